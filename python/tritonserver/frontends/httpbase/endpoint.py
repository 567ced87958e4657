"""What the HTTP apps' endpoints share (the KServe app, http/app.py, and
the OpenAI one, openai/app.py): an ASGI endpoint that checks the method and
the API's restriction, runs its handler and answers any error in its
protocol's body; the server behind an app; Starlette's own errors (unknown
paths) in that body."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Optional

from tritonserver import InvalidArgumentError, Server
from tritonserver.frontends._restricted import (Protocols, RestrictedLike, as_restricted,
                                                restriction_table)
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends.httpbase.wire import (JSON_TYPE, Disconnected, Receive, Reply, Scope,
                                              Send, error_body, header, http_status,
                                              send_reply)


class MethodNotAllowed(InvalidArgumentError):
    pass


def triton_error_reply(error: BaseException) -> tuple[int, bytes]:
    """Triton's status and body (``{"error": "<message>"}``) for an error."""
    status = 405 if isinstance(error, MethodNotAllowed) else http_status(error)
    return status, error_body(c.error_message(error))


class Endpoint:
    """An ASGI endpoint: checks the method and restriction, runs a handler,
    turns any error into ``error_reply``'s status and body (Triton's here;
    a subclass answers in its protocol's)."""

    def __init__(self, api: Any, handler: Callable[..., Awaitable[Reply]],
                 protocol: Protocols, methods: tuple[str, ...]):
        self.api = api  # has server() and restrictions
        self.handler = handler
        self.protocol = protocol
        self.methods = methods

    @staticmethod
    def error_reply(error: BaseException) -> tuple[int, bytes]:
        return triton_error_reply(error)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        api = self.api
        server: Optional[Server] = None
        try:
            if scope["method"] not in self.methods:
                raise MethodNotAllowed("Method Not Allowed")
            restriction = api.restrictions.get(self.protocol) if api.restrictions else None
            if restriction is not None:
                key, value = restriction
                got = header(scope, key.encode("latin-1"))
                if got is None or got.decode("latin-1") != value:
                    raise c.Forbidden(f"This API is restricted, expecting header '{key}'")
            server = api.server()
            reply = await self.handler(scope, receive, send, server,
                                       **scope.get("path_params", {}))
        except Disconnected:
            return
        except Exception as e:  # every error becomes a response; the server goes on
            error: BaseException = e
            if server is not None and not isinstance(e, (c.Forbidden, c.PayloadTooLarge,
                                                          MethodNotAllowed)):
                error = c.unavailable_if_stopped(server, e)
            status, body = self.error_reply(error)
            extra = [(b"connection", b"close")] if isinstance(error, c.PayloadTooLarge) else None
            # The error's traceback holds this frame, which holds the error: a cycle that
            # would keep the failed request's body (up to max_input_size) until the next
            # full garbage collection (Triton's server PR #8764 fixed such a retention).
            del error
            await send_reply(send, status, JSON_TYPE, body, extra)
            return
        if reply is not None:
            status, content_type, body, extra = reply
            await send_reply(send, status, content_type, body, extra)


async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking call (model load/unload, readiness) off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def server_provider(server: c.ServerLike) -> Callable[[], Server]:
    """The Server behind an app, per request: a Server, or a callable
    returning one (resolved per request)."""
    if isinstance(server, Server):
        return lambda: server
    if callable(server):
        return lambda: c.resolve(server)
    raise InvalidArgumentError(
        f"server: expected a tritonserver.Server or a callable returning one, "
        f"got {type(server).__name__}")


def starlette_errors(body: Callable[[str, int, str, str], bytes]) -> dict[Any, Any]:
    """Starlette's exception handlers answering its own errors (an unknown
    path, 404) with ``body(message, status, method, path)``."""
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import Response

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return Response(body(str(detail), status, request.method, request.url.path),
                        status_code=status,
                        media_type="application/json")

    return {HTTPException: http_error}


def checked_limits(max_input_size: Any,
                   restricted_features: RestrictedLike) -> dict[Protocols, tuple[str, str]]:
    """An app's settings every HTTP app has, checked: the body size limit
    (a positive int) and the restricted API groups, as their table
    (restriction_table)."""
    if isinstance(max_input_size, bool) or not isinstance(max_input_size, int) \
            or max_input_size <= 0:
        raise InvalidArgumentError(
            f"max_input_size: expected a positive number of bytes, got {max_input_size!r}")
    return restriction_table(as_restricted(restricted_features, "restricted_features"))
