"""What a Server shares with everything that serves it: the started core's
handle, its trace settings (tritonserver._trace) and its shared memory
regions (tritonserver._shared_memory), each made at first use. Its models
and the in-process request path, below tritonserver._server, reach them
through ``registries_of``; the frontends and the serve command are handed
them by tritonserver._server's functions."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Generic, Optional, TypeVar

from tritonserver._errors import InvalidArgumentError, InvalidArgumentTypeError

T = TypeVar("T")

if TYPE_CHECKING:
    from tritonserver._c import triton_bindings as _bindings
    from tritonserver._shared_memory import SharedMemoryRegistry
    from tritonserver._trace import Tracing


class Registries:
    __slots__ = ("handle", "made_tracing", "_shared_memory")

    def __init__(self) -> None:
        # The started core's binding Server, None while stopped. Read
        # directly by the binding's fast path too (tritonserver._submit).
        self.handle: Optional[_bindings.Server] = None
        # The trace settings once made, else None: read directly by the
        # request path's fastest case (tritonserver._submit.send_inputs),
        # where a call per request would cost more than its check.
        self.made_tracing: Optional[Tracing] = None
        self._shared_memory: Optional[SharedMemoryRegistry] = None

    def started(self) -> "_bindings.Server":
        """The started core's handle; InvalidArgumentError when stopped."""
        if self.handle is None:
            raise InvalidArgumentError("the server is not started")
        return self.handle

    def tracing(self) -> "Tracing":
        if self.made_tracing is None:
            from tritonserver._trace import Tracing

            self.made_tracing = Tracing()
        return self.made_tracing

    def active_tracing(self) -> Optional["Tracing"]:
        """The trace settings when they may sample a request (asked on every
        request: nothing is made here)."""
        tracing = self.made_tracing
        return tracing if tracing is not None and tracing.active else None

    def close_tracing(self) -> None:
        """Finish every trace (the settings end with the server)."""
        tracing, self.made_tracing = self.made_tracing, None
        if tracing is not None:
            tracing.close()

    def shared_memory(self) -> "SharedMemoryRegistry":
        if self._shared_memory is None:
            from tritonserver._shared_memory import SharedMemoryRegistry

            self._shared_memory = SharedMemoryRegistry()
        return self._shared_memory


class HasRegistries:
    """The base of tritonserver.Server, which sets ``_registries`` when it is
    made: the layers below it (its models, the request path) cannot import
    tritonserver._server, and reach a server's Registries through
    ``registries_of``."""

    __slots__ = ()
    _registries: Registries


def registries_of(server: Any) -> Registries:
    """``server``'s Registries (a tritonserver.Server)."""
    if not isinstance(server, HasRegistries):
        raise InvalidArgumentTypeError(
            f"server must be a tritonserver.Server, not {type(server).__name__}")
    return server._registries


class CopyOnWrite(Generic[T]):
    """A value replaced whole and never changed in place: readers take
    ``value`` with no lock (a consistent snapshot), a writer makes the next
    value outside any lock and swaps it in unless another writer came first.

    Nothing is allocated while the lock is held, so no garbage collection
    runs then, and no finalizer it calls: a Server's __del__ stops it, which
    writes here. A registry that held a lock across code that allocates
    deadlocked on itself when a collection came in the middle."""

    __slots__ = ("value", "_lock")

    def __init__(self, value: T):
        self.value = value
        self._lock = threading.Lock()

    def update(self, edit: Callable[[T], T]) -> None:
        while True:
            old = self.value
            new = edit(old)
            with self._lock:
                if self.value is old:
                    self.value = new
                    return


# The started servers of this process by their core's address (the
# TRITONSERVER_Server* the backends see), for the models they run to call
# them back in-process (BLS: tritonserver._inprocess._pb_bls).
_started: CopyOnWrite[dict[int, "weakref.ref[HasRegistries]"]] = CopyOnWrite({})


def note_started(server: HasRegistries) -> None:
    """``server`` has started: its models may find it by its address."""
    address = registries_of(server).started().address()
    ref = weakref.ref(server)
    _started.update(lambda servers: {**servers, address: ref})


def note_stopping(server: HasRegistries) -> None:
    _started.update(lambda servers: {address: ref for address, ref in servers.items()
                                     if ref() is not None and ref() is not server})


def started_server(address: Optional[int] = None) -> Optional[HasRegistries]:
    """The started server whose core is at ``address``; with None, the one
    started server when there is exactly one."""
    servers = _started.value
    if address is not None:
        ref = servers.get(address)
        return None if ref is None else ref()
    alive = [server for server in (ref() for ref in servers.values()) if server is not None]
    return alive[0] if len(alive) == 1 else None


# Readiness checks that models add to the core's, by the address of their server's core:
# a python-backend model's is_ready() (Triton 2.67+), run in this process
# (tritonserver._inprocess._readiness). The core 2.51 asks no backend whether an instance is
# ready, so Model.ready() and a strict Server.ready() ask these after the core: each check is
# one instance's, and returns whether it is ready (saying why not in the server's log itself).
ReadinessCheck = Callable[[], bool]
_CheckKey = tuple[int, str, int, str]  # address, model, version, instance
_checks: CopyOnWrite[dict[_CheckKey, ReadinessCheck]] = CopyOnWrite({})


def add_readiness_check(address: int, name: str, version: int, instance: str,
                        check: ReadinessCheck) -> None:
    key = (address, name, version, instance)
    _checks.update(lambda checks: {**checks, key: check})


def remove_readiness_check(address: int, name: str, version: int, instance: str) -> None:
    key = (address, name, version, instance)
    _checks.update(lambda checks: {k: c for k, c in checks.items() if k != key})


def readiness_checks(address: int, name: Optional[str] = None,
                     version: int = -1) -> list[ReadinessCheck]:
    """The checks of the instances of ``name`` at ``version`` (-1: the
    newest version that has any, as the core picks the newest); with no
    name, every check of the server at ``address``."""
    checks = _checks.value
    if not checks:
        return []
    if name is None:
        return [check for key, check in checks.items() if key[0] == address]
    mine = {key: check for key, check in checks.items() if key[:2] == (address, name)}
    if not mine:
        return []
    picked = max(key[2] for key in mine) if version == -1 else version
    return [check for key, check in mine.items() if key[2] == picked]
