"""InferenceRequest: what to send, turned into a core request at send time
(by tritonserver._submit, as every request is)."""

from __future__ import annotations

import asyncio
import queue
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from tritonserver._errors import InvalidArgumentError
from tritonserver._submit import RequestSpec, Submission, submission

if TYPE_CHECKING:
    from tritonserver._memory import MemoryAllocator
    from tritonserver._model import Model
    from tritonserver._response import InferenceResponse


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

    def _spec(self) -> RequestSpec:
        """This request's description (tritonserver._submit)."""
        return RequestSpec(
            inputs=self.inputs, request_id=self.request_id, flags=self.flags,
            correlation_id=self.correlation_id, priority=self.priority, timeout=self.timeout,
            parameters=self.parameters, output_memory_allocator=self.output_memory_allocator,
            output_memory_type=self.output_memory_type, response_queue=self.response_queue)


def submission_of(request: InferenceRequest) -> Submission:
    """``request`` as the binding's, ready to send (validated first)."""
    return submission(request.model, request._spec())


def model_submission(model: "Model", request: Optional[InferenceRequest],
                     kwargs: dict[str, Any]) -> Submission:
    """What Model.infer sends: `request`, or one made of the keyword
    arguments (a call of inputs alone gets here when the binding's fast path
    declined it: tritonserver._submit.send_inputs)."""
    if request is None:
        return submission_of(InferenceRequest(model=model, **kwargs))
    if kwargs:
        raise InvalidArgumentError("pass either an InferenceRequest or keyword arguments, not both")
    if not isinstance(request, InferenceRequest):
        raise InvalidArgumentError(
            f"inference_request must be an InferenceRequest, not {type(request).__name__}")
    return submission_of(request)
