"""Tensor and MemoryBuffer: typed views of memory, exchanged through DLPack.

A Tensor never copies on its own: outputs are views of the response's
buffers (kept alive by ``memory_buffer.owner``), and inputs made from numpy
arrays or DLPack producers reference the caller's memory in place. The only
copies are the ones a representation change forces: a non-contiguous array
is made contiguous, and BYTES elements are serialized to Triton's
length-prefixed layout.
"""

from __future__ import annotations

import ctypes
import enum
import struct
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from tritonserver import _datatypes as dt
from tritonserver._c import triton_bindings as _bindings
from tritonserver._enum_names import named
from tritonserver._enums import DataType, MemoryType
from tritonserver._errors import InvalidArgumentError, UnsupportedError
from tritonserver._slots import slotted

_DLPACK_DEVICE_BY_MEMORY_TYPE = {
    MemoryType.CPU: dt.DL_CPU,
    MemoryType.CPU_PINNED: dt.DL_CUDA_HOST,
    MemoryType.GPU: dt.DL_CUDA,
}
_MEMORY_TYPE_BY_DLPACK_DEVICE = {v: k for k, v in _DLPACK_DEVICE_BY_MEMORY_TYPE.items()}


_memory_view = ctypes.pythonapi.PyMemoryView_FromMemory
_memory_view.restype = ctypes.py_object
_memory_view.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]
_PYBUF_WRITE = 0x200


def host_view(data_ptr: int, size: int) -> memoryview:
    """A writable byte view of `size` bytes of host memory at `data_ptr`; no
    copy, and it does not keep the memory alive. Not `(c_char * size)`: ctypes
    keeps every array type it makes, one per distinct size, for the life of
    the process, so a server answering tensors of ever new sizes would grow."""
    if size == 0:
        return memoryview(b"")
    view: memoryview = _memory_view(data_ptr, size, _PYBUF_WRITE)
    return view


def buffer_view(buffer: "MemoryBuffer") -> memoryview:
    """The host bytes of ``buffer`` (no copy); UnsupportedError for device memory."""
    if buffer.memory_type not in (MemoryType.CPU, MemoryType.CPU_PINNED):
        raise UnsupportedError("this buffer is in GPU memory; copy it to the host first")
    return host_view(buffer.data_ptr, buffer.size)


def host_buffer(array: np.ndarray[Any, Any]) -> "MemoryBuffer":
    """A MemoryBuffer over a contiguous host array's bytes, kept alive by it."""
    address = _bindings.buffer_address(array) if array.nbytes else 0
    return MemoryBuffer(address, MemoryType.CPU, 0, int(array.nbytes), array)


@slotted
@dataclass
class MemoryBuffer:
    """A span of memory and the object that keeps it alive.

    ``owner`` is whatever must stay referenced for ``data_ptr`` to stay valid:
    a response, a numpy array, a DLPack keeper.
    """

    data_ptr: int
    memory_type: MemoryType
    memory_type_id: int
    size: int
    owner: Any

    @staticmethod
    def from_dlpack(owner: Any) -> "MemoryBuffer":
        """A buffer over the memory of a contiguous DLPack producer."""
        return _import_dlpack(owner)[1]


