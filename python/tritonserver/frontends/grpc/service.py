"""The gRPC frontend: ``inference.GRPCInferenceService`` (every RPC that
needs no shared memory, ModelStreamInfer included) and the standard
``grpc.health.v1.Health`` service, on grpcio's server.

grpcio's synchronous server (a thread pool) rather than its asyncio one:
measured with tritonclient against a server that answers without doing
anything, pinned to one CPU, the synchronous one serves about 1.3 times the
requests of the asyncio one one at a time and 2.3 times with 64 in flight
(docs/serving.md). Each RPC waits for the core on its thread, without the GIL.

The messages come from our own .proto files, compiled at first use into a
private descriptor pool (_protos.py). Handlers are registered generically:
no generated service code is involved.
"""

from __future__ import annotations

import concurrent.futures
import enum
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from tritonserver import InvalidArgumentError, Server, UnavailableError
from tritonserver._enum_names import named
from tritonserver.frontends.grpc.trace import parse_grpc
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends.dataplane import metadata as _metadata
from tritonserver.frontends.dataplane import repository as _repository
from tritonserver.frontends.dataplane import shared_memory as _shm
from tritonserver.frontends._frontend import (
    Frontend,
    check_bool,
    check_int,
    check_socket_options,
)
from tritonserver.frontends.grpc.codec import (
    grpc_code_name,
    call_from_request,
    infer_response,
    parameter_value,
    parse_message,
)
from tritonserver.frontends.grpc.stream import InferStream
from tritonserver.frontends.dataplane.inference import (
    AnswerOnce,
    mark,
    model_version,
    once_entry,
    send_request,
    trace_start,
    tracing,
)
from tritonserver.frontends.dataplane.headers import forward_headers, forward_regex
from tritonserver.frontends.dataplane.log_settings import log_settings_request
from tritonserver.frontends.grpc.protos import Messages, messages
from tritonserver.frontends._restricted import (
    GRPC_KEY_PREFIX,
    Protocols,
    RestrictedLike,
    as_restricted,
    restriction_table,
)
from tritonserver.frontends._runner import JOIN_GRACE_S
from tritonserver.frontends.dataplane.trace_settings import check_trace_request, trace_settings

SERVICE = "inference.GRPCInferenceService"
HEALTH_SERVICE = "grpc.health.v1.Health"
WATCH_INTERVAL_S = 1.0
INT32_MAX = 2**31 - 1



@named
class Grpc_compression_level(enum.IntEnum):  # noqa: N801 - tritonfrontend's name
    """Compression of inference responses (tritonfrontend's enum). grpcio
    compresses with gzip; it has no levels, so LOW, MED and HIGH all mean gzip."""

    NONE = 0
    LOW = 1
    MED = 2
    HIGH = 3
    COUNT = 4


