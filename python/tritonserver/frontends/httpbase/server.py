"""The HTTP/1.1 server that runs the frontends' ASGI apps (KServeHttp,
Metrics): asyncio protocols with httptools' parser, one task per request.

Why not uvicorn: per request it does a good deal of Python that this server
skips (measured with tritonclient, client and server on one CPU: see
docs/serving.md), and every response here leaves in one write: status line,
headers and body together. What it serves is what the frontends need:
keep-alive and pipelining, Content-Length and chunked request bodies, read
as the app asks for them (a body is never read ahead past FLOW_LIMIT bytes,
so an oversized request is refused before it is read), ``Expect:
100-continue``, chunked (streamed) responses, HEAD, bounded request heads,
a time limit on clients that stall (idle, slow to send, or not reading),
a close that drains what the client is still sending (so it reads the
answer), and a graceful stop that lets requests in flight finish within a
bound.
"""

from __future__ import annotations

import asyncio
import http
import json
import logging
import socket
import ssl
import urllib.parse
from typing import Any, Callable, Optional

import httptools

FLOW_LIMIT = 1 << 20  # body bytes buffered before reading pauses
MAX_HEAD = 64 << 10  # request line and headers, in bytes
# Non-empty chunks of one chunked body: Triton's kMaxChunkedChunks (server PR #8770);
# many tiny chunks cost far more memory than their bytes.
MAX_CHUNKS = 65536
TOO_MANY_CHUNKS = (f"Chunked request body exceeds maximum of {MAX_CHUNKS} non-empty chunks. "
                   "Send fewer or larger HTTP chunks.")
COPY_LIMIT = 64 << 10  # bodies smaller than this are joined to their head
KEEP_ALIVE_S = 75.0  # a connection waiting this long on its client is closed
SWEEP_S = 1.0  # how often idle connections are looked for
LINGER_S = 2.0  # after a response that closes, unread request bytes are drained this long
LINGER_BYTES = 64 << 20  # ... up to this many
_NO_BODY = frozenset({204, 304})  # statuses whose responses have no body and no framing

_log = logging.getLogger("tritonserver.frontends")
_DISCONNECT = {"type": "http.disconnect"}
_REASONS = {s.value: s.phrase.encode("latin-1") for s in http.HTTPStatus}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_ASGI = {"version": "3.0", "spec_version": "2.3"}  # shared by every scope


def _status_line(status: int) -> bytes:
    return b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))


def _plain_response(status: int, text: str, as_json: bool = False) -> bytes:
    """A text answer after which the connection closes (every caller closes it);
    ``as_json``: Triton's JSON error body instead, for what the frontends refuse."""
    if as_json:
        body, kind = json.dumps({"error": text}).encode(), b"application/json"
    else:
        body, kind = text.encode(), b"text/plain; charset=utf-8"
    return (_status_line(status) + b"content-type: %s\r\n" % kind +
            b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body)


