"""ModelRequest and ResponseSender: a request as a Python model sees it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from tritonserver import _datatypes as dt
from tritonserver._enums import DataType, MemoryType, RequestFlag
from tritonserver._errors import InvalidArgumentError, UnsupportedError
from tritonserver._inprocess._response import ModelResponse, convert_outputs, error_parts
from tritonserver._tensor import MemoryBuffer, Tensor, _deserialize_bytes
from tritonserver._trace import context_carrier

if TYPE_CHECKING:
    from tritonserver._inprocess._backend import RequestHandle

_NUMPY_BY_TYPE = {int(t): dt.to_numpy_dtype(t) for t in DataType
                  if t not in (DataType.INVALID, DataType.BYTES, DataType.BF16)}
_BYTES = int(DataType.BYTES)
_HOST = (int(MemoryType.CPU), int(MemoryType.CPU_PINNED))


def _input_value(record: Any) -> Any:
    """A numpy view of an input (an Input of the backend), or a Tensor for
    one in device memory or of a type numpy lacks."""
    data_type, shape = record.datatype, record.shape
    if record.memory_type in _HOST:
        dtype = _NUMPY_BY_TYPE.get(data_type)
        if dtype is not None:
            return np.frombuffer(record, dtype).reshape(shape)
        if data_type == _BYTES:
            count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
            items = _deserialize_bytes(memoryview(record), count)
            out = np.empty(len(items), dtype=object)
            out[:] = items
            return out.reshape(shape)
    return Tensor(DataType(data_type), shape,
                  MemoryBuffer(record.data_ptr, MemoryType(record.memory_type),
                               record.memory_type_id, record.byte_size, record))


class ModelRequest:
    """One request of a batch given to ``PythonModel.execute``.

    ``inputs`` maps names to read-only numpy arrays that view the core's
    buffers (no copy): BYTES inputs are object arrays of bytes, inputs in
    device memory are tritonserver Tensors (DLPack). An array kept after
    execute returns stays valid, and keeps its request (and so the model's
    unload) until it is dropped: copy what you keep (``np.array(x)``).
    """

    __slots__ = ("_handle", "_model", "instance", "_inputs", "_sender")

    def __init__(self, handle: RequestHandle, instance: Any, model: Any):
        self._handle = handle
        self._model = model
        self.instance = instance
        self._inputs: Optional[dict[str, Any]] = None
        self._sender: Optional[ResponseSender] = None

    @property
    def inputs(self) -> dict[str, Any]:
        if self._inputs is None:
            self._inputs = {record.name: _input_value(record) for record in self._handle.inputs()}
        return self._inputs

    @property
    def parameters(self) -> dict[str, Union[str, int, bool, float]]:
        return self._handle.parameters()

    @property
    def id(self) -> str:
        return self._handle.id()

    @property
    def correlation_id(self) -> Union[int, str]:
        """The sequence's id (0 when none): an int, or a str."""
        return self._handle.correlation_id()

    @property
    def flags(self) -> int:
        return self._handle.flags()

    @property
    def sequence_start(self) -> bool:
        return bool(self._handle.flags() & RequestFlag.SEQUENCE_START)

    @property
    def sequence_end(self) -> bool:
        return bool(self._handle.flags() & RequestFlag.SEQUENCE_END)

    @property
    def requested_outputs(self) -> tuple[str, ...]:
        return self._handle.requested_outputs()

    @property
    def timeout_us(self) -> int:
        return self._handle.timeout_us()

    def reschedule(self, again: bool = True) -> None:
        """Give the request back to its scheduler, unanswered, once execute
        is done with it (the core's TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
        a sequence batcher's iterative sequence runs it again). Return None
        for it from execute. A scheduler that cannot reschedule fails it."""
        self._handle.set_rescheduled(again)

    def is_cancelled(self) -> bool:
        return self._handle.is_cancelled()

    @property
    def trace_context(self) -> Optional[dict[str, str]]:
        """The W3C trace context of the request's span when it is traced in
        trace mode opentelemetry ({"traceparent": ..., "tracestate": ...},
        for an OpenTelemetry propagator's extract), else None."""
        return context_carrier(self._handle.trace_context())

    @property
    def sender(self) -> "ResponseSender":
        """The response sender of a decoupled model's request."""
        if not self._model.decoupled:
            raise UnsupportedError(
                f"model '{self._model.name}' is not decoupled: return one response per "
                "request from execute (decoupled=True gives a sender)")
        if self._sender is None:
            self._sender = ResponseSender(self._handle, self._model)
        return self._sender

    @property
    def decoupled(self) -> bool:
        """Whether its model is decoupled."""
        return bool(self._model.decoupled)

    def open_sender(self) -> "ResponseSender":
        """A sender even when the model is not decoupled (the python
        backend's ``get_response_sender()``): the request may then be
        answered through it, during execute or after it returned."""
        if self._sender is None:
            self._sender = ResponseSender(self._handle, self._model)
        if not self._model.decoupled:
            self._handle.hold()
        return self._sender

    def __repr__(self) -> str:
        return f"ModelRequest(id={self.id!r}, inputs={list(self.inputs)})"


class ResponseSender:
    """Sends a decoupled request's responses: any number, then the final
    flag (``send(..., final=True)`` or ``finish()``). Usable from any thread,
    during execute or after it returned; the request is held until it is
    finished (a sender dropped unfinished fails its request)."""

    __slots__ = ("_handle", "_model")

    def __init__(self, handle: RequestHandle, model: Any):
        self._handle = handle
        self._model = model

    def send(self, response: Any = None, final: bool = False) -> None:
        """Send a response (a dict of outputs, a ModelResponse, or an
        exception, which ends the request with that error). A ModelResponse
        with an error ends it only with ``final``: more may follow."""
        if response is None:
            if final:
                self._handle.finish()
            return
        send(self._model, self._handle, response, final)

    def finish(self) -> None:
        """The final flag, with no response."""
        self._handle.finish()

    @property
    def finished(self) -> bool:
        return self._handle.finished

    def is_cancelled(self) -> bool:
        return self._handle.is_cancelled()


def send(model: Any, handle: RequestHandle, response: Any, final: bool) -> None:
    """Send one response through the backend (raises on a bad response)."""
    if type(response) is dict:
        handle.send(convert_outputs(model, response), None, final)
    elif isinstance(response, ModelResponse):
        if response.error is not None and not final and model.decoupled:
            handle.send_error(*error_parts(response.error))  # the stream goes on
        elif response.error is not None:
            handle.fail(*error_parts(response.error))
        else:
            handle.send(convert_outputs(model, response.outputs), response.parameters, final)
    elif isinstance(response, BaseException):
        handle.fail(*error_parts(response))
    else:
        raise InvalidArgumentError(
            "a response is a dict of outputs, a ModelResponse or an exception, "
            f"not {type(response).__name__}")


def update_states(request: ModelRequest, outputs: list[Any]) -> None:
    """``outputs`` (Outputs, tritonserver._inprocess._response) become the
    states of ``request``'s sequence (implicit state)."""
    request._handle.update_states(outputs)
