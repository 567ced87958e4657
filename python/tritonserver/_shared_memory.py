"""Shared memory regions: Triton's system and CUDA shared memory extensions.

A system region is a span (``offset``, ``byte_size``) of a POSIX shared
memory object (``key``, as ``shm_open`` names it: ``/dev/shm/<key>``) mapped
into this process under a client's ``name``. A CUDA region is another
process's device memory, opened from its CUDA IPC handle on a GPU
(``device_id``) through the CUDA runtime the core ships
(tritonserver._cuda). Both kinds share one namespace. Every Server has one
registry (``Server.register_system_shared_memory``,
``Server.register_cuda_shared_memory`` and kin), shared by its network
frontends and by in-process callers. Tensors are read from a region and
written to it in place: an input is a view of the mapping (host memory, or
GPU memory of the region's device: never copied through the host), an
output is allocated in it (SharedMemoryOutputs). The error texts and codes
are Triton's (its shared_memory_manager), so clients that read them work.

A region stays mapped while anything built over it lives (the buffer
protocol forbids unmapping under a view; a CUDA region's tensors hold its
mapping). Unregistering a region that a frontend's requests use (they hold
it through a RegionUse from the moment their tensors are placed until their
last response, whatever the garbage collector does) succeeds but only marks
it, as Triton does: it stays registered, listed and usable until the last of
them ends, then goes. Tensors built in-process (region_tensor) hold no use:
unregistering frees the name at once, and they go on with the old mapping.
"""

from __future__ import annotations

import logging
import mmap
import os
import stat
import struct
import threading
import weakref
from typing import Any, Optional, Union

import numpy as np

from tritonserver import _cuda
from tritonserver._c import triton_bindings as _bindings
from tritonserver._datatypes import to_numpy_dtype
from tritonserver._enums import DataType, MemoryType
from tritonserver._errors import (
    AlreadyExistsError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    TritonError,
)
from tritonserver._memory import MemoryAllocator
from tritonserver._tensor import MemoryBuffer, Tensor

SHM_DIRECTORY = "/dev/shm"
# Keys Triton keeps for the shared memory of its own python backend.
RESERVED_KEY_PREFIX = "triton_python_backend_shm_region_"

# The two kinds of region, as requests and the Server's methods name them.
SYSTEM, CUDA = "system", "cuda"
# How Triton's texts name each kind.
_KIND_TEXT = {SYSTEM: "system", CUDA: "CUDA"}

_U32 = struct.Struct("<I")
_SIZE_MAX = (1 << 64) - 1  # C++'s SIZE_MAX, Triton's bound for offset + byte_size

# Where an output goes: a region's name (all of it), or (name, offset, byte_size).
Placement = Union[str, tuple[str, int, int]]

_log = logging.getLogger("tritonserver.shared_memory")


class _Region:
    """What every registered region has: its name, size, kind and how many
    requests use it (RegionUse)."""

    kind = SYSTEM

    def __init__(self, name: str, byte_size: int):
        self.name = name
        self.byte_size = byte_size
        self.users = 0  # requests holding it (RegionUse)
        self.awaiting_unregister = False  # unregistered while in use: goes with the last user

    def status(self) -> dict[str, Any]:
        raise NotImplementedError

    def span(self, offset: int, byte_size: int) -> "RegionSlice":
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _SystemRegion(_Region):
    """A mapped span of a POSIX shared memory object."""

    def __init__(self, name: str, key: str, offset: int, byte_size: int,
                 mapping: mmap.mmap, start: int):
        super().__init__(name, byte_size)
        self.key = key
        self.offset = offset
        self.mapping = mapping
        # The region's bytes: the mapping starts at a page boundary at or before `offset`.
        self.view = memoryview(mapping)[start:start + byte_size]

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "offset": self.offset,
                "byte_size": self.byte_size}

    def span(self, offset: int, byte_size: int) -> "RegionSlice":
        return RegionSlice(self.name, offset, byte_size, self.view[offset:offset + byte_size])

    def close(self) -> None:
        try:
            self.view.release()
            self.mapping.close()
        except BufferError:
            pass  # a view still lives: the mapping goes with the last one


class _DeviceSpan:
    """The owner of a tensor over a CUDA region: it keeps the region's
    mapping open for as long as the tensor (or the core) holds it."""

    __slots__ = ("mapping", "__weakref__")

    def __init__(self, mapping: _cuda.IpcMapping):
        self.mapping = mapping