class _Cycle:
    """One request and its response."""

    __slots__ = ("conn", "scope", "body", "buffered", "complete", "delivered", "waiters",
                 "expect_continue", "keep_alive", "head", "chunked", "started", "finished",
                 "disconnected", "is_head", "no_body", "task")

    def __init__(self, conn: "_Connection", scope: dict[str, Any], keep_alive: bool,
                 expect_continue: bool):
        self.conn = conn
        self.scope = scope
        self.body: list[bytes] = []
        self.buffered = 0
        self.complete = False  # the whole body has been parsed
        self.delivered = False  # ... and handed to the app
        self.waiters: list[asyncio.Future[None]] = []  # receive() calls waiting
        self.expect_continue = expect_continue
        self.keep_alive = keep_alive
        self.head: Optional[bytes] = None  # the response head, sent with the first body
        self.chunked: Optional[bool] = False  # None: decided by the first body message
        self.started = False
        self.finished = False
        self.disconnected = False
        self.is_head = scope["method"] == "HEAD"
        self.no_body = self.is_head
        self.task: Optional[asyncio.Task[None]] = None

    def wake(self) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def receive(self) -> dict[str, Any]:
        while not (self.body or (self.complete and not self.delivered) or self.disconnected
                   or self.finished or self.conn.eof):
            if self.expect_continue and not self.started:
                self.expect_continue = False
                self.conn.write(_CONTINUE)
            self.conn.resume_reading()
            waiter = self.conn.loop.create_future()
            self.waiters.append(waiter)
            try:
                await waiter
            finally:
                self.waiters.remove(waiter)
        if self.disconnected or self.finished or not (
                self.body or (self.complete and not self.delivered)):
            # After the whole body, the client's end of sending (a half-close)
            # reads as the disconnect; the answer is still written.
            return _DISCONNECT
        body = self.body
        chunk = body[0] if len(body) == 1 else b"".join(body)
        body.clear()
        self.buffered = 0
        more = not self.complete
        self.delivered = not more
        if more:
            self.conn.resume_reading()
        return {"type": "http.request", "body": chunk, "more_body": more}

    async def send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if not self.started:
            if kind != "http.response.start":
                raise RuntimeError(f"expected http.response.start, got {kind!r}")
            self._start(message["status"], message.get("headers") or ())
            return
        if kind != "http.response.body" or self.finished:
            raise RuntimeError(f"unexpected ASGI message {kind!r} for this response")
        body = message.get("body", b"")
        more = message.get("more_body", False)
        if self.disconnected:
            if not more:
                self.finished = True
                self.conn.response_done(self)
            return
        head = self.head
        if head is not None:
            self.head = None
            if self.chunked is None:  # no length given: known now, or streamed
                if not more:
                    self.chunked = False
                    head += b"content-length: %d\r\n" % len(body)
                elif self.scope["http_version"] == "1.1":
                    self.chunked = True
                    head += b"transfer-encoding: chunked\r\n"
                else:  # an HTTP/1.0 client: the end of the body is the end of the connection
                    self.chunked = False
                    if self.keep_alive:
                        self.keep_alive = False
                        head += b"connection: close\r\n"
            head += b"\r\n"
        if self.no_body:
            body = b""
        elif self.chunked and body:
            body = b"%x\r\n%s\r\n" % (len(body), body)
        if not more:
            if self.chunked and not self.no_body:
                body += b"0\r\n\r\n"
            self.finished = True
        self.conn.send(head, body)
        if self.finished:
            self.conn.response_done(self)
        else:
            await self.conn.drain()

    def _start(self, status: int, headers: Any) -> None:
        self.started = True
        if self.expect_continue:
            # The client was never told to send its body: it may or may not.
            self.keep_alive = False
        parts = [_status_line(status)]
        framed = status in _NO_BODY  # these carry neither length nor chunks
        self.no_body = self.no_body or framed
        for name, value in headers:
            lower = name.lower()
            if lower == b"content-length":
                framed = True
                if status in _NO_BODY:
                    continue
            elif lower == b"connection" and value.lower() == b"close":
                self.keep_alive = False
                continue  # written below
            elif lower == b"transfer-encoding":
                continue  # decided here
            parts.append(b"%s: %s\r\n" % (name, value))
        if not self.keep_alive:
            parts.append(b"connection: close\r\n")
        self.head = b"".join(parts)
        self.chunked = False if framed else None


