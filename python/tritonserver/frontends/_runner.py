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
from typing import Any, Awaitable, Callable, Coroutine, Optional

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
    callback once it is listening (with None), or raises. stop(timeout)
    calls ``shutdown(timeout)`` (a coroutine function) on the loop and waits
    for ``serve`` to return.
    """

    def __init__(self, name: str, serve: Callable[[Callable[[Optional[BaseException]], None]],
                                                   Awaitable[None]],
                 shutdown: Callable[[float], Coroutine[Any, Any, None]], fast_loop: bool = True):
        self.name = name
        self._serve = serve
        self._shutdown = shutdown
        self._fast_loop = fast_loop
        self._thread: Optional[threading.Thread] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._ready = threading.Event()
        self._error: Optional[BaseException] = None
        self._stopping: Optional[concurrent.futures.Future[None]] = None

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

    def begin_stop(self, timeout: float) -> None:
        """Start the shutdown (``shutdown(timeout)`` on the loop) without waiting."""
        loop = self._loop
        if self._stopping is None and self._thread is not None and loop is not None \
                and self._thread.is_alive() and not loop.is_closed():
            try:
                self._stopping = asyncio.run_coroutine_threadsafe(self._shutdown(timeout), loop)
            except RuntimeError:
                pass  # the loop ended meanwhile

    def stop(self, timeout: float) -> bool:
        """Shut down (bounded by ``timeout`` + a grace); True if the thread ended."""
        thread = self._thread
        if thread is None:
            return True
        self.begin_stop(timeout)
        if self._stopping is not None:
            try:
                self._stopping.result(timeout + JOIN_GRACE_S)
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


class HttpService:
    """An ASGI app served by HttpServer (frontends/httpbase/server.py) on ``thread_count``
    event loops, each on its own thread, all accepting on one listening
    socket."""

    def __init__(self, name: str, app: Any, address: str, port: int, reuse_port: bool,
                 thread_count: int, graceful_timeout: float, tls: Any = None):
        self.name = name
        self.app = app
        self.address = address
        self.requested_port = port
        self.reuse_port = reuse_port
        self.thread_count = thread_count
        self.graceful_timeout = graceful_timeout
        self.tls = tls  # an ssl.SSLContext: HTTPS
        self.port = 0
        self._socket: Optional[socket.socket] = None
        self._threads: list[LoopThread] = []

    def start(self) -> None:
        from tritonserver.frontends.httpbase.server import HttpServer

        self._socket = listening_socket(self.address, self.requested_port, self.reuse_port,
                                        self.name)
        self.port = self._socket.getsockname()[1]
        try:
            for i in range(self.thread_count):
                server = HttpServer(self.app, self._socket.dup(), tls=self.tls)
                suffix = f"-{i}" if self.thread_count > 1 else ""
                thread = LoopThread(self.name + suffix, server.serve, server.shutdown)
                thread.start()
                self._threads.append(thread)
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: Optional[float] = None) -> bool:
        """Stop accepting, let requests in flight finish within ``timeout``
        (default: the graceful timeout given at creation), then end the rest;
        True if every thread ended."""
        graceful = self.graceful_timeout if timeout is None else timeout
        threads, self._threads = self._threads, []
        for thread in threads:
            thread.begin_stop(graceful)  # every loop starts its shutdown at once
        ended = True
        for thread in threads:
            ended = thread.stop(graceful) and ended
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        return ended