class _CudaRegion(_Region):
    """Another process's device memory, opened from its CUDA IPC handle."""

    kind = CUDA

    def __init__(self, name: str, device_id: int, byte_size: int,
                 mapping: _cuda.IpcMapping):
        super().__init__(name, byte_size)
        self.device_id = device_id
        self.mapping: Optional[_cuda.IpcMapping] = mapping
        self.spans: "weakref.WeakSet[_DeviceSpan]" = weakref.WeakSet()

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "device_id": self.device_id, "byte_size": self.byte_size}

    def span(self, offset: int, byte_size: int) -> "RegionSlice":
        assert self.mapping is not None  # a registered region is open
        owner = _DeviceSpan(self.mapping)
        self.spans.add(owner)
        return DeviceRegionSlice(self.name, offset, byte_size, self.mapping.ptr + offset,
                                 self.device_id, owner)

    def close(self) -> None:
        mapping, self.mapping = self.mapping, None
        if mapping is None:
            return
        if not len(self.spans):
            mapping.close()  # cudaIpcCloseMemHandle, now
        # Else tensors built over it still live: the mapping closes itself
        # (IpcMapping's finalizer) when the last of them goes.


class RegionSlice:
    """``byte_size`` bytes of a system region at ``offset``: ``view`` (what is
    built over it keeps the mapping alive)."""

    memory_type = MemoryType.CPU

    def __init__(self, region_name: str, offset: int, byte_size: int, view: memoryview):
        self.region_name = region_name
        self.offset = offset
        self.byte_size = byte_size
        self.view = view

    def array(self) -> np.ndarray[Any, Any]:
        """The bytes as a uint8 array (a view)."""
        return np.frombuffer(self.view, dtype=np.uint8)

    def buffer(self) -> MemoryBuffer:
        """A MemoryBuffer over these bytes, in place."""
        raw = self.array()
        address = _bindings.buffer_address(raw) if self.byte_size else 0
        return MemoryBuffer(address, MemoryType.CPU, 0, self.byte_size, raw)

    def tensor(self, data_type: DataType, shape: tuple[int, ...]) -> Tensor:
        """A tensor over these bytes, in place."""
        return Tensor(data_type, shape, self.buffer())


class DeviceRegionSlice(RegionSlice):
    """``byte_size`` bytes of a CUDA region at ``offset``: GPU memory of the
    region's device at its mapped base + ``offset`` (no ``view``: device
    memory has no host bytes)."""

    memory_type = MemoryType.GPU

    def __init__(self, region_name: str, offset: int, byte_size: int, address: int,
                 device_id: int, owner: _DeviceSpan):
        super().__init__(region_name, offset, byte_size, memoryview(b""))
        self.address = address
        self.device_id = device_id
        self.owner = owner

    def array(self) -> np.ndarray[Any, Any]:
        raise InvalidArgumentError(
            f"region '{self.region_name}' is CUDA shared memory: its bytes are on GPU "
            f"{self.device_id}, not in host memory")

    def buffer(self) -> MemoryBuffer:
        return MemoryBuffer(self.address, MemoryType.GPU, self.device_id, self.byte_size,
                            self.owner)


class RegionUse:
    """The regions one request uses, held from when its tensors are placed
    (``SharedMemoryRegistry.slice(..., use=)``) until ``release()``: a region
    unregistered meanwhile stays registered until its last user releases it,
    as in Triton (its awaiting_unregister, server PR #7743), so that a request
    never runs on memory the client was told is no longer the server's."""

    __slots__ = ("_registry", "_regions")

    def __init__(self, registry: "SharedMemoryRegistry"):
        self._registry = registry
        self._regions: list[_Region] = []

    def release(self) -> None:
        """Let go of every region held (again: nothing)."""
        regions, self._regions = self._regions, []
        if regions:
            self._registry._release(regions)

    def _hold(self, region: _Region) -> None:
        """Count this request among ``region``'s users once (the registry's lock held)."""
        if all(held is not region for held in self._regions):
            region.users += 1
            self._regions.append(region)


