"""The KServe v2 HTTP/REST frontend: an ASGI app (FastAPI) and KServeHttp,
which serves it with the package's HTTP/1.1 server (frontends/httpbase/server.py) on a
thread of its own.

``create_http_app(server)`` builds the app for a Server (or for a callable
returning one, resolved per request: what an application that creates its
Server later, such as a Ray Serve deployment, needs). Every endpoint is a
plain ASGI callable routed by the app: the inference path reads the body
once, decodes tensors in place and writes one response, with no per-request
framework objects.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

from tritonserver import InferenceResponse, InvalidArgumentError, Server
from tritonserver._trace import parse_update
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends.dataplane.headers import forward_regex
from tritonserver.frontends.dataplane import generate as _generate
from tritonserver.frontends.httpbase import json_codec as _json
from tritonserver.frontends.dataplane import metadata as _metadata
from tritonserver.frontends.dataplane import repository as _repository
from tritonserver.frontends.dataplane import shared_memory as _shm
from tritonserver.frontends._frontend import AsgiFrontend
from tritonserver.frontends.http.codec import (infer_reply, inference_header_length, parse_infer,
                                               raw_binary_call)
from tritonserver.frontends.httpbase.endpoint import (Endpoint, checked_limits, in_thread,
                                                  server_provider, starlette_errors)
from tritonserver.frontends.httpbase.wire import (
    HEADER_LENGTH,
    JSON_TYPE,
    SSE_TYPE,
    Receive,
    Reply,
    Scope,
    Send,
    decompress,
    error_body,
    header,
    http_status,
    json_bytes,
    ok_json,
    read_body,
)
from tritonserver.frontends.dataplane.inference import (WireRequest, infer_once, mark,
                                                       trace_context_of, trace_start, tracing)
from tritonserver.frontends.dataplane.log_settings import log_settings_request
from tritonserver.frontends._restricted import (
    Protocols,
    RestrictedLike,
)
from tritonserver.frontends.dataplane.trace_settings import check_trace_request, trace_settings

if TYPE_CHECKING:
    from fastapi import FastAPI

@dataclass
class HttpSettings:
    """What the app enforces (KServeHttp.Options fills it)."""

    max_input_size: int = c.DEFAULT_MAX_INPUT_SIZE
    restricted_features: RestrictedLike = None
    header_forward_pattern: str = ""
    allow_client_shm: bool = False
    _restrictions: dict[Protocols, tuple[str, str]] = field(default_factory=dict, repr=False)
    _forward: Optional["re.Pattern[str]"] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._restrictions = checked_limits(self.max_input_size, self.restricted_features)
        if not isinstance(self.allow_client_shm, bool):
            raise InvalidArgumentError("allow_client_shm: expected a bool")
        self._forward = forward_regex(self.header_forward_pattern, "header_forward_pattern")


class KServeApi:
    """The handlers of every endpoint, for one server (or server provider).

    Public so that a protocol carrying KServe's inference body on other
    routes (the SageMaker frontend, frontends/sagemaker) serves it with these
    handlers: it overrides how an inference body is decoded and its
    response encoded (``decode_infer``, ``encode_infer``) and what a
    decoupled model is told (``decoupled_refusal``); tracing, the core call
    and the answer-once policy stay this class's."""

    # What /infer tells a decoupled model (None: the dataplane's text).
    decoupled_refusal: Optional[str] = None

    def __init__(self, server: c.ServerLike, settings: HttpSettings):
        self.server = server_provider(server)
        self.settings = settings
        self._state: Optional[tuple[Server, c.ServerState]] = None
        self.max_input_size = settings.max_input_size
        self.restrictions = settings._restrictions
        self.forward = settings._forward

    # ---- Health and metadata ----------------------------------------------------------

    async def live(self, scope: Scope, receive: Receive, send: Send, server: Server) -> Reply:
        c.check_running(server)
        return 200, JSON_TYPE, b"", []

    async def ready(self, scope: Scope, receive: Receive, send: Send, server: Server) -> Reply:
        c.check_running(server)
        # in a thread: with strict readiness the models' own checks run (up to 5 s each)
        if await in_thread(server.ready):
            return 200, JSON_TYPE, b"", []
        return 400, JSON_TYPE, error_body("Server is not ready"), []

    async def server_metadata(self, scope: Scope, receive: Receive, send: Send,
                              server: Server) -> Reply:
        return ok_json(_metadata.server_metadata(server))

    async def model_metadata(self, scope: Scope, receive: Receive, send: Send, server: Server,
                             model_name: str, model_version: str = "") -> Reply:
        return ok_json(_metadata.model_metadata(server, model_name, model_version))

    async def model_ready(self, scope: Scope, receive: Receive, send: Send, server: Server,
                          model_name: str, model_version: str = "") -> Reply:
        # in a thread: a model's own readiness check may take up to 5 s (Model.ready)
        if await in_thread(_metadata.model(server, model_name, model_version).ready):
            return 200, JSON_TYPE, b"", []
        return 400, JSON_TYPE, error_body("Model version not ready"), []

    async def model_config(self, scope: Scope, receive: Receive, send: Send, server: Server,
                           model_name: str, model_version: str = "") -> Reply:
        return ok_json(_metadata.model_config(server, model_name, model_version))

    async def model_stats(self, scope: Scope, receive: Receive, send: Send, server: Server,
                          model_name: str = "", model_version: str = "") -> Reply:
        return ok_json(_metadata.model_statistics(server, model_name, model_version))

    # ---- Model repository ---------------------------------------------------------------

    async def _json_body(self, scope: Scope, receive: Receive, what: str,
                         loads: Callable[[bytes], Any] = _json.loads) -> dict[str, Any]:
        body = await read_body(scope, receive, self.max_input_size)
        if not body.strip():
            return {}
        try:
            document = loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise InvalidArgumentError(f"failed to parse the {what} request JSON: {e}") from None
        if not isinstance(document, dict):
            raise InvalidArgumentError(f"the {what} request must be a JSON object")
        return document

    async def repository_index(self, scope: Scope, receive: Receive, send: Send,
                               server: Server, repository: str = "") -> Reply:
        _repository.check_repository(repository)
        request = await self._json_body(scope, receive, "repository index")
        ready = request.get("ready", False)
        if not isinstance(ready, bool):
            raise InvalidArgumentError("Invalid value for 'ready': expected a boolean")
        return ok_json(_repository.index(server, ready))

    async def repository_load(self, scope: Scope, receive: Receive, send: Send,
                              server: Server, model_name: str, repository: str = "") -> Reply:
        _repository.check_repository(repository)
        request = await self._json_body(scope, receive, "load model")
        load = _repository.json_load_parameters(request.get("parameters", {}))
        await in_thread(_repository.load, server, model_name, load)
        return 200, JSON_TYPE, b"", []

    async def repository_unload(self, scope: Scope, receive: Receive, send: Send,
                                server: Server, model_name: str, repository: str = "") -> Reply:
        _repository.check_repository(repository)
        request = await self._json_body(scope, receive, "unload model")
        dependents = _repository.json_unload_dependents(request.get("parameters", {}))
        await in_thread(_repository.unload, server, model_name, dependents)
        return 200, JSON_TYPE, b"", []

    # ---- Logging, trace, shared memory ---------------------------------------------------

    async def logging(self, scope: Scope, receive: Receive, send: Send, server: Server) -> Reply:
        changes = None
        if scope["method"] == "POST":
            changes = await self._json_body(scope, receive, "log settings")
        return ok_json(log_settings_request(server, changes))

    async def trace_setting(self, scope: Scope, receive: Receive, send: Send, server: Server,
                            model_name: str = "") -> Reply:
        check_trace_request(server, model_name)
        update = None
        if scope["method"] == "POST":
            update = parse_update(await self._json_body(scope, receive, "trace setting"))
        return ok_json(trace_settings(server, model_name, update))

    async def shm_status(self, scope: Scope, receive: Receive, send: Send, server: Server,
                         region_name: Optional[str] = None) -> Reply:
        return ok_json(_shm.status(server, region_name))

    async def shm_register(self, scope: Scope, receive: Receive, send: Send, server: Server,
                           region_name: str) -> Reply:
        allowed = self.settings.allow_client_shm
        _shm.check_client_shm(allowed)  # before the body is read, as Triton
        request = await self._json_body(scope, receive, "register")
        _shm.register(server, allowed, region_name, *_shm.register_fields(request))
        return 200, JSON_TYPE, b"", []

    async def shm_unregister(self, scope: Scope, receive: Receive, send: Send, server: Server,
                             region_name: Optional[str] = None) -> Reply:
        _shm.unregister(server, self.settings.allow_client_shm, region_name)
        return 200, JSON_TYPE, b"", []

    async def cuda_shm_status(self, scope: Scope, receive: Receive, send: Send,
                              server: Server, region_name: Optional[str] = None) -> Reply:
        return ok_json(_shm.cuda_status(server, region_name))

    async def cuda_shm_register(self, scope: Scope, receive: Receive, send: Send,
                                server: Server, region_name: str) -> Reply:
        allowed = self.settings.allow_client_shm
        _shm.check_client_shm(allowed)  # before the body is read, as Triton
        request = await self._json_body(scope, receive, "register")
        fields = _shm.cuda_register_fields(request)
        # Opening an IPC handle is CUDA work: not on the event loop.
        await in_thread(_shm.cuda_register, server, allowed, region_name, *fields)
        return 200, JSON_TYPE, b"", []

    async def cuda_shm_unregister(self, scope: Scope, receive: Receive, send: Send,
                                  server: Server, region_name: Optional[str] = None) -> Reply:
        await in_thread(_shm.cuda_unregister, server, self.settings.allow_client_shm,
                        region_name)
        return 200, JSON_TYPE, b"", []

    # ---- Inference ---------------------------------------------------------------------

    async def infer(self, scope: Scope, receive: Receive, send: Send, server: Server,
                    model_name: str, model_version: str = "") -> Reply:
        recv_start = time.monotonic_ns() if tracing(server) else 0
        body = await read_body(scope, receive, self.max_input_size)
        headers = dict(scope["headers"])
        version = c.parse_version(model_version)
        call, kinds, default_binary = self.decode_infer(scope, headers, body, server,
                                                        model_name, version)
        if recv_start:  # the trace's HTTP timestamps, as Triton's frontend takes them
            trace_start(call, scope["headers"], ("HTTP_RECV_START", recv_start),
                        ("HTTP_RECV_END", time.monotonic_ns()))
        response, entry = await infer_once(server, call, self._state_of(server),
                                           self.settings.allow_client_shm,
                                           self.decoupled_refusal)
        if call.traced is None:
            return self.encode_infer(headers, entry, response, call, kinds, default_binary)
        send_start = time.monotonic_ns()
        reply = self.encode_infer(headers, entry, response, call, kinds, default_binary)
        mark(call, ("INFER_RESPONSE_COMPLETE", send_start), ("HTTP_SEND_START", send_start),
             ("HTTP_SEND_END", time.monotonic_ns()))
        return reply

    def decode_infer(self, scope: Scope, headers: dict[bytes, bytes], body: bytes,
                     server: Server, model_name: str, version: int
                     ) -> tuple[WireRequest, Optional[dict[str, bool]], bool]:
        """KServe's body: decompressed as Content-Encoding says, the JSON
        as long as Inference-Header-Content-Length says (0: the body is the
        only input's bytes). Returns parse_infer's triple."""
        encoding = headers.get(b"content-encoding")
        if encoding is not None:
            body = decompress(body, encoding, self.max_input_size)
        header_length = headers.get(HEADER_LENGTH)
        if header_length is not None and header_length.strip() == b"0":
            return raw_binary_call(server, model_name, version, body)
        json_length = len(body) if header_length is None \
            else inference_header_length(header_length, len(body))
        return parse_infer(scope, body, json_length, model_name, version, self.forward)

    def encode_infer(self, headers: dict[bytes, bytes], entry: c.ModelEntry,
                     response: InferenceResponse, call: WireRequest,
                     kinds: Optional[dict[str, bool]], default_binary: bool) -> Reply:
        """KServe's response: JSON, binary outputs after it, compressed as
        the client accepts."""
        return infer_reply(headers, entry, response, call, kinds, default_binary)

    def _state_of(self, server: Server) -> c.ServerState:
        cached = self._state
        if cached is None or cached[0] is not server:
            cached = self._state = (server, c.state_of(server))
        return cached[1]

    # ---- Generate ----------------------------------------------------------------------

    async def generate(self, scope: Scope, receive: Receive, send: Send, server: Server,
                       model_name: str, model_version: str = "") -> Reply:
        return await self._generate(scope, receive, send, server, model_name, model_version,
                                    stream=False)

    async def generate_stream(self, scope: Scope, receive: Receive, send: Send, server: Server,
                              model_name: str, model_version: str = "") -> Reply:
        return await self._generate(scope, receive, send, server, model_name, model_version,
                                    stream=True)

    async def _generate(self, scope: Scope, receive: Receive, send: Send, server: Server,
                        model_name: str, model_version: str, stream: bool) -> Reply:
        version = c.parse_version(model_version)
        encoding = header(scope, b"content-encoding")
        if encoding is not None and encoding.strip().lower() not in (b"", b"identity"):
            raise InvalidArgumentError("Unsupported content-encoding, only 'identity' is "
                                       "supported.")
        # Keys as Triton reads them: in order, a repeated one seen twice.
        request = await self._json_body(scope, receive, "generate", _generate_loads)
        iterator, call, entry = _generate.start(server, model_name, version, request,
                                                trace_context_of(server, scope["headers"]))
        try:
            if not stream:
                return ok_json(await _generate.only_document(iterator, call, entry))
            await _generate_events(iterator, call, entry, send, receive)
            return None
        finally:
            iterator.cancel()


