"""The SageMaker frontend: Triton's SageMaker HTTP service (the executable's
``--allow-sagemaker``) as an ASGI app, and ``SageMaker``, which serves it
with the package's HTTP/1.1 server.

SageMaker's hosting contract is a few routes on one port: ``GET /ping``
(health), ``POST /invocations`` (inference on the one model of the
endpoint) and, for multi-model endpoints, ``/models`` (list, load),
``/models/<name>`` (get, unload) and ``/models/<name>/invoke``. The
inference body is KServe's, so the KServe app's handlers serve it
(``KServeApi``, frontends/http/app.py): only where the JSON ends, the
response's Content-Type, the decoupled model's refusal and the
multi-model endpoints' statuses are SageMaker's (sagemaker/wire.py). The
requests are traced as the HTTP frontend's (a ``traceparent`` header
continues the client's trace in OpenTelemetry mode).

What each route does follows Triton's ``src/sagemaker_server.cc``: routes
are matched on the whole path and then the method; anything else is an
empty 400.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from tritonserver import InferenceResponse, InvalidArgumentError, Server
from tritonserver.frontends._frontend import AsgiFrontend, ListenOptions
from tritonserver.frontends._restricted import Protocols, RestrictedLike
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends.dataplane.inference import WireRequest
from tritonserver.frontends.http.app import HttpSettings, KServeApi
from tritonserver.frontends.http.codec import infer_reply, parse_infer, raw_binary_call
from tritonserver.frontends.httpbase.endpoint import Endpoint, in_thread
from tritonserver.frontends.httpbase.wire import (BINARY_TYPE, HEADER_LENGTH, JSON_TYPE, Receive,
                                                  Reply, Scope, Send, error_body, header,
                                                  ok_json, send_reply)
from tritonserver.frontends.sagemaker import models as _models
from tritonserver.frontends.sagemaker.wire import (binary_content_type, json_header_size,
                                                   multi_model_error_reply)

_log = logging.getLogger("tritonserver.frontends.sagemaker")

# The environment variables Triton's SageMaker service reads, and their defaults.
PING_MODE_VARIABLE = "SAGEMAKER_TRITON_PING_MODE"
DEFAULT_MODEL_VARIABLE = "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"
INFERENCE_TYPE_VARIABLE = "SAGEMAKER_TRITON_INFERENCE_TYPE"
DEFAULT_PING_MODE = "ready"
DEFAULT_MODEL_NAME = "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"
DEFAULT_INFERENCE_TYPE = "infer"
INFERENCE_TYPES = ("infer", "generate", "generate_stream")
TARGET_MODEL_HEADER = b"x-amzn-sagemaker-target-model"
DECOUPLED_REFUSAL = ("HTTP end point doesn't support models with decoupled transaction "
                     "policy")


def _from_environment(field_name: str, value: Optional[str], variable: str,
                      default: str) -> str:
    """A setting given (a str), else the environment variable Triton reads, else its default."""
    if value is None:
        return os.environ.get(variable, default)
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{field_name}: expected a str or None, got {value!r}")
    return value


@dataclass
class SageMakerSettings:
    """What the app serves and enforces (SageMaker.Options fills it).

    ``ping_mode``, ``default_model_name`` and ``inference_type``: None
    reads them, as Triton does, from SAGEMAKER_TRITON_PING_MODE ("ready";
    "live" answers liveness), SAGEMAKER_TRITON_DEFAULT_MODEL_NAME (the model
    of /invocations) and SAGEMAKER_TRITON_INFERENCE_TYPE ("infer", or
    "generate" / "generate_stream": /invocations is then that endpoint;
    another value is answered, per request, with Triton's error), when the
    settings are made. ``models_root``: where SageMaker unpacks multi-model
    archives; a load's url must lie under it. ``unload_timeout``: how long
    an unload waits for the core to finish it (Triton's 350 s)."""

    max_input_size: int = c.DEFAULT_MAX_INPUT_SIZE
    restricted_features: RestrictedLike = None
    allow_client_shm: bool = False
    ping_mode: Optional[str] = None
    default_model_name: Optional[str] = None
    inference_type: Optional[str] = None
    models_root: str = _models.SAGEMAKER_MODELS_ROOT
    unload_timeout: float = _models.UNLOAD_TIMEOUT_S
    _http: HttpSettings = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.ping_mode = _from_environment("ping_mode", self.ping_mode, PING_MODE_VARIABLE,
                                           DEFAULT_PING_MODE)
        self.default_model_name = _from_environment(
            "default_model_name", self.default_model_name, DEFAULT_MODEL_VARIABLE,
            DEFAULT_MODEL_NAME)
        self.inference_type = _from_environment("inference_type", self.inference_type,
                                                INFERENCE_TYPE_VARIABLE, DEFAULT_INFERENCE_TYPE)
        if not isinstance(self.models_root, str) or not os.path.isabs(self.models_root):
            raise InvalidArgumentError(
                f"models_root: expected an absolute path, got {self.models_root!r}")
        if isinstance(self.unload_timeout, bool) or \
                not isinstance(self.unload_timeout, (int, float)) or self.unload_timeout < 0:
            raise InvalidArgumentError(
                f"unload_timeout: expected seconds (>= 0), got {self.unload_timeout!r}")
        # No header forwarding: Triton's SageMaker service has none.
        self._http = HttpSettings(max_input_size=self.max_input_size,
                                  restricted_features=self.restricted_features,
                                  allow_client_shm=self.allow_client_shm)

    @property
    def inference_type_error(self) -> Optional[str]:
        """Triton's answer to /invocations for an unknown inference type (None: known)."""
        if self.inference_type in INFERENCE_TYPES:
            return None
        return (f"Server has invalid inference type '{self.inference_type}'. Must be one of: "
                f"{', '.join(INFERENCE_TYPES)}.")


class SageMakerApi(KServeApi):
    """KServe's handlers with SageMaker's inference body, and SageMaker's own routes."""

    decoupled_refusal = DECOUPLED_REFUSAL

    def __init__(self, server: c.ServerLike, settings: SageMakerSettings):
        super().__init__(server, settings._http)
        self.sagemaker = settings
        self.loaded = _models.LoadedModels(settings.models_root, settings.unload_timeout)

    # ---- The inference body --------------------------------------------------------------

    def decode_infer(self, scope: Scope, headers: dict[bytes, bytes], body: bytes,
                     server: Server, model_name: str, version: int
                     ) -> tuple[WireRequest, Optional[dict[str, bool]], bool]:
        """The JSON's length is the Content-Type's json-header-size (0: the
        body is the only input's bytes); bodies are never compressed."""
        json_length = json_header_size(headers.get(b"content-type"), len(body))
        if json_length == 0:
            return raw_binary_call(server, model_name, version, body)
        return parse_infer(scope, body, json_length, model_name, version, None)

    def encode_infer(self, headers: dict[bytes, bytes], entry: c.ModelEntry,
                     response: InferenceResponse, call: WireRequest,
                     kinds: Optional[dict[str, bool]], default_binary: bool) -> Reply:
        """KServe's response, uncompressed; binary outputs are said by the
        Content-Type (with the JSON's length), not by a header of their own."""
        reply = infer_reply({}, entry, response, call, kinds, default_binary)
        if reply is None or reply[1] != BINARY_TYPE:
            return reply
        status, _, body, extra = reply
        length = int(dict(extra)[HEADER_LENGTH])
        return (status, binary_content_type(length), body,
                [item for item in extra if item[0] != HEADER_LENGTH])

    # ---- /ping, /invocations --------------------------------------------------------------

    async def ping(self, scope: Scope, receive: Receive, send: Send, server: Server) -> Reply:
        """200 when the server is ready (live, in ping mode "live"), else an empty 400."""
        if self.sagemaker.ping_mode == "live":
            healthy = server.live()
        else:  # a strict readiness check asks the models' own (up to 5 s each)
            healthy = await in_thread(server.ready)
        return (200 if healthy else 400), JSON_TYPE, b"", []

    async def invocations(self, scope: Scope, receive: Receive, send: Send,
                          server: Server) -> Reply:
        """The default model's infer, generate or generate_stream."""
        name = self.sagemaker.default_model_name or ""
        kind = self.sagemaker.inference_type
        if kind == "generate":
            return await self.generate(scope, receive, send, server, name)
        if kind == "generate_stream":
            return await self.generate_stream(scope, receive, send, server, name)
        return await self.infer(scope, receive, send, server, name)

    # ---- Multi-model endpoints -------------------------------------------------------------

    async def list_models(self, scope: Scope, receive: Receive, send: Send,
                          server: Server) -> Reply:
        """``{"models": [{"modelName", "modelUrl"}]}``; as Triton lists them,
        a model whose version 1 is not ready is an empty object."""
        def listing() -> list[dict[str, str]]:
            return [{"modelName": name, "modelUrl": url} if _models.ready(server, name) else {}
                    for name, url in self.loaded.items()]

        return ok_json({"models": await in_thread(listing)})

    async def get_model(self, scope: Scope, receive: Receive, send: Send, server: Server,
                        model_hash: str) -> Reply:
        url = self.loaded.get(model_hash)
        if url is None:
            return 404, JSON_TYPE, b"", []
        return ok_json({"modelName": model_hash, "modelUrl": url})

    async def load_model(self, scope: Scope, receive: Receive, send: Send, server: Server,
                         model_hash: str = "") -> Reply:
        """``{"model_name": <hash>, "url": <folder>}``: register and load
        (the path's name plays no part, as in Triton)."""
        request = await self._json_body(scope, receive, "load model")
        name, url = request.get("model_name", ""), request.get("url", "")
        for key, value in (("model_name", name), ("url", url)):
            if not isinstance(value, str):
                raise InvalidArgumentError(f"Unable to parse '{key}': expected a string")
        try:
            _models.check_not_system(url)
        except _models.SystemFolderError as e:
            _log.error("%s", e)
            return 400, JSON_TYPE, b"", []
        target = _models.target_model(header(scope, TARGET_MODEL_HEADER), name)
        _log.info("Loading SageMaker TargetModel: %s", target)
        await in_thread(self.loaded.load, server, name, target, url)
        return 200, JSON_TYPE, b"", []

    async def unload_model(self, scope: Scope, receive: Receive, send: Send, server: Server,
                           model_hash: str = "") -> Reply:
        """Unload the model (and its dependents) loaded as ``model_hash``;
        an empty 404 when none was. Any error is a 400."""
        target = _models.target_model(header(scope, TARGET_MODEL_HEADER), model_hash)
        if self.loaded.get(model_hash) is None:
            return 404, JSON_TYPE, b"", []
        _log.info("Unloading SageMaker TargetModel: %s", target)
        try:
            if not await in_thread(self.loaded.unload, server, model_hash, target):
                return 404, JSON_TYPE, b"", []
        except Exception as e:
            return 400, JSON_TYPE, error_body(c.error_message(c.unavailable_if_stopped(
                server, e))), []
        return 200, JSON_TYPE, b"", []

    async def invoke(self, scope: Scope, receive: Receive, send: Send, server: Server,
                     model_hash: str) -> Reply:
        """Inference on the model loaded as ``model_hash`` (the app has
        checked it is): the target model, KServe's body."""
        target = _models.target_model(header(scope, TARGET_MODEL_HEADER), model_hash)
        _log.info("Invoking SageMaker TargetModel: %s", target)
        return await self.infer(scope, receive, send, server, target)


class MultiModelEndpoint(Endpoint):
    """A multi-model endpoint: its errors are 400, 409 or 507 (wire.py)."""

    @staticmethod
    def error_reply(error: BaseException) -> tuple[int, bytes]:
        if isinstance(error, _models.RegistrationError):
            return (409 if error.taken else 400), error_body(c.error_message(error))
        return multi_model_error_reply(error)


_MODELS_PATH = re.compile(r"/models(?:/)?([^/]+)?(/invoke)?")


class SageMakerApp:
    """The ASGI app: routes as Triton's SageMaker service matches them."""

    def __init__(self, api: SageMakerApi):
        self.api = api
        self.settings = api.sagemaker
        repository, inference = Protocols.MODEL_REPOSITORY, Protocols.INFERENCE
        self._ping = Endpoint(api, api.ping, Protocols.HEALTH, ("GET",))
        self._invocations = Endpoint(api, api.invocations, inference, ("POST",))
        self._list = MultiModelEndpoint(api, api.list_models, repository, ("GET",))
        self._get = MultiModelEndpoint(api, api.get_model, repository, ("GET",))
        self._load = MultiModelEndpoint(api, api.load_model, repository, ("POST",))
        self._unload = MultiModelEndpoint(api, api.unload_model, repository, ("DELETE",))
        self._invoke = MultiModelEndpoint(api, api.invoke, inference, ("POST",))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        root = scope.get("root_path")
        if root and path.startswith(root):
            path = path[len(root):]
        method = scope["method"]
        if path == "/ping":
            await self._ping(scope, receive, send)
            return
        if path == "/invocations":
            refusal = self.settings.inference_type_error
            if refusal is not None:
                await send_reply(send, 400, JSON_TYPE, error_body(refusal))
                return
            await self._invocations(scope, receive, send)
            return
        match = _MODELS_PATH.fullmatch(path)
        endpoint: Optional[Endpoint] = None
        if match is not None:
            name, action = match.group(1) or "", match.group(2)
            scope["path_params"] = {"model_hash": name}
            if method == "GET":
                endpoint = self._get if name else self._list
                if not name:
                    scope["path_params"] = {}
            elif method == "POST" and action:
                if self.api.loaded.get(name) is None:
                    await send_reply(send, 404, JSON_TYPE, b"")
                    return
                endpoint = self._invoke
            elif method == "POST":
                endpoint = self._load
            elif method == "DELETE":
                endpoint = self._unload
        if endpoint is None:
            await send_reply(send, 400, JSON_TYPE, b"")
            return
        await endpoint(scope, receive, send)


async def _lifespan(receive: Receive, send: Send) -> None:
    """Nothing to start or stop: the ASGI lifespan messages answered, for
    servers that send them (the package's own does not)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def create_sagemaker_app(server: c.ServerLike, settings: Optional[SageMakerSettings] = None,
                         **kwargs: Any) -> SageMakerApp:
    """An ASGI app serving Triton's SageMaker routes for ``server`` (a
    tritonserver.Server, or a callable returning one, called per request).
    ``settings`` (a SageMakerSettings), or its fields as keywords."""
    if settings is None:
        settings = SageMakerSettings(**kwargs)
    elif kwargs:
        raise InvalidArgumentError("pass either settings or their fields as keywords, not both")
    return SageMakerApp(SageMakerApi(server, settings))


class SageMaker(AsgiFrontend):
    """Serves Triton's SageMaker HTTP service for a running Server (what the
    executable's ``--allow-sagemaker`` serves on port 8080).

    ``SageMaker(server, SageMaker.Options(port=8080)).start()``, or use it
    as a context manager. Multi-model loads need a server in EXPLICIT model
    control mode (repositories are registered at run time).
    """

    _kind = "SageMaker"

    @dataclass
    class Options(SageMakerSettings, ListenOptions):
        """SageMaker frontend options: where it listens (ListenOptions';
        ``port`` is SageMaker's 8080 by default; on SageMaker's platform,
        which reaches the container from outside, ``address`` is
        "0.0.0.0"), and what it serves (SageMakerSettings': ``ping_mode``,
        ``default_model_name``, ``inference_type``, ``models_root``,
        ``unload_timeout``, ``max_input_size``, ``restricted_features``,
        ``allow_client_shm``; Triton applies ``--http-max-input-size`` and
        ``--http-restricted-api`` to this service too)."""

        port: int = 8080

    _service_name = "tritonserver-sagemaker"

    def __init__(self, server: Server, options: Optional["SageMaker.Options"] = None):
        super().__init__(server, options, SageMaker.Options)
        self.settings: SageMakerSettings = self.options
        self.app = create_sagemaker_app(server, self.settings)

    @property
    def url(self) -> str:
        """The base URL of the routes (``http://127.0.0.1:8080``: add ``/ping``...)."""
        return self.base_url


__all__ = ["SageMaker", "SageMakerApp", "SageMakerSettings", "create_sagemaker_app"]
