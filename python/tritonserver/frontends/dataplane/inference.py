"""An inference request from the wire, protocol-free: the WireRequest each
frontend decodes its request into (a RequestSpec, tritonserver._submit,
with what the client named: the model, shared memory places and outputs
asked for as classes), turned into the request the core gets, and sending
one that answers once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from tritonserver import (
    InferenceResponse,
    InternalError,
    InvalidArgumentError,
    Server,
    UnsupportedError,
)
from tritonserver._enums import ModelBatchFlag, RequestFlag
from tritonserver._model import send
from tritonserver._server import active_tracing
from tritonserver._submit import RequestSpec, mark
from tritonserver._trace import context_headers
from tritonserver.frontends.dataplane.classification import Classification
from tritonserver.frontends.dataplane.shared_memory import (
    ShmRef,
    place_in_shared_memory,
    release_shared_memory,
)
from tritonserver.frontends.dataplane.state import ModelEntry, ServerState, state_of


def set_parameter(parameters: dict[str, Any], key: str, value: Any) -> None:
    """A request parameter from the wire (str, int, bool or float)."""
    if key.startswith("triton_"):
        raise InvalidArgumentError(
            "parameter keys starting with 'triton_' are reserved for Triton usage "
            "and should not be specified.")
    if isinstance(value, bool) or isinstance(value, str) or isinstance(value, float):
        parameters[key] = value
    elif isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 63):
            raise InvalidArgumentError(f"parameter '{key}' does not fit in 64 bits")
        parameters[key] = value
    else:
        raise InvalidArgumentError(
            f"parameter '{key}' must be a string, number or boolean, not {type(value).__name__}")


@dataclass(eq=False)
class WireRequest(RequestSpec):
    """One inference request, decoded from the wire: the model and version
    the client named, and, until ``prepare``, its tensors in shared memory
    (inputs: their place in ``inputs`` holds None) and the outputs it asked
    for as their top classes (requested outputs, so never the fast path)."""

    model_name: str = ""
    model_version: int = -1
    shm_inputs: dict[str, ShmRef] = field(default_factory=dict)
    shm_outputs: dict[str, ShmRef] = field(default_factory=dict)
    classification: Optional[Classification] = None
    shm_use: Any = None  # the regions it holds until its end (release_shared_memory)


def prepare(request: WireRequest, server: Server, entry: ModelEntry, client_shm: bool) -> None:
    """Make ``request`` what the core gets: inputs in regions become views
    of them (``client_shm``: the frontend lets clients use shared memory),
    outputs to regions get their allocator, classified outputs their labels."""
    if request.shm_inputs or request.shm_outputs:
        request.output_memory_allocator = place_in_shared_memory(request, server, client_shm)
    if request.classification is not None:
        request.classification.batched = bool(
            int(entry.model.batch_properties()) & int(ModelBatchFlag.FIRST_DIM))
        request.label_outputs = (list(request.classification.counts),
                                 request.classification.batched)


def send_request(request: WireRequest, server: Server, entry: ModelEntry,
                 asynchronous: bool = True, raise_on_error: bool = True,
                 client_shm: bool = False) -> Any:
    """Send a decoded request to its model's entry; returns the iterator of
    its responses (tritonserver._model.send)."""
    prepare(request, server, entry, client_shm)
    try:
        return send(entry.model, request, asynchronous, raise_on_error)
    except BaseException:
        release_shared_memory(request)
        raise


def sequence_flag(key: str, value: Any) -> int:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"Unable to parse '{key}': expected a boolean")
    if not value:
        return 0
    return int(RequestFlag.SEQUENCE_START if key == "sequence_start" else RequestFlag.SEQUENCE_END)


def unsigned(key: str, value: Any, bits: int = 64) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << bits):
        raise InvalidArgumentError(f"Unable to parse '{key}': expected an unsigned integer")
    return int(value)


def set_request_parameter(call: WireRequest, key: str, value: Any) -> None:
    """A request parameter, as a plain value, into the call: those Triton
    reads itself (sequence_id, sequence_start/end, priority, timeout) checked
    and taken, any other a parameter of the request."""
    if key == "sequence_id":
        call.correlation_id = value if isinstance(value, str) else unsigned(key, value)
    elif key in ("sequence_start", "sequence_end"):
        call.flags |= sequence_flag(key, value)
    elif key == "priority":
        call.priority = unsigned(key, value)
    elif key == "timeout":
        call.timeout = unsigned(key, value)
    else:
        set_parameter(call.parameters, key, value)


def once_entry(state: ServerState, server: Server, call: WireRequest,
               refusal: str) -> ModelEntry:
    """The entry of a request's model for an endpoint that answers once
    (``refusal``: what it says to a decoupled model)."""
    entry = state.entry(server, call.model_name, call.model_version)
    if entry.decoupled:
        raise UnsupportedError(refusal)
    return entry


def finish_once(call: WireRequest, response: Optional[InferenceResponse]) -> InferenceResponse:
    """The one response of a call (None: there was none), with only the
    requested outputs (or their top classes)."""
    if response is None:
        raise InternalError("the model sent no response")
    select_outputs(response, call.requested_outputs, call.model_name)
    if call.classification is not None:
        call.classification.apply(response)
    return response


class AnswerOnce:
    """The answer-once policy of the endpoints that answer a call with one
    response (HTTP infer, gRPC ModelInfer): fed the call's responses in
    order by ``take``, it keeps the one response, lets a bare final flag
    after it end the wait, and refuses a second one (``second``: what the
    client is told to use instead). As a context manager around the
    response loop: an error cancels the request, and the call's shared
    memory is released either way, before the client hears the answer.
    ``response()`` is then the answer, with only the requested outputs."""

    __slots__ = ("call", "iterator", "second", "_response")

    def __init__(self, call: WireRequest, iterator: Any, second: str):
        self.call = call
        self.iterator = iterator
        self.second = second
        self._response: Optional[InferenceResponse] = None

    def take(self, response: InferenceResponse) -> bool:
        """Whether the wait is over (a final flag after the response)."""
        if self._response is not None:
            if response.final and not response.outputs:
                return True
            raise UnsupportedError(f"the model sent more than one response; use {self.second}")
        self._response = response
        return False

    def __enter__(self) -> "AnswerOnce":
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        try:
            if kind is not None:
                self.iterator.cancel()
        finally:
            release_shared_memory(self.call)

    def response(self) -> InferenceResponse:
        return finish_once(self.call, self._response)


DECOUPLED_REFUSAL = ("this endpoint doesn't support models with decoupled transaction "
                     "policy; use ModelStreamInfer (gRPC) or generate_stream (HTTP)")


async def infer_once(server: Server, call: WireRequest, state: Optional[ServerState] = None,
                     client_shm: bool = False, refusal: Optional[str] = None
                     ) -> tuple[InferenceResponse, ModelEntry]:
    """Send a call to a model that answers once; returns its (successful)
    response, with only the requested outputs, and the model's entry.
    Raises the call's error. ``state``: the server's, when the caller has it;
    ``client_shm``: the frontend lets clients use shared memory; ``refusal``:
    what a decoupled model is told (None: DECOUPLED_REFUSAL)."""
    entry = once_entry(state or state_of(server), server, call, refusal or DECOUPLED_REFUSAL)
    iterator = send_request(call, server, entry, client_shm=client_shm)
    with AnswerOnce(call, iterator, "a streaming endpoint") as once:
        async for response in iterator:
            if once.take(response):
                break
    return once.response(), entry


__all__ = ["WireRequest", "mark", "prepare", "send_request",
           "trace_context_of", "trace_start"]  # mark: tritonserver._submit's


def tracing(server: Server) -> bool:
    """Whether a request to ``server`` may be traced (tritonserver._trace):
    the frontends take their timestamps only then."""
    return active_tracing(server) is not None


def trace_start(call: RequestSpec, headers: Any, *marks: tuple[str, int]) -> None:
    """What a frontend gives a call that may be traced: its timestamps taken
    before sending (``marks``, as Triton's frontends take them) and the W3C
    trace context among its ``headers`` (HTTP) or metadata (gRPC), which
    trace mode opentelemetry continues."""
    call.trace_marks = list(marks)
    call.trace_context = context_headers(headers)


def trace_context_of(server: Server, headers: Any) -> Optional[dict[str, str]]:
    """The W3C trace context among a request's headers, when a request to
    ``server`` may be traced (None otherwise, without looking)."""
    return context_headers(headers) if tracing(server) else None


def model_version(entry: ModelEntry, requested: int) -> str:
    """The version a response came from: the one asked for, else the one the
    core picks for -1 (the highest of the model's versions), read once."""
    if requested >= 0:
        return str(requested)
    if entry.version is None:
        versions = entry.model.metadata().get("versions") or []
        numbers = [int(v) for v in versions if str(v).isdigit()]
        entry.version = str(max(numbers)) if numbers else ""
    return entry.version


def select_outputs(response: InferenceResponse, names: Optional[list[str]],
                   model_name: str) -> None:
    """Keep only the requested outputs, in the requested order."""
    if names is None:
        return
    produced = response.outputs
    selected = {}
    for name in names:
        tensor = produced.get(name)
        if tensor is None:
            raise InvalidArgumentError(
                f"unexpected inference output '{name}' for model '{model_name}'")
        selected[name] = tensor
    response.outputs = selected