def _generate_loads(body: bytes) -> Any:
    return _json.loads_pairs(body, _generate.JsonObject.from_pairs)


async def _generate_events(iterator: Any, call: WireRequest, entry: c.ModelEntry,
                           send: Send, receive: Receive) -> None:
    """Server-sent events, one per response. A client that goes away ends
    the stream and cancels the request (the body was read: the next
    message ASGI receives is the disconnect)."""
    import asyncio

    gone = asyncio.ensure_future(receive())
    try:
        await _send_events(iterator, call, entry, send, gone)
    finally:
        gone.cancel()


async def _send_events(iterator: Any, call: WireRequest, entry: c.ModelEntry, send: Send,
                       gone: Any) -> None:
    started = False
    async for response in iterator:
        if gone.done():
            iterator.cancel()
            return
        failed = response.error
        if failed is None and response.final and not response.outputs \
                and not response.parameters:
            continue  # the decoupled model's closing flag
        if failed is None:
            try:
                event = json_bytes(_generate.response_document(response, call, entry))
            except Exception as e:  # an output JSON cannot carry
                failed = e
        status = 200
        if failed is not None:
            event = error_body(c.error_message(failed))
            status = http_status(failed)
        if not started:
            # As Triton: the first response sets the status (a model's error
            # first: its status, the error as the one event); failures before
            # the request ran were plain JSON errors (raised before this).
            await _start_events(send, status)
            started = True
        await send({"type": "http.response.body", "body": b"data: " + event + b"\n\n",
                    "more_body": True})
        if failed is not None:
            iterator.cancel()
            break
    if not started:
        await _start_events(send, 200)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _start_events(send: Send, status: int) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", SSE_TYPE), (b"cache-control", b"no-cache")]})


