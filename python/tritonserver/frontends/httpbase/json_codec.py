"""JSON for the HTTP frontend: orjson when installed (part of the serve
extra; several times faster), else the standard library."""

from __future__ import annotations

import json
from typing import Any, Callable

def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_decoders: dict[Callable[[list[tuple[str, Any]]], Any], json.JSONDecoder] = {}


def loads_pairs(data: bytes, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any]) -> Any:
    """Parse with every JSON object made by ``object_pairs_hook`` from its
    members in order, repeated keys included (the standard library's parser:
    orjson keeps only a key's last value); NaN and Infinity refused, as
    orjson and Triton do. Raises ValueError on bad JSON."""
    decoder = _decoders.get(object_pairs_hook)
    if decoder is None:
        decoder = _decoders[object_pairs_hook] = json.JSONDecoder(
            object_pairs_hook=object_pairs_hook, parse_constant=_not_json)
    return decoder.decode(data.decode("utf-8"))

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
