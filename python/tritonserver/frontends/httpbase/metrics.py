"""The metrics frontend: ``GET /metrics`` answers the core's Prometheus text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from tritonserver import InvalidArgumentError, Server
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends._frontend import AsgiFrontend, ListenOptions
from tritonserver.frontends.httpbase.wire import http_status

if TYPE_CHECKING:
    from starlette.applications import Starlette

PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def create_metrics_app(server: c.ServerLike) -> "Starlette":
    """An ASGI app serving ``GET /metrics`` (Prometheus text exposition) for
    ``server`` (a Server, or a callable returning one)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    if not isinstance(server, Server) and not callable(server):
        raise InvalidArgumentError(
            f"server: expected a tritonserver.Server or a callable returning one, "
            f"got {type(server).__name__}")

    async def metrics(request: Request) -> Response:
        target = c.resolve(server)
        try:
            c.check_running(target)
            text = target.metrics()
        except Exception as e:
            error = c.unavailable_if_stopped(target, e)
            return JSONResponse({"error": c.error_message(error)},
                                status_code=http_status(error))
        return PlainTextResponse(text, media_type=PROMETHEUS_TYPE)

    return Starlette(routes=[Route("/metrics", metrics, methods=["GET"])])


class Metrics(AsgiFrontend):
    """Serves the server's metrics at ``http://<address>:<port>/metrics``."""

    _kind = "metrics"

    @dataclass
    class Options(ListenOptions):
        """Metrics frontend options (names as in NVIDIA's tritonfrontend):
        ListenOptions' (port 8002 by default).

        ``ssl_certfile``, ``ssl_keyfile``: serve HTTPS with this certificate
        (PEM, chain after it) and key; ``ssl_ca_certs`` and ``ssl_cert_reqs``
        ("none", "optional", "required"; default "required" with
        ``ssl_ca_certs``) check client certificates.
        """

        port: int = 8002

    _service_name = "tritonserver-metrics"

    def __init__(self, server: Server, options: Optional["Metrics.Options"] = None):
        super().__init__(server, options, Metrics.Options)
        self.app = create_metrics_app(server)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.options.address}:{self.port}/metrics"