# ---- The app ------------------------------------------------------------------------------

_INFER_PATH = re.compile(r"/v2/models/([^/]+)(?:/versions/([^/]+))?/infer")


def _app_class() -> type:
    from fastapi import FastAPI

    class TritonHttpApp(FastAPI):  # type: ignore[misc, unused-ignore]
        """The FastAPI app, with the inference path dispatched before the
        framework's layers (while no user middleware is installed: with one,
        every request goes through FastAPI)."""

        triton_infer: Optional[Endpoint] = None

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            endpoint = self.triton_infer
            if (endpoint is not None and scope["type"] == "http" and scope["method"] == "POST"
                    and not self.user_middleware):
                path = scope["path"]
                root = scope.get("root_path")
                if root and path.startswith(root):
                    path = path[len(root):]
                match = _INFER_PATH.fullmatch(path)
                if match is not None:
                    name, version = match.groups()
                    scope["path_params"] = {"model_name": name, "model_version": version or ""}
                    await endpoint(scope, receive, send)
                    return
            await super().__call__(scope, receive, send)

    return TritonHttpApp


def create_http_app(server: c.ServerLike, settings: Optional[HttpSettings] = None,
                    **kwargs: Any) -> "FastAPI":
    """A FastAPI (ASGI) app serving the KServe v2 HTTP/REST protocol for ``server``.

    ``server`` is a tritonserver.Server, or a callable returning one (called
    per request: the app may be built before the server exists, as in Ray
    Serve's ``@serve.ingress(app)``). ``settings`` (an HttpSettings), or its
    fields as keywords: ``max_input_size``, ``restricted_features``,
    ``header_forward_pattern``. Serve it with any ASGI server; KServeHttp
    serves it with the package's own (frontends/httpbase/server.py).
    """
    from starlette.routing import Route

    if settings is None:
        settings = HttpSettings(**kwargs)
    elif kwargs:
        raise InvalidArgumentError("pass either settings or their fields as keywords, not both")
    api = KServeApi(server, settings)
    app = _app_class()(title="tritonserver: KServe v2 HTTP/REST", docs_url=None,
                       redoc_url=None, openapi_url=None,
                       exception_handlers=starlette_errors(lambda text, *_: error_body(text)))
    get, post, both = ("GET",), ("POST",), ("GET", "POST")
    m = "/v2/models/{model_name}"
    mv = m + "/versions/{model_version}"
    table: list[tuple[str, Callable[..., Awaitable[Reply]], Protocols, tuple[str, ...]]] = [
        # The router tries routes in order: inference first.
        (m + "/infer", api.infer, Protocols.INFERENCE, post),
        (mv + "/infer", api.infer, Protocols.INFERENCE, post),
        (m + "/generate", api.generate, Protocols.INFERENCE, post),
        (mv + "/generate", api.generate, Protocols.INFERENCE, post),
        (m + "/generate_stream", api.generate_stream, Protocols.INFERENCE, post),
        (mv + "/generate_stream", api.generate_stream, Protocols.INFERENCE, post),
        ("/v2/health/live", api.live, Protocols.HEALTH, get),
        ("/v2/health/ready", api.ready, Protocols.HEALTH, get),
        ("/v2", api.server_metadata, Protocols.METADATA, get),
        ("/v2/models/stats", api.model_stats, Protocols.STATISTICS, get),
        (m + "/ready", api.model_ready, Protocols.HEALTH, get),
        (mv + "/ready", api.model_ready, Protocols.HEALTH, get),
        (m + "/config", api.model_config, Protocols.MODEL_CONFIG, get),
        (mv + "/config", api.model_config, Protocols.MODEL_CONFIG, get),
        (m + "/stats", api.model_stats, Protocols.STATISTICS, get),
        (mv + "/stats", api.model_stats, Protocols.STATISTICS, get),
        (m, api.model_metadata, Protocols.METADATA, get),
        (mv, api.model_metadata, Protocols.METADATA, get),
        ("/v2/repository/index", api.repository_index, Protocols.MODEL_REPOSITORY, post),
        ("/v2/repository/{repository}/index", api.repository_index, Protocols.MODEL_REPOSITORY,
         post),
        ("/v2/repository/models/{model_name}/load", api.repository_load,
         Protocols.MODEL_REPOSITORY, post),
        ("/v2/repository/{repository}/models/{model_name}/load", api.repository_load,
         Protocols.MODEL_REPOSITORY, post),
        ("/v2/repository/models/{model_name}/unload", api.repository_unload,
         Protocols.MODEL_REPOSITORY, post),
        ("/v2/repository/{repository}/models/{model_name}/unload", api.repository_unload,
         Protocols.MODEL_REPOSITORY, post),
        ("/v2/logging", api.logging, Protocols.LOGGING, both),
        ("/v2/trace/setting", api.trace_setting, Protocols.TRACE, both),
        (m + "/trace/setting", api.trace_setting, Protocols.TRACE, both),
        ("/v2/systemsharedmemory/status", api.shm_status, Protocols.SHM_MEMORY, get),
        ("/v2/systemsharedmemory/region/{region_name}/status", api.shm_status,
         Protocols.SHM_MEMORY, get),
        ("/v2/systemsharedmemory/region/{region_name}/register", api.shm_register,
         Protocols.SHM_MEMORY, post),
        ("/v2/systemsharedmemory/unregister", api.shm_unregister, Protocols.SHM_MEMORY, post),
        ("/v2/systemsharedmemory/region/{region_name}/unregister", api.shm_unregister,
         Protocols.SHM_MEMORY, post),
        ("/v2/cudasharedmemory/status", api.cuda_shm_status, Protocols.SHM_MEMORY, get),
        ("/v2/cudasharedmemory/region/{region_name}/status", api.cuda_shm_status,
         Protocols.SHM_MEMORY, get),
        ("/v2/cudasharedmemory/region/{region_name}/register", api.cuda_shm_register,
         Protocols.SHM_MEMORY, post),
        ("/v2/cudasharedmemory/unregister", api.cuda_shm_unregister, Protocols.SHM_MEMORY,
         post),
        ("/v2/cudasharedmemory/region/{region_name}/unregister", api.cuda_shm_unregister,
         Protocols.SHM_MEMORY, post),
    ]
    for path, handler, protocol, methods in table:
        endpoint = Endpoint(api, handler, protocol, methods)
        if handler == api.infer and app.triton_infer is None:
            app.triton_infer = endpoint
        # A class instance as endpoint: Starlette calls it as a plain ASGI app.
        app.router.routes.append(Route(path, endpoint))
    app.state.tritonserver_settings = settings
    return app  # type: ignore[no-any-return]