@slotted
@dataclass
class Tensor:
    """A typed, shaped tensor over a MemoryBuffer, readable through DLPack."""

    data_type: DataType
    shape: Sequence[int]
    memory_buffer: MemoryBuffer

    @property
    def data_ptr(self) -> int:
        return self.memory_buffer.data_ptr

    @property
    def memory_type(self) -> MemoryType:
        return self.memory_buffer.memory_type

    @property
    def memory_type_id(self) -> int:
        return self.memory_buffer.memory_type_id

    @property
    def size(self) -> int:
        """Size of the data in bytes."""
        return self.memory_buffer.size

    # ---- DLPack ---------------------------------------------------------------

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: Optional[bool] = None) -> Any:
        dlpack_dtype = dt.DLPACK_DTYPES.get(self.data_type)
        if dlpack_dtype is None or copy or dl_device is not None:
            self._check_export(dl_device, copy)
        buffer = self.memory_buffer
        device = _DLPACK_DEVICE_BY_MEMORY_TYPE[buffer.memory_type]
        return _bindings.to_dlpack(buffer.data_ptr, self.shape, dlpack_dtype[0],  # type: ignore[index]
                                   dlpack_dtype[1], device,  # type: ignore[index]
                                   buffer.memory_type_id if device == dt.DL_CUDA else 0,
                                   buffer.owner)

    def _check_export(self, dl_device: Any, copy: Optional[bool]) -> None:
        """Raise what a __dlpack__ call asks for that this tensor cannot do."""
        if self.data_type == DataType.BYTES:
            raise UnsupportedError(
                "BYTES tensors have no DLPack form; use to_bytes_array() or to_string_array()")
        dt.to_dlpack_dtype(self.data_type)  # raises for a type DLPack lacks
        if copy:
            raise UnsupportedError("Tensor.__dlpack__ exports in place; copy=True is not supported")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise UnsupportedError("Tensor.__dlpack__ cannot move data to another device")

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray[Any, Any]:
        """numpy.array(tensor): a view for host tensors (BYTES: its elements)."""
        if self.data_type == DataType.BYTES:
            array = self.to_bytes_array()
        else:
            array = np.from_dlpack(self.to_host())
            if copy:
                array = array.copy()
        return array if dtype is None else array.astype(dtype, copy=False)

    def __dlpack_device__(self) -> tuple[int, int]:
        buffer = self.memory_buffer
        device = _DLPACK_DEVICE_BY_MEMORY_TYPE[buffer.memory_type]
        return (device, buffer.memory_type_id if device == dt.DL_CUDA else 0)

    @staticmethod
    def from_dlpack(obj: Any) -> "Tensor":
        """A tensor over the memory of any DLPack producer (numpy, torch, cupy...)."""
        desc, buffer = _import_dlpack(obj)
        data_type = dt.from_dlpack_dtype(desc["code"], desc["bits"], desc["lanes"])
        return Tensor(data_type, tuple(desc["shape"]), buffer)

    # ---- BYTES ----------------------------------------------------------------

    @staticmethod
    def from_bytes_array(bytes_array: Any) -> "Tensor":
        """A BYTES tensor from bytes or str elements (a list or numpy array)."""
        array = np.asarray(bytes_array, dtype=object) if isinstance(bytes_array, list) else bytes_array
        if not isinstance(array, np.ndarray):
            raise InvalidArgumentError("from_bytes_array expects a list or a numpy array")
        return _bytes_tensor(array)

    @staticmethod
    def from_string_array(string_array: Any) -> "Tensor":
        """A BYTES tensor from str elements, encoded as UTF-8."""
        return Tensor.from_bytes_array(string_array)

    def to_bytes_array(self) -> np.ndarray[Any, Any]:
        """The elements of a BYTES tensor as a numpy object array of bytes."""
        if self.data_type != DataType.BYTES:
            raise InvalidArgumentError(f"to_bytes_array needs a BYTES tensor, not {DataType(self.data_type).name}")
        count = int(np.prod(self.shape, dtype=np.int64)) if len(self.shape) else 1
        items = _deserialize_bytes(buffer_view(self.to_host().memory_buffer), count)
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out.reshape(tuple(self.shape))

    def to_string_array(self) -> np.ndarray[Any, Any]:
        """The elements of a BYTES tensor decoded as UTF-8 str."""
        as_bytes = self.to_bytes_array()
        out = np.empty(as_bytes.shape, dtype=object)
        flat = out.reshape(-1)
        for i, item in enumerate(as_bytes.reshape(-1)):
            flat[i] = item.decode("utf-8")
        return out

    # ---- Devices --------------------------------------------------------------

    def to_host(self) -> "Tensor":
        """This tensor in host memory: itself when it already is (CPU or
        CPU_PINNED), else a copy of its device memory in a numpy array."""
        if self.memory_type in (MemoryType.CPU, MemoryType.CPU_PINNED):
            return self
        return self._copied_to(MemoryType.CPU, 0)

    def to_device(self, device: Any) -> "Tensor":
        """This tensor on `device` ("cpu", "gpu:1", MemoryType.GPU,
        (MemoryType.GPU, 1), (DLDeviceType.kDLCUDA, 1)...): itself when it is
        there already, else a copy (device memory from the CUDA runtime)."""
        memory_type, device_id = parse_device(device)
        if memory_type == MemoryType.CPU:
            return self.to_host()
        if memory_type == MemoryType.CPU_PINNED:
            if self.memory_type == MemoryType.CPU_PINNED:
                return self
            return self._copied_to(MemoryType.CPU_PINNED, 0)
        if self.memory_type == MemoryType.GPU and self.memory_type_id == device_id:
            return self
        return self._copied_to(MemoryType.GPU, device_id)

    def _copied_to(self, memory_type: MemoryType, device_id: int) -> "Tensor":
        from tritonserver import _cuda

        size = self.size
        owner: Any
        if memory_type == MemoryType.CPU:
            owner = np.empty(size, np.uint8)
            address = owner.ctypes.data
        elif memory_type == MemoryType.CPU_PINNED:
            owner = _cuda.PinnedAllocation(size)
            address = owner.ptr
        else:
            owner = _cuda.DeviceAllocation(size, device_id)
            address = owner.ptr
        _cuda.copy(address, self.data_ptr, size)
        return Tensor(self.data_type, tuple(self.shape),
                      MemoryBuffer(address, memory_type, device_id, size, owner))

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """Numba's and CuPy's CUDA array interface (version 3), for tensors in
        GPU memory; an AttributeError for others, as the protocol expects."""
        if self.memory_type != MemoryType.GPU:
            raise AttributeError("__cuda_array_interface__: this tensor is not in GPU memory")
        if self.data_type in (DataType.BYTES, DataType.BF16):
            raise AttributeError(
                f"__cuda_array_interface__: {DataType(self.data_type).name} has no typestr")
        return {"shape": tuple(int(n) for n in self.shape),
                "typestr": dt.to_numpy_dtype(self.data_type).str,
                "data": (self.data_ptr, False), "strides": None, "stream": None, "version": 3}


