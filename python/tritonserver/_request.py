"""InferenceRequest: what to send, turned into a core request at send time."""

from __future__ import annotations

import asyncio
import queue
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Union


from tritonserver._c import triton_bindings as _bindings
from tritonserver._errors import InvalidArgumentError, InvalidArgumentTypeError, TritonError
from tritonserver._memory import default_for
from tritonserver._memory import default_memory_allocators as _defaults
from tritonserver._tensor import Tensor, parse_device

if TYPE_CHECKING:
    from tritonserver._memory import MemoryAllocator
    from tritonserver._model import Model
    from tritonserver._response import InferenceResponse

CLASSIFICATION_PARAMETER = "classification"



@dataclass
class InferenceRequest:
    """An inference request for one model.

    ``inputs`` maps input names to Tensors, numpy arrays, DLPack producers,
    lists or scalars; lists and scalars take the model's declared data type.
    Input data is referenced in place until the core releases the request.
    ``timeout`` is in microseconds (0: none). ``priority`` 0 is the model's
    default. ``correlation_id`` may be an int or a str.
    """

    model: "Model"
    request_id: Optional[str] = None
    flags: int = 0
    correlation_id: Optional[Union[int, str]] = None
    priority: int = 0
    timeout: int = 0
    inputs: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, Union[str, int, bool, float]] = field(default_factory=dict)
    output_memory_type: Optional[Any] = None
    output_memory_allocator: Optional["MemoryAllocator"] = None
    response_queue: Optional[Union[queue.SimpleQueue[InferenceResponse],
                                   asyncio.Queue[InferenceResponse]]] = None
    # The outputs to compute (None: all). Not a field (the reference page
    # lists the fields): the network frontends set it on a request, with
    # setattr, from what their clients ask for.
    _requested_outputs: ClassVar[Optional[list[str]]] = None
    # Likewise: (output names, whether the model batches) whose class labels
    # each response carries (InferenceResponse._output_labels), for the
    # frontends' classification extension.
    _label_outputs: ClassVar[Optional[tuple[list[str], bool]]] = None

    def _submission(self) -> Submission:
        """This request as the binding's, ready to send (validated first).

        Fields at their defaults cost nothing; only set ones are checked.
        """
        model = self.model
        request = _bindings.InferenceRequest(model._server._handle(), model.name, model.version)
        if self.request_id is not None:
            _check_type("request_id", self.request_id, str)
            request.set_id(self.request_id)
        if self.flags:
            _check_uint("flags", self.flags, 32)
            request.set_flags(self.flags)
        if self.correlation_id is not None:
            if isinstance(self.correlation_id, str):
                request.set_correlation_id_string(self.correlation_id)
            else:
                _check_uint("correlation_id", self.correlation_id, 64)
                request.set_correlation_id(self.correlation_id)
        if self.priority:
            _check_uint("priority", self.priority, 64)
            request.set_priority(self.priority)
        if self.timeout:
            _check_uint("timeout", self.timeout, 64)
            request.set_timeout_microseconds(self.timeout)
        if self.parameters:
            if not isinstance(self.parameters, dict):
                raise InvalidArgumentError("parameters must be a dict of str to str, int, "
                                           "bool or float")
            parameters = self.parameters
            if CLASSIFICATION_PARAMETER in parameters:  # ours, not the model's
                request.set_classify(_classify(parameters[CLASSIFICATION_PARAMETER]))
                parameters = {k: v for k, v in parameters.items()
                              if k != CLASSIFICATION_PARAMETER}
            request.set_parameters(parameters)
        if self.output_memory_allocator is not None or self.output_memory_type is not None \
                or not _defaults.as_shipped:
            _set_output_memory(request, self.output_memory_allocator, self.output_memory_type)
        if self._requested_outputs is not None:
            for name in self._requested_outputs:
                request.add_requested_output(name)
        if self._label_outputs is not None:
            request.set_label_outputs(*self._label_outputs)
        _add_inputs(request, model, self.inputs)
        _trace(model, request)
        return request, self.response_queue, self.request_id


# A binding request ready to send (its responses arrive in its own queue),
# the caller's response_queue if any, and the request's id: what the
# iterators start from.
Submission = tuple[Any, Any, Optional[str]]


def submission(model: "Model", request: Optional[InferenceRequest],
               kwargs: dict[str, Any]) -> Submission:
    """What Model.infer sends: `request`, or one made of the keyword
    arguments. A call that gives only inputs (the common case) builds the
    binding request directly, without an InferenceRequest."""
    if request is None:
        if len(kwargs) == 1 and "inputs" in kwargs and _defaults.as_shipped:
            # The hot path: arrays in one call, outputs in the binding's host memory.
            c_request = _bindings.InferenceRequest(model._server._handle(), model.name,
                                                   model.version)
            inputs = kwargs["inputs"]
            if type(inputs) is dict:
                others = c_request.add_arrays(inputs)
                if others is not None:
                    _add_others(c_request, model, inputs, others)
            else:
                _add_inputs(c_request, model, inputs)
            _trace(model, c_request)
            return c_request, None, None
        return InferenceRequest(model=model, **kwargs)._submission()
    if kwargs:
        raise InvalidArgumentError("pass either an InferenceRequest or keyword arguments, not both")
    if not isinstance(request, InferenceRequest):
        raise InvalidArgumentError(
            f"inference_request must be an InferenceRequest, not {type(request).__name__}")
    return request._submission()


def _trace(model: "Model", request: Any) -> None:
    """Sends `request` with a core trace when its server's trace setting
    samples it (tritonserver._trace; nothing to do while tracing is off)."""
    tracing = model._server._registries.active_tracing()
    if tracing is not None:
        tracing.attach(request, model.name)


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


def _add_inputs(request: Any, model: "Model", inputs: Any) -> None:
    """Numpy arrays go in place through the binding in one call; from the
    first other value on, each becomes a Tensor first (lists and scalars
    take the model's declared data type), keeping the inputs' order."""
    if not isinstance(inputs, dict):
        raise InvalidArgumentError("inputs must be a dict of name to tensor")
    others = request.add_arrays(inputs)
    if others is not None:
        _add_others(request, model, inputs, others)


def _add_others(request: Any, model: "Model", inputs: dict[Any, Any], names: list[Any]) -> None:
    """The inputs add_arrays left (`names`), each as a Tensor."""
    declared = model._input_datatypes()
    for name in names:
        if not isinstance(name, str):
            raise InvalidArgumentError(f"input names must be str, not {type(name).__name__}")
        try:
            tensor = Tensor._from_object(inputs[name], declared.get(name))
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
