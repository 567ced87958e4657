"""``tritonserver._api._request``: aliases (see tritonserver._api)."""

from tritonserver._enums import DataType, MemoryType
from tritonserver._request import InferenceRequest

__all__ = ["DataType", "InferenceRequest", "MemoryType"]
