"""``tritonserver._api._dlpack``: aliases (see tritonserver._api)."""

from tritonserver._tensor import DLDeviceType

__all__ = ["DLDeviceType"]
