"""The KServe v2 HTTP/REST frontend: an ASGI app (FastAPI) and KServeHttp,
which serves it with the package's HTTP/1.1 server (_httpserver.py) on a
thread of its own.

``create_http_app(server)`` builds the app for a Server (or for a callable
returning one, resolved per request: what an application that creates its
Server later, such as a Ray Serve deployment, needs). Every endpoint is a
plain ASGI callable routed by the app: the inference path reads the body
once, decodes tensors in place and writes one response, with no per-request
framework objects.
"""

from __future__ import annotations

import base64
import binascii
import re
import time
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, MutableMapping, Optional

from tritonserver import (
    InferenceRequest,
    InferenceResponse,
    InternalError,
    InvalidArgumentError,
    Server,
    UnsupportedError,
)
from tritonserver._shared_memory import cuda_register_refusal, cuda_status
from tritonserver._trace import parse_http
from tritonserver.frontends import _common as c
from tritonserver.frontends import _json
from tritonserver.frontends._classification import Classification, http_count
from tritonserver.frontends._frontend import AsgiFrontend
from tritonserver.frontends._restricted import (
    Protocols,
    RestrictedLike,
    as_restricted,
    restriction_table,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
# (status, content type, body, extra headers); None: the handler has sent its response
Reply = Optional[tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]]

JSON_TYPE = b"application/json"
BINARY_TYPE = b"application/octet-stream"
SSE_TYPE = b"text/event-stream; charset=utf-8"
HEADER_LENGTH = b"inference-header-content-length"
# Extensions of the core's list that these frontends do not serve.
UNSERVED_EXTENSIONS = {"cuda_shared_memory"}

_json_bytes = _json.dumps


def _error_body(message: str) -> bytes:
    return _json_bytes({"error": message})


class _MethodNotAllowed(InvalidArgumentError):
    pass


class _Disconnected(Exception):
    """The client went away before its request body arrived."""


@dataclass
class HttpSettings:
    """What the app enforces (KServeHttp.Options fills it)."""

    max_input_size: int = c.DEFAULT_MAX_INPUT_SIZE
    restricted_features: RestrictedLike = None
    header_forward_pattern: str = ""
    _restrictions: dict[Protocols, tuple[str, str]] = field(default_factory=dict, repr=False)
    _forward: Optional["re.Pattern[str]"] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        size = self.max_input_size
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise InvalidArgumentError(
                f"max_input_size: expected a positive number of bytes, got {size!r}")
        self._restrictions = restriction_table(
            as_restricted(self.restricted_features, "restricted_features"))
        if not isinstance(self.header_forward_pattern, str):
            raise InvalidArgumentError("header_forward_pattern: expected a str (a regex)")
        if self.header_forward_pattern:
            try:
                self._forward = re.compile(self.header_forward_pattern, re.IGNORECASE)
            except re.error as e:
                raise InvalidArgumentError(f"header_forward_pattern: not a regex: {e}") from None


def _header(scope: Scope, name: bytes) -> Optional[bytes]:
    for key, value in scope["headers"]:
        if key == name:
            return value  # type: ignore[no-any-return]
    return None


def _choose_encoding(accept: Optional[bytes]) -> Optional[str]:
    """gzip or deflate when the client accepts one (the highest weight wins,
    the first on a tie), else None."""
    if not accept:
        return None
    best, weight = "identity", 0.0
    for part in accept.decode("latin-1").split(","):
        name, _, params = part.strip().partition(";")
        w = 1.0
        params = params.strip()
        if params.startswith("q="):
            try:
                w = float(params[2:])
            except ValueError:
                continue
        if name in ("identity", "gzip", "deflate") and w > weight:
            best, weight = name, w
    return None if best == "identity" else best