def _read_file(field: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise InvalidArgumentError(f"{field}: cannot read {path!r}: {e.strerror or e}") from None


# ---- The service ----------------------------------------------------------------------------


class _InFlight:
    """The core requests a frontend's RPCs are waiting on, so that stop()
    can cancel what is left when its grace runs out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._iterators: set[Any] = set()
        self.closed = False

    def add(self, iterator: Any) -> None:
        with self._lock:
            self._iterators.add(iterator)
            closed = self.closed
        if closed:
            iterator.cancel()

    def discard(self, iterator: Any) -> None:
        with self._lock:
            self._iterators.discard(iterator)

    def cancel_all(self) -> int:
        with self._lock:
            self.closed = True
            iterators = list(self._iterators)
        for iterator in iterators:
            try:
                iterator.cancel()
            except Exception:
                pass
        return len(iterators)


class _Service:
    """The RPC handlers for one server, run by grpcio's synchronous server
    on its thread pool: an inference call waits for the core without the GIL."""

    forward: Any = None  # the header forward pattern: metadata forwarded as parameters

    def __init__(self, server: Server, m: Messages, restrictions: dict[Protocols, tuple[str, str]],
                 compress: bool, client_shm: bool = False):
        self.server = server
        self.m = m
        self.restrictions = restrictions
        self.compress = compress
        self.client_shm = client_shm  # clients may use shared memory (allow_client_shm)
        self.state = c.state_of(server)
        self.inflight = _InFlight()

    # ---- plumbing ----

    def _check_restriction(self, protocol: Protocols, context: Any) -> None:
        rule = self.restrictions.get(protocol)
        if rule is None:
            return
        key, value = rule
        for k, v in context.invocation_metadata() or ():
            if k == key and v == value:
                return
        raise c.Forbidden(f"This protocol is restricted, expecting header '{key}'")

    def _abort(self, context: Any, error: BaseException) -> None:
        import grpc  # type: ignore[import-untyped, unused-ignore]

        if not isinstance(error, (c.Forbidden, c.PayloadTooLarge)):
            error = c.unavailable_if_stopped(self.server, error)
        code = getattr(grpc.StatusCode, grpc_code_name(error))
        context.abort(code, c.error_message(error))  # raises: ends the RPC

    def unary(self, protocol: Protocols, fn: Callable[[Any, Any], Any],
              request_type: Any) -> Callable[[bytes, Any], Any]:
        """An RPC handler: parses the request (a malformed message is
        INVALID_ARGUMENT, not grpc's INTERNAL), checks the restriction, runs
        ``fn`` and turns its errors into the RPC's status."""
        def handler(data: bytes, context: Any) -> Any:
            try:
                if self.restrictions:
                    self._check_restriction(protocol, context)
                return fn(parse_message(request_type, data), context)
            except Exception as e:
                if _is_abort(e):
                    raise
                self._abort(context, e)

        return handler

    # ---- health and metadata ----

    def server_live(self, request: Any, context: Any) -> Any:
        return self.m.ServerLiveResponse(live=c.running(self.server))

    def server_ready(self, request: Any, context: Any) -> Any:
        return self.m.ServerReadyResponse(ready=_metadata.server_ready(self.server))

    def model_ready(self, request: Any, context: Any) -> Any:
        c.check_running(self.server)
        model = _metadata.model(self.server, request.name, request.version)
        return self.m.ModelReadyResponse(ready=model.ready())

    def server_metadata(self, request: Any, context: Any) -> Any:
        metadata = _metadata.server_metadata(self.server)
        return self.m.ServerMetadataResponse(
            name=metadata.get("name", ""), version=metadata.get("version", ""),
            extensions=metadata["extensions"])

    def model_metadata(self, request: Any, context: Any) -> Any:
        return _from_dict(_metadata.model_metadata(self.server, request.name, request.version),
                          self.m.ModelMetadataResponse())

    def model_config(self, request: Any, context: Any) -> Any:
        config = _metadata.model_config(self.server, request.name, request.version)
        return self.m.ModelConfigResponse(config=_from_dict(config, self.m.ModelConfig()))

    def model_statistics(self, request: Any, context: Any) -> Any:
        statistics = _metadata.model_statistics(self.server, request.name, request.version)
        return _from_dict(statistics, self.m.ModelStatisticsResponse())

    # ---- repository ----

    def repository_index(self, request: Any, context: Any) -> Any:
        _repository.check_repository(request.repository_name)
        out = self.m.RepositoryIndexResponse()
        for entry in _repository.index(self.server, request.ready):
            out.models.add(name=entry["name"], version=entry.get("version", ""),
                           state=entry.get("state", ""), reason=entry.get("reason", ""))
        return out

    def repository_load(self, request: Any, context: Any) -> Any:
        _repository.check_repository(request.repository_name)
        parameters = {key: parameter_value(p) for key, p in request.parameters.items()}
        _repository.load(self.server, request.model_name, parameters)
        return self.m.RepositoryModelLoadResponse()

    def repository_unload(self, request: Any, context: Any) -> Any:
        _repository.check_repository(request.repository_name)
        dependents = False
        for key, p in request.parameters.items():
            if key == "unload_dependents":
                if p.WhichOneof("parameter_choice") != "bool_param":
                    raise InvalidArgumentError(
                        "invalid value type for 'unload_dependents', expected bool_param")
                dependents = p.bool_param
        _repository.unload(self.server, request.model_name, dependents)
        return self.m.RepositoryModelUnloadResponse()

    # ---- logging, trace, shared memory ----

    def log_settings(self, request: Any, context: Any) -> Any:
        changes = {key: parameter_value(v) for key, v in request.settings.items()}
        out = self.m.LogSettingsResponse()
        for key, value in log_settings_request(self.server, changes).items():
            target = out.settings[key]
            if isinstance(value, bool):
                target.bool_param = value
            elif isinstance(value, int):
                target.uint32_param = value
            else:
                target.string_param = value
        return out

    def trace_setting(self, request: Any, context: Any) -> Any:
        check_trace_request(self.server, request.model_name)
        update = None
        if request.settings:
            update = parse_grpc({key: list(v.value) for key, v in request.settings.items()})
        out = self.m.TraceSettingResponse()
        for key, value in trace_settings(self.server, request.model_name, update).items():
            out.settings[key].value.extend(value if isinstance(value, list) else [value])
        return out

    def shm_status(self, request: Any, context: Any) -> Any:
        return _status_message(self.m.SystemSharedMemoryStatusResponse(),
                               _shm.status(self.server, request.name or None))

    def shm_register(self, request: Any, context: Any) -> Any:
        _shm.register(self.server, self.client_shm, request.name, request.key,
                      request.byte_size, request.offset)
        return self.m.SystemSharedMemoryRegisterResponse()

    def shm_unregister(self, request: Any, context: Any) -> Any:
        _shm.unregister(self.server, self.client_shm, request.name)
        return self.m.SystemSharedMemoryUnregisterResponse()

    def cuda_shm_status(self, request: Any, context: Any) -> Any:
        return _status_message(self.m.CudaSharedMemoryStatusResponse(),
                               _shm.cuda_status(self.server, request.name or None))

    def cuda_shm_register(self, request: Any, context: Any) -> Any:
        _shm.cuda_register(self.server, self.client_shm, request.name, request.raw_handle,
                           request.device_id, request.byte_size)
        return self.m.CudaSharedMemoryRegisterResponse()

    def cuda_shm_unregister(self, request: Any, context: Any) -> Any:
        _shm.cuda_unregister(self.server, self.client_shm, request.name)
        return self.m.CudaSharedMemoryUnregisterResponse()

    # ---- inference ----

    def model_infer(self, request: Any, context: Any) -> Any:
        read = time.monotonic_ns() if tracing(self.server) else 0
        call, _ = call_from_request(request)
        metadata = context.invocation_metadata() or ()
        forward_headers(self.forward, metadata, call.parameters)
        if read:  # the trace's gRPC timestamps, as Triton's frontend takes them
            trace_start(call, metadata, ("GRPC_WAITREAD_START", read),
                        ("GRPC_WAITREAD_END", time.monotonic_ns()))
        entry = once_entry(self.state, self.server, call,
                           "ModelInfer RPC doesn't support models with decoupled transaction "
                           "policy; use ModelStreamInfer")
        iterator = send_request(call, self.server, entry, asynchronous=False,
                                client_shm=self.client_shm)
        self.inflight.add(iterator)
        # A call the client cancels (or leaves) cancels its request in the
        # core, as Triton's frontend does; after an answer it does nothing.
        context.add_callback(iterator.cancel)
        try:
            with AnswerOnce(call, iterator, "ModelStreamInfer") as once:
                for r in iterator:
                    if once.take(r):
                        break
        finally:
            self.inflight.discard(iterator)
        response = once.response()
        if self.compress:
            import grpc  # type: ignore[import-untyped, unused-ignore]

            context.set_compression(grpc.Compression.Gzip)
        if call.traced is None:
            return infer_response(self.m, response, call, model_version(entry, call.model_version))
        send_start = time.monotonic_ns()
        out = infer_response(self.m, response, call, model_version(entry, call.model_version))
        mark(call, ("INFER_RESPONSE_COMPLETE", send_start), ("GRPC_SEND_START", send_start),
             ("GRPC_SEND_END", time.monotonic_ns()))
        return out

    def model_stream_infer(self, requests: Iterator[bytes], context: Any) -> Iterator[Any]:
        if self.restrictions:
            try:
                self._check_restriction(Protocols.INFERENCE, context)
            except Exception as e:
                self._abort(context, e)
        if self.compress:
            import grpc  # type: ignore[import-untyped, unused-ignore]

            context.set_compression(grpc.Compression.Gzip)
        stream = InferStream(self.server, self.state, self.m, self.inflight, self.client_shm)
        context.add_callback(stream.cancel)  # when the call ends, cancelled or not
        metadata = tuple(context.invocation_metadata() or ())
        # The stream's metadata, for each of its requests: headers forwarded
        # as parameters, and the trace context (traceparent) they continue.
        stream.forward = self.forward
        stream.headers = metadata
        if (GRPC_ERROR_KEY, "true") in metadata:
            # Triton's triton_grpc_error mode: the first error response ends
            # the stream with its status (the core's code as gRPC's).
            stream.end_on_error = lambda error: self._abort(context, error)
        return stream.responses(requests)

    # ---- gRPC health ----

    def _health_status(self, service: str) -> int:
        status = self.m.HealthCheckResponse.ServingStatus
        if service not in ("", SERVICE):
            return int(status.Value("SERVICE_UNKNOWN"))
        # As Triton's own health service: serving while the server runs (its
        # readiness, which model loads and unloads change, is ServerReady's).
        return int(status.Value("SERVING" if c.running(self.server) else "NOT_SERVING"))

    def health_check(self, request: Any, context: Any) -> Any:
        status = self._health_status(request.service)
        if status == self.m.HealthCheckResponse.ServingStatus.Value("SERVICE_UNKNOWN"):
            from tritonserver import NotFoundError

            raise NotFoundError(f"unknown service '{request.service}'")
        return self.m.HealthCheckResponse(status=status)

    def health_watch(self, data: bytes, context: Any) -> Iterator[Any]:
        try:
            if self.restrictions:
                self._check_restriction(Protocols.HEALTH, context)
            request = parse_message(self.m.HealthCheckRequest, data)
        except Exception as e:
            self._abort(context, e)
            return
        last = None
        while context.is_active() and not self.inflight.closed:
            status = self._health_status(request.service)
            if status != last:
                last = status
                yield self.m.HealthCheckResponse(status=status)
            time.sleep(WATCH_INTERVAL_S)

    # ---- registration ----

    def handlers(self) -> list[Any]:
        import grpc  # type: ignore[import-untyped, unused-ignore]

        m = self.m
        P = Protocols

        def unary(name: str, protocol: Protocols, fn: Callable[[Any, Any], Any],
                  request_type: Any, response_type: Any) -> tuple[str, Any]:
            return name, grpc.unary_unary_rpc_method_handler(
                self.unary(protocol, fn, request_type),
                response_serializer=response_type.SerializeToString)

        table = dict([
            unary("ServerLive", P.HEALTH, self.server_live, m.ServerLiveRequest,
                  m.ServerLiveResponse),
            unary("ServerReady", P.HEALTH, self.server_ready, m.ServerReadyRequest,
                  m.ServerReadyResponse),
            unary("ModelReady", P.HEALTH, self.model_ready, m.ModelReadyRequest,
                  m.ModelReadyResponse),
            unary("ServerMetadata", P.METADATA, self.server_metadata, m.ServerMetadataRequest,
                  m.ServerMetadataResponse),
            unary("ModelMetadata", P.METADATA, self.model_metadata, m.ModelMetadataRequest,
                  m.ModelMetadataResponse),
            unary("ModelInfer", P.INFERENCE, self.model_infer, m.ModelInferRequest,
                  m.ModelInferResponse),
            unary("ModelConfig", P.MODEL_CONFIG, self.model_config, m.ModelConfigRequest,
                  m.ModelConfigResponse),
            unary("ModelStatistics", P.STATISTICS, self.model_statistics,
                  m.ModelStatisticsRequest, m.ModelStatisticsResponse),
            unary("RepositoryIndex", P.MODEL_REPOSITORY, self.repository_index,
                  m.RepositoryIndexRequest, m.RepositoryIndexResponse),
            unary("RepositoryModelLoad", P.MODEL_REPOSITORY, self.repository_load,
                  m.RepositoryModelLoadRequest, m.RepositoryModelLoadResponse),
            unary("RepositoryModelUnload", P.MODEL_REPOSITORY, self.repository_unload,
                  m.RepositoryModelUnloadRequest, m.RepositoryModelUnloadResponse),
            unary("LogSettings", P.LOGGING, self.log_settings, m.LogSettingsRequest,
                  m.LogSettingsResponse),
            unary("TraceSetting", P.TRACE, self.trace_setting, m.TraceSettingRequest,
                  m.TraceSettingResponse),
        ])
        shm = {"System": {"Status": self.shm_status, "Register": self.shm_register,
                          "Unregister": self.shm_unregister},
               "Cuda": {"Status": self.cuda_shm_status, "Register": self.cuda_shm_register,
                        "Unregister": self.cuda_shm_unregister}}
        for kind in ("System", "Cuda"):
            for action in ("Status", "Register", "Unregister"):
                name = f"{kind}SharedMemory{action}"
                handler = shm[kind][action]
                table.update([unary(name, P.SHM_MEMORY, handler,
                                    getattr(m, name + "Request"), getattr(m, name + "Response"))])
        table["ModelStreamInfer"] = grpc.stream_stream_rpc_method_handler(
            self.model_stream_infer,
            response_serializer=m.ModelStreamInferResponse.SerializeToString)
        health = {
            "Check": grpc.unary_unary_rpc_method_handler(
                self.unary(P.HEALTH, self.health_check, m.HealthCheckRequest),
                response_serializer=m.HealthCheckResponse.SerializeToString),
            "Watch": grpc.unary_stream_rpc_method_handler(
                self.health_watch,
                response_serializer=m.HealthCheckResponse.SerializeToString),
        }
        return [grpc.method_handlers_generic_handler(SERVICE, table),
                grpc.method_handlers_generic_handler(HEALTH_SERVICE, health)]


def _from_dict(values: dict[str, Any], message: Any) -> Any:
    """A message filled from the JSON form of its fields (unknown ones ignored)."""
    from google.protobuf import json_format  # type: ignore[import-untyped, unused-ignore]

    return json_format.ParseDict(values, message, ignore_unknown_fields=True)


def _status_message(out: Any, regions: list[dict[str, Any]]) -> Any:
    """A shared memory status response: each region's fields (the message's
    own names) in its entry of ``out.regions``."""
    for region in regions:
        entry = out.regions[region["name"]]
        for key, value in region.items():
            setattr(entry, key, value)
    return out


# The stream metadata that turns Triton's triton_grpc_error mode on (value "true").
GRPC_ERROR_KEY = "triton_grpc_error"


def _is_abort(error: BaseException) -> bool:
    """grpc.aio's context.abort() raises its own exception: let it through."""
    return type(error).__name__ in ("AbortError", "UsageError", "InternalError") and \
        type(error).__module__.startswith("grpc")


# ---- The frontend -------------------------------------------------------------------------------


class KServeGrpc(Frontend):
    """Serves ``inference.GRPCInferenceService`` (and ``grpc.health.v1.Health``)
    for a running Server, on grpcio's server and threads of its own.

    ``KServeGrpc(server, KServeGrpc.Options(port=8001)).start()``, or use it
    as a context manager.
    """

    _kind = "gRPC"
    Grpc_compression_level = Grpc_compression_level

    @dataclass
    class Options:
        """gRPC frontend options (names as in NVIDIA's tritonfrontend).

        Socket: ``address`` (loopback unless you say otherwise), ``port`` (0:
        the system chooses; read ``.port``), ``reuse_port``.
        TLS: ``use_ssl`` with ``server_cert`` and ``server_key`` (PEM file
        paths); ``root_cert`` and ``use_mutual_auth`` to require client
        certificates signed by that root.
        Keepalive (grpc core channel arguments of the same names):
        ``keepalive_time_ms``, ``keepalive_timeout_ms``,
        ``keepalive_permit_without_calls``, ``http2_max_pings_without_data``,
        ``http2_min_recv_ping_interval_without_data_ms``,
        ``http2_max_ping_strikes``, ``max_connection_age_ms`` and
        ``max_connection_age_grace_ms`` (0: not set).
        ``infer_compression_level``: compress inference responses (gzip) unless NONE.
        ``max_input_size``: the largest request message, in bytes
        (RESOURCE_EXHAUSTED beyond it).
        ``allow_client_shm``: clients may register, unregister and use
        system and CUDA shared memory regions (Triton's ``--allow-client-shm``;
        off: a region names any shared memory object this process can open).
        ``restricted_features``: protocol groups that need a metadata key
        (sent as ``triton-grpc-protocol-<key>``), see RestrictedFeatures.
        ``infer_thread_count``: threads running RPCs (an RPC holds one while
        it runs; an open stream or health Watch holds one for its life), and
        as many more running the requests of streams.
        ``forward_header_pattern``: a regex; request metadata whose keys it
        finds (case-insensitively unless it starts with ``(?-i)``) are passed
        to the model as request parameters, as Triton's
        ``--grpc-header-forward-pattern`` does.
        ``infer_allocation_pool_size`` and ``max_response_pool_size`` are
        accepted for compatibility: there are no allocation pools to size.
        """

        address: str = "127.0.0.1"
        port: int = 8001
        reuse_port: bool = False
        use_ssl: bool = False
        server_cert: str = ""
        server_key: str = ""
        root_cert: str = ""
        use_mutual_auth: bool = False
        keepalive_time_ms: int = 7_200_000
        keepalive_timeout_ms: int = 20_000
        keepalive_permit_without_calls: bool = False
        http2_max_pings_without_data: int = 2
        http2_min_recv_ping_interval_without_data_ms: int = 300_000
        http2_max_ping_strikes: int = 2
        max_connection_age_ms: int = 0
        max_connection_age_grace_ms: int = 0
        infer_compression_level: Any = Grpc_compression_level.NONE
        infer_thread_count: int = 32
        infer_allocation_pool_size: int = 8
        max_response_pool_size: int = INT32_MAX
        forward_header_pattern: str = ""
        max_input_size: int = c.DEFAULT_MAX_INPUT_SIZE
        restricted_features: RestrictedLike = None
        allow_client_shm: bool = False

    def __init__(self, server: Server, options: Optional["KServeGrpc.Options"] = None):
        super().__init__(server, options, KServeGrpc.Options)
        o = self.options
        name = "KServeGrpc.Options"
        check_socket_options("KServeGrpc", o)
        for flag in ("use_ssl", "use_mutual_auth", "keepalive_permit_without_calls",
                     "allow_client_shm"):
            check_bool(f"{name}.{flag}", getattr(o, flag))
        for number in ("keepalive_time_ms", "keepalive_timeout_ms",
                       "http2_max_pings_without_data",
                       "http2_min_recv_ping_interval_without_data_ms", "http2_max_ping_strikes",
                       "max_connection_age_ms", "max_connection_age_grace_ms",
                       "infer_thread_count", "infer_allocation_pool_size",
                       "max_response_pool_size"):
            check_int(f"{name}.{number}", getattr(o, number), 0, INT32_MAX)
        check_int(f"{name}.max_input_size", o.max_input_size, 1, INT32_MAX)
        try:
            self._compression = Grpc_compression_level(o.infer_compression_level)
        except ValueError:
            raise InvalidArgumentError(
                f"{name}.infer_compression_level: expected a Grpc_compression_level, got "
                f"{o.infer_compression_level!r}") from None
        if self._compression == Grpc_compression_level.COUNT:
            raise InvalidArgumentError(f"{name}.infer_compression_level: COUNT is not a level")
        self._forward = forward_regex(o.forward_header_pattern, f"{name}.forward_header_pattern")
        self._credentials: Optional[tuple[bytes, bytes, Optional[bytes]]] = None
        if o.use_ssl:
            if not o.server_cert or not o.server_key:
                raise InvalidArgumentError(
                    f"{name}: use_ssl needs server_cert and server_key (PEM file paths)")
            root = _read_file(f"{name}.root_cert", o.root_cert) if o.root_cert else None
            if o.use_mutual_auth and root is None:
                raise InvalidArgumentError(f"{name}: use_mutual_auth needs root_cert")
            self._credentials = (_read_file(f"{name}.server_key", o.server_key),
                                 _read_file(f"{name}.server_cert", o.server_cert), root)
        elif o.use_mutual_auth:
            raise InvalidArgumentError(f"{name}: use_mutual_auth needs use_ssl")
        self._restrictions = restriction_table(
            as_restricted(o.restricted_features, f"{name}.restricted_features"),
            key_prefix=GRPC_KEY_PREFIX)
        if o.infer_thread_count < 1:
            raise InvalidArgumentError(f"{name}.infer_thread_count: at least 1 thread")
        self._messages = messages()  # compiles the protos once per process
        self._grpc_server: Any = None
        self._port = 0

    def _channel_options(self) -> list[tuple[str, Any]]:
        o = self.options
        options: list[tuple[str, Any]] = [
            ("grpc.so_reuseport", 1 if o.reuse_port else 0),
            ("grpc.max_receive_message_length", o.max_input_size),
            ("grpc.max_send_message_length", -1),
            ("grpc.keepalive_time_ms", o.keepalive_time_ms),
            ("grpc.keepalive_timeout_ms", o.keepalive_timeout_ms),
            ("grpc.keepalive_permit_without_calls", 1 if o.keepalive_permit_without_calls else 0),
            ("grpc.http2.max_pings_without_data", o.http2_max_pings_without_data),
            ("grpc.http2.min_recv_ping_interval_without_data_ms",
             o.http2_min_recv_ping_interval_without_data_ms),
            ("grpc.http2.max_ping_strikes", o.http2_max_ping_strikes),
        ]
        if o.max_connection_age_ms:
            options.append(("grpc.max_connection_age_ms", o.max_connection_age_ms))
        if o.max_connection_age_grace_ms:
            options.append(("grpc.max_connection_age_grace_ms", o.max_connection_age_grace_ms))
        return options

    def _start(self) -> None:
        import grpc  # type: ignore[import-untyped, unused-ignore]

        o = self.options
        service = _Service(self.server, self._messages, self._restrictions,
                           self._compression != Grpc_compression_level.NONE,
                           bool(o.allow_client_shm))
        service.forward = self._forward
        host = f"[{o.address}]" if ":" in o.address and not o.address.startswith("[") \
            else o.address
        target = f"{host}:{o.port}"
        pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=o.infer_thread_count, thread_name_prefix="tritonserver-grpc")
        server = grpc.server(pool, options=self._channel_options())
        server.add_generic_rpc_handlers(service.handlers())
        reason = "address in use or not available"
        try:
            if self._credentials is not None:
                key, cert, root = self._credentials
                credentials = grpc.ssl_server_credentials(
                    [(key, cert)], root_certificates=root, require_client_auth=o.use_mutual_auth)
                port = server.add_secure_port(target, credentials)
            else:
                port = server.add_insecure_port(target)
        except RuntimeError as e:
            port, reason = 0, str(e)
        if not port:
            pool.shutdown(wait=False)
            raise UnavailableError(f"gRPC frontend: cannot listen on {target}: {reason}")
        server.start()
        self._port = port
        self._grpc_server = (server, service, pool)

    def _stop(self, timeout: float) -> bool:
        running, self._grpc_server = self._grpc_server, None
        if running is None:
            return True
        server, service, pool = running
        # New RPCs are refused at once; those in flight get `timeout` seconds,
        # then grpc cancels them and we cancel the core requests they wait on.
        stopped = server.stop(timeout)
        stopped.wait(timeout + 1.0)
        service.inflight.cancel_all()
        ended = stopped.wait(JOIN_GRACE_S)
        pool.shutdown(wait=False)
        return bool(ended)

    @property
    def port(self) -> int:
        return self._port if self._grpc_server is not None else 0

    @property
    def url(self) -> str:
        host = self.options.address
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"


__all__ = ["KServeGrpc", "Grpc_compression_level"]
