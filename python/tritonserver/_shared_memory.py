"""System shared memory regions: Triton's shared-memory extension.

A region is a span (``offset``, ``byte_size``) of a POSIX shared memory
object (``key``, as ``shm_open`` names it: ``/dev/shm/<key>``) mapped into
this process under a client's ``name``. Every Server has one registry
(``Server.register_system_shared_memory`` and kin), shared by its network
frontends and by in-process callers. Tensors are read from a region and
written to it in place: an input is a view of the mapping, an output is
allocated in it (SystemSharedMemoryOutputs). The error texts and codes are
Triton's (its shared_memory_manager), so clients that read them work.

A region stays mapped while anything built over it lives (the buffer
protocol forbids unmapping under a view). Unregistering a region that a
frontend's requests use (they hold it through a RegionUse from the moment
their tensors are placed until their last response, whatever the garbage
collector does) succeeds but only marks it, as Triton does: it stays
registered, listed and usable until the last of them ends, then goes.
Tensors built in-process (region_tensor) hold no use: unregistering frees
the name at once, and they go on with the old mapping.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import threading
from typing import Any, Optional, Union

import numpy as np

from tritonserver._c import triton_bindings as _bindings
from tritonserver._datatypes import to_numpy_dtype
from tritonserver._enums import DataType, MemoryType
from tritonserver._errors import (
    AlreadyExistsError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
)
from tritonserver._memory import MemoryAllocator
from tritonserver._tensor import MemoryBuffer, Tensor

SHM_DIRECTORY = "/dev/shm"
# Keys Triton keeps for the shared memory of its own python backend.
RESERVED_KEY_PREFIX = "triton_python_backend_shm_region_"

_U32 = struct.Struct("<I")
_SIZE_MAX = (1 << 64) - 1  # C++'s SIZE_MAX, Triton's bound for offset + byte_size

# Where an output goes: a region's name (all of it), or (name, offset, byte_size).
Placement = Union[str, tuple[str, int, int]]


class _Region:
    """One registered region: its mapping and how many live objects use it."""

    def __init__(self, name: str, key: str, offset: int, byte_size: int,
                 mapping: mmap.mmap, start: int):
        self.name = name
        self.key = key
        self.offset = offset
        self.byte_size = byte_size
        self.mapping = mapping
        # The region's bytes: the mapping starts at a page boundary at or before `offset`.
        self.view = memoryview(mapping)[start:start + byte_size]
        self.users = 0  # requests holding it (RegionUse)
        self.awaiting_unregister = False  # unregistered while in use: goes with the last user

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "offset": self.offset,
                "byte_size": self.byte_size}

    def close(self) -> None:
        try:
            self.view.release()
            self.mapping.close()
        except BufferError:
            pass  # a view still lives: the mapping goes with the last one


class RegionSlice:
    """``byte_size`` bytes of a region at ``offset``: ``view`` (what is built
    over it keeps the mapping alive)."""

    def __init__(self, region: _Region, offset: int, byte_size: int):
        self.region_name = region.name
        self.offset = offset
        self.byte_size = byte_size
        self.view = region.view[offset:offset + byte_size]

    def array(self) -> np.ndarray[Any, Any]:
        """The bytes as a uint8 array (a view)."""
        return np.frombuffer(self.view, dtype=np.uint8)

    def tensor(self, data_type: DataType, shape: tuple[int, ...]) -> Tensor:
        """A tensor over these bytes, in place."""
        raw = self.array()
        address = _bindings.buffer_address(raw) if self.byte_size else 0
        return Tensor(data_type, shape, MemoryBuffer(address, MemoryType.CPU, 0,
                                                     self.byte_size, raw))


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


class SharedMemoryRegistry:
    """The system shared memory regions of one Server, by name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._regions: dict[str, _Region] = {}

    def register(self, name: str, key: str, byte_size: int, offset: int = 0) -> None:
        """Map ``byte_size`` bytes at ``offset`` of shared memory object ``key``
        as region ``name``."""
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
            if name in self._regions:
                raise AlreadyExistsError(f"shared memory region '{name}' already in manager")
            self._regions[name] = _map(name, key, stripped, offset, byte_size)

    def unregister(self, name: Optional[str] = None) -> None:
        """Unregister region ``name``, or every region (None). An unknown name
        is no error (as in Triton). A region that requests use (RegionUse)
        stays until the last of them ends."""
        with self._lock:
            if name is None:
                names = list(self._regions)
            else:
                _check_str("name", name)
                names = [name] if name in self._regions else []
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

    def status(self, name: Optional[str] = None) -> list[dict[str, Any]]:
        """``[{"name", "key", "offset", "byte_size"}]`` of region ``name``, or of all."""
        with self._lock:
            if name is None:
                return [region.status() for region in self._regions.values()]
            _check_str("name", name)
            region = self._regions.get(name)
            if region is None:
                raise NotFoundError(f"Unable to find system shared memory region: '{name}'")
            return [region.status()]

    def slice(self, name: str, offset: int, byte_size: int,
              use: Optional[RegionUse] = None) -> RegionSlice:
        """``byte_size`` bytes at ``offset`` of region ``name``, checked as Triton
        does (offset and byte_size are the wire's unsigned 64-bit numbers);
        ``use``: the request that holds the region until it releases it."""
        with self._lock:
            region = self._regions.get(name)
            if region is None:
                raise NotFoundError(f"Unable to find shared memory region: '{name}'")
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
            if use is not None and all(held is not region for held in use._regions):
                region.users += 1
                use._regions.append(region)
            return RegionSlice(region, offset, byte_size)

    def size_of(self, name: str) -> int:
        """The byte size of region ``name``."""
        with self._lock:
            region = self._regions.get(name)
            if region is None:
                raise NotFoundError(f"Unable to find shared memory region: '{name}'")
            return region.byte_size

    def __len__(self) -> int:
        return len(self._regions)

    def close(self) -> None:
        """Unregister everything, in use or not (what a Server's end does)."""
        with self._lock:
            regions, self._regions = list(self._regions.values()), {}
        for region in regions:
            region.close()