class SharedMemoryRegistry:
    """The shared memory regions of one Server, system and CUDA, by name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._regions: dict[str, _Region] = {}

    def register(self, name: str, key: str, byte_size: int, offset: int = 0) -> None:
        """Map ``byte_size`` bytes at ``offset`` of shared memory object ``key``
        as system region ``name``."""
        _check_str("name", name)
        _check_str("key", key)
        _check_size("offset", offset)
        _check_size("byte_size", byte_size)
        if not name:
            raise InvalidArgumentError(
                "'region name' is necessary to register system shared memory region")
        stripped = key.lstrip("/")
        if not stripped:
            raise InvalidArgumentError(
                f"cannot register shared memory region '{name}' - invalid shm key '{key}'")
        if stripped.startswith(RESERVED_KEY_PREFIX):
            raise InvalidArgumentError(
                f"cannot register shared memory region '{name}' with key '{key}' as the key "
                f"contains the reserved prefix '{RESERVED_KEY_PREFIX}'")
        with self._lock:
            self._check_free(name)
            self._regions[name] = _map(name, key, stripped, offset, byte_size)

    def register_cuda(self, name: str, raw_handle: bytes, device_id: int,
                      byte_size: int) -> None:
        """Open the device memory whose CUDA IPC handle is ``raw_handle`` (the
        64 bytes of a cudaIpcMemHandle_t, made by another process) on GPU
        ``device_id`` as CUDA region ``name`` of ``byte_size`` bytes."""
        _check_str("name", name)
        if not isinstance(raw_handle, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(
                f"raw_handle must be bytes, not {type(raw_handle).__name__}")
        raw_handle = bytes(raw_handle)
        _check_size("device_id", device_id, 31)
        _check_size("byte_size", byte_size, 64)
        if not name:
            raise InvalidArgumentError(
                "'region name' is necessary to register cuda shared memory region")
        with self._lock:
            self._check_free(name)
        if _cuda.device_count() == 0:
            # What a Triton without GPUs answers.
            raise InvalidArgumentError(
                f"failed to register CUDA shared memory region: '{name}', GPUs not supported")
        if len(raw_handle) != _cuda.IPC_HANDLE_SIZE:
            raise InvalidArgumentError(
                f"failed to register shared memory region '{name}': a CUDA IPC handle has "
                f"{_cuda.IPC_HANDLE_SIZE} bytes, not {len(raw_handle)}")
        # Opened without the lock: other regions' requests need not wait on CUDA.
        try:
            mapping = _cuda.IpcMapping(raw_handle, device_id)
        except TritonError as e:
            # Triton's answer: the client gets no detail, the log has the CUDA error.
            _log.error("failed to open CUDA IPC handle: %s", e)
            raise InvalidArgumentError(
                "failed to register shared memory region: invalid args") from None
        # A client may name no more than it shares: byte_size is checked
        # against the opened allocation (Triton's check, with its answer).
        try:
            fits = byte_size <= _cuda.bytes_from(mapping.ptr)
        except TritonError as e:
            _log.error("failed to read the size of CUDA shared memory region '%s': %s", name, e)
            fits = False
        if not fits:
            mapping.close()
            raise InvalidArgumentError(
                f"failed to register shared memory region '{name}': invalid args")
        with self._lock:
            if name in self._regions:  # taken while the handle was being opened
                mapping.close()
                self._check_free(name)
            self._regions[name] = _CudaRegion(name, device_id, byte_size, mapping)

    def _check_free(self, name: str) -> None:
        if name in self._regions:
            raise AlreadyExistsError(f"shared memory region '{name}' already in manager")

    def unregister(self, name: Optional[str] = None, kind: str = SYSTEM) -> None:
        """Unregister region ``name`` of ``kind``, or every region of it (None).
        An unknown name, or one of the other kind, is no error (as in Triton).
        A region that requests use (RegionUse) stays until the last of them ends."""
        with self._lock:
            if name is None:
                names = [each for each, region in self._regions.items() if region.kind == kind]
            else:
                _check_str("name", name)
                region = self._regions.get(name)
                names = [name] if region is not None and region.kind == kind else []
            for each in names:
                region = self._regions[each]
                if region.users:
                    region.awaiting_unregister = True
                else:
                    del self._regions[each]
                    region.close()

    def use(self) -> RegionUse:
        """A holder for the regions one request uses (``slice(..., use=)``)."""
        return RegionUse(self)

    def _release(self, regions: list[_Region]) -> None:
        with self._lock:
            for region in regions:
                region.users -= 1
                if region.users or not region.awaiting_unregister:
                    continue
                if self._regions.get(region.name) is region:
                    del self._regions[region.name]
                region.close()

    def status(self, name: Optional[str] = None, kind: str = SYSTEM) -> list[dict[str, Any]]:
        """The regions of ``kind``: system ``[{"name", "key", "offset", "byte_size"}]``,
        CUDA ``[{"name", "device_id", "byte_size"}]``; of region ``name``, or of all."""
        with self._lock:
            if name is None:
                return [region.status() for region in self._regions.values()
                        if region.kind == kind]
            _check_str("name", name)
            return [self._find(name, kind).status()]

    def _find(self, name: str, kind: str) -> _Region:
        """Region ``name`` of ``kind`` (the lock held): NotFoundError in Triton's words."""
        region = self._regions.get(name)
        if region is None:
            raise NotFoundError(f"Unable to find {kind} shared memory region: '{name}'")
        if region.kind != kind:
            raise NotFoundError(
                f"The region named '{name}' is registered as {_KIND_TEXT[region.kind]} shared "
                f"memory, not {_KIND_TEXT[kind]} shared memory")
        return region

    def _named(self, name: str, kind: Optional[str]) -> _Region:
        """Region ``name`` as a request names it (any kind when ``kind`` is None)."""
        region = self._regions.get(name)
        if region is None:
            raise NotFoundError(f"Unable to find shared memory region: '{name}'")
        if kind is not None:
            return self._find(name, kind)
        return region

    def slice(self, name: str, offset: int, byte_size: int,
              use: Optional[RegionUse] = None, kind: Optional[str] = None) -> RegionSlice:
        """``byte_size`` bytes at ``offset`` of region ``name``, checked as Triton
        does (offset and byte_size are the wire's unsigned 64-bit numbers);
        ``use``: the request that holds the region until it releases it;
        ``kind``: the region must be of it (None: any, as a request's tensors)."""
        with self._lock:
            region = self._named(name, kind)
            if offset >= region.byte_size:
                raise InvalidArgumentError(f"Invalid offset for shared memory region: '{name}'")
            if byte_size > _SIZE_MAX - offset:
                # Triton's text (server PR #8170): offset + byte_size wraps in C++.
                raise InvalidArgumentError(
                    f"Integer overflow detected: byte_size ({byte_size}) + offset ({offset}) "
                    f"exceeds maximum value ({_SIZE_MAX}) for region '{name}'")
            if offset + byte_size > region.byte_size:
                raise InvalidArgumentError(
                    f"Invalid offset + byte size for shared memory region: '{name}'")
            if use is not None:
                use._hold(region)
            return region.span(offset, byte_size)

    def size_of(self, name: str, kind: Optional[str] = None) -> int:
        """The byte size of region ``name`` (of ``kind``, when given)."""
        with self._lock:
            return self._named(name, kind).byte_size

    def __len__(self) -> int:
        return len(self._regions)

    def close(self) -> None:
        """Unregister everything, in use or not (what a Server's end does)."""
        with self._lock:
            regions, self._regions = list(self._regions.values()), {}
            for region in regions:
                region.close()


