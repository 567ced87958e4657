"""MemoryAllocator: the interface for user-provided output memory."""

from __future__ import annotations

import abc

from tritonserver._enums import MemoryType
from tritonserver._tensor import MemoryBuffer


class MemoryAllocator(abc.ABC):
    """Allocates the memory the core writes output tensors into.

    Subclass it and implement allocate(); the returned MemoryBuffer's owner
    is kept alive for as long as the output tensor is.
    """

    @abc.abstractmethod
    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        """Return a buffer of at least `size` bytes."""