class _Connection(asyncio.Protocol):
    """One client connection: parses requests, runs the app for each in
    turn (pipelined requests wait), writes the responses."""

    def __init__(self, server: "HttpServer"):
        self.server = server
        self.loop = server.loop
        self.transport: Optional[asyncio.Transport] = None
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_size = 0  # bytes of the request line and headers parsed so far
        self.head_raw = 0  # bytes received while inside one head (a header in progress too)
        self.in_head = False
        self.head_started = 0.0  # loop time the head began
        self.messages = 0  # requests begun on this connection
        self.expect: Optional[bytes] = None
        self.refusal: Optional[tuple[Any, ...]] = None  # a limit the request went past
        self.chunks = 0  # non-empty chunks of the body being parsed
        self.chunk_open = False  # a chunk has begun and none of its bytes is counted yet
        self.refused: Optional[bytes] = None  # the error answer, after what is in flight
        self.parsing: Optional[_Cycle] = None  # the request being parsed
        self.current: Optional[_Cycle] = None  # the request the app runs
        self.queued: list[_Cycle] = []
        self.reading = True
        self.closed = False
        self.eof = False  # the client shut its side for writing: it sends nothing more
        self.lingering = -1  # bytes drained since a closing answer; -1: not closing
        self.drain_waiter: Optional[asyncio.Future[None]] = None
        self.write_paused = False
        self.last_active = 0.0  # loop time of the last bytes in or out
        self.client: Optional[tuple[str, int]] = None
        self.local: Optional[tuple[str, int]] = None

    # ---- asyncio.Protocol ----

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.client = _address(transport.get_extra_info("peername"))
        self.local = _address(transport.get_extra_info("sockname"))
        self.last_active = self.loop.time()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        self.server.connections.discard(self)
        for cycle in (self.current, self.parsing, *self.queued):
            if cycle is not None:
                cycle.disconnected = True
                cycle.wake()
        self.queued.clear()
        self._wake_drain()

    def data_received(self, data: bytes) -> None:
        self.last_active = self.loop.time()
        if self.lingering >= 0:
            self._linger(len(data))
            return
        if self.refused is not None:
            return  # the parser stopped at a bad request; its answer is pending
        begun = self.messages
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # Not served (no websocket, no h2c): the request is answered over
            # HTTP/1.1, then the connection closes.
            if self.parsing is not None:
                self.parsing.keep_alive = False
            self.pause_reading()
            return
        except httptools.HttpParserError as e:
            # A callback's exception reaches here wrapped: the head limit's is kept.
            self._refuse(*(self.refusal or (400, f"Invalid HTTP request: {e}")))
            return
        if self.in_head and begun == self.messages:
            # httptools hands a header over only once it is whole: count what
            # arrives meanwhile, so one endless header is refused too.
            self.head_raw += len(data)
            if self.head_raw > MAX_HEAD:
                self._refuse(431, "Request Header Fields Too Large")

    def eof_received(self) -> bool:
        """The client shut down its side for writing (as ``nc -N``, some
        proxies and load balancers do after a request): it still reads.
        What it sent whole is answered, then the connection closes; a
        request cut short is a disconnect. Returning False closes now."""
        self.last_active = self.loop.time()
        self.eof = True
        cycle = self.parsing
        if cycle is not None and not cycle.complete:
            cycle.keep_alive = False
            cycle.disconnected = True
        for waiting in (self.current, *self.queued):
            if waiting is not None:
                waiting.wake()
        if self.lingering >= 0:
            return False
        return not (self.current is None and not self.queued and self.refused is None)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self.last_active = self.loop.time()
        self._wake_drain()
        if self.current is None:
            self._next()  # what waited for the client to read

    # ---- httptools callbacks ----

    def on_message_begin(self) -> None:
        self.messages += 1
        self.in_head = True
        self.head_started = self.loop.time()
        self.head_raw = 0
        self.url = b""
        self.headers = []
        self.head_size = 0
        self.expect = None
        self.chunks = 0
        self.chunk_open = False

    def on_url(self, url: bytes) -> None:
        self.url += url
        if len(self.url) > MAX_HEAD:
            self._too_large(414, "URI Too Long")

    def on_header(self, name: bytes, value: bytes) -> None:
        # Called once per header: kept short, it is on every request's path.
        self.head_size += len(name) + len(value) + 4
        if self.head_size > MAX_HEAD:
            self._too_large(431, "Request Header Fields Too Large")
        name = name.lower()
        if name == b"expect":
            self.expect = value
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.in_head = False
        parser = self.parser
        url = self.url
        if url[:1] == b"/" and b"?" not in url and b"#" not in url:
            raw_path, query = url, b""  # the usual target: a plain path
        else:
            try:
                parsed = httptools.parse_url(url)
            except httptools.HttpParserInvalidURLError:
                raise httptools.HttpParserError("invalid request target") from None
            raw_path, query = parsed.path or b"/", parsed.query or b""
        version = parser.get_http_version()
        path = raw_path.decode("latin-1")
        scope = {
            "type": "http", "asgi": _ASGI, "http_version": version,
            "method": parser.get_method().decode("ascii"), "scheme": "http",
            "path": urllib.parse.unquote(path) if "%" in path else path,
            "raw_path": raw_path, "query_string": query, "root_path": "",
            "headers": self.headers, "client": self.client, "server": self.local,
        }
        expect = self.expect is not None and self.expect.lower() == b"100-continue" \
            and version == "1.1"
        keep_alive = parser.should_keep_alive() and not self.server.stopping
        cycle = _Cycle(self, scope, keep_alive, expect)
        self.parsing = cycle
        if self.current is None and not self.write_paused:
            self._run(cycle)
        else:
            self.queued.append(cycle)
            self.pause_reading()  # one request ahead at most

    def on_chunk_header(self) -> None:
        self.chunk_open = True

    def on_body(self, body: bytes) -> None:
        cycle = self.parsing
        if cycle is None or cycle.disconnected or cycle.finished:
            return  # answered without reading it: the rest is dropped as it comes
        if self.chunk_open:  # the first bytes of a chunk: one more non-empty chunk
            self.chunk_open = False
            self.chunks += 1
            if self.chunks > MAX_CHUNKS:
                self.refusal = (400, TOO_MANY_CHUNKS, True)
                raise ValueError(TOO_MANY_CHUNKS)  # stops the parser; data_received answers
        cycle.body.append(body)
        cycle.buffered += len(body)
        if cycle.buffered >= FLOW_LIMIT:
            self.pause_reading()
        cycle.wake()

    def on_message_complete(self) -> None:
        cycle = self.parsing
        if cycle is not None:
            cycle.complete = True
            cycle.wake()

    # ---- requests and responses ----

    def _too_large(self, status: int, reason: str) -> None:
        self.refusal = (status, reason)
        raise ValueError(reason)  # stops the parser; data_received answers

    def _run(self, cycle: _Cycle) -> None:
        self.current = cycle
        cycle.task = self.loop.create_task(self._serve(cycle))

    async def _serve(self, cycle: _Cycle) -> None:
        try:
            await self.server.app(cycle.scope, cycle.receive, cycle.send)
        except asyncio.CancelledError:
            self._abandon(cycle, 503, "the server is stopping")
            raise
        except BaseException:
            _log.exception("the ASGI app failed on %s %s", cycle.scope["method"],
                           cycle.scope["path"])
            self._abandon(cycle, 500, "Internal Server Error")
        else:
            if not cycle.finished:
                self._abandon(cycle, 500, "Internal Server Error")

    def _abandon(self, cycle: _Cycle, status: int, text: str) -> None:
        """A response the app did not finish: an error if none was started,
        else the connection closes (the client sees a cut response)."""
        if cycle.finished or self.closed:
            return
        cycle.finished = True
        if not cycle.started:
            self.write(self.refused or _plain_response(status, text))
            self.close_after_response(cycle)
        else:
            self.abort()

    def response_done(self, cycle: _Cycle) -> None:
        cycle.wake()  # a receive() waiting for the disconnect
        if self.current is cycle:
            self.current = None
        self.last_active = self.loop.time()
        if not cycle.keep_alive or self.server.stopping:
            self.close_after_response(cycle)
        elif not self.write_paused:  # else resume_writing goes on once the client reads
            self._next()

    def _next(self) -> None:
        """After a response: the next pipelined request, or the pending
        refusal of a bad one, or more reading."""
        if self.closed or self.current is not None:
            return
        if self.queued:
            self._run(self.queued.pop(0))
            if not self.queued:
                self.resume_reading()
            return
        if self.refused is not None:
            self.write(self.refused)
            self.close()
            return
        if self.eof:  # every request the client sent is answered
            self.close()
            return
        self.resume_reading()

    def close_after_response(self, cycle: Optional[_Cycle]) -> None:
        """Close once the answer is out. Request bytes still coming (a body
        answered without being read: a 413, say) are read and dropped for a
        while first: closing on unread data would reset the connection, and
        the client could lose the answer."""
        if (cycle is None or cycle.complete or cycle.disconnected) and self.lingering < 0 \
                or self.transport is None or self.closed:
            self.close()
            return
        self.lingering = 0
        self.resume_reading()
        transport = self.transport
        if transport.can_write_eof():
            transport.write_eof()
        self.loop.call_later(LINGER_S, self.close)

    def _linger(self, size: int) -> None:
        self.lingering += size
        if self.lingering > LINGER_BYTES:
            self.close()

    def _refuse(self, status: int, text: str, in_body: bool = False) -> None:
        """A request the parser refused: answered once the requests before
        it are, then the connection closes. ``in_body``: refused inside its
        body (Triton's JSON error), whose rest is read and dropped until the
        close, as after a 413 (closing on unread bytes would reset the
        connection, and the client could lose the answer)."""
        self.refused = _plain_response(status, text, in_body)
        self.pause_reading()
        if in_body:
            self.lingering = 0
        cycle = self.parsing
        if cycle is not None and not cycle.complete:  # its body will not come
            cycle.keep_alive = False
            cycle.disconnected = True
            cycle.wake()
        if self.current is None and not self.queued:
            self.write(self.refused)
            if in_body:
                self.close_after_response(cycle)
            else:
                self.close()

    # ---- transport ----

    def write(self, data: bytes) -> None:
        transport = self.transport
        if transport is not None and not self.closed and not transport.is_closing():
            transport.write(data)

    def send(self, head: Optional[bytes], body: bytes) -> None:
        """A response's head (None once sent) and body: one write, or
        two buffers in one writev when the body is large."""
        transport = self.transport
        if transport is None or self.closed or transport.is_closing():
            return
        if head is None:
            if body:
                transport.write(body)
        elif len(body) < COPY_LIMIT:
            transport.write(head + body)
        else:
            transport.writelines((head, body))

    async def drain(self) -> None:
        while self.write_paused and not self.closed:
            self.drain_waiter = self.loop.create_future()
            try:
                await self.drain_waiter
            finally:
                self.drain_waiter = None

    def _wake_drain(self) -> None:
        waiter = self.drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pause_reading(self) -> None:
        if self.reading and self.transport is not None and not self.closed:
            self.reading = False
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if not self.reading and self.transport is not None and not self.closed \
                and not self.queued and (self.refused is None or self.lingering >= 0):
            self.reading = True
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        """Close now, dropping what is not yet written."""
        if self.transport is not None and not self.closed:
            self.transport.abort()

    def idle(self) -> bool:
        return self.current is None and not self.queued

    def stalled(self, since: float) -> bool:
        """Waiting on the client since before ``since`` (loop time): between
        requests, for a head or a body the app asked for, for the client to
        read what was written, or inside one head for too long (however
        slowly its bytes come). Not while the app works."""
        if self.in_head and self.head_started < since:
            return True
        if self.last_active >= since:
            return False
        cycle = self.current
        transport = self.transport
        return (cycle is None or (bool(cycle.waiters) and not cycle.complete)
                or self.drain_waiter is not None or self.write_paused
                or (transport is not None and transport.is_closing()))

    def task(self) -> Optional[asyncio.Task[None]]:
        """The task running the app for this connection, if any."""
        cycle = self.current
        return cycle.task if cycle is not None and not cycle.finished else None


