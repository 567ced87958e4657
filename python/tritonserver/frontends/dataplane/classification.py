"""Triton's classification extension, for both frontends.

An output requested with the ``classification`` parameter (HTTP: a JSON
unsigned integer in the output's ``parameters``; gRPC: ``int64_param``,
which tritonclient sets from ``class_count``) comes back as its top k
classes instead of its values: a BYTES tensor of ``"<value>:<index>"``, or
``"<value>:<index>:<label>"`` where the model's label file (the output's
``label_filename`` in its configuration) has a label for that class. As in
Triton (``src/classification.cc`` and the frontends that call it):

- classes are counted per batch item when the model batches (its outputs'
  first dimension is the batch): shape ``[batch, k']``, otherwise over the
  whole output: shape ``[k']``; ``k' = min(k, classes)``;
- classes come highest value first; values are written as C++'s
  ``std::to_string`` writes them (integers in decimal, floating point with
  ``%f``: ``0.700000``); equal values come lowest index first (Triton's
  ``std::sort`` leaves their order unspecified beyond 16 classes), NaN last;
- only UINT8-64, INT8-64, FP32 and FP64 outputs can be classified; more than
  1,000,000 classes per item are refused;
- k is held in 32 bits, as Triton holds it: HTTP 0 (or a multiple of 2**32)
  asks for the plain output, gRPC values <= 0 are refused.

The frontends only translate: they parse the parameter with ``http_count`` or
``grpc_count``, keep the counts in a ``Classification`` on their call, which
asks the core for the labels when the request is made (``attach``) and
replaces the outputs in each response (``apply``).
"""

from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from tritonserver import DataType, InvalidArgumentError, MemoryType, Tensor
from tritonserver._response import output_labels
from tritonserver._tensor import host_buffer

if TYPE_CHECKING:
    from tritonserver import InferenceResponse

PARAMETER = "classification"
# Triton's limit on the classes of one batch item.
MAX_CLASSES = 1_000_000

# The datatypes Triton classifies, as numpy reads them.
_NUMERIC: dict[DataType, np.dtype[Any]] = {
    DataType.UINT8: np.dtype(np.uint8), DataType.UINT16: np.dtype("<u2"),
    DataType.UINT32: np.dtype("<u4"), DataType.UINT64: np.dtype("<u8"),
    DataType.INT8: np.dtype(np.int8), DataType.INT16: np.dtype("<i2"),
    DataType.INT32: np.dtype("<i4"), DataType.INT64: np.dtype("<i8"),
    DataType.FP32: np.dtype("<f4"), DataType.FP64: np.dtype("<f8"),
}
_HOST = (MemoryType.CPU, MemoryType.CPU_PINNED)
_U32 = struct.Struct("<I")


# ---- Parsing the request ---------------------------------------------------------------


def http_count(params: dict[str, Any]) -> int:
    """k for an HTTP output's ``parameters`` (0: not a classification)."""
    if PARAMETER not in params:
        return 0
    value = params[PARAMETER]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << 64):
        # Triton's text (its JSON reader's), though it answers it 500.
        raise InvalidArgumentError(
            "Unable to set 'classification': attempt to access JSON non-unsigned-integer "
            "as unsigned-integer")
    return value & 0xFFFFFFFF


def grpc_count(parameters: Any) -> Optional[int]:
    """k for a gRPC requested output's ``parameters`` map (None: not a
    classification). k may be 0 (a value that is a multiple of 2**32): an
    empty classification, as Triton answers."""
    param = parameters.get(PARAMETER)
    if param is None:
        return None
    if param.WhichOneof("parameter_choice") != "int64_param":
        raise InvalidArgumentError(
            "invalid value type for 'classification' parameter, expected int64_param")
    count = int(param.int64_param)
    if count <= 0:
        raise InvalidArgumentError(
            "invalid value for 'classification' parameter, expected >= 0")
    return count & 0xFFFFFFFF


# ---- The request and its responses -----------------------------------------------------


class Classification:
    """The outputs one call asked for as classes, ``{name: k}``."""

    __slots__ = ("counts", "batched")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.batched = False

    @staticmethod
    def including(existing: Optional["Classification"], name: str,
                  k: int) -> "Classification":
        """``existing`` (or a new one) with output ``name`` asked for its top ``k``."""
        classification = existing if existing is not None else Classification()
        classification.counts[name] = k
        return classification

    def apply(self, response: "InferenceResponse") -> None:
        """Replace the classified outputs of a response by their top classes."""
        outputs = response.outputs
        labels = output_labels(response) or {}
        for name, k in self.counts.items():
            tensor = outputs.get(name)
            if tensor is not None:
                outputs[name] = top_classes(tensor, k, self.batched, labels.get(name))


def top_classes(tensor: Tensor, k: int, batched: bool,
                labels: Optional[list[Optional[bytes]]]) -> Tensor:
    """The BYTES tensor of ``tensor``'s top ``k`` classes (per batch item when
    ``batched``); ``labels``: one batch item's class labels, if any."""
    dtype = _NUMERIC.get(tensor.data_type)
    if dtype is None:
        raise InvalidArgumentError(
            f"class result not available for output due to unsupported type "
            f"'{tensor.data_type.name}'")
    if tensor.memory_type not in _HOST:
        raise InvalidArgumentError(
            f"class result not available for an output in {tensor.memory_type.name} memory")
    shape = [int(d) for d in tensor.shape]
    batch = shape[0] if batched and shape else 0
    per_item = math.prod(shape[1:] if batch else shape)
    values = (np.from_dlpack(tensor).reshape(-1) if tensor.size
              else np.empty(0, dtype))
    parts: list[bytes] = []
    for item in range(max(1, batch)):
        start = item * per_item
        chunk = values[start:start + per_item] if start + per_item <= values.size else values[:0]
        if chunk.size > MAX_CLASSES:
            raise InvalidArgumentError("classification output tensor too large")
        order = _descending(chunk)[:k].tolist()
        for index, value in zip(order, chunk[order].tolist()):
            text = f"{_to_string(value)}:{index}".encode()
            label = labels[index] if labels is not None and index < len(labels) else None
            if label:
                text += b":" + label
            parts.append(_U32.pack(len(text)))
            parts.append(text)
    blob = b"".join(parts)
    out_shape = ([batch] if batch else []) + [min(k, per_item)]
    raw = np.frombuffer(blob, dtype=np.uint8)
    return Tensor(DataType.BYTES, tuple(out_shape), host_buffer(raw))


def _descending(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Indices of ``values`` highest first; equal values lowest index first,
    NaN last."""
    if values.dtype.kind == "f":
        nan = np.isnan(values)
        if nan.any():
            kept = np.flatnonzero(~nan)
            return np.concatenate([kept[_descending(values[kept])], np.flatnonzero(nan)])
    # A stable ascending sort of the reversed values, reversed: descending,
    # and among equal values the lowest index first.
    last = values.size - 1
    return last - np.argsort(values[::-1], kind="stable")[::-1]


def _to_string(value: Any) -> str:
    """As C++'s std::to_string: integers in decimal, floating point as %f
    (glibc's spelling of infinities and NaN, sign included)."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return "%f" % value
