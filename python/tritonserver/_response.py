"""InferenceResponse: one response of a request, built from the binding's
record of it (tritonserver._c.triton_bindings.Response)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Optional, Union

import numpy as np

from tritonserver._c import triton_bindings as _bindings
from tritonserver._enums import DATA_TYPES, MEMORY_TYPES, DataType, MemoryType
from tritonserver._errors import TritonError, error_from_code
from tritonserver._slots import slotted
from tritonserver._tensor import MemoryBuffer, Tensor

if TYPE_CHECKING:
    from tritonserver._c.triton_bindings import Response
    from tritonserver._model import Model

_HOST = (MemoryType.CPU, MemoryType.CPU_PINNED)


@slotted
@dataclass
class InferenceResponse:
    """One response of a request: outputs, or the error that replaced them.

    The last response of a request has ``final=True``. A decoupled model may
    end with a final response that carries nothing else. classification_label
    is filled when the request asked for it (parameter "classification":
    True): the label of the first output's top class, from the model's label
    file (None without one).
    """

    model: "Model"
    request_id: Optional[str] = None
    parameters: dict[str, Union[str, int, bool, float]] = field(default_factory=dict)
    outputs: dict[str, Tensor] = field(default_factory=dict)
    error: Optional[TritonError] = None
    classification_label: Optional[str] = None
    final: bool = False
    # Not a field: set on a response whose request named outputs for their
    # class labels (RequestSpec.label_outputs): {output: the labels of
    # one batch item's classes, None where the label file has none}.
    _output_labels: ClassVar[Optional[dict[str, list[Optional[bytes]]]]] = None

    @staticmethod
    def _from_record(model: "Model", record: "Response",
                     request_id: Optional[str]) -> "InferenceResponse":
        """Build from the binding's record; each output's record owns its
        memory and becomes its MemoryBuffer's owner."""
        outputs = {}
        for o in record.outputs:
            buffer = MemoryBuffer(o.data_ptr, MEMORY_TYPES[o.memory_type], o.memory_type_id,
                                  o.byte_size, o)
            outputs[o.name] = Tensor(DATA_TYPES[o.datatype], o.shape, buffer)
        code = record.error_code
        labels = record.class_labels
        response = InferenceResponse(
            model, record.request_id or request_id, record.parameters, outputs,
            None if code is None else error_from_code(code, record.error_message),
            None if labels is None else _top_class_label(outputs, labels), record.final)
        output_labels = record.output_labels
        if output_labels is not None:
            setattr(response, "_output_labels", output_labels)  # noqa: B010 - not a field
        return response


# Popped responses are made by the binding (csrc/bindings/response_objects.h):
# these classes, and _from_record for the records that carry an error or
# class labels.
_bindings.set_response_classes(InferenceResponse, Tensor, MemoryBuffer, DATA_TYPES, MEMORY_TYPES,
                               InferenceResponse._from_record)


def output_labels(response: InferenceResponse) -> Optional[dict[str, list[Optional[bytes]]]]:
    """The class labels a response carries for the outputs its request
    named for them (RequestSpec.label_outputs): {output: the labels of one
    batch item's classes, None where the label file has none}; else None."""
    return response._output_labels


def _top_class_label(outputs: dict[str, Tensor], labels: list[Optional[str]]) -> Optional[str]:
    """The label of the first output's top class (over its first element's
    classes, the last dimension): None without a label, or when the output
    is not a host tensor of numbers."""
    first = next(iter(outputs.values()), None)
    if (first is None or not labels or first.memory_type not in _HOST
            or first.data_type in (DataType.BYTES, DataType.BF16)):
        return None
    scores = np.from_dlpack(first).reshape(-1)[:len(labels)]
    return labels[int(np.argmax(scores))] if scores.size else None
