"""PythonModel: the base class of a model written in Python and run by the
core in this process (the ``inprocess`` backend)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from tritonserver._inprocess._request import ModelRequest


class ModelInstance:
    """One instance of a model (``instance_count=2`` gives two).

    The core runs at most one ``execute`` at a time on an instance, and
    batches on different instances concurrently (each on its own core
    thread, taking turns on the GIL). Attributes set on it stay with it.
    """

    def __init__(self, name: str, kind: str, device_id: int):
        self.name = name
        self.kind = kind
        self.device_id = device_id

    def __repr__(self) -> str:
        return f"ModelInstance(name={self.name!r}, kind={self.kind!r}, device_id={self.device_id})"


class PythonModel:
    """A model written in Python, scheduled by the core in this process.

    Subclass it and define ``execute``; register it with
    ``Server.register_model(name, MyModel, inputs=..., outputs=...)`` or put
    it in a ``model.py`` under a model folder whose config says
    ``backend: "inprocess"``. One object is made per model load (with no
    arguments); before ``initialize`` it gets ``name``, ``version``,
    ``config`` (the model configuration as a dict), ``parameters`` (the
    configuration's string parameters), ``repository_path`` (the model's
    folder) and ``server_address`` (the core of the server that loads it;
    ``server`` is that tritonserver.Server once it has started: call other
    models through it).

    ``execute`` may be an ``async def``: its coroutine runs on the models'
    event loop and answers the batch when it returns, while the instance
    takes the next batch (several batches in flight on one instance).

    ``execute(requests)`` receives one batch (a list of ModelRequest) on one
    instance and returns one response per request, in order: a dict of
    outputs, a ModelResponse, or an exception (that request fails alone).
    An exception raised by execute fails every request of the batch. A
    decoupled model answers through ``request.sender`` instead and may
    return None.

    The other hooks are optional: ``initialize``/``finalize`` once per load,
    ``initialize_instance``/``finalize_instance`` once per instance. An
    exception in an initialize hook fails the load.
    """

    name: str = ""
    version: int = 0
    config: dict[str, Any] = {}
    parameters: dict[str, str] = {}
    repository_path: str = ""
    server_address: int = 0

    @property
    def server(self) -> Any:
        """The started tritonserver.Server that runs this model (None while
        it is starting or after it stopped)."""
        from tritonserver._registries import started_server

        return started_server(self.server_address) if self.server_address else None

    def initialize(self) -> None:
        """Once per load, before the instances are made."""

    def finalize(self) -> None:
        """Once per unload, after the instances were finalized."""

    def initialize_instance(self, instance: ModelInstance) -> None:
        """Once per instance, before its first batch."""

    def finalize_instance(self, instance: ModelInstance) -> None:
        """Once per instance, after its last batch returned."""

    def execute(self, requests: list[ModelRequest]) -> Optional[list[Any]]:
        """One batch on one instance: one response per request."""
        raise NotImplementedError(f"{type(self).__name__} must define execute(requests)")
