"""The CUDA runtime, reached through the libcudart that the core ships.

The GPU paths of the package need a handful of runtime calls: copies between
host and device memory (Tensor.to_host, Tensor.to_device), device and pinned
allocations that outlive no one (the default GPU and CPU_PINNED output
allocators), and CUDA IPC handles (the frontends' CUDA shared memory). They
go through the same libcudart the core links (its CUDA 12.6 runtime, in the
core's library folder), loaded by ctypes: no compiler, no CuPy, one runtime
in the process whichever library asked first. Any CUDA runtime of 12.x or
later shares the driver's primary context with it, so device pointers from
CuPy or PyTorch are valid here.

Nothing is loaded until a GPU path is taken. On a machine without a GPU each
call raises UnavailableError naming the CUDA error (for example
``cudaErrorNoDevice``), which is what the CPU tests check.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from typing import Any, Optional

from tritonserver._errors import InvalidArgumentError, UnavailableError

IPC_HANDLE_SIZE = 64  # sizeof(cudaIpcMemHandle_t)

_MEMCPY_DEFAULT = 4  # cudaMemcpyDefault: the direction read from the pointers (UVA)
_IPC_LAZY_ENABLE_PEER_ACCESS = 1  # cudaIpcMemLazyEnablePeerAccess
_SUCCESS = 0
# cudaMemoryType, as cudaPointerGetAttributes reports it.
MEMORY_UNREGISTERED, MEMORY_HOST, MEMORY_DEVICE, MEMORY_MANAGED = 0, 1, 2, 3


class _IpcMemHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * IPC_HANDLE_SIZE)]


class _PointerAttributes(ctypes.Structure):
    # struct cudaPointerAttributes since CUDA 11.
    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int),
                ("devicePointer", ctypes.c_void_p), ("hostPointer", ctypes.c_void_p)]


_lock = threading.Lock()
_runtime: Optional[ctypes.CDLL] = None


def _candidates() -> list[str]:
    """Where a CUDA runtime may be: the core's folder first, then the system's."""
    found: list[str] = []
    try:
        from tritonserver._core import find_core

        core = find_core()
        found += sorted(glob.glob(os.path.join(core.libs_dir, "libcudart*.so*")))
    except Exception:  # no core: a system runtime may still be there
        pass
    return found + ["libcudart.so.12", "libcudart.so"]


def runtime() -> ctypes.CDLL:
    """The loaded CUDA runtime library (UnavailableError when there is none)."""
    global _runtime
    with _lock:
        if _runtime is None:
            tried = []
            for path in _candidates():
                try:
                    library = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
                except OSError as e:
                    tried.append(f"{path} ({e})")
                    continue
                _declare(library)
                _runtime = library
                break
            else:
                raise UnavailableError("no CUDA runtime could be loaded: tried " + "; ".join(tried))
        return _runtime


def _declare(lib: ctypes.CDLL) -> None:
    c_int, c_void_p, c_size_t = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
    signatures: dict[str, tuple[Any, list[Any]]] = {
        "cudaGetErrorName": (ctypes.c_char_p, [c_int]),
        "cudaGetErrorString": (ctypes.c_char_p, [c_int]),
        "cudaGetLastError": (c_int, []),
        "cudaGetDeviceCount": (c_int, [ctypes.POINTER(c_int)]),
        "cudaGetDevice": (c_int, [ctypes.POINTER(c_int)]),
        "cudaSetDevice": (c_int, [c_int]),
        "cudaMalloc": (c_int, [ctypes.POINTER(c_void_p), c_size_t]),
        "cudaFree": (c_int, [c_void_p]),
        "cudaMallocHost": (c_int, [ctypes.POINTER(c_void_p), c_size_t]),
        "cudaFreeHost": (c_int, [c_void_p]),
        "cudaMemcpy": (c_int, [c_void_p, c_void_p, c_size_t, c_int]),
        "cudaMemset": (c_int, [c_void_p, c_int, c_size_t]),
        "cudaDeviceSynchronize": (c_int, []),
        "cudaIpcGetMemHandle": (c_int, [ctypes.POINTER(_IpcMemHandle), c_void_p]),
        "cudaIpcOpenMemHandle": (c_int, [ctypes.POINTER(c_void_p), _IpcMemHandle, ctypes.c_uint]),
        "cudaIpcCloseMemHandle": (c_int, [c_void_p]),
        "cudaPointerGetAttributes": (c_int, [ctypes.POINTER(_PointerAttributes), c_void_p]),
        "cudaGetDriverEntryPoint": (c_int, [ctypes.c_char_p, ctypes.POINTER(c_void_p),
                                            ctypes.c_ulonglong, ctypes.POINTER(c_int)]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


def error_text(code: int) -> str:
    """``cudaErrorNoDevice: no CUDA-capable device is detected``."""
    lib = runtime()
    name = lib.cudaGetErrorName(code) or b"cudaError"
    text = lib.cudaGetErrorString(code) or b"unknown error"
    return f"{name.decode()}: {text.decode()}"


def check(code: int, what: str) -> None:
    """Raise UnavailableError for a failed runtime call, its error cleared."""
    if code != _SUCCESS:
        runtime().cudaGetLastError()  # a sticky error stays; a plain one is reset
        raise UnavailableError(f"{what} failed: {error_text(code)}")


def device_count() -> int:
    """How many GPUs the runtime sees (0 without a driver or a device)."""
    try:
        lib = runtime()
    except UnavailableError:
        return 0
    count = ctypes.c_int(0)
    if lib.cudaGetDeviceCount(ctypes.byref(count)) != _SUCCESS:
        lib.cudaGetLastError()
        return 0
    return count.value


class on_device:
    """``with on_device(n):`` makes GPU n current for this thread, then restores it."""

    def __init__(self, device_id: int) -> None:
        self.device_id = int(device_id)
        self._previous = ctypes.c_int(-1)

    def __enter__(self) -> "on_device":
        lib = runtime()
        check(lib.cudaGetDevice(ctypes.byref(self._previous)), "cudaGetDevice")
        if self._previous.value != self.device_id:
            check(lib.cudaSetDevice(self.device_id), f"cudaSetDevice({self.device_id})")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous.value not in (-1, self.device_id):
            runtime().cudaSetDevice(self._previous.value)


def copy(dst: int, src: int, size: int) -> None:
    """Copy `size` bytes between any two of host, pinned and device memory
    (the direction is read from the pointers); returns when it is done."""
    if size:
        check(runtime().cudaMemcpy(dst, src, size, _MEMCPY_DEFAULT), f"cudaMemcpy of {size} bytes")


class DeviceAllocation:
    """`size` bytes of GPU memory on one device, freed when this object goes."""

    def __init__(self, size: int, device_id: int) -> None:
        self.ptr = 0
        self.size = int(size)
        self.device_id = int(device_id)
        pointer = ctypes.c_void_p()
        with on_device(self.device_id):
            check(runtime().cudaMalloc(ctypes.byref(pointer), max(self.size, 1)),
                  f"cudaMalloc of {self.size} bytes on GPU {self.device_id}")
        self.ptr = pointer.value or 0

    def __del__(self) -> None:
        ptr, self.ptr = self.ptr, 0
        if ptr and _runtime is not None:
            _release(lambda: _runtime.cudaFree(ptr), self.device_id)


class PinnedAllocation:
    """`size` bytes of page-locked host memory, freed when this object goes."""

    def __init__(self, size: int) -> None:
        self.ptr = 0
        self.size = int(size)
        pointer = ctypes.c_void_p()
        check(runtime().cudaMallocHost(ctypes.byref(pointer), max(self.size, 1)),
              f"cudaMallocHost of {self.size} bytes")
        self.ptr = pointer.value or 0

    def __del__(self) -> None:
        if self.ptr and _runtime is not None:
            _runtime.cudaFreeHost(self.ptr)
            self.ptr = 0


def _release(call: Any, device_id: int) -> None:
    """Run a freeing call on `device_id`; a failure is ignored (there is no
    one to tell: it runs when the owner is collected)."""
    try:
        with on_device(device_id):
            call()
    except UnavailableError:
        pass


def pointer_device(ptr: int) -> tuple[int, int]:
    """(cudaMemoryType, device) of a pointer: where a CUDA array interface's data lies."""
    attributes = _PointerAttributes()
    check(runtime().cudaPointerGetAttributes(ctypes.byref(attributes), ptr),
          "cudaPointerGetAttributes")
    return attributes.type, attributes.device