def _map(name: str, key: str, stripped: str, offset: int, byte_size: int) -> _Region:
    """shm_open(key) and mmap, with Triton's error texts."""
    if "/" in stripped:
        raise InternalError(f"Unable to open shared memory region: '{key}'")
    try:
        fd = os.open(os.path.join(SHM_DIRECTORY, stripped),
                     os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        raise InternalError(f"Unable to open shared memory region: '{key}'") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InternalError(f"Invalid shared memory region: '{key}'")
        if offset + byte_size > info.st_size:
            raise InvalidArgumentError(
                f"failed to register shared memory region '{name}': invalid args")
        if byte_size == 0:  # mmap refuses an empty mapping, as Triton's does
            raise InvalidArgumentError(
                f"failed to register shared memory region '{name}': unable to process "
                f"address space: Invalid argument")
        start = offset % mmap.ALLOCATIONGRANULARITY
        try:
            mapping = mmap.mmap(fd, start + byte_size, mmap.MAP_SHARED,
                                mmap.PROT_READ | mmap.PROT_WRITE, offset=offset - start)
        except (OSError, ValueError, OverflowError) as e:
            raise InvalidArgumentError(
                f"failed to register shared memory region '{name}': unable to process "
                f"address space: {getattr(e, 'strerror', None) or e}") from None
    finally:
        os.close(fd)
    return _SystemRegion(name, key, offset, byte_size, mapping, start)


def _check_str(what: str, value: Any) -> None:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a str, not {type(value).__name__}")


def _check_size(what: str, value: Any, bits: int = 63) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << bits):
        raise InvalidArgumentError(f"{what} must be a non-negative int, got {value!r}")


# ---- Tensors in regions ---------------------------------------------------------------


