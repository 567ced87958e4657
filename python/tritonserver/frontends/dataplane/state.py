"""What every endpoint shares, whatever the protocol: the errors a frontend
adds to the package's (each protocol maps them to its status), the
per-server state (model handles and whether each is decoupled), the server
behind a frontend and whether it runs, and model versions as the protocols
give them.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Callable, Optional, Union

from tritonserver import (
    InternalError,
    InvalidArgumentError,
    Model,
    ModelTxnPropertyFlag,
    Server,
    TritonError,
    UnavailableError,
)

DEFAULT_MAX_INPUT_SIZE = 64 << 20  # Triton's --http-max-input-size default


# ---- Errors ---------------------------------------------------------------------------


class Forbidden(TritonError):
    """A restricted API called without its header (HTTP 403)."""


class PayloadTooLarge(InvalidArgumentError):
    """A request body over the frontend's max_input_size, refused unread:
    HTTP 400 as Triton answers it, and the connection closes."""


def error_message(error: BaseException) -> str:
    if isinstance(error, TritonError):
        return str(error) or type(error).__name__
    return f"internal error: {type(error).__name__}: {error}"


# ---- Server state -------------------------------------------------------------------


ServerLike = Union[Server, Callable[[], Server]]


@dataclass
class ModelEntry:
    model: Model
    decoupled: bool
    version: Optional[str] = None  # the version the core picks for -1 (read when needed)


class ServerState:
    """What every frontend of one Server shares: model handles (and whether
    each is decoupled). Found with ``state_of``."""

    MAX_MODELS = 4096  # bound on cached handles; names come from the network

    def __init__(self, server: Server):
        self._server = weakref.ref(server)
        self._lock = threading.Lock()
        self._models: dict[tuple[str, int], ModelEntry] = {}

    def entry(self, server: Server, name: str, version: int) -> ModelEntry:
        key = (name, version)
        entry = self._models.get(key)
        if entry is None:
            model = server.model(name, version)
            decoupled = bool(int(model.transaction_properties())
                             & int(ModelTxnPropertyFlag.DECOUPLED))
            entry = ModelEntry(model, decoupled)
            with self._lock:
                if len(self._models) >= self.MAX_MODELS:
                    self._models.clear()
                self._models[key] = entry
        return entry

    def forget_models(self) -> None:
        """After a load or unload: configurations may have changed."""
        with self._lock:
            self._models.clear()


_states: "weakref.WeakKeyDictionary[Server, ServerState]" = weakref.WeakKeyDictionary()
_states_lock = threading.Lock()


def state_of(server: Server) -> ServerState:
    with _states_lock:
        state = _states.get(server)
        if state is None:
            state = _states[server] = ServerState(server)
        return state


def resolve(server: ServerLike) -> Server:
    """The Server behind a Server or a zero-argument callable returning one."""
    if isinstance(server, Server):
        return server
    resolved = server()
    if not isinstance(resolved, Server):
        raise InternalError(f"the server provider returned {type(resolved).__name__}, not a Server")
    return resolved


def running(server: Server) -> bool:
    """Whether the server is started and live (never raises)."""
    try:
        return server.live()
    except Exception:
        return False


def check_running(server: Server) -> None:
    if not running(server):
        raise UnavailableError("the server is not running")


def unavailable_if_stopped(server: Server, error: BaseException) -> BaseException:
    """An error met while the server stopped becomes UnavailableError."""
    if not running(server):
        return UnavailableError(f"the server is not running ({error_message(error)})")
    return error


# ---- Versions --------------------------------------------------------------------------


def parse_version(text: str) -> int:
    """A model version as the protocol gives it: empty (the server picks) or digits."""
    if not text:
        return -1
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise InvalidArgumentError(
            f"failed to get model version from specified version string '{text}'")
    return int(text)