def _address(value: Any) -> Optional[tuple[str, int]]:
    if isinstance(value, tuple) and len(value) >= 2:
        return str(value[0]), int(value[1])
    return None


class HttpServer:
    """Serves an ASGI app (HTTP only, no lifespan) on a listening socket, on
    the running event loop: ``await serve(ready)``; ``shutdown(timeout)``
    from the same loop stops accepting, lets requests in flight finish
    within ``timeout`` seconds, then ends the rest with 503 and closes every
    connection."""

    def __init__(self, app: Any, sock: socket.socket, keep_alive_s: float = KEEP_ALIVE_S,
                 tls: Optional[ssl.SSLContext] = None):
        self.app = app
        self.sock = sock
        self.tls = tls  # HTTPS: the handshake is asyncio's, before the first byte
        self.keep_alive_s = keep_alive_s
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.connections: set[_Connection] = set()
        self.stopping = False
        self._server: Optional[asyncio.AbstractServer] = None
        self._done: Optional[asyncio.Event] = None
        self._sweeper: Optional[asyncio.TimerHandle] = None

    async def serve(self, ready: Callable[[Optional[BaseException]], None]) -> None:
        self.loop = asyncio.get_running_loop()
        self._done = asyncio.Event()
        self._server = await self.loop.create_server(lambda: _Connection(self), sock=self.sock,
                                                     backlog=2048, ssl=self.tls,
                                                     ssl_handshake_timeout=(
                                                         self.keep_alive_s if self.tls else None))
        ready(None)
        self._sweeper = self.loop.call_later(SWEEP_S, self._sweep)
        try:
            await self._done.wait()
        finally:
            if self._sweeper is not None:
                self._sweeper.cancel()

    def _sweep(self) -> None:
        """Close the connections that have waited on their client for longer
        than keep_alive_s: idle ones, and ones sending a head or body too
        slowly (one timer per server, not one per request)."""
        since = self.loop.time() - self.keep_alive_s
        for conn in list(self.connections):
            if conn.stalled(since):
                conn.abort()
        self._sweeper = self.loop.call_later(SWEEP_S, self._sweep)

    def _tasks(self) -> list[asyncio.Task[None]]:
        return [t for t in (conn.task() for conn in self.connections) if t is not None]

    async def shutdown(self, timeout: float) -> None:
        self.stopping = True
        if self._server is not None:
            self._server.close()
        deadline = self.loop.time() + max(0.0, timeout)
        while True:
            for conn in list(self.connections):
                if conn.idle():
                    conn.close()
            if not self._tasks() or self.loop.time() >= deadline:
                break
            await asyncio.sleep(0.01)
        tasks = self._tasks()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        for conn in list(self.connections):
            conn.close()
        if self._done is not None:
            self._done.set()
