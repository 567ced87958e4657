"""BLS for python-backend models run in-process: ``pb_utils.InferenceRequest``
(the requests ``execute`` gets, and those a model makes to call another
model), ``exec``/``async_exec``, and model control from a model
(``load_model``, ``unload_model``, ``is_model_ready``).

A call is a request to the same server, made through the package's own
request path (tritonserver._model.send), in this process: input arrays are
handed to the core by reference, never copied or serialized (the core reads
them in place until it releases the request); output tensors are the
core's response buffers, viewed by numpy through DLPack. Copied: BYTES
tensors (decoded into object arrays, as the python backend gives them) and
nothing else. The server is the one that loaded the calling model (the
model's context, tritonserver._inprocess._pb_types); a thread of the
model's own, which has no context, reaches the process's one started
server.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from tritonserver._errors import TritonError as _ServerError
from tritonserver._inprocess._pb_types import (
    InferenceResponse,
    Tensor,
    TritonError,
    TritonModelException,
    checked_parameters,
    current_model,
    host_input,
    model_response,
    running_for,
)
from tritonserver._registries import started_server
from tritonserver._trace import context_carrier

if TYPE_CHECKING:
    from tritonserver._inprocess._request import ModelRequest, ResponseSender
    from tritonserver._response import InferenceResponse as _ServerResponse

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2


class PreferredMemory:
    """Where a BLS call's outputs should be: ``PreferredMemory(
    TRITONSERVER_MEMORY_CPU)``; the in-process backend puts them in host
    memory."""

    TRITONSERVER_MEMORY_GPU = 1
    TRITONSERVER_MEMORY_CPU = 0

    def __init__(self, preferred_memory_type: int, preferred_device_id: int = 0):
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


TRITONSERVER_MEMORY_GPU = PreferredMemory.TRITONSERVER_MEMORY_GPU
TRITONSERVER_MEMORY_CPU = PreferredMemory.TRITONSERVER_MEMORY_CPU


class InferenceTrace:
    """A request's trace (``request.trace()``); ``get_context()`` is the
    OpenTelemetry context text of the trace, None when not traced."""

    def __init__(self, context: Optional[str] = None):
        self._context = context

    def get_context(self) -> Optional[str]:
        return self._context


def _server() -> Any:
    context = current_model()
    server = started_server(context.server_address if context and context.server_address
                            else None)
    if server is None:
        raise TritonModelException(
            "no started server to call: BLS and model control work from a model's "
            "execute (and the threads and tasks it starts) while its server runs")
    return server


def _check_phase() -> None:
    context = current_model()
    if context is not None and not context.bls:
        raise TritonModelException("BLS is only supported during the 'execute' function.")


def _pb_response(response: "_ServerResponse") -> InferenceResponse:
    for name, value in response.parameters.items():
        if not isinstance(value, (bool, int, str)):  # a double: the python backend has none
            return InferenceResponse(error=TritonError(
                f"Unsupported parameter type for parameter '{name}'."))
    if response.error is not None:
        return InferenceResponse(error=TritonError.of(response.error),
                                 parameters=dict(response.parameters))
    outputs = [Tensor(name, tensor) for name, tensor in response.outputs.items()]
    return InferenceResponse(outputs, parameters=dict(response.parameters))


class ResponseIterator:
    """The responses of a BLS call to a decoupled model
    (``exec(decoupled=True)``), the last one marked final (maybe with no
    outputs); ``cancel()`` asks the called model to stop.

    Made once the first response is there, as the python backend's: so
    ``await async_exec(decoupled=True)`` waits for it off the event loop,
    and iterating only waits for the later ones."""

    def __init__(self, responses: Any, failed: Optional[InferenceResponse] = None):
        self._responses = responses
        self._failed = failed
        self._first = None if responses is None else next(responses, None)

    def __iter__(self) -> "ResponseIterator":
        return self

    def __next__(self) -> InferenceResponse:
        if self._failed is not None:
            failed, self._failed, self._responses = self._failed, None, None
            return failed
        if self._first is not None:
            response, self._first = self._first, None
        elif self._responses is None:
            raise StopIteration
        else:
            try:
                response = next(self._responses)
            except StopIteration:
                self._responses = None
                raise
        if response.final:
            self._responses = None  # nothing follows: no wait for the end
        return _pb_response(response)

    def cancel(self) -> None:
        if self._responses is not None:
            self._responses.cancel()


def _text(what: str, value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    if not isinstance(value, str):
        raise TypeError(f"InferenceRequest: {what} must be str, not {type(value).__name__}")
    return value


class InferenceRequest:
    """A request: one ``execute`` got (read it), or one a model makes to
    call another model (``InferenceRequest(model_name=...,
    requested_output_names=[...], inputs=[...])``, then ``exec()`` or
    ``await async_exec()``)."""

    _request: Optional[ModelRequest]
    _sender: Optional[InferenceResponseSender] = None

    def __init__(self, request_id: str = "", correlation_id: Union[int, str] = 0,
                 inputs: Optional[list[Tensor]] = None,
                 requested_output_names: Optional[list[str]] = None,
                 model_name: Optional[str] = None, model_version: int = -1, flags: int = 0,
                 timeout: int = 0, preferred_memory: Optional[PreferredMemory] = None,
                 trace: Optional[InferenceTrace] = None, parameters: Any = None):
        if inputs is None or requested_output_names is None or model_name is None:
            raise TypeError("InferenceRequest: inputs, requested_output_names and model_name "
                            "are required")
        # Text arguments may be bytes (read from a BYTES tensor), as the
        # python backend's binding takes them.
        model_name, request_id = _text("model_name", model_name), _text("request_id", request_id)
        requested_output_names = [_text("requested_output_names", n)
                                  for n in requested_output_names]
        if correlation_id is None:
            raise TypeError("InferenceRequest: correlation_id must be int or str, not None")
        if not isinstance(correlation_id, (int, str)) or isinstance(correlation_id, bool):
            raise TritonModelException("Correlation ID must be integer or string")
        for what, number in (("model_version", model_version), ("flags", flags),
                             ("timeout", timeout)):
            if not isinstance(number, int):
                raise TypeError(f"InferenceRequest: {what} must be int, "
                                f"not {type(number).__name__}")
        for tensor in inputs:
            if tensor is None:
                raise TritonModelException(
                    f"Input tensor for request with id '{request_id}' and model name "
                    f"'{model_name}' should not be empty.")
            if not isinstance(tensor, Tensor):
                raise TypeError(f"InferenceRequest: inputs must be pb_utils.Tensor objects, "
                                f"not {type(tensor).__name__}")
        parameters = checked_parameters(parameters)
        self._request = None
        self._cpu_inputs = True
        self._id = request_id
        self._correlation_id = correlation_id
        self._inputs = list(inputs)
        self._requested = list(requested_output_names)
        self._model_name = model_name
        self._model_version = model_version
        self._flags = flags
        self._timeout = timeout
        self._preferred = preferred_memory
        self._trace = trace or InferenceTrace()
        self._parameters = dict(parameters)

    @classmethod
    def of(cls, request: ModelRequest, cpu_inputs: bool = True) -> "InferenceRequest":
        """The request ``TritonPythonModel.execute`` gets for ``request``;
        `cpu_inputs`: inputs in GPU memory are copied to the host (the
        model's FORCE_CPU_ONLY_INPUT_TENSORS)."""
        wrapped = object.__new__(cls)
        wrapped._request = request
        wrapped._sender = None
        wrapped._cpu_inputs = cpu_inputs
        return wrapped

    # ---- What it asks ----------------------------------------------------------

    def inputs(self) -> list[Tensor]:
        if self._request is None:
            return self._inputs
        if self._cpu_inputs:  # numpy arrays are host memory already: no call for them
            return [Tensor(n, v if type(v) is np.ndarray else host_input(v))
                    for n, v in self._request.inputs.items()]
        return [Tensor(n, v) for n, v in self._request.inputs.items()]

    def request_id(self) -> str:
        return self._id if self._request is None else self._request.id

    def correlation_id(self) -> Union[int, str]:
        return self._correlation_id if self._request is None else self._request.correlation_id

    def flags(self) -> int:
        return self._flags if self._request is None else self._request.flags

    def set_flags(self, flags: int) -> None:
        if self._request is not None:
            raise TritonModelException("the flags of a request the model received are read only")
        self._flags = flags

    def parameters(self) -> str:
        return json.dumps(self._parameters if self._request is None
                          else self._request.parameters)

    def requested_output_names(self) -> list[str]:
        return self._requested if self._request is None \
            else list(self._request.requested_outputs)

    def timeout(self) -> int:
        return self._timeout if self._request is None else self._request.timeout_us

    def trace(self) -> InferenceTrace:
        if self._request is None:
            return self._trace
        carrier = self._request.trace_context
        return InferenceTrace(json.dumps(carrier) if carrier else None)

    # ---- A request execute got -------------------------------------------------

    def _received(self, what: str) -> ModelRequest:
        if self._request is None:
            raise TritonModelException(f"{what} is for the requests execute receives")
        return self._request

    def is_cancelled(self) -> bool:
        return self._received("is_cancelled()").is_cancelled()

    def get_response_sender(self) -> InferenceResponseSender:
        """The request's one sender (every call gives the same)."""
        request = self._received("get_response_sender()")
        if self._sender is None:
            self._sender = InferenceResponseSender(request, request.decoupled)
        return self._sender

    def set_release_flags(self, flags: int) -> None:
        """TRITONSERVER_REQUEST_RELEASE_ALL (what happens anyway), or
        TRITONSERVER_REQUEST_RELEASE_RESCHEDULE: the request goes back to
        its scheduler once execute returns (a sequence batcher's iterative
        sequence, or a decoupled model's), with no response sent for it."""
        request = self._received("set_release_flags()")
        if flags not in (TRITONSERVER_REQUEST_RELEASE_ALL, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE):
            raise TritonModelException(
                "Request release flags must be TRITONSERVER_REQUEST_RELEASE_ALL or "
                "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE")
        request.reschedule(flags == TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)

    # ---- A call to another model -----------------------------------------------

    def _spec(self) -> Any:
        from tritonserver._submit import RequestSpec

        output_memory_type = None
        if self._preferred is not None and \
                self._preferred.preferred_memory_type == TRITONSERVER_MEMORY_GPU:
            from tritonserver._enums import MemoryType
            from tritonserver._memory import default_memory_allocators

            if MemoryType.GPU not in default_memory_allocators:
                raise TritonModelException(
                    "PreferredMemory(TRITONSERVER_MEMORY_GPU): this process sees no GPU, so BLS "
                    "outputs come in host memory only; ask for TRITONSERVER_MEMORY_CPU (or leave "
                    "it out)")
            output_memory_type = (MemoryType.GPU, int(self._preferred.preferred_device_id))
        return RequestSpec(
            inputs={t.name(): t.data() for t in self._inputs},
            request_id=self._id or None, flags=self._flags,
            correlation_id=self._correlation_id or None, timeout=self._timeout,
            parameters=self._parameters, requested_outputs=self._requested or None,
            output_memory_type=output_memory_type,
            trace_context=context_carrier(self._trace.get_context()))

    def _send(self, decoupled: bool) -> Any:
        """Our response iterator for the call."""
        from tritonserver._model import send

        if self._request is not None:
            raise TritonModelException("a request execute received cannot be executed again")
        server = _server()
        model = server.model(self._model_name, self._model_version)
        if not decoupled and model.transaction_properties() & _decoupled_flag():
            raise TritonModelException(
                f"Model {self._model_name} is using the decoupled. The current BLS request "
                "call doesn't support models using the decoupled transaction policy. Please "
                "use 'decoupled=True' argument to the 'exec' or 'async_exec' calls for "
                "decoupled models.'")
        return send(model, self._spec(), asynchronous=False, raise_on_error=False)

    def exec(self, decoupled: bool = False) -> Union[InferenceResponse, ResponseIterator]:
        """Run the request on its model and wait: its response, or (with
        ``decoupled=True``) an iterator of its responses. Failures are
        responses with an error, as in the python backend; a call from
        initialize or finalize raises, as there."""
        _check_phase()
        try:
            responses = self._send(decoupled)
        except (_ServerError, TritonError) as e:
            if isinstance(e, _ServerError):
                e = TritonError(f"Model {self._model_name} - Error when running inference: {e}",
                                TritonError.of(e).code())
            failed = InferenceResponse(error=e)
            return ResponseIterator(None, failed) if decoupled else failed
        if decoupled:
            return ResponseIterator(responses)
        # One response (a bare final flag may follow it).
        collected = list(responses)
        chosen = next((r for r in collected if r.error is not None or r.outputs),
                      collected[0] if collected else None)
        if chosen is None:
            return InferenceResponse(error=TritonError("Unexpected empty response."))
        return _pb_response(chosen)

    def async_exec(self, decoupled: bool = False) -> "asyncio.Future[Any]":
        """``exec`` awaitable from the model's event loop (an ``async def
        execute``): the call runs on a worker thread, so the loop goes on."""
        loop = asyncio.get_running_loop()
        _check_phase()
        context = current_model()

        def run() -> Any:
            if context is None:
                return self.exec(decoupled)
            with running_for(context):
                return self.exec(decoupled)

        return loop.run_in_executor(None, run)


def _decoupled_flag() -> int:
    from tritonserver._enums import ModelTxnPropertyFlag

    return int(ModelTxnPropertyFlag.DECOUPLED)


class InferenceResponseSender:
    """A request's sender: ``send(response=None, flags=0)``, with the python
    backend's rules. A decoupled model sends any number of responses, then
    the final flag; one that is not decoupled sends exactly one response
    (it answers the request), then may send the final flag. Once closed (the
    final flag, or an error of its batch) it refuses to send."""

    def __init__(self, request: ModelRequest, decoupled: bool):
        self._decoupled = decoupled
        self._sender = request.sender if decoupled else request.open_sender()
        self._lock = threading.Lock()
        self._sent = 0
        self._closed = False

    def send(self, response: Optional[InferenceResponse] = None, flags: int = 0) -> None:
        if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        if flags == 0 and response is None:
            raise TritonModelException("Inference Response object must be provided when the "
                                       "response flags is set to zero.")
        final = flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL
        self._count(response is not None, final)
        converted = None if response is None else model_response(response)
        if self._decoupled:
            self._sender.send(converted, final)
        elif converted is not None:
            self._sender.send(converted, True)  # its one response answers the request
        # (The final flag after that one response: the request ended with it.)

    def _count(self, has_response: bool, final: bool) -> None:
        with self._lock:
            if not self._decoupled:
                if has_response and self._sent > 0:
                    raise TritonModelException("Unable to send response. Non-decoupled model "
                                               "cannot send more than one response.")
                if not has_response and final and self._sent == 0:
                    raise TritonModelException("Unable to send response. Non-decoupled model "
                                               "cannot send complete final before sending a "
                                               "response.")
            if self._closed:
                raise TritonModelException(
                    "Unable to send response. Response sender has been closed.")
            if final:
                self._closed = True
            self._sent += 1

    def is_cancelled(self) -> bool:
        return self._sender.is_cancelled()


def returned_response(request: "InferenceRequest") -> None:
    """Count the response execute returned for `request` against its
    sender, as the python backend does (raises when the sender already
    sent its one response, or was closed)."""
    sender = request._sender
    if sender is not None:
        sender._count(True, True)


def close_senders(requests: list["InferenceRequest"]) -> None:
    """Their batch failed: their senders refuse to send from now on."""
    for request in requests:
        if request._sender is not None:
            with request._sender._lock:
                request._sender._closed = True


# ---- Model control from a model ---------------------------------------------------


def load_model(model_name: str, config: str = "", files: Optional[dict[str, bytes]] = None) -> None:
    """Load (or reload) a model of the server (EXPLICIT model control), with
    an optional configuration (JSON) and files (``"file:1/model.onnx"`` ->
    bytes), as ``Server.load`` does."""
    parameters: dict[str, Any] = {}
    if config:
        parameters["config"] = config
    for key, value in (files or {}).items():
        parameters[key] = value
    try:
        _server().load(model_name, parameters or None)
    except _ServerError as e:
        raise TritonModelException(f"Failed to load the model '{model_name}': {e}") from None


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    try:
        _server().unload(model_name, unload_dependents=unload_dependents)
    except _ServerError as e:
        raise TritonModelException(f"Failed to unload the model '{model_name}': {e}") from None


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    try:
        version = int(model_version) if model_version else -1
    except ValueError:
        raise TritonModelException(f"model_version must be a number, not {model_version!r}") \
            from None
    try:
        return bool(_server().model(model_name, version).ready())
    except _ServerError:
        return False
