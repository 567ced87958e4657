"""RequestSpec: the one description of a request, and the one way to turn
it into the binding's request (``submission``).

Every request reaches the core through here: the public InferenceRequest
and ``Model.infer`` build a RequestSpec, and so do the network frontends'
decoders (tritonserver.frontends.dataplane.inference); ``Model.infer(inputs=...)``
with numpy arrays takes ``send_inputs``, the binding's one-call send (below).
No other module creates or configures a ``triton_bindings.InferenceRequest``;
the iterators only send the submission and read its responses
(tritonserver._iterators).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from tritonserver._c import triton_bindings as _bindings
from tritonserver._datatypes import from_config_name
from tritonserver._enums import DataType
from tritonserver._errors import (InvalidArgumentError, InvalidArgumentTypeError, TritonError,
                                  check_text)
from tritonserver._memory import default_for
from tritonserver._memory import default_memory_allocators as _defaults
from tritonserver._registries import Registries
from tritonserver._tensor import parse_device, tensor_of

CLASSIFICATION_PARAMETER = "classification"

# A binding request ready to send (its responses arrive in its own queue),
# the caller's response_queue if any, and the request's id: what the
# iterators start from.
Submission = tuple[Any, Any, Optional[str]]



class RequestTarget:
    """The base of tritonserver.Model: what sending a request needs of its
    model, read here and by the binding's fast path (``FAST_PATH_READS``):
    the model's name and version, its server's Registries (tritonserver._registries,
    which Model takes from the server it is given) and its declared input
    types (for lists and scalars), cached per model."""

    name: str
    version: int
    _registries: Registries
    _input_types: Optional[dict[str, DataType]]

    def _input_datatypes(self) -> dict[str, DataType]:
        if self._input_types is None:
            types: dict[str, DataType] = {}
            try:
                metadata = json.loads(
                    self._registries.started().model_metadata(self.name, self.version))
                for spec in metadata.get("inputs", []):
                    types[spec["name"]] = from_config_name(spec["datatype"])
            except Exception:
                # Unknown model and the like: the core reports it on send.
                return {}
            self._input_types = types
        return self._input_types


@dataclass(eq=False)
class RequestSpec:
    """What to ask the core for one model (the model is given beside it).

    Fields at their defaults cost nothing when the request is made; only
    set ones are checked. ``requested_outputs``: the outputs to compute
    (None: all). ``label_outputs``: (output names, whether the model
    batches) whose class labels each response carries (the frontends'
    classification). ``trace_marks``: timestamps a frontend took before
    sending, given to the core's trace once sent when it samples the
    request, which is then kept in ``traced`` for later ones (``mark``).
    ``trace_context``: the W3C trace context headers (traceparent,
    tracestate) a frontend got with the request, which trace mode
    opentelemetry continues (tritonserver._trace.context_headers).
    """

    inputs: dict[str, Any] = field(default_factory=dict)
    request_id: Optional[str] = None
    flags: int = 0
    correlation_id: Optional[Union[int, str]] = None
    priority: int = 0
    timeout: int = 0
    parameters: dict[str, Any] = field(default_factory=dict)
    requested_outputs: Optional[list[str]] = None
    label_outputs: Optional[tuple[list[str], bool]] = None
    output_memory_allocator: Any = None
    output_memory_type: Any = None
    response_queue: Any = None
    trace_marks: Optional[list[tuple[str, int]]] = None
    traced: Any = None
    trace_context: Optional[dict[str, str]] = None


def submission(model: RequestTarget, spec: RequestSpec) -> Submission:
    """The binding's request for ``spec``, validated, ready to send."""
    registries = model._registries
    request = _bindings.InferenceRequest(registries.started(), model.name, model.version)
    if spec.request_id is not None:
        _check_type("request_id", spec.request_id, str)
        if spec.request_id:
            request.set_id(check_text("request_id", spec.request_id))
    if spec.flags:
        _check_uint("flags", spec.flags, 32)
        request.set_flags(spec.flags)
    if spec.correlation_id is not None:
        if isinstance(spec.correlation_id, str):
            request.set_correlation_id_string(check_text("correlation_id", spec.correlation_id))
        else:
            _check_uint("correlation_id", spec.correlation_id, 64)
            request.set_correlation_id(spec.correlation_id)
    if spec.priority:
        _check_uint("priority", spec.priority, 64)
        request.set_priority(spec.priority)
    if spec.timeout:
        _check_uint("timeout", spec.timeout, 64)
        request.set_timeout_microseconds(spec.timeout)
    if spec.parameters:
        if not isinstance(spec.parameters, dict):
            raise InvalidArgumentError("parameters must be a dict of str to str, int, "
                                       "bool or float")
        parameters = spec.parameters
        if CLASSIFICATION_PARAMETER in parameters:  # ours, not the model's
            request.set_classify(_classify(parameters[CLASSIFICATION_PARAMETER]))
            parameters = {k: v for k, v in parameters.items() if k != CLASSIFICATION_PARAMETER}
        request.set_parameters(parameters)
    if spec.output_memory_allocator is not None or spec.output_memory_type is not None \
            or not _defaults.as_shipped:
        _set_output_memory(request, spec.output_memory_allocator, spec.output_memory_type)
    if spec.requested_outputs is not None:
        for name in spec.requested_outputs:
            request.add_requested_output(check_text("output name", name))
    if spec.label_outputs is not None:
        request.set_label_outputs(*spec.label_outputs)
    _add_inputs(request, model, spec.inputs)
    tracing = registries.active_tracing()
    if tracing is not None:
        tracing.attach(request, model.name, spec.trace_context)
    return request, spec.response_queue, spec.request_id


