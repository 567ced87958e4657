"""``tritonserver._api._response``: aliases (see tritonserver._api)."""

from tritonserver._enums import LogLevel, MemoryType
from tritonserver._iterators import AsyncResponseIterator, ResponseIterator
from tritonserver._response import InferenceResponse

__all__ = ["AsyncResponseIterator", "InferenceResponse", "LogLevel", "MemoryType",
           "ResponseIterator"]