def cuda_status(registry: SharedMemoryRegistry, name: Optional[str]) -> list[dict[str, Any]]:
    """CUDA shared memory status: there are no CUDA regions (this package
    maps none), so all of them is [] and one is not found, in Triton's words."""
    if name is None:
        return []
    with registry._lock:
        if name in registry._regions:
            raise NotFoundError(f"The region named '{name}' is registered as system shared "
                                f"memory, not CUDA shared memory")
    raise NotFoundError(f"Unable to find cuda shared memory region: '{name}'")


def cuda_register_refusal(name: str) -> InvalidArgumentError:
    """What registering CUDA shared memory answers (Triton built without GPUs)."""
    return InvalidArgumentError(
        f"failed to register CUDA shared memory region: '{name}', GPUs not supported")


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
    return _Region(name, key, offset, byte_size, mapping, start)


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
                  byte_size: Optional[int] = None) -> Tensor:
    """A tensor over the bytes of region ``name`` at ``offset`` (in place).
    ``byte_size``: by default what the shape takes (BYTES: what its elements take)."""
    data_type = _data_type(data_type)
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"shape must hold non-negative integers, got {list(shape)}")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    _check_size("offset", offset)
    if data_type == DataType.BYTES:
        if byte_size is None:
            rest = registry.slice(name, offset, registry.size_of(name) - offset)
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
    region_slice = registry.slice(name, offset, byte_size)
    if data_type == DataType.BYTES:
        bytes_extent(region_slice.view, count)  # the elements fit the slice
    return region_slice.tensor(data_type, shape)


class SystemSharedMemoryOutputs(MemoryAllocator):
    """An output_memory_allocator that writes the outputs it names into
    regions (``{output: region name, or (region, offset, byte_size)}``) and
    allocates the others in host memory. The regions are checked when it is
    made; an output larger than its place fails the request, as in Triton."""

    def __init__(self, registry: SharedMemoryRegistry, placements: dict[str, Placement],
                 use: Optional[RegionUse] = None):
        if not isinstance(placements, dict):
            raise InvalidArgumentError("placements must be a dict of output name to region")
        self.placements: dict[str, RegionSlice] = {}
        for output, place in placements.items():
            if isinstance(place, str):
                region_slice = registry.slice(place, 0, registry.size_of(place), use)
            else:
                region, offset, byte_size = place
                # Unsigned 64-bit, as on the wire: slice says what is wrong, in Triton's words.
                _check_size("offset", offset, 64)
                _check_size("byte_size", byte_size, 64)
                region_slice = registry.slice(region, offset, byte_size, use)
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
        raw = place.array()
        return MemoryBuffer(_bindings.buffer_address(raw), MemoryType.CPU, 0, place.byte_size, raw)
