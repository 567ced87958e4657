"""One Ray Serve replica: an in-process Server, its HTTP app and its handle API.

Ray Serve runs each replica in an actor process of its own; the replica's
Server is started in ``__init__`` (Ray waits for it before routing to the
replica) and stopped when Ray shuts the replica down. The HTTP frontend's app
finds the replica's Server through :func:`current_server`, which is per
process and so per replica.
"""

from __future__ import annotations

import os
from typing import Any, AsyncIterator, Callable, Mapping, Optional

import numpy as np

import tritonserver
from tritonserver import DataType, Server, Tensor, UnavailableError

_current: Optional[Server] = None


def current_server() -> Server:
    """The Server of the replica running in this process."""
    if _current is None:
        raise UnavailableError("this replica's server is not started")
    return _current


def to_numpy(tensor: Tensor) -> np.ndarray[Any, Any]:
    """A numpy array owning a copy of ``tensor`` (BYTES as an object array of bytes)."""
    if tensor.data_type == DataType.BYTES:
        return tensor.to_bytes_array()
    return np.array(np.from_dlpack(tensor), copy=True)


def _outputs(response: Any) -> dict[str, np.ndarray[Any, Any]]:
    return {name: to_numpy(tensor) for name, tensor in response.outputs.items()}


class TritonReplica:
    """The deployment class: Ray Serve makes one per replica.

    ``options`` are the Server's options; ``setup`` (optional, picklable) is
    called with the Server before it starts, e.g. to ``register_model``
    Python models; ``exit_timeout_s`` bounds the stop at shutdown.
    """

    def __init__(self, options: tritonserver.Options,
                 setup: Optional[Callable[[Server], None]] = None) -> None:
        global _current
        server = Server(options)
        try:
            if setup is not None:
                setup(server)
            server.start(wait_until_ready=True)
        except BaseException:
            _stop_quietly(server)
            raise
        self._server = server
        _current = server

    # ---- The handle API ---------------------------------------------------------

    async def infer(self, model: str, inputs: Mapping[str, Any],
                    parameters: Optional[Mapping[str, Any]] = None,
                    model_version: int = -1) -> dict[str, np.ndarray[Any, Any]]:
        """The outputs of one inference as numpy arrays.

        For a model that answers with several responses (decoupled), use
        ``handle.options(stream=True).stream.remote(...)``.
        """
        found: list[dict[str, np.ndarray[Any, Any]]] = []
        async for outputs in self.stream(model, inputs, parameters, model_version):
            found.append(outputs)
        if len(found) > 1:
            raise tritonserver.InvalidArgumentError(
                f"model '{model}' sent {len(found)} responses: stream them with "
                "handle.options(stream=True).stream.remote(...)")
        return found[0] if found else {}

    async def stream(self, model: str, inputs: Mapping[str, Any],
                     parameters: Optional[Mapping[str, Any]] = None,
                     model_version: int = -1) -> AsyncIterator[dict[str, np.ndarray[Any, Any]]]:
        """The outputs of each response as numpy arrays, as they arrive
        (responses that carry only the final flag are skipped)."""
        server = current_server()
        kwargs: dict[str, Any] = {"inputs": dict(inputs)}
        if parameters:
            kwargs["parameters"] = dict(parameters)
        async for response in server.model(model, model_version).async_infer(**kwargs):
            if response.outputs:
                yield _outputs(response)

    def statistics(self) -> dict[str, Any]:
        """Which replica this is (its process and Ray's replica id) and the
        statistics of its models."""
        stats = [stat for model in self._server.models(exclude_not_ready=True).values()
                 for stat in model.statistics().get("model_stats", [])]
        return {"replica": _replica_id(), "pid": os.getpid(), "model_stats": stats}

    # ---- Ray Serve's hooks ------------------------------------------------------

    def check_health(self) -> None:
        """Ray calls this periodically: a replica whose Server is not live and
        ready fails it, and Ray replaces the replica."""
        try:
            healthy = self._server.live() and self._server.ready()
        except tritonserver.TritonError as e:
            raise UnavailableError(f"the replica's server does not answer: {e}") from None
        if not healthy:
            raise UnavailableError("the replica's server is not live and ready")

    def __del__(self) -> None:
        """Ray's shutdown hook (also run when the object is collected)."""
        global _current
        server = getattr(self, "_server", None)
        if server is not None:
            if _current is server:
                _current = None
            if _stop_quietly(server) and _in_replica():
                # Ray kills the replica's process (ray.kill) once this returns:
                # atexit never runs there, so the folder the core read its
                # backends from goes now.
                from tritonserver._core.runtime_dirs import release_backend_directories

                release_backend_directories()


def _stop_quietly(server: Server) -> bool:
    """Whether the server stopped (False: it still finishes work in the background)."""
    try:
        server.stop()
    except Exception:
        return False
    return True


def _in_replica() -> bool:
    """Whether this process is a Ray Serve replica's (Ray ends it after shutdown)."""
    try:
        from ray import serve

        serve.get_replica_context()
    except Exception:
        return False
    return True


def _replica_id() -> str:
    from ray import serve

    try:
        context = serve.get_replica_context()
    except Exception:
        return f"pid-{os.getpid()}"
    rid = getattr(context, "replica_id", None)
    return str(getattr(rid, "unique_id", None) or getattr(context, "replica_tag", rid))
