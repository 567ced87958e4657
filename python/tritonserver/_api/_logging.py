"""``tritonserver._api._logging``: aliases (see tritonserver._api)."""

from tritonserver._enums import LogLevel

__all__ = ["LogLevel"]