def tensor_of(value: Any, data_type: Optional[DataType] = None) -> Tensor:
    """A request input as a Tensor: a Tensor, numpy array, DLPack producer,
    list or scalar. ``data_type`` (the model's declared type) is applied to
    lists and scalars, which carry no dtype of their own; arrays keep theirs.
    """
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        return _numpy_tensor(value)
    if hasattr(value, "__dlpack__"):
        return Tensor.from_dlpack(value)
    if hasattr(value, "__cuda_array_interface__"):
        return from_cuda_array_interface(value)
    if data_type is not None and data_type not in (DataType.BYTES, DataType.BF16):
        array = np.asarray(value, dtype=dt.to_numpy_dtype(data_type))
    else:
        array = np.asarray(value)
    return _numpy_tensor(array)


# Every program reading an output through DLPack calls Tensor.__dlpack__: the
# binding's method (csrc/bindings/dlpack.cc) exports in place what it can take
# as is, and hands every other call to the method above, which stays the one
# answer to them (errors, dl_device, copy).
setattr(Tensor, "__dlpack__", _bindings.tensor_dlpack_method(
    Tensor, MemoryBuffer, Tensor.__dlpack__,
    {int(k): v for k, v in dt.DLPACK_DTYPES.items()},
    {int(k): v for k, v in _DLPACK_DEVICE_BY_MEMORY_TYPE.items()}))


@named
class DLDeviceType(enum.IntEnum):
    """DLPack device types (the ones a Tensor can name)."""

    kDLCPU = dt.DL_CPU
    kDLCUDA = dt.DL_CUDA
    kDLCUDAHost = dt.DL_CUDA_HOST


def parse_device(device: Any) -> tuple[MemoryType, int]:
    """Every spelling of a device the API accepts, as (MemoryType, id)."""
    if isinstance(device, str):
        name, _, index = device.strip().lower().partition(":")
        kinds = {"cpu": MemoryType.CPU, "cpu_pinned": MemoryType.CPU_PINNED,
                 "gpu": MemoryType.GPU, "cuda": MemoryType.GPU}
        if name not in kinds or (index and not index.isdigit()):
            raise InvalidArgumentError(f"unknown device '{device}'")
        return kinds[name], int(index or 0)
    if isinstance(device, MemoryType):
        return device, 0
    if isinstance(device, tuple) and len(device) == 2:
        kind, index = device
        if isinstance(kind, MemoryType):
            return kind, int(index)
        if isinstance(kind, int) and kind in _MEMORY_TYPE_BY_DLPACK_DEVICE:
            return _MEMORY_TYPE_BY_DLPACK_DEVICE[kind], int(index)
    raise InvalidArgumentError(f"unknown device {device!r}")


