"""ModelResponse, and turning what a model returns into what the backend
sends: an Output per output."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import numpy as np

from tritonserver import _datatypes as dt
from tritonserver._enums import DataType, MemoryType
from tritonserver._errors import (
    InvalidArgumentError,
    TritonError,
    UnsupportedError,
    code_of,
    release_frames,
)
from tritonserver._tensor import Tensor, _bytes_tensor, buffer_view, tensor_of

_BYTES = int(DataType.BYTES)
_BF16 = int(DataType.BF16)
_TYPE_OF_DTYPE = dt.data_type_by_dtype()  # numpy dtype -> int


class Output(NamedTuple):
    """One output as the backend's ``RequestHandle.send`` takes it (the
    backend reads the fields by position and checks them at load)."""

    name: str
    datatype: int
    shape: tuple[int, ...]
    data: Any  # a C-contiguous buffer of exactly the tensor's bytes


class ModelResponse:
    """One response of a model: its outputs and parameters, or an error.

    ``outputs`` maps output names to numpy arrays, DLPack producers
    (torch, cupy on the host...), tritonserver Tensors, lists or scalars;
    each is converted to the output's declared datatype when that is safe
    (float64 to FP32, int64 to INT32...) and copied into the core's buffer.
    ``parameters`` values are str, int, bool or float. ``error`` (an
    exception or a message) fails the request instead.
    """

    __slots__ = ("outputs", "parameters", "error")

    def __init__(self, outputs: Optional[dict[str, Any]] = None,
                 parameters: Optional[dict[str, Any]] = None,
                 error: Optional[Any] = None):
        self.outputs = outputs if outputs is not None else {}
        self.parameters = parameters
        self.error = error

    def __repr__(self) -> str:
        if self.error is not None:
            return f"ModelResponse(error={self.error!r})"
        return f"ModelResponse(outputs={list(self.outputs)}, parameters={self.parameters!r})"


def convert_outputs(model: Any, outputs: Any) -> list[Output]:
    """[Output] for the backend, checked against the
    model's declared outputs (``model.outputs``: name -> (type, numpy dtype))."""
    if not isinstance(outputs, dict):
        raise InvalidArgumentError(
            f"outputs must be a dict of name to array, not {type(outputs).__name__}")
    declared = model.outputs
    items = []
    for name, value in outputs.items():
        spec = declared.get(name)
        if spec is None:
            raise InvalidArgumentError(
                f"model '{model.name}' has no output {name!r} "
                f"(its outputs: {', '.join(sorted(declared)) or 'none'})")
        try:
            items.append(_convert(name, value, spec))
        except TritonError:
            raise
        except (TypeError, ValueError, OverflowError, BufferError, RuntimeError) as e:
            raise InvalidArgumentError(f"output {name!r}: {e}") from None
    return items


def _convert(name: str, value: Any, spec: tuple[int, Optional[np.dtype[Any]]]) -> Output:
    data_type, dtype = spec
    if type(value) is np.ndarray:
        array = value
    elif _in_device_memory(value):
        # A device array (a Tensor, CuPy, torch on cuda, the CUDA array
        # interface): its bytes go to the response through the host, and the
        # core puts them where the client's allocator wants them.
        device_tensor = value if isinstance(value, Tensor) else tensor_of(value)
        return _convert(name, device_tensor.to_host(), spec)
    elif isinstance(value, Tensor):
        if value.data_type == DataType.BYTES:
            return Output(name, _BYTES, tuple(value.shape), buffer_view(value.memory_buffer))
        if value.data_type == DataType.BF16:
            return _bf16(name, data_type, value)
        array = np.from_dlpack(value)
    elif hasattr(value, "__dlpack__"):
        try:
            array = np.from_dlpack(value)
        except (RuntimeError, BufferError, TypeError) as e:
            tensor = _bf16_tensor(value)  # numpy has no BF16: torch's bfloat16, for one
            if tensor is not None:
                return _convert(name, tensor, spec)
            raise UnsupportedError(f"output {name!r}: {e}; outputs must be numpy arrays, or "
                                   "DLPack producers in host or GPU memory") from None
    else:
        array = np.asarray(value, dtype=dtype if dtype is not None and
                           data_type != _BYTES else None)
    if data_type == _BYTES or array.dtype.kind in "OSU":
        if data_type != _BYTES:
            raise InvalidArgumentError(
                f"output {name!r} is {DataType(data_type).name}, not text or bytes")
        tensor = _bytes_tensor(array)
        return Output(name, _BYTES, array.shape, tensor.memory_buffer.owner)
    if dtype is None:  # BF16: two bytes per element, as given
        if array.dtype.itemsize != 2:
            raise InvalidArgumentError(f"output {name!r} is BF16: give 2-byte elements")
    elif array.dtype != dtype:
        if not np.can_cast(array.dtype, dtype, "same_kind"):
            raise InvalidArgumentError(
                f"output {name!r} is {DataType(data_type).name}; a {array.dtype} array "
                "does not convert safely")
        array = array.astype(dtype)
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    return Output(name, data_type, array.shape, array)


def _in_device_memory(value: Any) -> bool:
    """Whether an output value lies in GPU memory (by its DLPack device, or
    the CUDA array interface when it has no DLPack)."""
    if isinstance(value, Tensor):
        return value.memory_type == MemoryType.GPU
    device = getattr(value, "__dlpack_device__", None)
    if device is not None:
        try:
            return int(device()[0]) == dt.DL_CUDA
        except Exception:  # not a device it can name: numpy says what is wrong below
            return False
    return hasattr(value, "__cuda_array_interface__")


def _bf16_tensor(value: Any) -> Optional[Tensor]:
    """`value` (a DLPack producer numpy refused) as a Tensor, when it is BF16."""
    try:
        tensor = Tensor.from_dlpack(value)
    except Exception:
        return None
    return tensor if tensor.data_type == DataType.BF16 else None


def _bf16(name: str, data_type: int, tensor: Tensor) -> Output:
    """A BF16 Tensor in host memory: its bytes, as they are."""
    if data_type != _BF16:
        raise InvalidArgumentError(
            f"output {name!r} is {DataType(data_type).name}, not BF16")
    return Output(name, _BF16, tuple(tensor.shape), buffer_view(tensor.memory_buffer))


def error_parts(error: Any) -> tuple[int, str]:
    """(code, message) of an exception or a message given as a response error."""
    if isinstance(error, BaseException):
        release_frames(error)  # the message is all that is kept
        return code_of(error), (str(error) or type(error).__name__)
    return code_of(None), str(error)