# CUresult cuMemGetAddressRange(CUdeviceptr* base, size_t* size, CUdeviceptr ptr)
_ADDRESS_RANGE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64),
                                  ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64)
_address_range: Optional[Any] = None


def bytes_from(ptr: int) -> int:
    """How many bytes of its allocation lie at and after device pointer
    `ptr` (the driver's cuMemGetAddressRange, reached through the runtime's
    cudaGetDriverEntryPoint): what a client may name of memory it shares."""
    global _address_range
    lib = runtime()
    if _address_range is None:
        function, status = ctypes.c_void_p(), ctypes.c_int(0)
        check(lib.cudaGetDriverEntryPoint(b"cuMemGetAddressRange", ctypes.byref(function), 0,
                                          ctypes.byref(status)),
              "cudaGetDriverEntryPoint(cuMemGetAddressRange)")
        if not function.value:
            raise UnavailableError("the CUDA driver has no cuMemGetAddressRange")
        _address_range = _ADDRESS_RANGE(function.value)
    base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
    result = _address_range(ctypes.byref(base), ctypes.byref(size), ptr)
    if result != 0:
        raise UnavailableError(f"cuMemGetAddressRange failed: CUresult {result}")
    return int(base.value) + int(size.value) - int(ptr)


def ipc_handle(ptr: int) -> bytes:
    """The 64-byte CUDA IPC handle of device memory allocated with cudaMalloc."""
    handle = _IpcMemHandle()
    check(runtime().cudaIpcGetMemHandle(ctypes.byref(handle), ptr), "cudaIpcGetMemHandle")
    return bytes(bytearray(handle))


class IpcMapping:
    """Another process's device memory, opened from its IPC handle on
    `device_id`; closed by close() or when this object goes."""

    def __init__(self, handle: bytes, device_id: int) -> None:
        self.ptr = 0
        self.device_id = int(device_id)
        if len(handle) != IPC_HANDLE_SIZE:
            raise InvalidArgumentError(
                f"a CUDA IPC handle has {IPC_HANDLE_SIZE} bytes, not {len(handle)}")
        raw = _IpcMemHandle.from_buffer_copy(handle)
        pointer = ctypes.c_void_p()
        with on_device(self.device_id):
            check(runtime().cudaIpcOpenMemHandle(ctypes.byref(pointer), raw,
                                                 _IPC_LAZY_ENABLE_PEER_ACCESS),
                  "cudaIpcOpenMemHandle")
        self.ptr = pointer.value or 0

    def close(self) -> None:
        ptr, self.ptr = self.ptr, 0
        if ptr and _runtime is not None:
            _release(lambda: _runtime.cudaIpcCloseMemHandle(ptr), self.device_id)

    def __del__(self) -> None:
        self.close()