def from_cuda_array_interface(obj: Any) -> Tensor:
    """A tensor over the device memory of an object with the CUDA array
    interface (Numba's device arrays, for one), in place: it must be
    C-contiguous, and it stays referenced as the buffer's owner."""
    from tritonserver import _cuda

    interface = obj.__cuda_array_interface__
    shape = tuple(int(n) for n in interface["shape"])
    dtype = np.dtype(interface["typestr"])
    if not _c_contiguous(shape, interface.get("strides"), dtype.itemsize):
        raise InvalidArgumentError(
            "__cuda_array_interface__: the array is not C-contiguous; make it contiguous first")
    if not dtype.isnative:
        raise InvalidArgumentError("__cuda_array_interface__: the array's byte order is not native")
    if interface.get("mask") is not None:
        raise UnsupportedError("__cuda_array_interface__: masked arrays are not supported")
    address = int(interface["data"][0])
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    device_id = 0
    if address:
        kind, device_id = _cuda.pointer_device(address)
        if kind not in (_cuda.MEMORY_DEVICE, _cuda.MEMORY_MANAGED):
            raise InvalidArgumentError(
                "__cuda_array_interface__: the data pointer is not device memory")
    data_type = dt.from_numpy_dtype(dtype)
    return Tensor(data_type, shape,
                  MemoryBuffer(address, MemoryType.GPU, device_id, count * dtype.itemsize, obj))


def _c_contiguous(shape: Sequence[int], strides: Optional[Sequence[int]], unit: int) -> bool:
    """Whether `strides` (None: contiguous) lay `shape` out in C order, in
    steps of `unit` (DLPack counts elements, the CUDA array interface bytes);
    a dimension of one element may have any stride."""
    if strides is None:
        return True
    step = unit
    for n, stride in zip(reversed(tuple(shape)), reversed(tuple(strides))):
        if n > 1 and stride != step:
            return False
        step *= n
    return True


def _import_dlpack(obj: Any) -> tuple[dict[str, Any], MemoryBuffer]:
    capsule = obj.__dlpack__() if hasattr(obj, "__dlpack__") else obj
    try:
        desc = _bindings.from_dlpack(capsule)
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None
    shape = desc["shape"]
    itemsize = (desc["bits"] * desc["lanes"] + 7) // 8
    if not _c_contiguous(shape, desc["strides"], 1):
        raise InvalidArgumentError("DLPack tensor is not contiguous; make it contiguous first")
    if desc["device_type"] not in _MEMORY_TYPE_BY_DLPACK_DEVICE:
        raise UnsupportedError(f"DLPack device type {desc['device_type']} is not supported")
    count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    buffer = MemoryBuffer(
        data_ptr=desc["data_ptr"],
        memory_type=_MEMORY_TYPE_BY_DLPACK_DEVICE[desc["device_type"]],
        memory_type_id=desc["device_id"],
        size=count * itemsize,
        owner=desc["keeper"],
    )
    return desc, buffer


def _numpy_tensor(array: np.ndarray[Any, Any]) -> Tensor:
    if array.dtype.kind in "OSU":
        return _bytes_tensor(array)
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    array = np.ascontiguousarray(array)  # copies only when not C-contiguous
    data_type = dt.from_numpy_dtype(array.dtype)
    ptr = _bindings.buffer_address(array)
    return Tensor(data_type, array.shape, MemoryBuffer(ptr, MemoryType.CPU, 0, array.nbytes, array))


def _bytes_tensor(array: np.ndarray[Any, Any]) -> Tensor:
    parts = []
    for item in array.reshape(-1):
        if isinstance(item, (bytes, bytearray, memoryview)):
            data = bytes(item)
        elif isinstance(item, str):
            data = item.encode("utf-8")
        else:
            raise InvalidArgumentError(
                f"BYTES elements must be bytes or str, not {type(item).__name__}")
        parts.append(struct.pack("<I", len(data)))
        parts.append(data)
    serialized = np.frombuffer(b"".join(parts), dtype=np.uint8)
    ptr = _bindings.buffer_address(serialized) if serialized.size else 0
    buffer = MemoryBuffer(ptr, MemoryType.CPU, 0, serialized.nbytes, serialized)
    return Tensor(DataType.BYTES, array.shape, buffer)


def _deserialize_bytes(view: memoryview, count: int) -> list[bytes]:
    items, offset, end = [], 0, len(view)
    for _ in range(count):
        if offset + 4 > end:
            raise InvalidArgumentError("BYTES tensor is truncated")
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > end:
            raise InvalidArgumentError("BYTES tensor is truncated")
        items.append(bytes(view[offset:offset + length]))
        offset += length
    return items
