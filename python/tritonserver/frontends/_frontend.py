"""What KServeHttp, KServeGrpc and Metrics share: start/stop, the context
manager, checks of the options every frontend has, and TLS for the HTTP
ones."""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass
from typing import Any, Optional

from tritonserver import InvalidArgumentError, Server, UnavailableError
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends._runner import HttpService, check_address, check_port


def check_bool(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{field}: expected a bool, got {value!r}")
    return value


def check_int(field: str, value: Any, low: int = 0, high: int = 2**63 - 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgumentError(f"{field}: expected an int in [{low}, {high}], got {value!r}")
    return int(value)


def check_socket_options(cls: str, options: Any) -> None:
    check_address(f"{cls}.Options.address", options.address)
    check_port(f"{cls}.Options.port", options.port)
    check_bool(f"{cls}.Options.reuse_port", options.reuse_port)


_CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
              "required": ssl.CERT_REQUIRED}


def tls_context(cls: str, options: Any) -> Optional[ssl.SSLContext]:
    """The server-side TLS context of an HTTP frontend's options, or None
    without ``ssl_certfile``: ``ssl_keyfile`` (else the key is in the
    certificate file), ``ssl_ca_certs`` (CA certificates that client
    certificates are checked against) and ``ssl_cert_reqs`` ("none",
    "optional", "required"; None: "required" with ``ssl_ca_certs``, else
    "none"). Files are read here, so a wrong one fails at construction."""
    certfile, keyfile = options.ssl_certfile, options.ssl_keyfile
    ca_certs, reqs = options.ssl_ca_certs, options.ssl_cert_reqs
    for field_name, value in (("ssl_certfile", certfile), ("ssl_keyfile", keyfile),
                              ("ssl_ca_certs", ca_certs)):
        if not isinstance(value, str):
            raise InvalidArgumentError(f"{cls}.Options.{field_name}: expected a path (str)")
    if reqs is not None and reqs not in _CERT_REQS:
        raise InvalidArgumentError(f"{cls}.Options.ssl_cert_reqs: expected one of "
                                   f"{sorted(_CERT_REQS)} or None, got {reqs!r}")
    if not certfile:
        if keyfile or ca_certs or reqs is not None:
            raise InvalidArgumentError(f"{cls}.Options: TLS settings need ssl_certfile")
        return None
    if reqs is None:
        reqs = "required" if ca_certs else "none"
    if reqs != "none" and not ca_certs:
        raise InvalidArgumentError(
            f"{cls}.Options.ssl_cert_reqs={reqs!r} needs ssl_ca_certs to check client "
            "certificates against")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(certfile, keyfile or None)
        if ca_certs:
            context.load_verify_locations(cafile=ca_certs)
    except (OSError, ssl.SSLError) as e:
        raise InvalidArgumentError(f"{cls}.Options: cannot use the TLS files "
                                   f"({certfile!r}, {keyfile or certfile!r}"
                                   + (f", {ca_certs!r}" if ca_certs else "") + f"): {e}") \
            from None
    context.verify_mode = _CERT_REQS[reqs]
    return context


class Frontend:
    """Base of the frontends: ``start()``, ``stop()``, and use as a context
    manager (started on entry, stopped on exit)."""

    _kind = "frontend"

    def __init__(self, server: Any, options: Any, options_class: type):
        if not isinstance(server, Server):
            raise InvalidArgumentError(
                f"{type(self).__name__}: server must be a tritonserver.Server, "
                f"not {type(server).__name__}")
        if options is None:
            options = options_class()
        if not isinstance(options, options_class):
            raise InvalidArgumentError(
                f"{type(self).__name__}: options must be {type(self).__name__}.Options, "
                f"not {type(options).__name__}")
        self.server = server
        self.options: Any = options
        self._lock = threading.Lock()
        self._running = False

    # Implemented by each frontend.
    def _start(self) -> None:
        raise NotImplementedError

    def _stop(self, timeout: float) -> bool:
        raise NotImplementedError

    @property
    def port(self) -> int:
        """The port it listens on (the one the system chose when Options.port is 0)."""
        raise NotImplementedError

    def start(self) -> "Frontend":
        """Listen and serve; returns once listening. Raises UnavailableError
        if the address cannot be used, InvalidArgumentError if the server
        is not started."""
        with self._lock:
            if self._running:
                raise InvalidArgumentError(f"{type(self).__name__} is already started")
            if not c.running(self.server):
                raise InvalidArgumentError(
                    f"{type(self).__name__}: start the tritonserver.Server first")
            self._start()
            self._running = True
        return self

    def stop(self, timeout: Optional[float] = None) -> None:
        """Stop accepting connections; requests in flight get ``timeout``
        seconds (default: the server's Options.exit_timeout) to finish, then
        end with an error. Stopping a stopped frontend does nothing."""
        with self._lock:
            if not self._running:
                return
            self._running = False
            limit = float(self.server.options.exit_timeout if timeout is None else timeout)
            if not self._stop(limit):
                raise UnavailableError(f"{type(self).__name__} did not stop within {limit} s")

    @property
    def running(self) -> bool:
        return self._running

    def __enter__(self) -> "Frontend":
        if not self._running:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        try:
            if self._running:
                self.stop(timeout=0)
        except Exception:
            pass

    def _graceful_timeout(self) -> float:
        return float(self.server.options.exit_timeout)


@dataclass
class ListenOptions:
    """The options every HTTP frontend has (an Options dataclass may derive
    from this one): ``address`` (loopback unless you say otherwise),
    ``port`` (0: the system chooses), ``reuse_port`` (SO_REUSEPORT),
    ``thread_count`` (event loops; Python runs one thread at a time, so 1 is
    usually fastest), and HTTPS: ``ssl_certfile`` and ``ssl_keyfile`` (PEM),
    ``ssl_ca_certs`` and ``ssl_cert_reqs`` to check client certificates
    (tls_context)."""

    address: str = "127.0.0.1"
    port: int = 0
    reuse_port: bool = False
    thread_count: int = 1
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    ssl_ca_certs: str = ""
    ssl_cert_reqs: Optional[str] = None


class AsgiFrontend(Frontend):
    """A frontend whose ASGI ``app`` HttpService serves (KServeHttp, Metrics):
    options address, port, reuse_port and thread_count."""

    _service_name = "tritonserver-asgi"  # the threads' name

    def __init__(self, server: Any, options: Any, options_class: type):
        super().__init__(server, options, options_class)
        name = type(self).__name__
        check_socket_options(name, self.options)
        check_int(f"{name}.Options.thread_count", self.options.thread_count, 1, 64)
        self._tls = tls_context(name, self.options)
        self._service: Optional[HttpService] = None

    app: Any  # set by the subclass

    def _start(self) -> None:
        o = self.options
        service = HttpService(self._service_name, self.app, o.address, o.port, o.reuse_port,
                              o.thread_count, self._graceful_timeout(), self._tls)
        service.start()
        self._service = service

    def _stop(self, timeout: float) -> bool:
        service, self._service = self._service, None
        return service.stop(timeout) if service is not None else True

    @property
    def port(self) -> int:
        return self._service.port if self._service is not None else 0

    @property
    def scheme(self) -> str:
        """"https" when the frontend serves TLS, else "http"."""
        return "https" if self._tls is not None else "http"

    @property
    def base_url(self) -> str:
        """``scheme://host:port``, an IPv6 address in brackets."""
        host = self.options.address
        return f"{self.scheme}://{f'[{host}]' if ':' in host else host}:{self.port}"


__all__ = ["AsgiFrontend", "Frontend", "ListenOptions", "check_bool", "check_int",
           "check_socket_options", "c", "tls_context"]
