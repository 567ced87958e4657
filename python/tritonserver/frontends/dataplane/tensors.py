"""Tensors on the wire: Triton's datatype names, the checks of a client's
shape and datatype, inputs made from request bytes or JSON lists, and the
bytes and JSON values of output tensors. Both frontends decode with these.

Inputs reach the core in place: a fixed-size tensor is a numpy view
(``np.frombuffer``) of the request's own bytes, a BYTES or BF16 tensor a
``Tensor`` over them; nothing is copied or looped over per element, except
that BYTES tensors have their length prefixes checked (one step per element).
"""

from __future__ import annotations

import math
import struct
from typing import Any, Optional

import numpy as np

from tritonserver import (
    DataType,
    InvalidArgumentError,
    MemoryType,
    Tensor,
    UnsupportedError,
)
from tritonserver._tensor import host_buffer, host_view

MAX_DIMS = 32
INT64_MAX = (1 << 63) - 1
# Triton's HTTP_MAX_JSON_NESTING_DEPTH (server PR #8172): 'data' nested this
# deep is refused, shallower nesting is flattened whatever the shape says.
JSON_MAX_NESTING_DEPTH = 100

# Triton datatype name -> numpy dtype (None: no numpy form) and element size.
NUMPY_DTYPE: dict[str, Optional[np.dtype[Any]]] = {
    "BOOL": np.dtype(np.bool_), "UINT8": np.dtype(np.uint8), "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"), "UINT64": np.dtype("<u8"), "INT8": np.dtype(np.int8),
    "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"), "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"),
    "BF16": None, "BYTES": None,
}
ELEMENT_SIZE = {name: (dt.itemsize if dt is not None else 0) for name, dt in NUMPY_DTYPE.items()}
ELEMENT_SIZE["BF16"] = 2
DATATYPE_NAME = {int(m): m.name for m in DataType if m.name != "INVALID"}
HOST_MEMORY = (MemoryType.CPU, MemoryType.CPU_PINNED)

_U32 = struct.Struct("<I")


def element_count(name: str, shape: Any) -> int:
    """Product of a shape given by a client, checked (ints >= 0, at most MAX_DIMS)."""
    if not isinstance(shape, (list, tuple)) and not hasattr(shape, "__len__"):
        raise InvalidArgumentError(f"input '{name}': shape must be a list of integers")
    if len(shape) > MAX_DIMS:
        raise InvalidArgumentError(f"input '{name}': shape has {len(shape)} dimensions, "
                                   f"more than the {MAX_DIMS} allowed")
    count = 1
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise InvalidArgumentError(
                f"input '{name}': shape must hold non-negative integers, got {list(shape)!r}")
        count *= d
    if count > INT64_MAX:
        # Triton's text (server PRs #8182, #8489): a count past int64 wraps in C++.
        raise InvalidArgumentError(
            f"invalid shape for input '{name}': shape [{','.join(map(str, shape))}] causes "
            f"total element count to exceed maximum size of {INT64_MAX}")
    return count


def check_datatype(name: str, datatype: Any) -> str:
    if not isinstance(datatype, str) or datatype not in NUMPY_DTYPE:
        raise InvalidArgumentError(f"input '{name}': invalid datatype {datatype!r}")
    return datatype


def check_bytes_layout(name: str, buffer: Any, offset: int, size: int, count: int) -> None:
    """BYTES data must be exactly ``count`` elements of 4-byte length + bytes."""
    end = offset + size
    pos = offset
    unpack = _U32.unpack_from
    for _ in range(count):
        if pos + 4 > end:
            raise InvalidArgumentError(
                f"input '{name}': BYTES data holds fewer elements than its shape says ({count})")
        pos += 4 + unpack(buffer, pos)[0]
        if pos > end:
            raise InvalidArgumentError(
                f"input '{name}': a BYTES element runs past the end of the tensor data")
    if pos != end:
        raise InvalidArgumentError(
            f"input '{name}': BYTES data holds more bytes than its {count} elements")


def tensor_from_buffer(name: str, datatype: str, shape: list[int], buffer: Any,
                       offset: int, size: int) -> Any:
    """An input over ``size`` bytes of ``buffer`` (bytes-like) at ``offset``, in place."""
    count = element_count(name, shape)
    itemsize = ELEMENT_SIZE[datatype]
    if datatype == "BYTES":
        check_bytes_layout(name, buffer, offset, size, count)
    elif count * itemsize != size:
        raise InvalidArgumentError(
            f"input '{name}': {size} bytes of data for shape {list(shape)} of {datatype} "
            f"({count * itemsize} expected)")
    dtype = NUMPY_DTYPE[datatype]
    if dtype is not None:
        return np.frombuffer(buffer, dtype=dtype, count=count, offset=offset).reshape(shape)
    raw = np.frombuffer(buffer, dtype=np.uint8, count=size, offset=offset)
    return Tensor(DataType[datatype], tuple(shape), host_buffer(raw))


_JSON_KINDS = {"BOOL": "b", "FP16": "biuf", "FP32": "biuf", "FP64": "biuf"}


