"""The framework backends: models of ordinary Triton repositories in ONNX
(``onnxruntime``), TorchScript (``pytorch``) and OpenVINO IR (``openvino``),
run by the framework's Python API inside this process, and backends of
other distributions built the same way (plugins: docs/plugins.md).

Each backend library (csrc/backends/framework) forwards to the inprocess
backend, whose dispatch hands a model whose configuration names a backend
to the class declared for that name in the entry point group
``tritonserver.backends`` (``_plugins``): the package's own backends are
declared there by its pyproject.toml like any plugin. A backend class is a
subclass of ``_model.FrameworkModel`` (``tritonserver.backend_api.Backend``)
with ``load``, ``open_instance`` and ``run``, and a classmethod
``complete(name, version, config, repository_path, settings)`` (the
configuration completed from the model, or None; only called when the
server allows completion).

What they share lives here: ``_config`` (completion and checks with
Triton's texts), ``_batch`` (batches, batch inputs, ragged inputs, sequence
states), ``_params`` (the runtime import, the model file, parameters),
``_plugins`` (finding backends). docs/backends.md says how to add a framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from tritonserver._framework._plugins import backend_class

if TYPE_CHECKING:
    from tritonserver._framework._model import FrameworkModel


def framework(backend: Optional[str]) -> Optional[type[FrameworkModel]]:
    """The class serving `backend` (imported now), or None for a backend no
    distribution declares (inprocess Python models)."""
    return backend_class(backend)
