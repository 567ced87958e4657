"""A frontend's own thread and event loop, and listening sockets.

Each frontend runs its network server on an asyncio loop in a daemon thread
of its own: the caller's thread (and its loop, if it has one) is never used.
start() returns once the server listens, or raises what went wrong; stop()
returns once the thread has ended, within a bound.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import socket
import threading
from typing import Any, Awaitable, Callable, Coroutine, Optional, cast

from tritonserver import InvalidArgumentError, UnavailableError

JOIN_GRACE_S = 10.0


def new_event_loop(fast: bool = True) -> asyncio.AbstractEventLoop:
    """uvloop's loop when installed (and ``fast``), else asyncio's."""
    if fast:
        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
        except ImportError:
            pass
    return asyncio.new_event_loop()


def check_address(field: str, address: Any) -> str:
    if not isinstance(address, str) or not address:
        raise InvalidArgumentError(f"{field}: expected an IP address or host name, got {address!r}")
    return address


def check_port(field: str, port: Any) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidArgumentError(f"{field}: expected a port in 0..65535, got {port!r}")
    return int(port)


def listening_socket(address: str, port: int, reuse_port: bool, what: str) -> socket.socket:
    """A bound, listening TCP socket (port 0: the system picks one)."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(address.strip("[]")).version == 6 \
            else socket.AF_INET
        host = address.strip("[]")
    except ValueError:  # a host name
        infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)
        if not infos:
            raise UnavailableError(f"{what}: cannot resolve {address!r}") from None
        family, host = infos[0][0], str(infos[0][4][0])
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((host, port))
        sock.listen(2048)
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise UnavailableError(f"{what}: cannot listen on {address}:{port}: {e.strerror or e}") \
            from None
    return sock