def sent(spec: RequestSpec, request: Any) -> None:
    """``request`` (``spec``'s submission) was sent: the core's trace, when it
    samples it, gets the timestamps taken before (the trace exists from the
    send on), and ``spec.traced`` keeps it for later ones (``mark``)."""
    marks = spec.trace_marks
    if marks and request.trace_timestamp(*marks[0]):
        for name, ns in marks[1:]:
            request.trace_timestamp(name, ns)
        spec.traced = request


# ``Model.infer(inputs=...)`` at its fastest: when ``inputs`` is a dict of
# numpy arrays the binding reads in place, no allocator was put in
# tritonserver.default_memory_allocators and no trace may sample it, the
# binding's request, made, filled and sent in one call; else None, and
# nothing was sent (the caller then takes ``submission``). The binding's
# function (csrc/bindings/response_stream.cc), which Model.infer's and
# Model.async_infer's own C methods call too: the checks are written once.
#
# It is the one other builder of the binding's request, and it stays for
# speed: the request made, filled and sent in one C call, with the
# responses built in C, took the sync ratio to the C API from 0.43 to 0.51
# (benchmarks/README.md, "The in-process hot path"); everything since
# (0.8 today) builds on it.
#
# What it reads from Python objects, named here and nowhere else: the
# binding takes every name from this table (a renamed attribute changes
# here; tests/api/test_fast_path.py fails when a call that should take the
# fast path does not, and tests/unit checks each name exists).
FAST_PATH_READS = {
    "model_registries": "_registries",    # RequestTarget._registries
    "model_name": "name",                 # RequestTarget.name
    "model_version": "version",           # RequestTarget.version
    "handle": "handle",                   # Registries.handle
    "made_tracing": "made_tracing",       # Registries.made_tracing
    "tracing_active": "active",           # tritonserver._trace.Tracing.active
    "allocators_as_shipped": "as_shipped",  # tritonserver._memory's default_memory_allocators
}
send_inputs = _bindings.inputs_sender(_defaults, FAST_PATH_READS)


def mark(spec: RequestSpec, *marks: tuple[str, int]) -> None:
    """Timestamps of a traced request taken after it was sent (its response
    sent back): the trace is written once the request is let go."""
    if spec.traced is not None:
        for name, ns in marks:
            spec.traced.trace_timestamp(name, ns)


def _classify(value: Any) -> bool:
    """Whether the "classification" parameter asks for classification
    labels (True or 1). It is read by this package, not sent to the model:
    the top class of the first output, by its model's label file, becomes
    each response's classification_label."""
    if value is None or value is False:
        return False
    if value is True or (type(value) is int and value == 1):
        return True
    raise InvalidArgumentError(
        f"parameter '{CLASSIFICATION_PARAMETER}' must be True (or 1): the top class's label")


def _add_inputs(request: Any, model: RequestTarget, inputs: Any) -> None:
    """Numpy arrays go in place through the binding in one call; from the
    first other value on, each becomes a Tensor first (lists and scalars
    take the model's declared data type), keeping the inputs' order."""
    if not isinstance(inputs, dict):
        raise InvalidArgumentError("inputs must be a dict of name to tensor")
    others = request.add_arrays(inputs)
    if others is not None:
        _add_others(request, model, inputs, others)


def _add_others(request: Any, model: RequestTarget, inputs: dict[Any, Any],
                names: list[Any]) -> None:
    """The inputs add_arrays left (`names`), each as a Tensor."""
    declared = model._input_datatypes()
    for name in names:
        if not isinstance(name, str):
            raise InvalidArgumentError(f"input names must be str, not {type(name).__name__}")
        check_text("input name", name)
        try:
            tensor = tensor_of(inputs[name], declared.get(name))
        except TritonError:
            raise
        except (TypeError, ValueError, OverflowError) as e:
            raise InvalidArgumentError(f"input '{name}': {e}") from None
        request.add_input(name, int(tensor.data_type), list(tensor.shape), tensor.data_ptr,
                          tensor.size, int(tensor.memory_type), tensor.memory_type_id,
                          tensor.memory_buffer.owner)


def _set_output_memory(request: Any, allocator: Any, device: Any) -> None:
    """Where outputs go: the request's MemoryAllocator (asked for `device`
    when given), else tritonserver.default_memory_allocators (tritonserver._memory)."""
    memory_type, memory_type_id = parse_device(device) if device is not None else (None, 0)
    if allocator is None:
        allocator = default_for(memory_type)
        if allocator is None:  # the binding's host allocator
            return
    elif not callable(getattr(allocator, "allocate", None)):
        raise InvalidArgumentTypeError("output_memory_allocator must have an allocate() method")
    preferred = -1 if memory_type is None else int(memory_type)
    request.set_allocator(allocator, preferred, memory_type_id)


def _check_type(name: str, value: Any, kind: type) -> None:
    if not isinstance(value, kind):
        raise InvalidArgumentTypeError(f"{name} must be {kind.__name__}, not {type(value).__name__}")


def _check_uint(name: str, value: Any, bits: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << bits):
        raise InvalidArgumentError(f"{name} must be an int in [0, 2**{bits}), got {value!r}")
