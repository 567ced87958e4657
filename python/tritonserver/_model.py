"""Model: a handle on one model (name, version) of a running server."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

from tritonserver._c import triton_bindings as _bindings
from tritonserver._datatypes import from_config_name
from tritonserver._enums import DataType, ModelBatchFlag, ModelTxnPropertyFlag
from tritonserver._errors import InvalidArgumentError
from tritonserver._request import InferenceRequest, _create_c_request_for_inputs
from tritonserver._response import AsyncResponseIterator, ResponseIterator

if TYPE_CHECKING:
    from tritonserver._server import Server


class Model:
    """A model of a running server. Not validated until it is used."""

    def __init__(self, server: "Server", name: str, version: int = -1,
                 state: Optional[str] = None, reason: Optional[str] = None):
        self._server = server
        self.name = name
        self.version = version
        self.state = state
        self.reason = reason
        self._input_types: Optional[dict[str, DataType]] = None

    def create_request(self, **kwargs: Any) -> InferenceRequest:
        """An InferenceRequest for this model (see InferenceRequest)."""
        return InferenceRequest(model=self, **kwargs)

    def infer(self, inference_request: Optional[InferenceRequest] = None,
              raise_on_error: bool = True, **kwargs: Any) -> ResponseIterator:
        """Send a request; returns an iterator over its responses."""
        c_request, sink, response_queue, request_id = self._prepare(inference_request, kwargs)
        # Made before sending, so its notifier is in place for any response.
        iterator = ResponseIterator(self, c_request, response_queue, raise_on_error,
                                    _sink=sink, _request_id=request_id)
        c_request.send(sink)
        return iterator

    def async_infer(self, inference_request: Optional[InferenceRequest] = None,
                    raise_on_error: bool = True, **kwargs: Any) -> AsyncResponseIterator:
        """Send a request; returns an asyncio iterator over its responses.

        Call it from a running event loop.
        """
        c_request, sink, response_queue, request_id = self._prepare(inference_request, kwargs)
        iterator = AsyncResponseIterator(self, c_request, response_queue, raise_on_error, None,
                                         _sink=sink, _request_id=request_id)
        c_request.send(sink)
        return iterator

    def metadata(self) -> dict[str, Any]:
        return json.loads(self._server._handle().model_metadata(self.name, self.version))

    def config(self, config_version: int = 1) -> dict[str, Any]:
        return json.loads(self._server._handle().model_config(self.name, self.version,
                                                              config_version))

    def ready(self) -> bool:
        return self._server._handle().model_is_ready(self.name, self.version)

    def statistics(self) -> dict[str, Any]:
        return json.loads(self._server._handle().model_statistics(self.name, self.version))

    def batch_properties(self) -> ModelBatchFlag:
        return ModelBatchFlag(self._server._handle().model_batch_properties(self.name,
                                                                            self.version))

    def transaction_properties(self) -> ModelTxnPropertyFlag:
        return ModelTxnPropertyFlag(
            self._server._handle().model_transaction_properties(self.name, self.version))

    def _prepare(self, request: Optional[InferenceRequest],
                 kwargs: dict[str, Any]) -> tuple[Any, Any, Any, Optional[str]]:
        """(binding request, its sink, response_queue, request_id) for a call."""
        sink = _bindings.ResponseSink()
        if request is None and len(kwargs) == 1 and "inputs" in kwargs:
            return _create_c_request_for_inputs(self, kwargs["inputs"]), sink, None, None
        request = self._resolve_request(request, kwargs)
        c_request = request._create_c_request()
        if request._classify():
            sink.set_classify(True)
        return c_request, sink, request.response_queue, request.request_id

    def _resolve_request(self, request: Optional[InferenceRequest],
                         kwargs: dict[str, Any]) -> InferenceRequest:
        if request is None:
            return self.create_request(**kwargs)
        if kwargs:
            raise InvalidArgumentError("pass either an InferenceRequest or keyword arguments, not both")
        if not isinstance(request, InferenceRequest):
            raise InvalidArgumentError(
                f"inference_request must be an InferenceRequest, not {type(request).__name__}")
        return request

    def _input_datatypes(self) -> dict[str, DataType]:
        """Declared input types (for lists and scalars); cached per Model."""
        if self._input_types is None:
            types: dict[str, DataType] = {}
            try:
                for spec in self.metadata().get("inputs", []):
                    types[spec["name"]] = from_config_name(spec["datatype"])
            except Exception:
                # Unknown model and the like: the core reports it on send.
                return {}
            self._input_types = types
        return self._input_types

    def _as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "state": self.state}

    def __repr__(self) -> str:
        return repr(self._as_dict())