class LoopThread:
    """Runs ``serve(ready)`` on a new event loop in a daemon thread.

    ``serve`` is a coroutine function taking a callback; it calls the
    callback once it is listening (with None), or raises. stop() calls
    ``shutdown`` (a coroutine function) on the loop and waits for ``serve``
    to return.
    """

    def __init__(self, name: str, serve: Callable[[Callable[[Optional[BaseException]], None]],
                                                   Awaitable[None]],
                 shutdown: Callable[[], Coroutine[Any, Any, None]], fast_loop: bool = True):
        self.name = name
        self._serve = serve
        self._shutdown = shutdown
        self._fast_loop = fast_loop
        self._thread: Optional[threading.Thread] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._ready = threading.Event()
        self._error: Optional[BaseException] = None

    @property
    def loop(self) -> Optional[asyncio.AbstractEventLoop]:
        return self._loop

    def start(self, timeout: float = 60.0) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise UnavailableError(f"{self.name} did not start within {timeout} s")
        if self._error is not None:
            self._thread.join(JOIN_GRACE_S)
            self._thread = None
            raise self._error

    def _on_ready(self, error: Optional[BaseException]) -> None:
        if error is not None and self._error is None:
            self._error = error
        self._ready.set()

    def _run(self) -> None:
        loop = self._loop = new_event_loop(self._fast_loop)
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve(self._on_ready))
        except BaseException as e:  # reported to start(), or dropped after it
            self._on_ready(e)
        finally:
            try:
                _cancel_all(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                asyncio.set_event_loop(None)
                loop.close()
                self._ready.set()

    def stop(self, timeout: float) -> bool:
        """Shut down (bounded by ``timeout`` + a grace); True if the thread ended."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return True
        if thread.is_alive() and not loop.is_closed():
            try:
                future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
                future.result(timeout + JOIN_GRACE_S)
            except (RuntimeError, concurrent.futures.TimeoutError,
                    concurrent.futures.CancelledError):
                pass  # the loop ended meanwhile, or the shutdown overran: join below
        thread.join(timeout + JOIN_GRACE_S)
        self._thread = None
        return not thread.is_alive()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


class UvicornService:
    """An ASGI app served by uvicorn on ``thread_count`` event loops, each on
    its own thread, all accepting on one listening socket."""

    def __init__(self, name: str, app: Any, address: str, port: int, reuse_port: bool,
                 thread_count: int, graceful_timeout: float):
        self.name = name
        self.app = app
        self.address = address
        self.requested_port = port
        self.reuse_port = reuse_port
        self.thread_count = thread_count
        self.graceful_timeout = graceful_timeout
        self.port = 0
        self._socket: Optional[socket.socket] = None
        self._threads: list[LoopThread] = []
        self._servers: list[Any] = []

    def start(self) -> None:
        self._socket = listening_socket(self.address, self.requested_port, self.reuse_port,
                                        self.name)
        self.port = self._socket.getsockname()[1]
        try:
            for i in range(self.thread_count):
                thread = self._make_thread(i, self._socket.dup())
                thread.start()
                self._threads.append(thread)
        except BaseException:
            self.stop()
            raise

    def _make_thread(self, index: int, sock: socket.socket) -> LoopThread:
        import uvicorn

        config = uvicorn.Config(
            self.app, lifespan="off", log_config=None, access_log=False, proxy_headers=False,
            server_header=False, http=http_protocol_class(), timeout_keep_alive=75,
            timeout_graceful_shutdown=max(1, int(round(self.graceful_timeout))),
            backlog=2048)
        server = uvicorn.Server(config)
        self._servers.append(server)

        async def serve(ready: Callable[[Optional[BaseException]], None]) -> None:
            task = asyncio.ensure_future(server.serve(sockets=[sock]))
            while not server.started and not task.done():
                await asyncio.sleep(0.002)
            if task.done():
                error = task.exception()
                ready(error or UnavailableError(f"{self.name} stopped while starting"))
                return
            ready(None)
            await task
            # Past the graceful timeout uvicorn cancels the requests' tasks but
            # leaves their connections open: close them.
            for connection in list(server.server_state.connections):
                transport = getattr(connection, "transport", None)
                if transport is not None:
                    transport.close()

        async def shutdown() -> None:
            server.should_exit = True

        suffix = f"-{index}" if self.thread_count > 1 else ""
        return LoopThread(self.name + suffix, serve, shutdown)

    def stop(self, timeout: Optional[float] = None) -> bool:
        """Stop accepting, let requests in flight finish within ``timeout``
        (default: the graceful timeout given at creation), then end the rest;
        True if every thread ended."""
        graceful = self.graceful_timeout if timeout is None else timeout
        for server in self._servers:
            # uvicorn reads it when its shutdown begins, which is next.
            server.config.timeout_graceful_shutdown = graceful
            server.should_exit = True  # every loop starts its shutdown at once
        ended = True
        for thread in self._threads:
            ended = thread.stop(graceful + 1.0) and ended
        self._threads = []
        self._servers = []
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        return ended


# ---- Fewer packets per response ------------------------------------------------------------

COALESCE_LIMIT = 256 << 10


class CoalescingTransport(asyncio.Transport):
    """A transport that gathers the writes made in one turn of the event loop
    and sends them together (one ``writev``) at the end of that turn.

    uvicorn writes a response's status line and headers, then its body, in
    two calls; sent as two TCP segments they cost the client an extra
    wake-up (measured: about 50 µs per request when client and server share
    a CPU). Writes past COALESCE_LIMIT bytes go out at once.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._pending: list[Any] = []
        self._size = 0
        self._scheduled = False

    def write(self, data: Any) -> None:
        if not data:
            return
        self._pending.append(data)
        self._size += len(data)
        if self._size >= COALESCE_LIMIT:
            self._flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def _flush(self) -> None:
        self._scheduled = False
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._size = 0
        if self._transport.is_closing():
            return
        if len(pending) == 1:
            self._transport.write(pending[0])
        else:
            self._transport.writelines(pending)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending = []
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_write_buffer_limits(self, high: Optional[int] = None, low: Optional[int] = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._size

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()


def http_protocol_class() -> Any:
    """uvicorn's httptools protocol writing through a CoalescingTransport;
    plain "httptools" or "h11" (by name) when that cannot be had."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return "h11"

    class CoalescingHttpToolsProtocol(HttpToolsProtocol):  # type: ignore[misc, unused-ignore]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            loop = getattr(self, "loop", None) or asyncio.get_running_loop()
            super().connection_made(
                CoalescingTransport(cast(asyncio.Transport, transport), loop))

    return CoalescingHttpToolsProtocol
