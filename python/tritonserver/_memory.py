"""MemoryAllocator, the interface for user-provided output memory, and
default_memory_allocators, the allocators used when a request names none.

``default_memory_allocators`` maps a MemoryType to its allocator: CPU
always, GPU and CPU_PINNED where the process sees a GPU (their memory
comes from the CUDA runtime the core ships, tritonserver._cuda). A request
that names no allocator gets its outputs from it: with the CPU entry as
shipped outputs land in host memory allocated by the binding (the fast
path); once a program replaces or removes an entry, outputs are allocated
through the mapping, falling back to its CPU entry for a memory type it
lacks. ``output_memory_type`` naming a type the mapping lacks is an
InvalidArgumentError.
"""

from __future__ import annotations

import abc
from typing import Any, Iterable, Optional

import numpy as np

from tritonserver import _cuda, _gpu
from tritonserver._enums import MemoryType
from tritonserver._errors import InvalidArgumentError
from tritonserver._tensor import MemoryBuffer


class MemoryAllocator(abc.ABC):
    """Allocates the memory the core writes output tensors into.

    Subclass it and implement allocate(); the returned MemoryBuffer's owner
    is kept alive for as long as the output tensor is.
    """

    @abc.abstractmethod
    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        """Return a buffer of at least `size` bytes."""


class CPUAllocator(MemoryAllocator):
    """Host memory in a numpy array (the buffer's owner)."""

    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        array = np.empty(size, np.uint8)
        return MemoryBuffer(array.ctypes.data, MemoryType.CPU, 0, size, array)


class GPUAllocator(MemoryAllocator):
    """Device memory on GPU `memory_type_id` (cudaMalloc; freed with its owner)."""

    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        owner = _cuda.DeviceAllocation(size, memory_type_id)
        return MemoryBuffer(owner.ptr, MemoryType.GPU, memory_type_id, size, owner)


class PinnedAllocator(MemoryAllocator):
    """Page-locked host memory (cudaMallocHost; freed with its owner)."""

    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        owner = _cuda.PinnedAllocation(size)
        return MemoryBuffer(owner.ptr, MemoryType.CPU_PINNED, 0, size, owner)


_SHIPPED: dict[MemoryType, MemoryAllocator] = {MemoryType.CPU: CPUAllocator()}
if _gpu.present():
    _SHIPPED[MemoryType.GPU] = GPUAllocator()
    _SHIPPED[MemoryType.CPU_PINNED] = PinnedAllocator()


class DefaultMemoryAllocators(dict[MemoryType, MemoryAllocator]):
    """A dict that knows whether it still holds only what shipped (``as_shipped``)."""

    def __init__(self, items: Iterable[tuple[MemoryType, MemoryAllocator]] = ()) -> None:
        super().__init__(items)
        self._changed()

    # Every way a dict changes goes through _changed().

    def _changed(self) -> None:
        self.as_shipped: bool = self.keys() == _SHIPPED.keys() and all(
            self[k] is v for k, v in _SHIPPED.items())

    def __setitem__(self, key: MemoryType, value: MemoryAllocator) -> None:
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key: MemoryType) -> None:
        super().__delitem__(key)
        self._changed()

    def __ior__(self, other: Any) -> "DefaultMemoryAllocators":  # type: ignore[override,misc]
        self.update(other)
        return self

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._changed()

    def pop(self, *args: Any) -> Any:
        try:
            return super().pop(*args)
        finally:
            self._changed()

    def popitem(self) -> tuple[MemoryType, MemoryAllocator]:
        try:
            return super().popitem()
        finally:
            self._changed()

    def setdefault(self, key: MemoryType, default: Any = None) -> Any:
        try:
            return super().setdefault(key, default)
        finally:
            self._changed()

    def clear(self) -> None:
        super().clear()
        self._changed()


default_memory_allocators = DefaultMemoryAllocators(_SHIPPED.items())


class _FromDefaults(MemoryAllocator):
    """What a request without an allocator uses once the mapping changed."""

    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        asked = MemoryType(memory_type)
        allocator = default_memory_allocators.get(asked)
        if allocator is None:  # a type the mapping lacks: its CPU entry
            allocator = default_memory_allocators.get(MemoryType.CPU)
            if allocator is None:
                raise InvalidArgumentError(
                    f"tritonserver.default_memory_allocators has no allocator for {asked} "
                    "nor for MemoryType.CPU")
            asked, memory_type_id = MemoryType.CPU, 0
        return allocator.allocate(size, asked, memory_type_id)


FROM_DEFAULTS = _FromDefaults()


def default_for(memory_type: Optional[MemoryType]) -> Optional[MemoryAllocator]:
    """The allocator a request without one uses (asked for `memory_type`, if
    given): None means the binding's host allocator."""
    if memory_type is None:
        return None if default_memory_allocators.as_shipped else FROM_DEFAULTS
    allocator = default_memory_allocators.get(memory_type)
    if allocator is None:
        raise InvalidArgumentError(
            f"output_memory_type {memory_type}: tritonserver.default_memory_allocators has no "
            "allocator for it; give the request an output_memory_allocator, or put one there")
    if allocator is _SHIPPED.get(MemoryType.CPU):
        return None
    return allocator
