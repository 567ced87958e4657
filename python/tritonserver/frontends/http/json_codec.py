"""JSON for the HTTP frontend: orjson when installed (part of the serve
extra; several times faster), else the standard library."""

from __future__ import annotations

import json
from typing import Any, Callable

try:
    import orjson

    _orjson_loads: Callable[[Any], Any] = orjson.loads
    _orjson_dumps: Callable[[Any], bytes] = orjson.dumps

    def loads(data: bytes) -> Any:
        """Parse (raises ValueError on bad JSON)."""
        return _orjson_loads(data)

    def dumps(obj: Any) -> bytes:
        """Compact UTF-8 JSON."""
        return _orjson_dumps(obj)

    FAST = True
except ImportError:  # pragma: no cover - the serve extra installs orjson
    _encode = json.JSONEncoder(separators=(",", ":")).encode

    def loads(data: bytes) -> Any:
        return json.loads(data)

    def dumps(obj: Any) -> bytes:
        return _encode(obj).encode("utf-8")

    FAST = False
