"""The HTTP frontend's plumbing: ASGI types, reading a request body within
the size limit (and decompressing it), compressing and sending a response,
and Triton's status and JSON body for an error.
"""

from __future__ import annotations

import zlib
from typing import Any, Awaitable, Callable, MutableMapping, Optional

from tritonserver import (InternalError, InvalidArgumentError, NotFoundError, TritonError,
                          UnavailableError, UnsupportedError)
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends.httpbase import json_codec as _json

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
# (status, content type, body, extra headers); None: the handler has sent its response
Reply = Optional[tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]]

JSON_TYPE = b"application/json"
BINARY_TYPE = b"application/octet-stream"
SSE_TYPE = b"text/event-stream; charset=utf-8"
HEADER_LENGTH = b"inference-header-content-length"

json_bytes = _json.dumps


# Triton's HTTP status per error class.
_HTTP_STATUS: list[tuple[type, int]] = [
    (NotFoundError, 404), (UnavailableError, 503), (UnsupportedError, 501),
    (InternalError, 500),
]


def http_status(error: BaseException) -> int:
    """Triton's HTTP status for an error: not found 404, unavailable 503,
    unsupported 501, internal 500, anything else 400 (a body over the size
    limit too, as Triton answers it)."""
    if isinstance(error, c.Forbidden):
        return 403
    for cls, status in _HTTP_STATUS:
        if isinstance(error, cls):
            return status
    if not isinstance(error, TritonError):
        return 500  # a bug of ours: said as such, the server goes on
    return 400


def error_body(message: str) -> bytes:
    return json_bytes({"error": message})


class Disconnected(Exception):
    """The client went away before its request body arrived."""


def header(scope: Scope, name: bytes) -> Optional[bytes]:
    for key, value in scope["headers"]:
        if key == name:
            return value  # type: ignore[no-any-return]
    return None


# Responses smaller than this go uncompressed unless the client refuses identity: a
# compressor's setup costs more than the bytes it saves (34 µs for a 190-byte reply).
COMPRESS_MIN = 1024


def choose_encoding(accept: Optional[bytes], size: int = COMPRESS_MIN) -> Optional[str]:
    """gzip or deflate for a response of ``size`` bytes when the client
    accepts one (the highest weight wins, the first on a tie), else None.
    Below COMPRESS_MIN bytes, None unless identity is refused (``identity;q=0``
    or ``*;q=0``): HTTP lets a server answer uncompressed whatever the client
    prefers."""
    if not accept:
        return None
    best, weight = "identity", 0.0
    identity: Optional[float] = None  # identity's weight, when named
    anything: Optional[float] = None  # the weight of "*"
    for part in accept.decode("latin-1").split(","):
        name, _, params = part.strip().partition(";")
        w = 1.0
        params = params.strip()
        if params.startswith("q="):
            try:
                w = float(params[2:])
            except ValueError:
                continue
        if name == "identity":
            identity = w
        elif name == "*":
            anything = w
        if name in ("identity", "gzip", "deflate") and w > weight:
            best, weight = name, w
    if best == "identity":
        return None
    if size < COMPRESS_MIN and (identity if identity is not None else
                                anything if anything is not None else 1.0) > 0:
        return None
    return best


def compress(data: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    else:
        compressor = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def decompress(data: bytes, encoding: bytes, limit: int) -> bytes:
    name = encoding.decode("latin-1").strip().lower()
    if name in ("", "identity"):
        return data
    if name == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif name == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise UnsupportedError(f"unsupported content-encoding '{name}': use gzip, deflate "
                               "or identity")
    decompressor = zlib.decompressobj(wbits)
    try:
        out = decompressor.decompress(data, limit + 1)
    except zlib.error as e:
        raise InvalidArgumentError(f"the {name} request body cannot be decompressed: {e}") \
            from None
    if len(out) > limit or decompressor.unconsumed_tail:
        # Inflated no further than the limit; Triton's status and text (server PR #8570).
        raise InvalidArgumentError(
            f"Decompressed data size exceeds the maximum allowed value of {limit} bytes. "
            "Use --http-max-input-size to increase the limit.")
    return out


def too_large(scope: Scope, size: str, limit: int) -> c.PayloadTooLarge:
    """A body of ``size`` bytes over ``limit``, refused before it is read (the
    connection then closes) with Triton's texts (server PRs #8174, #8432): a raw
    binary request's (Inference-Header-Content-Length 0), else a JSON one's."""
    if header(scope, HEADER_LENGTH) == b"0":
        return c.PayloadTooLarge(
            f"Raw input has a byte_size ({size} bytes) that exceeds the maximum allowed value "
            f"of {limit} bytes. Use --http-max-input-size to increase the limit.")
    return c.PayloadTooLarge(
        f"request JSON size of {size} bytes exceeds the maximum allowed input size of "
        f"{limit} bytes. Use --http-max-input-size to increase the limit.")


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole request body, refusing one over ``limit`` bytes before
    reading it (Content-Length) or as soon as it passes the limit (chunked)."""
    declared = header(scope, b"content-length")
    if declared is not None:
        try:
            length = int(declared)
        except ValueError:
            raise InvalidArgumentError("invalid Content-Length header") from None
        if length > limit:
            raise too_large(scope, str(length), limit)
    message = await receive()
    if message["type"] == "http.disconnect":
        raise Disconnected()
    body: bytes = message.get("body", b"")
    total = len(body)
    if total > limit:
        raise too_large(scope, f"at least {total}", limit)
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected()
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            raise too_large(scope, f"at least {total}", limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def send_reply(send: Send, status: int, content_type: bytes, body: bytes,
                extra: Optional[list[tuple[bytes, bytes]]] = None) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def ok_json(obj: Any) -> Reply:
    return 200, JSON_TYPE, json_bytes(obj), []