def bytes_extent(view: memoryview, count: int) -> int:
    """The bytes ``count`` BYTES elements (4-byte little-endian length, then
    the bytes) take at the start of ``view``."""
    pos, end = 0, len(view)
    for _ in range(count):
        if pos + 4 > end:
            raise InvalidArgumentError(
                f"the region holds fewer than {count} BYTES elements")
        pos += 4 + _U32.unpack_from(view, pos)[0]
        if pos > end:
            raise InvalidArgumentError("a BYTES element runs past the end of the region")
    return pos


def _data_type(value: Any) -> DataType:
    """A DataType from itself, its value, or its name as Triton writes it ("FP32")."""
    try:
        return DataType[value] if isinstance(value, str) else DataType(value)
    except (KeyError, ValueError):
        names = ", ".join(t.name for t in DataType if t.name != "INVALID")
        raise InvalidArgumentError(
            f"unknown data type {value!r}: expected a DataType or one of {names}") from None


def region_tensor(registry: SharedMemoryRegistry, name: str, data_type: DataType,
                  shape: tuple[int, ...], offset: int = 0,
                  byte_size: Optional[int] = None, kind: str = SYSTEM) -> Tensor:
    """A tensor over the bytes of region ``name`` (of ``kind``) at ``offset``,
    in place: host memory for a system region, GPU memory of its device for a
    CUDA one. ``byte_size``: by default what the shape takes (BYTES: what its
    elements take, read from a system region; a CUDA region's BYTES need it)."""
    data_type = _data_type(data_type)
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"shape must hold non-negative integers, got {list(shape)}")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    _check_size("offset", offset)
    if data_type == DataType.BYTES:
        if byte_size is None:
            if kind == CUDA:
                raise InvalidArgumentError(
                    "byte_size is needed for a BYTES tensor in CUDA shared memory (its "
                    "elements' lengths are in device memory)")
            rest = registry.slice(name, offset, registry.size_of(name, kind) - offset,
                                  kind=kind)
            byte_size = bytes_extent(rest.view, count)
    else:
        itemsize = 2 if data_type == DataType.BF16 else to_numpy_dtype(data_type).itemsize
        needed = count * itemsize
        if byte_size is None:
            byte_size = needed
        elif byte_size != needed:
            raise InvalidArgumentError(
                f"{byte_size} bytes for shape {list(shape)} of {data_type.name} "
                f"({needed} expected)")
    _check_size("byte_size", byte_size)
    region_slice = registry.slice(name, offset, byte_size, kind=kind)
    if data_type == DataType.BYTES and region_slice.memory_type == MemoryType.CPU:
        bytes_extent(region_slice.view, count)  # the elements fit the slice
    return region_slice.tensor(data_type, shape)


class SharedMemoryOutputs(MemoryAllocator):
    """An output_memory_allocator that writes the outputs it names into
    regions (``{output: region name, or (region, offset, byte_size)}``) and
    allocates the others in host memory. An output placed in a CUDA region is
    GPU memory of the region's device, at its mapped base + offset, whatever
    memory the model prefers (as Triton's frontends answer the core). The
    regions are checked when it is made (``kind``: they must be of it; None,
    as for a request's outputs: any); an output larger than its place fails
    the request, as in Triton."""

    def __init__(self, registry: SharedMemoryRegistry, placements: dict[str, Placement],
                 use: Optional[RegionUse] = None, kind: Optional[str] = None):
        if not isinstance(placements, dict):
            raise InvalidArgumentError("placements must be a dict of output name to region")
        self.placements: dict[str, RegionSlice] = {}
        for output, place in placements.items():
            if isinstance(place, str):
                region_slice = registry.slice(place, 0, registry.size_of(place, kind), use,
                                              kind)
            else:
                region, offset, byte_size = place
                # Unsigned 64-bit, as on the wire: slice says what is wrong, in Triton's words.
                _check_size("offset", offset, 64)
                _check_size("byte_size", byte_size, 64)
                region_slice = registry.slice(region, offset, byte_size, use, kind)
            self.placements[output] = region_slice

    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        array = np.empty(size, np.uint8)
        return MemoryBuffer(array.ctypes.data, MemoryType.CPU, 0, size, array)

    def _allocate_output(self, name: str, size: int, memory_type: MemoryType,
                         memory_type_id: int) -> MemoryBuffer:
        """Called by the binding for each output (by name)."""
        place = self.placements.get(name)
        if place is None:
            return self.allocate(size, memory_type, memory_type_id)
        if size > place.byte_size:
            raise InternalError(
                f"shared memory size specified with the request for output '{name}' "
                f"({place.byte_size} bytes) should be at least {size} bytes to hold the results")
        return place.buffer()