def _compress(data: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    else:
        compressor = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def _decompress(data: bytes, encoding: bytes, limit: int) -> bytes:
    name = encoding.decode("latin-1").strip().lower()
    if name in ("", "identity"):
        return data
    if name == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif name == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise UnsupportedError(f"unsupported content-encoding '{name}': use gzip, deflate "
                               "or identity")
    decompressor = zlib.decompressobj(wbits)
    try:
        out = decompressor.decompress(data, limit + 1)
    except zlib.error as e:
        raise InvalidArgumentError(f"the {name} request body cannot be decompressed: {e}") \
            from None
    if len(out) > limit or decompressor.unconsumed_tail:
        raise c.PayloadTooLarge(
            f"the decompressed request body exceeds the maximum allowed input size of "
            f"{limit} bytes")
    return out


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole request body, refusing one over ``limit`` bytes before
    reading it (Content-Length) or as soon as it passes the limit (chunked)."""
    declared = _header(scope, b"content-length")
    if declared is not None:
        try:
            length = int(declared)
        except ValueError:
            raise InvalidArgumentError("invalid Content-Length header") from None
        if length > limit:
            raise c.PayloadTooLarge(
                f"request body of {length} bytes exceeds the maximum allowed input size of "
                f"{limit} bytes")
    message = await receive()
    if message["type"] == "http.disconnect":
        raise _Disconnected()
    body: bytes = message.get("body", b"")
    total = len(body)
    if total > limit:
        raise c.PayloadTooLarge(
            f"request body exceeds the maximum allowed input size of {limit} bytes")
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected()
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            raise c.PayloadTooLarge(
                f"request body exceeds the maximum allowed input size of {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _send(send: Send, status: int, content_type: bytes, body: bytes,
                extra: Optional[list[tuple[bytes, bytes]]] = None) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Endpoint:
    """An ASGI endpoint: checks the method and restriction, runs a handler,
    turns any error into Triton's JSON error body and status."""

    def __init__(self, api: "_Api", handler: Callable[..., Awaitable[Reply]],
                 protocol: Protocols, methods: tuple[str, ...]):
        self.api = api
        self.handler = handler
        self.protocol = protocol
        self.methods = methods

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        api = self.api
        server: Optional[Server] = None
        try:
            if scope["method"] not in self.methods:
                raise _MethodNotAllowed("Method Not Allowed")
            restriction = api.restrictions.get(self.protocol) if api.restrictions else None
            if restriction is not None:
                key, value = restriction
                got = _header(scope, key.encode("latin-1"))
                if got is None or got.decode("latin-1") != value:
                    raise c.Forbidden(f"This API is restricted, expecting header '{key}'")
            server = api.server()
            reply = await self.handler(scope, receive, send, server,
                                       **scope.get("path_params", {}))
        except _Disconnected:
            return
        except Exception as e:  # every error becomes a response; the server goes on
            error: BaseException = e
            if server is not None and not isinstance(e, (c.Forbidden, c.PayloadTooLarge,
                                                          _MethodNotAllowed)):
                error = c.unavailable_if_stopped(server, e)
            status = 405 if isinstance(error, _MethodNotAllowed) else c.http_status(error)
            extra = [(b"connection", b"close")] if isinstance(error, c.PayloadTooLarge) else None
            await _send(send, status, JSON_TYPE, _error_body(c.error_message(error)), extra)
            return
        if reply is not None:
            status, content_type, body, extra = reply
            await _send(send, status, content_type, body, extra)


def _ok_json(obj: Any) -> Reply:
    return 200, JSON_TYPE, _json_bytes(obj), []


class _Api:
    """The handlers of every endpoint, for one server (or server provider)."""

    def __init__(self, server: c.ServerLike, settings: HttpSettings):
        if isinstance(server, Server):
            self.server: Callable[[], Server] = lambda: server
        elif callable(server):
            self.server = lambda: c.resolve(server)
        else:
            raise InvalidArgumentError(
                f"server: expected a tritonserver.Server or a callable returning one, "
                f"got {type(server).__name__}")
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
        if server.ready():
            return 200, JSON_TYPE, b"", []
        return 400, JSON_TYPE, _error_body("Server is not ready"), []

    async def server_metadata(self, scope: Scope, receive: Receive, send: Send,
                              server: Server) -> Reply:
        c.check_running(server)
        metadata = server.metadata()
        metadata["extensions"] = [e for e in metadata.get("extensions", [])
                                  if e not in UNSERVED_EXTENSIONS]
        return _ok_json(metadata)

    async def model_metadata(self, scope: Scope, receive: Receive, send: Send, server: Server,
                             model_name: str, model_version: str = "") -> Reply:
        model = server.model(model_name, c.parse_version(model_version))
        return _ok_json(model.metadata())

    async def model_ready(self, scope: Scope, receive: Receive, send: Send, server: Server,
                          model_name: str, model_version: str = "") -> Reply:
        model = server.model(model_name, c.parse_version(model_version))
        if model.ready():
            return 200, JSON_TYPE, b"", []
        return 400, JSON_TYPE, _error_body("Model version not ready"), []

    async def model_config(self, scope: Scope, receive: Receive, send: Send, server: Server,
                           model_name: str, model_version: str = "") -> Reply:
        model = server.model(model_name, c.parse_version(model_version))
        return _ok_json(model.config())

    async def model_stats(self, scope: Scope, receive: Receive, send: Send, server: Server,
                          model_name: str = "", model_version: str = "") -> Reply:
        model = server.model(model_name, c.parse_version(model_version))
        return _ok_json(model.statistics())

    # ---- Model repository ---------------------------------------------------------------

    async def _json_body(self, scope: Scope, receive: Receive, what: str) -> dict[str, Any]:
        body = await _read_body(scope, receive, self.max_input_size)
        if not body.strip():
            return {}
        try:
            document = _json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise InvalidArgumentError(f"failed to parse the {what} request JSON: {e}") from None
        if not isinstance(document, dict):
            raise InvalidArgumentError(f"the {what} request must be a JSON object")
        return document

    async def repository_index(self, scope: Scope, receive: Receive, send: Send,
                               server: Server, repository: str = "") -> Reply:
        if repository:
            raise UnsupportedError("'repository_name' specification is not supported")
        request = await self._json_body(scope, receive, "repository index")
        ready = request.get("ready", False)
        if not isinstance(ready, bool):
            raise InvalidArgumentError("Invalid value for 'ready': expected a boolean")
        index = []
        for model in server.models(exclude_not_ready=ready).values():
            entry: dict[str, Any] = {"name": model.name}
            if model.version >= 0:
                entry["version"] = str(model.version)
            if model.state is not None:
                entry["state"] = model.state
            if model.reason:
                entry["reason"] = model.reason
            index.append(entry)
        return _ok_json(index)

    async def repository_load(self, scope: Scope, receive: Receive, send: Send,
                              server: Server, model_name: str, repository: str = "") -> Reply:
        if repository:
            raise UnsupportedError("'repository_name' specification is not supported")
        request = await self._json_body(scope, receive, "load model")
        parameters = request.get("parameters", {})
        if not isinstance(parameters, dict):
            raise InvalidArgumentError("'parameters' must be a JSON object")
        load: dict[str, Any] = {}
        for key, value in parameters.items():
            if not isinstance(value, str):
                raise InvalidArgumentError(f"load parameter '{key}' must be a string")
            if key == "config":
                load[key] = value
            elif key.startswith("file:"):
                try:
                    load[key] = base64.b64decode(value, validate=True)
                except (binascii.Error, ValueError):
                    raise InvalidArgumentError(
                        f"load parameter '{key}' is not valid base64") from None
            else:
                raise InvalidArgumentError(
                    f"unknown load parameter '{key}': expected 'config' or 'file:<path>'")
        state = c.state_of(server)
        try:
            await _in_thread(server.load, model_name, load)
        finally:
            state.forget_models()
        return 200, JSON_TYPE, b"", []

    async def repository_unload(self, scope: Scope, receive: Receive, send: Send,
                                server: Server, model_name: str, repository: str = "") -> Reply:
        if repository:
            raise UnsupportedError("'repository_name' specification is not supported")
        request = await self._json_body(scope, receive, "unload model")
        parameters = request.get("parameters", {})
        if not isinstance(parameters, dict):
            raise InvalidArgumentError("'parameters' must be a JSON object")
        dependents = parameters.get("unload_dependents", False)
        if not isinstance(dependents, bool):
            raise InvalidArgumentError("Unable to parse 'unload_dependents': expected a boolean")
        state = c.state_of(server)
        try:
            await _in_thread(server.unload, model_name, dependents)
        finally:
            state.forget_models()
        return 200, JSON_TYPE, b"", []

    # ---- Logging, trace, shared memory ---------------------------------------------------

    async def logging(self, scope: Scope, receive: Receive, send: Send, server: Server) -> Reply:
        c.check_running(server)
        if scope["method"] == "POST":
            request = await self._json_body(scope, receive, "log settings")
            settings = c.update_log_settings(server, request)
        else:
            settings = c.log_settings(server)
        return _ok_json(settings.__dict__)

    async def trace_setting(self, scope: Scope, receive: Receive, send: Send, server: Server,
                            model_name: str = "") -> Reply:
        c.check_running(server)
        server._check_traced_model(model_name)
        if scope["method"] == "POST":
            request = await self._json_body(scope, receive, "trace setting")
            server._tracing().update(model_name, parse_http(request))
        return _ok_json(server._tracing().settings(model_name or None))

    async def shm_status(self, scope: Scope, receive: Receive, send: Send, server: Server,
                         region_name: Optional[str] = None) -> Reply:
        return _ok_json(server.system_shared_memory_status(region_name))

    async def shm_register(self, scope: Scope, receive: Receive, send: Send, server: Server,
                           region_name: str) -> Reply:
        request = await self._json_body(scope, receive, "register")
        if "key" not in request:
            raise InvalidArgumentError("Shared memory register request has no 'key' field")
        key = request["key"]
        if not isinstance(key, str):
            raise InvalidArgumentError("Unable to parse 'key': expected a string")
        numbers = {}
        for field_name in ("offset", "byte_size"):
            if field_name not in request:
                if field_name == "offset":
                    numbers[field_name] = 0
                    continue
                raise InvalidArgumentError(
                    "Shared memory register request has no 'byte_size' field")
            value = request[field_name]
            if isinstance(value, bool) or not isinstance(value, int) or \
                    not 0 <= value < 1 << 63:
                raise InvalidArgumentError(
                    f"Unable to parse '{field_name}': expected an unsigned integer")
            numbers[field_name] = value
        server.register_system_shared_memory(region_name, key, numbers["byte_size"],
                                             numbers["offset"])
        return 200, JSON_TYPE, b"", []

    async def shm_unregister(self, scope: Scope, receive: Receive, send: Send, server: Server,
                             region_name: Optional[str] = None) -> Reply:
        server.unregister_system_shared_memory(region_name)
        return 200, JSON_TYPE, b"", []

    async def cuda_shm_status(self, scope: Scope, receive: Receive, send: Send,
                              server: Server, region_name: Optional[str] = None) -> Reply:
        return _ok_json(cuda_status(server._shared_memory(), region_name))

    async def cuda_shm_register(self, scope: Scope, receive: Receive, send: Send,
                                server: Server, region_name: str) -> Reply:
        raise cuda_register_refusal(region_name)

    async def cuda_shm_unregister(self, scope: Scope, receive: Receive, send: Send,
                                  server: Server, region_name: Optional[str] = None) -> Reply:
        return 200, JSON_TYPE, b"", []  # there are no CUDA regions: nothing to do, as Triton

    # ---- Inference ---------------------------------------------------------------------

    async def infer(self, scope: Scope, receive: Receive, send: Send, server: Server,
                    model_name: str, model_version: str = "") -> Reply:
        recv_start = time.monotonic_ns() if c.tracing(server) else 0
        body = await _read_body(scope, receive, self.max_input_size)
        headers = dict(scope["headers"])
        encoding = headers.get(b"content-encoding")
        if encoding is not None:
            body = _decompress(body, encoding, self.max_input_size)
        header_length = headers.get(HEADER_LENGTH)
        version = c.parse_version(model_version)
        if header_length is not None and header_length.strip() == b"0":
            call, kinds, default_binary = await self._raw_binary_call(
                server, model_name, version, body)
        else:
            call, kinds, default_binary = self._parse_infer(
                scope, body, header_length, model_name, version)
        if recv_start:  # the trace's HTTP timestamps, as Triton's frontend takes them
            call.trace_marks = [("HTTP_RECV_START", recv_start),
                                ("HTTP_RECV_END", time.monotonic_ns())]
        response, entry = await c.infer_once(server, call, self._state_of(server))
        if call.traced is None:
            return self._infer_reply(headers, entry, response, call, kinds, default_binary)
        send_start = time.monotonic_ns()
        reply = self._infer_reply(headers, entry, response, call, kinds, default_binary)
        c.mark(call, ("HTTP_SEND_START", send_start), ("HTTP_SEND_END", time.monotonic_ns()))
        return reply

    def _state_of(self, server: Server) -> c.ServerState:
        cached = self._state
        if cached is None or cached[0] is not server:
            cached = self._state = (server, c.state_of(server))
        return cached[1]

    def _parse_infer(self, scope: Scope, body: bytes, header_length: Optional[bytes],
                     model_name: str, version: int
                     ) -> tuple[c.Call, Optional[dict[str, bool]], bool]:
        size = len(body)
        if header_length is None:
            json_end = size
        else:
            try:
                json_end = int(header_length)
            except ValueError:
                raise InvalidArgumentError(
                    f"Unable to parse Inference-Header-Content-Length, got: "
                    f"{header_length.decode('latin-1')!r}") from None
            if not 0 < json_end <= size:
                raise InvalidArgumentError(
                    f"inference header size should be in range (0, {size}], got: {json_end}")
        try:
            request = _json.loads(body if json_end == size else body[:json_end])
        except (ValueError, UnicodeDecodeError) as e:
            raise InvalidArgumentError(f"failed to parse the request JSON buffer: {e}") from None
        if not isinstance(request, dict):
            raise InvalidArgumentError("the inference request must be a JSON object")
        call = c.Call(model_name, version)
        default_binary = self._parse_parameters(call, request.get("parameters"))
        if self.forward is not None:
            for key, value in scope["headers"]:
                name = key.decode("latin-1")
                if self.forward.match(name):
                    call.parameters[name] = value.decode("latin-1")
        request_id = request.get("id")
        if request_id is not None:
            if not isinstance(request_id, str):
                raise InvalidArgumentError("Unable to parse 'id': expected a string")
            call.request_id = request_id
        inputs = request.get("inputs")
        if not isinstance(inputs, list):
            raise InvalidArgumentError("Unable to parse 'inputs': expected a list of tensors")
        offset = json_end
        for entry in inputs:
            offset = self._parse_input(call, entry, body, offset)
        if offset != size:
            if offset == json_end:
                raise InvalidArgumentError(
                    f"{size - json_end} bytes follow the inference header but no input is "
                    "binary ('binary_data_size')")
            raise InvalidArgumentError(
                f"{size - offset} bytes follow the last binary input: 'binary_data_size' "
                "values and the body disagree")
        kinds = None
        outputs = request.get("outputs")
        if outputs is not None:
            if not isinstance(outputs, list):
                raise InvalidArgumentError("Unable to parse 'outputs': expected a list")
            kinds = {}
            names = []
            for entry in outputs:
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    raise InvalidArgumentError("each requested output needs a 'name' string")
                name = entry["name"]
                binary = default_binary
                params = entry.get("parameters")
                if params is not None:
                    if not isinstance(params, dict):
                        raise InvalidArgumentError(f"output '{name}': 'parameters' must be an object")
                    if "binary_data" in params:
                        binary = params["binary_data"]
                        if not isinstance(binary, bool):
                            raise InvalidArgumentError(
                                f"output '{name}': 'binary_data' must be a boolean")
                    if "shared_memory_region" in params:
                        call.shm_outputs[name] = _shm_output(params)
                    count = http_count(params)
                    if count:
                        call.classification = Classification.including(
                            call.classification, name, count)
                names.append(name)
                kinds[name] = binary
            call.outputs = names
        return call, kinds, default_binary

    @staticmethod
    def _parse_parameters(call: c.Call, params: Any) -> bool:
        """Request parameters into the call; returns binary_data_output."""
        binary = False
        if params is None:
            return binary
        if not isinstance(params, dict):
            raise InvalidArgumentError("Unable to parse 'parameters': expected an object")
        for key, value in params.items():
            if key == "sequence_id":
                if isinstance(value, str):
                    call.correlation_id = value
                else:
                    call.correlation_id = c.unsigned(key, value)
            elif key in ("sequence_start", "sequence_end"):
                call.flags |= c.sequence_flag(key, value)
            elif key == "priority":
                call.priority = c.unsigned(key, value)
            elif key == "timeout":
                call.timeout = c.unsigned(key, value)
            elif key == "binary_data_output":
                if not isinstance(value, bool):
                    raise InvalidArgumentError("Unable to parse 'binary_data_output'")
                binary = value
            else:
                c.set_parameter(call.parameters, key, value)
        return binary

    @staticmethod
    def _parse_input(call: c.Call, entry: Any, body: bytes, offset: int) -> int:
        if not isinstance(entry, dict):
            raise InvalidArgumentError("each input must be a JSON object")
        name = entry.get("name")
        if not isinstance(name, str):
            raise InvalidArgumentError("Unable to parse 'name' of an input")
        if name in call.inputs:
            raise InvalidArgumentError(f"input '{name}' is given twice")
        datatype = c.check_datatype(name, entry.get("datatype"))
        shape = entry.get("shape")
        if not isinstance(shape, list):
            raise InvalidArgumentError(f"input '{name}': Unable to parse 'shape'")
        params = entry.get("parameters")
        size = None
        if params is not None:
            if not isinstance(params, dict):
                raise InvalidArgumentError(f"input '{name}': 'parameters' must be an object")
            if "shared_memory_region" in params:
                call.shm_inputs[name] = _shm_input(name, entry, params, datatype, shape)
                call.inputs[name] = None  # a view of the region, when the request is made
                return offset
            if "binary_data_size" in params:
                size = params["binary_data_size"]
                if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                    raise InvalidArgumentError(
                        f"input '{name}': 'binary_data_size' must be a non-negative integer")
        if size is not None:
            if "data" in entry:
                raise InvalidArgumentError(
                    f"input '{name}': give either 'data' or 'binary_data_size', not both")
            if offset + size > len(body):
                raise InvalidArgumentError(
                    f"unexpected size for input '{name}', expecting {offset + size - len(body)} "
                    f"additional bytes for model '{call.model_name}'")
            call.inputs[name] = c.tensor_from_buffer(name, datatype, shape, body, offset, size)
            end: int = offset + size
            return end
        if "data" not in entry:
            raise InvalidArgumentError(
                f"input '{name}': expected 'data' or a 'binary_data_size' parameter")
        call.inputs[name] = c.tensor_from_list(name, datatype, shape, entry["data"])
        return offset

    async def _raw_binary_call(self, server: Server, model_name: str, version: int,
                               body: bytes) -> tuple[c.Call, Optional[dict[str, bool]], bool]:
        """Inference-Header-Content-Length 0: the body is the only input's data."""
        model = server.model(model_name, version)
        metadata = model.metadata()
        inputs = metadata.get("inputs", [])
        if len(inputs) != 1:
            raise InvalidArgumentError(
                f"a raw binary request needs a model with exactly 1 input; '{model_name}' "
                f"has {len(inputs)}")
        spec = inputs[0]
        datatype = spec["datatype"]
        shape = [int(d) for d in spec["shape"]]
        if model.config().get("max_batch_size", 0) > 0 and shape:
            shape[0] = 1
        if datatype == "BYTES":
            if [d for d in shape if d != 1 and d != -1] or shape.count(-1) > 1:
                raise InvalidArgumentError(
                    "a raw binary request of BYTES needs an input of shape [1]")
            shape = [1 for _ in shape] or [1]
        else:
            variable = [i for i, d in enumerate(shape) if d == -1]
            if len(variable) > 1:
                raise InvalidArgumentError(
                    "a raw binary request needs an input with at most one variable dimension")
            if variable:
                fixed = c.nbytes_of([d for d in shape if d != -1], datatype)
                if fixed == 0 or len(body) % fixed:
                    raise InvalidArgumentError(
                        f"{len(body)} bytes cannot be a whole {datatype} tensor of shape {shape}")
                shape[variable[0]] = len(body) // fixed
        call = c.Call(model_name, version)
        call.inputs[spec["name"]] = c.tensor_from_buffer(
            spec["name"], datatype, shape, body, 0, len(body))
        return call, None, True

    def _infer_reply(self, headers: dict[bytes, bytes], entry: c.ModelEntry,
                     response: InferenceResponse,
                     call: c.Call, kinds: Optional[dict[str, bool]],
                     default_binary: bool) -> Reply:
        document: dict[str, Any] = {"model_name": call.model_name,
                                    "model_version": c.model_version(entry, call.version)}
        if response.request_id:
            document["id"] = response.request_id
        if response.parameters:
            document["parameters"] = response.parameters
        outputs = []
        buffers: list[Any] = []
        for name, tensor in response.outputs.items():
            datatype = c.DATATYPE_NAME[int(tensor.data_type)]
            out: dict[str, Any] = {"name": name, "datatype": datatype,
                                   "shape": c.shape_list(tensor)}
            binary = default_binary if kinds is None else kinds[name]
            if name in call.shm_outputs:
                pass  # written into its region: neither data nor parameters, as Triton
            elif binary:
                view = c.tensor_bytes(tensor)
                out["parameters"] = {"binary_data_size": len(view)}
                if len(view):
                    buffers.append(view)
            else:
                out["data"] = c.tensor_to_list(name, tensor)
            outputs.append(out)
        document["outputs"] = outputs
        header = _json_bytes(document)
        extra: list[tuple[bytes, bytes]] = []
        if buffers:
            body = b"".join([header, *buffers])
            content_type = BINARY_TYPE
            extra.append((HEADER_LENGTH, str(len(header)).encode()))
        else:
            body = header
            content_type = JSON_TYPE
        encoding = _choose_encoding(headers.get(b"accept-encoding"))
        if encoding is not None:
            body = _compress(body, encoding)
            extra.append((b"content-encoding", encoding.encode()))
        return 200, content_type, body, extra

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
        encoding = _header(scope, b"content-encoding")
        if encoding is not None and encoding.strip().lower() not in (b"", b"identity"):
            raise InvalidArgumentError("Unsupported content-encoding, only 'identity' is "
                                       "supported.")
        request = await self._json_body(scope, receive, "generate")
        entry = c.state_of(server).entry(server, model_name, version)
        model = entry.model
        call = _generate_call(model, model_name, version, request)
        iterator = model.async_infer(call.request(model) or InferenceRequest(
            model=model, inputs=call.inputs), raise_on_error=False)
        try:
            if not stream:
                return await _generate_once(iterator, call, entry)
            await _generate_events(iterator, call, entry, send, receive)
            return None
        finally:
            iterator.cancel()


def _shm_place(params: dict[str, Any]) -> c.ShmRef:
    """A tensor's shared_memory_* parameters (Triton's texts)."""
    region = params["shared_memory_region"]
    if not isinstance(region, str):
        raise InvalidArgumentError("Unable to parse 'shared_memory_region'")
    numbers = []
    for key in ("shared_memory_offset", "shared_memory_byte_size"):
        value = params.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 63:
            raise InvalidArgumentError(f"Unable to parse '{key}'")
        numbers.append(value)
    return c.ShmRef(region, numbers[0], numbers[1])


def _shm_input(name: str, entry: dict[str, Any], params: dict[str, Any], datatype: str,
               shape: list[Any]) -> c.ShmRef:
    given = [what for what, present in (("'data'", "data" in entry),
                                         ("'binary_data_size'", "binary_data_size" in params))
             if present]
    if given:
        raise InvalidArgumentError(
            "Input must set only one of the following fields: 'data', 'binary_data_size' in "
            "'parameters', 'shared_memory_region' in 'parameters'. But set "
            + " ".join(given) + " 'shared_memory_region'")
    ref = _shm_place(params)
    c.element_count(name, shape)
    ref.datatype, ref.shape = datatype, shape
    return ref


def _shm_output(params: dict[str, Any]) -> c.ShmRef:
    if params.get("classification"):
        raise InvalidArgumentError(
            "Output can't set both 'shared_memory_region' and 'classification'")
    if params.get("binary_data") is True:
        raise InvalidArgumentError(
            "Output can't set both 'shared_memory_region' and 'binary_data'")
    return _shm_place(params)


def _generate_call(model: Any, model_name: str, version: int, request: dict[str, Any]) -> c.Call:
    """Generate-request JSON to a call: keys naming model inputs become
    tensors (scalar or 1-D list, shaped by the model's metadata), "parameters"
    and every other key become request parameters; "id" is the request id."""
    specs = {spec["name"]: spec for spec in model.metadata().get("inputs", [])}
    call = c.Call(model_name, version)
    for key, value in request.items():
        if key in specs:
            spec = specs[key]
            shape = _generate_shape(key, [int(d) for d in spec["shape"]],
                                    len(value) if isinstance(value, list) else 1)
            call.inputs[key] = c.tensor_from_list(key, spec["datatype"], shape, value)
        elif key == "id":
            if not isinstance(value, str):
                raise InvalidArgumentError("Unable to parse 'id': expected a string")
            call.request_id = value
        elif key == "parameters":
            if not isinstance(value, dict):
                raise InvalidArgumentError("Expected JSON object for keyword: 'parameters'")
            for name, item in value.items():
                c.set_parameter(call.parameters, name, item)
        else:
            c.set_parameter(call.parameters, key, value)
    return call


def _generate_shape(name: str, shape: list[int], count: int) -> list[int]:
    """A model input's shape filled for ``count`` elements: fixed dimensions
    take their share, the innermost variable one the rest, others 1."""
    remaining = count
    for d in shape:
        if d > 0:
            if remaining % d:
                raise InvalidArgumentError(
                    f"The schema can not convert input '{name}' to tensor with proper shape")
            remaining //= d
        elif d == 0 and count:
            raise InvalidArgumentError(
                f"The schema can not convert input '{name}' to tensor with proper shape")
    out = list(shape)
    for i in range(len(out) - 1, -1, -1):
        if out[i] == -1:
            out[i] = remaining
            remaining = 1
    if remaining != 1 and count:
        raise InvalidArgumentError(
            f"The schema can not convert input '{name}' to tensor with proper shape")
    return out


def _generate_document(response: InferenceResponse, call: c.Call,
                       entry: c.ModelEntry) -> dict[str, Any]:
    document: dict[str, Any] = {}
    if response.request_id:
        document["id"] = response.request_id
    document["model_name"] = call.model_name
    document["model_version"] = c.model_version(entry, call.version)
    for key, value in response.parameters.items():
        document[key] = value
    for name, tensor in response.outputs.items():
        values = c.tensor_to_list(name, tensor)
        document[name] = values[0] if len(values) == 1 else values
    return document


async def _generate_once(iterator: Any, call: c.Call, entry: c.ModelEntry) -> Reply:
    responses = []
    async for response in iterator:
        if response.error is not None:
            raise response.error
        if response.outputs or response.parameters or not response.final:
            responses.append(response)
    if len(responses) != 1:
        raise InternalError("generate expects model to produce exactly 1 response, use "
                            "generate stream for model that generates various number of "
                            "responses")
    return _ok_json(_generate_document(responses[0], call, entry))


async def _generate_events(iterator: Any, call: c.Call, entry: c.ModelEntry,
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


async def _send_events(iterator: Any, call: c.Call, entry: c.ModelEntry, send: Send,
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
                event = _json_bytes(_generate_document(response, call, entry))
            except Exception as e:  # an output JSON cannot carry
                failed = e
        if failed is not None:
            if not started:
                raise failed  # nothing sent yet: a plain JSON error with its status
            event = _error_body(c.error_message(failed))
        if not started:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", SSE_TYPE), (b"cache-control", b"no-cache")]})
            started = True
        await send({"type": "http.response.body", "body": b"data: " + event + b"\n\n",
                    "more_body": True})
        if failed is not None:
            iterator.cancel()
            break
    if not started:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", SSE_TYPE), (b"cache-control", b"no-cache")]})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking core call (model load/unload) off the event loop."""
    import asyncio

    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


# ---- The app ------------------------------------------------------------------------------

_INFER_PATH = re.compile(r"/v2/models/([^/]+)(?:/versions/([^/]+))?/infer")


def _app_class() -> type:
    from fastapi import FastAPI

    class TritonHttpApp(FastAPI):  # type: ignore[misc, unused-ignore]
        """The FastAPI app, with the inference path dispatched before the
        framework's layers (while no user middleware is installed: with one,
        every request goes through FastAPI)."""

        triton_infer: Optional[_Endpoint] = None

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
    serves it with the package's own (_httpserver.py).
    """
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    if settings is None:
        settings = HttpSettings(**kwargs)
    elif kwargs:
        raise InvalidArgumentError("pass either settings or their fields as keywords, not both")
    api = _Api(server, settings)

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return Response(_error_body(str(detail)), status_code=status,
                        media_type="application/json")

    app = _app_class()(title="tritonserver: KServe v2 HTTP/REST", docs_url=None,
                       redoc_url=None, openapi_url=None,
                       exception_handlers={HTTPException: http_error})
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
        endpoint = _Endpoint(api, handler, protocol, methods)
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
          (Triton's ``--http-max-input-size``); larger ones get 413 before
          their body is read.
        - ``restricted_features``: API groups that need a header (see
          RestrictedFeatures), e.g. ``["model-repository,logging:admin=secret"]``.
        """

        address: str = "127.0.0.1"
        port: int = 8000
        reuse_port: bool = False
        thread_count: int = 1
        header_forward_pattern: str = ""
        max_input_size: int = c.DEFAULT_MAX_INPUT_SIZE
        restricted_features: RestrictedLike = None

    _service_name = "tritonserver-http"

    def __init__(self, server: Server, options: Optional["KServeHttp.Options"] = None):
        super().__init__(server, options, KServeHttp.Options)
        o = self.options
        self.settings = HttpSettings(max_input_size=o.max_input_size,
                                     restricted_features=o.restricted_features,
                                     header_forward_pattern=o.header_forward_pattern)
        self.app = create_http_app(server, self.settings)

    @property
    def url(self) -> str:
        """``host:port`` as tritonclient takes it."""
        host = self.options.address
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