# ---- The frontend --------------------------------------------------------------------------


class KServeHttp(AsgiFrontend):
    """Serves the KServe v2 HTTP/REST protocol for a running Server.

    ``KServeHttp(server, KServeHttp.Options(port=8000)).start()``, or use it
    as a context manager. Any number of frontends may serve one Server.
    """

    _kind = "HTTP"

    @dataclass
    class Options:
        """HTTP frontend options (names as in NVIDIA's tritonfrontend).

        - ``address``: where to listen; loopback unless you say otherwise.
        - ``port``: 0 lets the system choose (read it back from ``.port``).
        - ``reuse_port``: set SO_REUSEPORT, so several processes can share the port.
        - ``thread_count``: event loops (threads) serving the port. Python
          runs one thread at a time, so 1 is usually fastest.
        - ``header_forward_pattern``: a regex; request headers whose names
          match become string parameters of the inference request.
        - ``max_input_size``: the largest request body accepted, in bytes
          (Triton's ``--http-max-input-size``); larger ones get 400 (as from Triton) before
          their body is read.
        - ``restricted_features``: API groups that need a header (see
          RestrictedFeatures), e.g. ``["model-repository,logging:admin=secret"]``.
        - ``ssl_certfile``, ``ssl_keyfile``: serve HTTPS with this certificate
          (PEM, chain after it) and key; ``ssl_ca_certs`` and ``ssl_cert_reqs``
          ("none", "optional", "required"; default "required" with
          ``ssl_ca_certs``) check client certificates.
        - ``allow_client_shm``: clients may register, unregister and use
          system and CUDA shared memory regions (Triton's ``--allow-client-shm``).
          Off by default: a region names any shared memory object this process
          can open, so a client could read and write other processes' memory.
        """

        address: str = "127.0.0.1"
        port: int = 8000
        reuse_port: bool = False
        thread_count: int = 1
        header_forward_pattern: str = ""
        max_input_size: int = c.DEFAULT_MAX_INPUT_SIZE
        restricted_features: RestrictedLike = None
        allow_client_shm: bool = False
        ssl_certfile: str = ""
        ssl_keyfile: str = ""
        ssl_ca_certs: str = ""
        ssl_cert_reqs: Optional[str] = None

    _service_name = "tritonserver-http"

    def __init__(self, server: Server, options: Optional["KServeHttp.Options"] = None):
        super().__init__(server, options, KServeHttp.Options)
        o = self.options
        self.settings = HttpSettings(max_input_size=o.max_input_size,
                                     restricted_features=o.restricted_features,
                                     header_forward_pattern=o.header_forward_pattern,
                                     allow_client_shm=o.allow_client_shm)
        self.app = create_http_app(server, self.settings)

    @property
    def url(self) -> str:
        """``host:port`` as tritonclient takes it."""
        host = self.options.address
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
