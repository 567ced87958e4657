"""An inference call, protocol-free: the Call each frontend decodes its
request into (inputs, the parameters Triton reads itself, requested outputs,
shared memory places, classification, trace timestamps), the request it
makes, and sending a call that answers once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from tritonserver._enums import RequestFlag
from tritonserver._server import active_tracing
from tritonserver.frontends.dataplane.classification import Classification
from tritonserver.frontends.dataplane.state import ModelEntry, ServerState, state_of
from tritonserver.frontends.dataplane.shared_memory import ShmRef, place_in_shared_memory
from tritonserver import (
    InferenceRequest,
    InferenceResponse,
    InternalError,
    InvalidArgumentError,
    Model,
    Server,
    UnsupportedError,
)

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


@dataclass
class Call:
    """One inference call, decoded from the wire."""

    model_name: str
    version: int
    inputs: dict[str, Any] = field(default_factory=dict)
    request_id: str = ""
    correlation_id: Union[int, str, None] = None
    flags: int = 0
    priority: int = 0
    timeout: int = 0
    parameters: dict[str, Any] = field(default_factory=dict)
    outputs: Optional[list[str]] = None  # requested outputs, in order; None: all
    # Tensors in system shared memory (inputs: their place in self.inputs holds None).
    shm_inputs: dict[str, ShmRef] = field(default_factory=dict)
    shm_outputs: dict[str, ShmRef] = field(default_factory=dict)
    # Outputs asked for as their top classes (requested outputs, so never the fast path).
    classification: Optional[Classification] = None
    # Tracing (tritonserver._trace): the frontend's timestamps taken before
    # the request was sent, and the sent request when the core traces it.
    trace_marks: Optional[list[tuple[str, int]]] = None
    traced: Any = None

    def request(self, model: Model) -> Optional[InferenceRequest]:
        """The InferenceRequest, or None when only inputs are set (fast path).
        Named outputs are the only ones the model computes."""
        allocator = None
        if self.shm_inputs or self.shm_outputs:
            allocator = place_in_shared_memory(self, model._server)
        if (not self.request_id and self.correlation_id is None and not self.flags
                and not self.priority and not self.timeout and not self.parameters
                and self.outputs is None and allocator is None):
            return None
        request = InferenceRequest(
            model=model, request_id=self.request_id or None, flags=self.flags,
            correlation_id=self.correlation_id, priority=self.priority, timeout=self.timeout,
            inputs=self.inputs, parameters=self.parameters, output_memory_allocator=allocator)
        setattr(request, "_requested_outputs", self.outputs)  # noqa: B010 - not a field
        if self.classification is not None:
            self.classification.attach(request, model)
        return request


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


def set_request_parameter(call: Call, key: str, value: Any) -> None:
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


def once_entry(state: ServerState, server: Server, call: Call, refusal: str) -> ModelEntry:
    """The entry of a call's model for an endpoint that answers once
    (``refusal``: what it says to a decoupled model)."""
    entry = state.entry(server, call.model_name, call.version)
    if entry.decoupled:
        raise UnsupportedError(refusal)
    return entry


def finish_once(call: Call, response: Optional[InferenceResponse]) -> InferenceResponse:
    """The one response of a call (None: there was none), with only the
    requested outputs (or their top classes)."""
    if response is None:
        raise InternalError("the model sent no response")
    select_outputs(response, call.outputs, call.model_name)
    if call.classification is not None:
        call.classification.apply(response)
    return response


async def infer_once(server: Server, call: Call,
                     state: Optional[ServerState] = None) -> tuple[InferenceResponse, ModelEntry]:
    """Send a call to a model that answers once; returns its (successful)
    response, with only the requested outputs, and the model's entry.
    Raises the call's error. ``state``: the server's, when the caller has it."""
    entry = once_entry(state or state_of(server), server, call,
                       "this endpoint doesn't support models with decoupled transaction "
                       "policy; use ModelStreamInfer (gRPC) or generate_stream (HTTP)")
    model = entry.model
    request = call.request(model)
    iterator = model.async_infer(request) if request is not None else \
        model.async_infer(inputs=call.inputs)
    if call.trace_marks:
        mark_sent(call, iterator._request)
    response = None
    try:
        async for r in iterator:
            if r.final and not r.outputs and response is not None:
                break  # a final flag after the response
            if response is not None:
                raise UnsupportedError(
                    "the model sent more than one response; use a streaming endpoint")
            response = r
    except BaseException:
        iterator.cancel()
        raise
    return finish_once(call, response), entry


def tracing(server: Server) -> bool:
    """Whether a request to ``server`` may be traced (tritonserver._trace):
    the frontends take their timestamps only then."""
    return active_tracing(server) is not None


def mark_sent(call: Call, request: Any) -> None:
    """``request`` (the binding's) was sent for ``call``: its trace, if it
    has one, gets the frontend's timestamps so far, and later ones (mark)."""
    marks = call.trace_marks
    if marks and request.trace_timestamp(*marks[0]):
        for name, ns in marks[1:]:
            request.trace_timestamp(name, ns)
        call.traced = request


def mark(call: Call, *marks: tuple[str, int]) -> None:
    """Timestamps of a traced call taken after its request was sent (its
    response sent back): the trace is written once ``call`` lets go."""
    if call.traced is not None:
        for name, ns in marks:
            call.traced.trace_timestamp(name, ns)


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
