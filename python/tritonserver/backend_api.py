"""The backend plugin API: what a distribution of its own uses to serve a
model format as a Triton backend (docs/plugins.md has a whole backend).

A backend is a subclass of ``Backend`` with ``load`` (once per model load:
open the model, check the configuration), ``open_instance`` (what one
instance runs on) and ``run`` (the named outputs of one batch), declared in
the distribution's pyproject.toml::

    [project.entry-points."tritonserver.backends"]
    mybackend = "my_package:MyBackend"

A model whose config.pbtxt says ``backend: "mybackend"`` is then served by
it: the class is imported when such a model loads, never before. Batches
(inputs stacked along the first dimension, outputs split back per request),
requested outputs, instances (``instance_group { count: N }`` gives N
``open_instance`` results, run in parallel when ``run`` releases the GIL),
ragged and batch inputs and sequence states are this package's.

Versioned: ``API_VERSION`` is "MAJOR.MINOR". A backend class declares
``api_version`` (the version it was written for); it loads when the major
versions are equal and its minor is at most ours, else the model's load
fails saying both. Everything a plugin may use is in this module; names
starting with an underscore anywhere in ``tritonserver`` are not part of it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from tritonserver._errors import (
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    TritonError,
    UnavailableError,
    UnsupportedError,
)
from tritonserver._framework._config import Completion, Tensor
from tritonserver._framework._config import check as _check
from tritonserver._framework._config import complete as _complete
from tritonserver._framework._model import FrameworkModel
from tritonserver._framework._params import bool_parameter, int_parameter, model_path, runtime
from tritonserver._framework._params import text_inputs
from tritonserver._framework._plugins import API_VERSION, DISCOVERY_ENV, GROUP
from tritonserver._inprocess._model import ModelInstance as Instance

__all__ = [
    "API_VERSION",
    "ENTRY_POINT_GROUP",
    "DISCOVERY_ENV",
    "Backend",
    "Instance",
    "Tensor",
    "Completion",
    "check_config",
    "complete_config",
    "model_path",
    "runtime",
    "int_parameter",
    "bool_parameter",
    "text_inputs",
    "TritonError",
    "InvalidArgumentError",
    "NotFoundError",
    "UnavailableError",
    "UnsupportedError",
    "InternalError",
]

ENTRY_POINT_GROUP = GROUP


class Backend(FrameworkModel):
    """One load of a model on your backend (one object per model version
    load). Before ``load`` the object has:

    - ``name`` (str), ``version`` (int): the model's;
    - ``config`` (dict): the model configuration as the core gives it (JSON
      form of config.pbtxt: ``config["max_batch_size"]``, ``config["input"]``...);
    - ``parameters`` (dict[str, str]): the configuration's ``parameters``
      as strings (``int_parameter`` and ``bool_parameter`` read them);
    - ``repository_path`` (str): the model's folder (``model_path`` finds
      the model file in ``<version>/``).

    Define ``api_version`` (the ``API_VERSION`` you wrote it for),
    ``load``, ``open_instance`` and ``run``; optionally ``requires`` (the
    modules ``python -m tritonserver backends`` checks), ``close_instance``,
    ``finalize``, ``prepare`` (applied to each input before batching:
    ``prepare(name, array) -> array``) and the classmethod ``complete``.
    An exception in ``load`` or ``open_instance`` fails the load with its
    message (a ``TritonError`` subclass keeps its code); one in ``run``
    fails the batch's requests.
    """

    api_version: ClassVar[str]
    requires: ClassVar[tuple[str, ...]] = ()

    name: str
    version: int
    config: dict[str, Any]
    parameters: dict[str, str]
    repository_path: str

    @classmethod
    def complete(cls, name: str, version: int, config: dict[str, Any], repository_path: str,
                 settings: dict[str, str]) -> Optional[dict[str, Any]]:
        """The configuration completed from the model, or None to keep it;
        only called when the server allows completion
        (strict_model_config=False). `settings`: the backend's settings
        (``Options.backend_configuration[<name>]``, ``serve --backend-config``)."""
        return None

    def load(self) -> None:
        """Once per load, before any instance: open the model and check the
        configuration against it; raise to refuse the load."""
        raise NotImplementedError(f"{type(self).__name__} must define load()")

    def open_instance(self, instance: Instance) -> Any:
        """What ``run`` gets for this instance (a session, a predictor...)."""
        raise NotImplementedError(f"{type(self).__name__} must define open_instance(instance)")

    def run(self, runner: Any, names: list[str], feed: dict[str, Any]) -> list[Any]:
        """The outputs ``names`` (in that order, numpy arrays whose first
        dimension is the batch's when the model batches) of one feed
        (input name -> numpy array holding the whole batch)."""
        raise NotImplementedError(f"{type(self).__name__} must define run(runner, names, feed)")

    def close_instance(self, runner: Any) -> None:
        """Frees what ``open_instance`` made (dropping it is the default)."""

    def finalize(self) -> None:
        """Once per unload, after every instance was closed."""


def check_config(name: str, config: dict[str, Any], inputs: list[Tensor],
                 outputs: list[Tensor], exact_types: bool = True) -> None:
    """Raise ``InvalidArgumentError`` with Triton's framework backends' texts
    when the configuration disagrees with the model's tensors (count, names,
    data types, dims)."""
    _check(name, config, inputs, outputs, exact_types=exact_types)


def complete_config(name: str, how: Completion, config: dict[str, Any], inputs: list[Tensor],
                    outputs: list[Tensor], batchable: bool,
                    default_max_batch_size: Optional[str] = None) -> Optional[dict[str, Any]]:
    """The configuration with what it lacks filled from the model's tensors
    (max_batch_size, inputs, outputs), or None when nothing is missing."""
    return _complete(name, how, config, inputs, outputs, batchable, default_max_batch_size)
