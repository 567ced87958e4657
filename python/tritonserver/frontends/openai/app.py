"""OpenAI's API over HTTP for an in-process Server: an ASGI app (Starlette)
and the ``OpenAI`` frontend, which serves it with the package's HTTP/1.1
server on a thread of its own, as KServeHttp serves the KServe app.

Endpoints: ``GET /v1/models``, ``GET /v1/models/{model}``, ``POST
/v1/completions``, ``POST /v1/chat/completions`` (``stream``: server-sent
events ending ``data: [DONE]``), ``POST /v1/models/{model}/load`` and
``/unload`` (explicit model control), ``GET /health/ready``, ``GET
/metrics``. Which models are served and how a request reaches them:
frontends/dataplane/text_generation.py and docs/openai.md.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

from tritonserver import (InvalidArgumentError, ModelControlMode, NotFoundError, Server,
                          TritonError)
from tritonserver.frontends._frontend import AsgiFrontend
from tritonserver.frontends._restricted import Protocols, RestrictedLike
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends.dataplane import text_generation as tg
from tritonserver.frontends.dataplane.inference import trace_context_of
from tritonserver.frontends.httpbase import json_codec as _json
from tritonserver.frontends.httpbase.endpoint import (Endpoint, checked_limits, in_thread,
                                                  server_provider, starlette_errors,
                                                  triton_error_reply)
from tritonserver.frontends.httpbase.wire import (JSON_TYPE, SSE_TYPE, Disconnected, Receive, Reply,
                                              Scope, Send, decompress, header, json_bytes,
                                              ok_json, read_body)
from tritonserver.frontends.httpbase.metrics import PROMETHEUS_TYPE
from tritonserver.frontends.openai import protocol as p

if TYPE_CHECKING:
    from starlette.applications import Starlette

DONE = b"data: [DONE]\n\n"
USAGE_SOURCE = "count_source"  # usage's extra key: "tokenizer", "model" or "estimate"


@dataclass
class OpenAISettings:
    """What the app enforces (OpenAI.Options fills it)."""

    max_input_size: int = c.DEFAULT_MAX_INPUT_SIZE
    restricted_features: RestrictedLike = None
    tokenizer: str = ""
    _restrictions: dict[Protocols, tuple[str, str]] = field(default_factory=dict, repr=False)
    _tokenizer: Optional[tg.Tokenizer] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._restrictions = checked_limits(self.max_input_size, self.restricted_features)
        if not isinstance(self.tokenizer, str):
            raise InvalidArgumentError(
                f"tokenizer: expected a Hugging Face tokenizer's name or folder, got "
                f"{self.tokenizer!r}")
        self._tokenizer = tg.Tokenizer(self.tokenizer) if self.tokenizer else None


def error_reply(error: BaseException) -> tuple[int, bytes]:
    """(status, OpenAI's error body) for an error: Triton's status, 413 for a
    body over the size limit."""
    status = 413 if isinstance(error, c.PayloadTooLarge) else triton_error_reply(error)[0]
    return status, json_bytes(p.error_object(c.error_message(error), status,
                                             getattr(error, "param", None),
                                             getattr(error, "code", None)))


class _Endpoint(Endpoint):
    """Errors in OpenAI's error object."""

    error_reply = staticmethod(error_reply)


class _Api:
    """The handlers, for one server (or server provider)."""

    def __init__(self, server: c.ServerLike, settings: OpenAISettings):
        self.server = server_provider(server)
        self.settings = settings
        self.restrictions = settings._restrictions
        self.tokenizer = settings._tokenizer
        self.models = tg.TextModels()

    # ---- Health, metrics, models ------------------------------------------------------

    async def ready(self, scope: Scope, receive: Receive, send: Send, server: Server) -> Reply:
        c.check_running(server)
        if await in_thread(server.ready):  # the models' own checks may take seconds
            return 200, JSON_TYPE, b"", []
        return 400, JSON_TYPE, json_bytes(p.error_object("the server is not ready", 400)), []

    async def metrics(self, scope: Scope, receive: Receive, send: Send, server: Server) -> Reply:
        c.check_running(server)
        return 200, PROMETHEUS_TYPE.encode(), server.metrics().encode(), []

    async def list_models(self, scope: Scope, receive: Receive, send: Send,
                          server: Server) -> Reply:
        c.check_running(server)
        data = [p.model_object(m.name, m.created) for m in self.models.listed(server)]
        return ok_json({"object": "list", "data": data})

    def _served(self, server: Server, name: str, chat: bool = False) -> Any:
        try:
            return self.models.served(server, name, chat)
        except NotFoundError:
            raise p.ModelNotFound(f"The model '{name}' does not exist") from None

    async def retrieve_model(self, scope: Scope, receive: Receive, send: Send, server: Server,
                             model: str) -> Reply:
        c.check_running(server)
        if not _is_ready(server, model):
            raise p.ModelNotFound(f"The model '{model}' does not exist")
        _, text_model = self.models.get(server, model)
        if not text_model.served:
            raise p.ModelNotFound(f"The model '{model}' does not exist")
        return ok_json(p.model_object(model, text_model.created))

    async def load(self, scope: Scope, receive: Receive, send: Send, server: Server,
                   model: str) -> Reply:
        _check_explicit(server)
        if _is_ready(server, model):
            raise InvalidArgumentError(f"Model '{model}' is already loaded")
        await in_thread(_change_model, server, model, True)
        _, text_model = self.models.get(server, model)
        return ok_json(p.model_object(model, text_model.created))

    async def unload(self, scope: Scope, receive: Receive, send: Send, server: Server,
                     model: str) -> Reply:
        _check_explicit(server)
        if not _is_ready(server, model):
            raise InvalidArgumentError(f"Unknown model: {model}")
        await in_thread(_change_model, server, model, False)
        return ok_json({"status": "success", "model": model})

    # ---- Completions -------------------------------------------------------------------

    async def _body(self, scope: Scope, receive: Receive) -> dict[str, Any]:
        body = await read_body(scope, receive, self.settings.max_input_size)
        encoding = header(scope, b"content-encoding")
        if encoding is not None:
            body = decompress(body, encoding, self.settings.max_input_size)
        try:
            document = _json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise p.RequestError(f"We could not parse the JSON body of your request: {e}") \
                from None
        if not isinstance(document, dict):
            raise p.RequestError("The request body must be a JSON object")
        return document

    async def completions(self, scope: Scope, receive: Receive, send: Send,
                          server: Server) -> Reply:
        c.check_running(server)
        name, generation, include_usage = p.completion_request(await self._body(scope, receive))
        return await self._run(scope, receive, send, server, name, generation, include_usage,
                               _CompletionShape())

    async def chat_completions(self, scope: Scope, receive: Receive, send: Send,
                               server: Server) -> Reply:
        c.check_running(server)
        tokenizer = self.tokenizer
        name, generation, include_usage = p.chat_request(
            await self._body(scope, receive), lambda m: tg.chat_prompt(m, tokenizer))
        return await self._run(scope, receive, send, server, name, generation, include_usage,
                               _ChatShape())

    async def _run(self, scope: Scope, receive: Receive, send: Send, server: Server, name: str,
                   generation: tg.Generation, include_usage: bool, shape: "_Shape") -> Reply:
        entry, model = self._served(server, name, chat=isinstance(shape, _ChatShape))
        stream = tg.start(server, entry, model, generation, self.tokenizer,
                          trace_context_of(server, scope["headers"]))
        # The body was read: the next message is the disconnect, whenever it comes,
        # and it cancels the request in the core at once (the model sees
        # is_cancelled(); the stream then ends, or fails CANCELLED).
        gone = asyncio.ensure_future(receive())
        gone.add_done_callback(lambda _: stream.cancel())
        try:
            first = await _next(stream, gone)  # an error here is a plain JSON error
            if not generation.stream:
                parts = [first or ""]
                while first is not None:
                    first = await _next(stream, gone)
                    parts.append(first or "")
                usage = _usage(stream)
                return ok_json(shape.whole(name, "".join(parts), stream.finish_reason, usage))
            await _stream_events(send, stream, gone, shape, name, first, include_usage)
            return None
        finally:
            gone.cancel()
            stream.cancel()


def _usage(stream: tg.TextStream) -> dict[str, Any]:
    usage = stream.tally.usage()
    usage[USAGE_SOURCE] = stream.tally.source
    return usage


async def _next(stream: tg.TextStream, gone: "asyncio.Future[Any]") -> Optional[str]:
    """The stream's next piece, or Disconnected once the client has gone
    (``gone``'s callback has cancelled the request then: see _run)."""
    piece = await stream.next()
    if gone.done():
        raise Disconnected()
    return piece


class _Shape:
    """The documents of one endpoint."""

    def __init__(self) -> None:
        self.ident = p.new_id(self.prefix)
        self.created = int(time.time())

    prefix = ""

    def whole(self, model: str, text: str, reason: Optional[str],
              usage: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def opening(self, model: str) -> Optional[dict[str, Any]]:
        return None

    def piece(self, model: str, text: str) -> dict[str, Any]:
        raise NotImplementedError

    def closing(self, model: str, reason: Optional[str]) -> dict[str, Any]:
        raise NotImplementedError

    def usage(self, model: str, usage: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


class _CompletionShape(_Shape):
    prefix = "cmpl"

    def whole(self, model: str, text: str, reason: Optional[str],
              usage: dict[str, Any]) -> dict[str, Any]:
        return p.completion(self.ident, self.created, model, text, reason, usage)

    def piece(self, model: str, text: str) -> dict[str, Any]:
        return p.completion(self.ident, self.created, model, text, None, None)

    def closing(self, model: str, reason: Optional[str]) -> dict[str, Any]:
        return p.completion(self.ident, self.created, model, "", reason, None)

    def usage(self, model: str, usage: dict[str, Any]) -> dict[str, Any]:
        return p.completion(self.ident, self.created, model, None, None, usage)


class _ChatShape(_Shape):
    prefix = "chatcmpl"

    def whole(self, model: str, text: str, reason: Optional[str],
              usage: dict[str, Any]) -> dict[str, Any]:
        return p.chat_completion(self.ident, self.created, model, text, reason, usage)

    def opening(self, model: str) -> Optional[dict[str, Any]]:
        return p.chat_chunk(self.ident, self.created, model,
                            {"role": "assistant", "content": ""}, None, None)

    def piece(self, model: str, text: str) -> dict[str, Any]:
        return p.chat_chunk(self.ident, self.created, model, {"content": text}, None, None)

    def closing(self, model: str, reason: Optional[str]) -> dict[str, Any]:
        return p.chat_chunk(self.ident, self.created, model, {}, reason, None)

    def usage(self, model: str, usage: dict[str, Any]) -> dict[str, Any]:
        return p.chat_chunk(self.ident, self.created, model, None, None, usage)


def _event(document: dict[str, Any]) -> dict[str, Any]:
    return {"type": "http.response.body", "body": b"data: " + json_bytes(document) + b"\n\n",
            "more_body": True}


async def _stream_events(send: Send, stream: tg.TextStream, gone: "asyncio.Future[Any]",
                         shape: _Shape, model: str, first: Optional[str],
                         include_usage: bool) -> None:
    """Server-sent events: the pieces, the closing chunk, the usage chunk
    when asked for, then ``data: [DONE]``. An error after the first piece
    is sent as an event carrying OpenAI's error object."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", SSE_TYPE), (b"cache-control", b"no-cache")]})
    opening = shape.opening(model)
    if opening is not None:
        await send(_event(opening))
    piece = first
    try:
        while piece is not None:
            if piece:
                await send(_event(shape.piece(model, piece)))
            piece = await _next(stream, gone)
        await send(_event(shape.closing(model, stream.finish_reason)))
        if include_usage:
            await send(_event(shape.usage(model, _usage(stream))))
    except Disconnected:
        raise
    except Exception as e:
        _, body = error_reply(e)
        await send({"type": "http.response.body", "body": b"data: " + body + b"\n\n",
                    "more_body": True})
    await send({"type": "http.response.body", "body": DONE, "more_body": False})


def _is_ready(server: Server, name: str) -> bool:
    return any(m.name == name for m in server.models(exclude_not_ready=True).values())


def _check_explicit(server: Server) -> None:
    c.check_running(server)
    if server.options.model_control_mode != ModelControlMode.EXPLICIT:
        raise InvalidArgumentError("Model load/unload requires --model-control-mode=explicit")


def _change_model(server: Server, name: str, load: bool) -> None:
    """Load, or unload and wait until unloaded (blocking: run in a thread)."""
    state = c.state_of(server)
    try:
        if load:
            server.load(name)
        else:
            server.unload(name, wait_until_unloaded=True)
    except TritonError as e:
        what = "load" if load else "unload"
        raise type(e)(f"Failed to {what} model '{name}': {e}") from None
    finally:
        state.forget_models()


def _starlette_error(text: str, status: int, method: str, path: str) -> bytes:
    if status == 404:
        text = f"Unknown request URL: {method} {path}"
    return json_bytes(p.error_object(text, status))


# ---- The app ------------------------------------------------------------------------------


# The paths of create_openai_app's routes: what one_port_app sends to it.
OPENAI_PATH_PREFIX = "/v1/"
OPENAI_PATHS = frozenset({"/health/ready", "/metrics"})


def one_port_app(kserve: Any, openai: Any) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """One ASGI app serving both on one port: OpenAI's paths (``/v1/...``,
    ``/health/ready``, ``/metrics``) go to ``openai``, every other request
    (KServe's ``/v2/...``) and the lifespan events to ``kserve``. KServe's
    app has none of OpenAI's paths (its metrics are a port of their own), so
    neither hides a route of the other. For servers that give an application
    one HTTP port: Ray Serve's proxy (``serve --ray --openai-port``)."""
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] in ("http", "websocket") else ""
        if path.startswith(OPENAI_PATH_PREFIX) or path in OPENAI_PATHS:
            await openai(scope, receive, send)
        else:
            await kserve(scope, receive, send)

    return app


def create_openai_app(server: c.ServerLike, settings: Optional[OpenAISettings] = None,
                      **kwargs: Any) -> "Starlette":
    """A Starlette (ASGI) app serving OpenAI's API for ``server`` (a Server,
    or a callable returning one, called per request). ``settings`` (an
    OpenAISettings), or its fields as keywords: ``max_input_size``,
    ``restricted_features``, ``tokenizer``."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    if settings is None:
        settings = OpenAISettings(**kwargs)
    elif kwargs:
        raise InvalidArgumentError("pass either settings or their fields as keywords, not both")
    api = _Api(server, settings)

    get, post = ("GET",), ("POST",)
    table: list[tuple[str, Callable[..., Awaitable[Reply]], Protocols, tuple[str, ...]]] = [
        ("/v1/chat/completions", api.chat_completions, Protocols.INFERENCE, post),
        ("/v1/completions", api.completions, Protocols.INFERENCE, post),
        ("/v1/models", api.list_models, Protocols.MODEL_REPOSITORY, get),
        ("/v1/models/{model:path}/load", api.load, Protocols.MODEL_REPOSITORY, post),
        ("/v1/models/{model:path}/unload", api.unload, Protocols.MODEL_REPOSITORY, post),
        ("/v1/models/{model:path}", api.retrieve_model, Protocols.MODEL_REPOSITORY, get),
        ("/health/ready", api.ready, Protocols.HEALTH, get),
        ("/metrics", api.metrics, Protocols.STATISTICS, get),
    ]
    routes = [Route(path, _Endpoint(api, handler, protocol, method))
              for path, handler, protocol, method in table]
    app = Starlette(routes=routes, exception_handlers=starlette_errors(_starlette_error))
    app.state.tritonserver_settings = settings
    return app


# ---- The frontend --------------------------------------------------------------------------


class OpenAI(AsgiFrontend):
    """Serves OpenAI's API (completions, chat completions, models) for a
    running Server: ``OpenAI(server, OpenAI.Options(port=9000)).start()``,
    or use it as a context manager. docs/openai.md says which models it
    serves and how."""

    _kind = "OpenAI"

    @dataclass
    class Options:
        """OpenAI frontend options.

        - ``address``: where to listen; loopback unless you say otherwise.
        - ``port``: 0 lets the system choose (read it back from ``.port``);
          9000 as NVIDIA's OpenAI frontend.
        - ``reuse_port``, ``thread_count``: as KServeHttp's.
        - ``max_input_size``: the largest request body, in bytes (413 beyond).
        - ``restricted_features``: API groups that need a header (see
          RestrictedFeatures): ``inference`` (completions), ``model-repository``
          (models, load, unload), ``health``, ``statistics`` (``/metrics``).
        - ``tokenizer``: a Hugging Face tokenizer's name or folder (needs
          ``transformers``): chat templates and token counts.
        - ``ssl_certfile``, ``ssl_keyfile``, ``ssl_ca_certs``, ``ssl_cert_reqs``:
          HTTPS, as KServeHttp's.
        """

        address: str = "127.0.0.1"
        port: int = 9000
        reuse_port: bool = False
        thread_count: int = 1
        max_input_size: int = c.DEFAULT_MAX_INPUT_SIZE
        restricted_features: RestrictedLike = None
        tokenizer: str = ""
        ssl_certfile: str = ""
        ssl_keyfile: str = ""
        ssl_ca_certs: str = ""
        ssl_cert_reqs: Optional[str] = None

    _service_name = "tritonserver-openai"

    def __init__(self, server: Server, options: Optional["OpenAI.Options"] = None):
        super().__init__(server, options, OpenAI.Options)
        o = self.options
        self.settings = OpenAISettings(max_input_size=o.max_input_size,
                                       restricted_features=o.restricted_features,
                                       tokenizer=o.tokenizer)
        self.app = create_openai_app(server, self.settings)

    @property
    def url(self) -> str:
        """The API's base URL, as the ``openai`` client takes it (``.../v1``)."""
        return f"{self.base_url}/v1"
