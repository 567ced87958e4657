"""Model: a handle on one model (name, version) of a running server."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional, cast

from tritonserver._control.instances import user_view
from tritonserver._enums import ModelBatchFlag, ModelTxnPropertyFlag
from tritonserver._c import triton_bindings as _bindings
from tritonserver._iterators import AsyncResponseIterator, ResponseIterator, send_submission
from tritonserver._registries import readiness_checks, registries_of
from tritonserver._request import InferenceRequest, model_submission
from tritonserver._submit import RequestSpec, RequestTarget, sent, submission

if TYPE_CHECKING:
    from tritonserver._server import Server


class Model(RequestTarget):
    """A model of a running server. Not validated until it is used."""

    def __init__(self, server: "Server", name: str, version: int = -1,
                 state: Optional[str] = None, reason: Optional[str] = None):
        self._server = server
        self._registries = registries_of(server)  # what requests read (RequestTarget)
        self.name = name
        self.version = version
        self.state = state
        self.reason = reason
        self._input_types = None

    def create_request(self, **kwargs: Any) -> InferenceRequest:
        """An InferenceRequest for this model (see InferenceRequest)."""
        return InferenceRequest(model=self, **kwargs)

    def infer(self, inference_request: Optional[InferenceRequest] = None,
              raise_on_error: bool = True, **kwargs: Any) -> ResponseIterator:
        """Send a request; returns an iterator over its responses."""
        # Every call the binding's method (below) did not send itself.
        return cast(ResponseIterator, send_submission(
            self, model_submission(self, inference_request, kwargs), raise_on_error))

    def async_infer(self, inference_request: Optional[InferenceRequest] = None,
                    raise_on_error: bool = True, **kwargs: Any) -> AsyncResponseIterator:
        """Send a request; returns an asyncio iterator over its responses.

        Call it from a running event loop.
        """
        # Every call the binding's method (below) did not send itself.
        return cast(AsyncResponseIterator, send_submission(
            self, model_submission(self, inference_request, kwargs), raise_on_error,
            asynchronous=True))

    def metadata(self) -> dict[str, Any]:
        return cast("dict[str, Any]",
                    json.loads(self._registries.started().model_metadata(self.name, self.version)))

    def config(self, config_version: int = 1) -> dict[str, Any]:
        """The model's configuration as the core completed it (with the
        instance count the user asked for: see tritonserver._control.instances)."""
        return user_view(cast("dict[str, Any]", json.loads(
            self._registries.started().model_config(self.name, self.version, config_version))))

    def ready(self) -> bool:
        """Whether the model is ready: loaded (the core's answer), and every
        instance ready by its model's own check where it has one (a python
        model's ``is_ready()``, tritonserver._inprocess._readiness)."""
        handle = self._registries.started()
        if not handle.model_is_ready(self.name, self.version):
            return False
        return all(check() for check in readiness_checks(handle.address(), self.name,
                                                          self.version))

    def statistics(self) -> dict[str, Any]:
        return cast("dict[str, Any]",
                    json.loads(self._registries.started().model_statistics(self.name, self.version)))

    def batch_properties(self) -> ModelBatchFlag:
        return ModelBatchFlag(self._registries.started().model_batch_properties(self.name,
                                                                            self.version))

    def transaction_properties(self) -> ModelTxnPropertyFlag:
        return ModelTxnPropertyFlag(
            self._registries.started().model_transaction_properties(self.name, self.version))

    def _as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "state": self.state}

    def __repr__(self) -> str:
        return repr(self._as_dict())


def send(model: Model, spec: RequestSpec, asynchronous: bool,
         raise_on_error: bool = True) -> Any:
    """Send ``spec`` to ``model``: the network frontends' way in (they
    describe their requests as RequestSpecs, tritonserver._submit). Returns
    the AsyncResponseIterator (``asynchronous``) or ResponseIterator of its
    responses, as Model.async_infer and Model.infer do."""
    prepared = submission(model, spec)
    iterator = send_submission(model, prepared, raise_on_error, asynchronous)
    sent(spec, prepared[0])
    return iterator


# Model.infer(inputs=...) is what nearly every synchronous program calls: the
# binding's method (csrc/bindings/response_stream.cc) sends it with
# send_inputs and makes its iterator with no Python frame, and hands every
# other call to the method above, which stays the one answer to them.
setattr(Model, "infer", _bindings.model_infer_method(Model, Model.infer, ResponseIterator))
# The same for Model.async_infer(inputs=...) (csrc/bindings/async_stream.cc).
setattr(Model, "async_infer",
        _bindings.model_async_infer_method(Model, Model.async_infer, AsyncResponseIterator))


class ModelDictionary(dict[tuple[str, int], Model]):
    """What Server.models() returns: models keyed by (name, version). A bare
    name answers too (``models["identity"]``, ``"identity" in models``,
    ``models.get("identity")``): the model at the version the server picks
    (-1). Iteration gives the (name, version) keys, as a dict's does."""

    def __getitem__(self, key: Any) -> Model:
        if isinstance(key, str):
            # The version the server picks (-1), with the state and reason of
            # the entry that stands for it: the newest ready version, else
            # the newest one (a model that failed has only failed entries).
            entries = [model for (name, _), model in self.items() if name == key]
            if not entries:
                raise KeyError(f"unknown model: {key!r}")
            ready = [model for model in entries if model.state == "READY"]
            shown = max(ready or entries, key=lambda model: model.version)
            return Model(shown._server, key, -1, shown.state, shown.reason)
        try:
            return super().__getitem__(key)
        except KeyError:
            raise KeyError(f"unknown model: {key!r}") from None

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            return any(name == key for name, _ in self.keys())
        return super().__contains__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default