def tensor_from_list(name: str, datatype: str, shape: list[int], data: Any) -> Any:
    """An input from JSON elements (flat or nested lists)."""
    count = element_count(name, shape)
    if not isinstance(data, list):
        data = [data]
    if datatype == "BYTES":
        flat = data if all(not isinstance(x, list) for x in data) else list(_flatten(name, data))
        if len(flat) != count:
            raise InvalidArgumentError(
                f"input '{name}': {len(flat)} elements of data for shape {list(shape)}")
        parts = []
        for item in flat:
            if not isinstance(item, str):
                raise InvalidArgumentError(
                    f"input '{name}': BYTES elements must be strings, got {type(item).__name__}")
            raw = item.encode("utf-8", "surrogatepass")
            parts.append(_U32.pack(len(raw)))
            parts.append(raw)
        blob = b"".join(parts)
        return tensor_from_buffer(name, "BYTES", shape, blob, 0, len(blob))
    dtype = NUMPY_DTYPE[datatype]
    if dtype is None:
        raise InvalidArgumentError(
            f"input '{name}': {datatype} data cannot be given as JSON; send it as binary data")
    try:
        array = np.asarray(data)
    except (ValueError, TypeError, OverflowError, RecursionError):
        # Ragged, or deeper than numpy's dimensions: flattened, as Triton reads any
        # nesting (and refuses, with its text, past JSON_MAX_NESTING_DEPTH).
        flat = list(_flatten(name, data))
        try:
            array = np.asarray(flat)
        except (ValueError, TypeError, OverflowError):
            raise InvalidArgumentError(
                f"input '{name}': 'data' is not a list of numbers matching the shape") from None
    allowed = _JSON_KINDS.get(datatype, "biu")
    if array.dtype.kind in "fO" and dtype.kind in "iu":
        # Python ints past int64 (UINT64's upper half) make numpy guess float
        # or object: take them one by one, exactly.
        flat = list(_flatten(name, data))
        if all(type(v) is int for v in flat):
            try:
                array = np.array(flat, dtype=dtype)
            except OverflowError:
                raise InvalidArgumentError(
                    f"input '{name}': a value does not fit in {datatype}") from None
    if array.size and array.dtype.kind not in allowed:
        raise InvalidArgumentError(
            f"input '{name}': 'data' holds values that are not {datatype} "
            f"(got {array.dtype.kind!r} kind elements)")
    if array.size != count:
        raise InvalidArgumentError(
            f"input '{name}': {array.size} elements of data for shape {list(shape)}")
    try:
        with np.errstate(over="raise", invalid="raise"):
            if array.dtype.kind in "iu" and dtype.kind in "iu":
                info = np.iinfo(dtype)
                if array.size and (array.min() < info.min or array.max() > info.max):
                    raise OverflowError
            converted = array.astype(dtype, copy=False)
    except (OverflowError, FloatingPointError, ValueError, TypeError):
        raise InvalidArgumentError(
            f"input '{name}': a value does not fit in {datatype}") from None
    return np.ascontiguousarray(converted).reshape(shape)


def _too_deep() -> InvalidArgumentError:
    return InvalidArgumentError(
        f"JSON nesting depth exceeds maximum allowed limit ({JSON_MAX_NESTING_DEPTH})")


def _flatten(name: str, data: list[Any], depth: int = 0) -> Any:
    """The elements of nested lists (``data`` at ``depth``), in order;
    refused, with Triton's text, if any lies JSON_MAX_NESTING_DEPTH deep."""
    for item in data:
        if depth + 1 >= JSON_MAX_NESTING_DEPTH:
            raise _too_deep()
        if isinstance(item, list):
            yield from _flatten(name, item, depth + 1)
        else:
            yield item



def tensor_bytes(tensor: Tensor) -> memoryview:
    """The host bytes of an output tensor (a view, valid while it lives)."""
    if tensor.memory_type not in (MemoryType.CPU, MemoryType.CPU_PINNED):
        raise UnsupportedError(f"output in {tensor.memory_type.name} memory cannot be sent")
    return host_view(tensor.data_ptr, tensor.size)


def tensor_to_list(name: str, tensor: Tensor) -> list[Any]:
    """A tensor's elements, flattened, as JSON values."""
    datatype = DATATYPE_NAME[int(tensor.data_type)]
    if datatype == "BYTES":
        out = []
        for item in tensor.to_bytes_array().reshape(-1):
            try:
                out.append(item.decode("utf-8"))
            except UnicodeDecodeError:
                raise InvalidArgumentError(
                    f"output '{name}' holds bytes that are not UTF-8 text: request it as "
                    f"binary data") from None
        return out
    if datatype == "BF16":
        raise InvalidArgumentError(
            f"output '{name}' is BF16, which JSON cannot carry: request it as binary data")
    values: list[Any] = np.from_dlpack(tensor).reshape(-1).tolist()
    return values


def shape_list(tensor: Tensor) -> list[int]:
    return [int(d) for d in tensor.shape]


def nbytes_of(shape: list[int], datatype: str) -> int:
    return math.prod(shape) * ELEMENT_SIZE.get(datatype, 0)
