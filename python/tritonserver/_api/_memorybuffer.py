"""``tritonserver._api._memorybuffer``: aliases (see tritonserver._api)."""

from tritonserver._enums import MemoryType
from tritonserver._tensor import MemoryBuffer

__all__ = ["MemoryBuffer", "MemoryType"]
