"""``tritonserver._api._tensor``: aliases (see tritonserver._api)."""

from tritonserver._enums import DataType, MemoryType
from tritonserver._tensor import Tensor

__all__ = ["DataType", "MemoryType", "Tensor"]
