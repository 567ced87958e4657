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

import collections
import concurrent.futures
import ctypes
import enum
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, cast

import numpy as np

from tritonserver import (
    InferenceRequest,
    InternalError,
    InvalidArgumentError,
    Server,
    UnavailableError,
    UnsupportedError,
)
from tritonserver._enum_names import named
from tritonserver._shared_memory import cuda_register_refusal, cuda_status
from tritonserver.frontends import _common as c
from tritonserver.frontends._classification import Classification, grpc_count
from tritonserver.frontends._frontend import (
    Frontend,
    check_bool,
    check_int,
    check_socket_options,
)
from tritonserver.frontends._protos import Messages, messages
from tritonserver.frontends._restricted import (
    GRPC_KEY_PREFIX,
    Protocols,
    RestrictedLike,
    as_restricted,
    restriction_table,
)
from tritonserver.frontends._runner import JOIN_GRACE_S

SERVICE = "inference.GRPCInferenceService"
_READ_DONE = object()


class _Sent:
    """One request of a stream, as its response queue: the core's callback
    puts each response here, and this puts itself on the stream's queue, so
    the stream writes responses in the order they came, with their request."""

    __slots__ = ("number", "out", "call", "empty_final", "entry", "version", "responses")

    def __init__(self, number: int, out: "queue.SimpleQueue[Any]", call: Any,
                 empty_final: bool, entry: Any, version: str):
        self.number, self.out, self.call = number, out, call
        self.empty_final, self.entry, self.version = empty_final, entry, version
        self.responses: collections.deque[Any] = collections.deque()

    def put(self, response: Any) -> None:
        self.responses.append(response)
        self.out.put(self)
HEALTH_SERVICE = "grpc.health.v1.Health"
WATCH_INTERVAL_S = 1.0
INT32_MAX = 2**31 - 1

# InferTensorContents field per datatype (FP16 and BF16 travel raw only).
CONTENTS_FIELD = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
    "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
    "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
    "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}


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


# ---- Conversions -------------------------------------------------------------------------


def _parameter_value(p: Any) -> Any:
    which = p.WhichOneof("parameter_choice")
    if which is None:
        raise InvalidArgumentError("a parameter has no value")
    return getattr(p, which)


def _set_infer_parameter(target: Any, value: Any) -> None:
    if isinstance(value, bool):
        target.bool_param = value
    elif isinstance(value, int):
        target.int64_param = value
    elif isinstance(value, float):
        target.double_param = value
    else:
        target.string_param = str(value)


def _call_from_request(request: Any) -> tuple[c.Call, bool]:
    """(call, triton_enable_empty_final_response) from a ModelInferRequest."""
    call = c.Call(request.model_name, c.parse_version(request.model_version))
    call.request_id = request.id
    empty_final = False
    for key, p in request.parameters.items():
        which = p.WhichOneof("parameter_choice")
        if key == "sequence_id":
            if which == "int64_param":
                call.correlation_id = c.unsigned(key, p.int64_param)
            elif which == "uint64_param":
                call.correlation_id = p.uint64_param
            elif which == "string_param":
                call.correlation_id = p.string_param
            else:
                raise InvalidArgumentError("invalid value type for 'sequence_id' parameter, "
                                           "expected int64_param or string_param.")
        elif key in ("sequence_start", "sequence_end"):
            if which != "bool_param":
                raise InvalidArgumentError(
                    f"invalid value type for '{key}' parameter, expected bool_param.")
            call.flags |= c.sequence_flag(key, p.bool_param)
        elif key == "priority":
            if which not in ("int64_param", "uint64_param"):
                raise InvalidArgumentError("invalid value type for 'priority' parameter, "
                                           "expected int64_param or uint64_param.")
            call.priority = c.unsigned(key, getattr(p, which))
        elif key == "timeout":
            if which != "int64_param":
                raise InvalidArgumentError(
                    "invalid value type for 'timeout' parameter, expected int64_param.")
            call.timeout = c.unsigned(key, p.int64_param)
        elif key == "triton_enable_empty_final_response":
            if which != "bool_param":
                raise InvalidArgumentError(
                    f"invalid value type for '{key}' parameter, expected bool_param.")
            empty_final = p.bool_param
        elif key in ("binary_data_output", "headers"):
            continue  # HTTP notions; nothing to do over gRPC
        else:
            if which == "uint64_param":
                value: Any = c.unsigned(key, p.uint64_param, 63)
            else:
                value = _parameter_value(p)
            c.set_parameter(call.parameters, key, value)
    raw = request.raw_input_contents
    if raw:
        # As Triton: an input that also has contents is named first (clients
        # match that text), then a count that does not match.
        for tensor in request.inputs:
            if tensor.HasField("contents") and "shared_memory_region" not in tensor.parameters:
                raise InvalidArgumentError(
                    f"contents field must not be specified when using raw_input_contents for "
                    f"'{tensor.name}' for model '{call.model_name}'")
        # One raw_input_contents per input not in shared memory, in order.
        expected = sum("shared_memory_region" not in t.parameters for t in request.inputs)
        if len(raw) != expected:
            raise InvalidArgumentError(f"expected {expected} raw_input_contents "
                                       f"(one per input), got {len(raw)}")
    index = 0
    for tensor in request.inputs:
        name = tensor.name
        if name in call.inputs:
            raise InvalidArgumentError(f"input '{name}' is given twice")
        ref = _shm_place(tensor)
        datatype = c.check_datatype(name, tensor.datatype)
        shape = list(tensor.shape)
        if ref is not None:
            if tensor.HasField("contents"):
                raise InvalidArgumentError(
                    f"unexpected 'content' provided when using shared memory for input tensor "
                    f"'{name}' for model '{call.model_name}'")
            c.element_count(name, shape)
            ref.datatype, ref.shape = datatype, shape
            call.shm_inputs[name] = ref
            call.inputs[name] = None  # a view of the region, when the request is made
        elif raw:
            data = raw[index]
            index += 1
            call.inputs[name] = c.tensor_from_buffer(name, datatype, shape, data, 0, len(data))
        elif tensor.HasField("contents"):
            call.inputs[name] = _tensor_from_contents(name, datatype, shape, tensor.contents)
        else:
            raise InvalidArgumentError(f"input '{name}' has neither contents nor "
                                       "raw_input_contents")
    if request.outputs:
        names = []
        for output in request.outputs:
            ref = _shm_place(output)
            if ref is not None:
                if "classification" in output.parameters:
                    raise InvalidArgumentError("output can't set both 'shared_memory_region' "
                                               "and 'classification'")
                call.shm_outputs[output.name] = ref
            count = grpc_count(output.parameters)
            if count is not None:
                call.classification = Classification.including(
                    call.classification, output.name, count)
            names.append(output.name)
        call.outputs = names
    return call, empty_final


def _shm_place(tensor: Any) -> Optional[c.ShmRef]:
    """A tensor's shared_memory_* parameters, None without them (Triton's texts)."""
    params = tensor.parameters
    region = params.get("shared_memory_region")
    if region is None:
        for key in ("shared_memory_offset", "shared_memory_byte_size"):
            if key in params:
                raise InvalidArgumentError(
                    f"'{key}' can not be specified without 'shared_memory_region' parameter "
                    f"for tensor '{tensor.name}'")
        return None
    if region.WhichOneof("parameter_choice") != "string_param":
        raise InvalidArgumentError(
            f"invalid value type for 'shared_memory_region' parameter for tensor "
            f"'{tensor.name}', expected string_param.")
    numbers = []
    for key in ("shared_memory_offset", "shared_memory_byte_size"):
        p = params.get(key)
        if p is None:
            if key == "shared_memory_byte_size":
                raise InvalidArgumentError(
                    f"'shared_memory_byte_size' must be specified along with "
                    f"'shared_memory_region' parameter for tensor '{tensor.name}'")
            numbers.append(0)
            continue
        if p.WhichOneof("parameter_choice") != "int64_param":
            raise InvalidArgumentError(
                f"invalid value type for '{key}' parameter for tensor '{tensor.name}', "
                f"expected int64_param.")
        if p.int64_param < 0:
            raise InvalidArgumentError(f"'{key}' of tensor '{tensor.name}' is negative")
        numbers.append(p.int64_param)
    return c.ShmRef(region.string_param, numbers[0], numbers[1])


def _tensor_from_contents(name: str, datatype: str, shape: list[int], contents: Any) -> Any:
    field = CONTENTS_FIELD.get(datatype)
    if field is None:
        raise InvalidArgumentError(
            f"input '{name}': {datatype} data must be sent in raw_input_contents")
    for other in CONTENTS_FIELD.values():
        if other != field and len(getattr(contents, other)):
            raise InvalidArgumentError(
                f"input '{name}': {datatype} data must be in {field}, not {other}")
    values = getattr(contents, field)
    count = c.element_count(name, shape)
    if len(values) != count:
        raise InvalidArgumentError(
            f"input '{name}': {len(values)} elements in {field} for shape {shape}")
    if datatype == "BYTES":
        parts = []
        for item in values:
            parts.append(len(item).to_bytes(4, "little"))
            parts.append(item)
        blob = b"".join(parts)
        return c.tensor_from_buffer(name, "BYTES", shape, blob, 0, len(blob))
    dtype = c.NUMPY_DTYPE[datatype]
    assert dtype is not None
    array = np.asarray(values)
    if array.size and array.dtype.kind in "iu" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if array.min() < info.min or array.max() > info.max:
            raise InvalidArgumentError(f"input '{name}': a value does not fit in {datatype}")
    return np.ascontiguousarray(array.astype(dtype)).reshape(shape)


def _tensor_raw(tensor: Any) -> bytes:
    size = tensor.size
    return ctypes.string_at(tensor.data_ptr, size) if size else b""


def _infer_response(m: Messages, response: Any, call: c.Call, version: str) -> Any:
    out = m.ModelInferResponse(model_name=call.model_name, model_version=version,
                               id=response.request_id or call.request_id)
    for key, value in response.parameters.items():
        _set_infer_parameter(out.parameters[key], value)
    raw = out.raw_output_contents
    for name, tensor in response.outputs.items():
        if tensor.memory_type not in c.HOST_MEMORY:
            raise UnsupportedError(f"output '{name}' in {tensor.memory_type.name} memory "
                                   "cannot be sent")
        o = out.outputs.add()
        o.name = name
        o.datatype = c.DATATYPE_NAME[int(tensor.data_type)]
        o.shape.extend(c.shape_list(tensor))
        # An output written into its region gets empty contents, as in Triton.
        raw.append(b"" if name in call.shm_outputs else _tensor_raw(tensor))
    return out


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

    def __init__(self, server: Server, m: Messages, restrictions: dict[Protocols, tuple[str, str]],
                 compress: bool):
        self.server = server
        self.m = m
        self.restrictions = restrictions
        self.compress = compress
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
        code = getattr(grpc.StatusCode, c.grpc_code_name(error))
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
                return fn(_parse(request_type, data), context)
            except Exception as e:
                if _is_abort(e):
                    raise
                self._abort(context, e)

        return handler

    def _infer(self, model: Any, call: c.Call) -> Any:
        """model.infer(), the iterator tracked while it runs."""
        request = call.request(model)
        return model.infer(request) if request is not None else model.infer(inputs=call.inputs)

    # ---- health and metadata ----

    def server_live(self, request: Any, context: Any) -> Any:
        return self.m.ServerLiveResponse(live=c.running(self.server))

    def server_ready(self, request: Any, context: Any) -> Any:
        return self.m.ServerReadyResponse(ready=c.running(self.server) and self.server.ready())

    def model_ready(self, request: Any, context: Any) -> Any:
        c.check_running(self.server)
        model = self.server.model(request.name, c.parse_version(request.version))
        return self.m.ModelReadyResponse(ready=model.ready())

    def server_metadata(self, request: Any, context: Any) -> Any:
        c.check_running(self.server)
        from tritonserver.frontends._http import UNSERVED_EXTENSIONS

        metadata = self.server.metadata()
        return self.m.ServerMetadataResponse(
            name=metadata.get("name", ""), version=metadata.get("version", ""),
            extensions=[e for e in metadata.get("extensions", [])
                        if e not in UNSERVED_EXTENSIONS])

    def model_metadata(self, request: Any, context: Any) -> Any:
        from google.protobuf import json_format  # type: ignore[import-untyped, unused-ignore]

        model = self.server.model(request.name, c.parse_version(request.version))
        return json_format.ParseDict(model.metadata(), self.m.ModelMetadataResponse(),
                                     ignore_unknown_fields=True)

    def model_config(self, request: Any, context: Any) -> Any:
        from google.protobuf import json_format  # type: ignore[import-untyped, unused-ignore]

        model = self.server.model(request.name, c.parse_version(request.version))
        config = json_format.ParseDict(model.config(), self.m.ModelConfig(),
                                       ignore_unknown_fields=True)
        return self.m.ModelConfigResponse(config=config)

    def model_statistics(self, request: Any, context: Any) -> Any:
        from google.protobuf import json_format  # type: ignore[import-untyped, unused-ignore]

        model = self.server.model(request.name, c.parse_version(request.version))
        return json_format.ParseDict(model.statistics(), self.m.ModelStatisticsResponse(),
                                     ignore_unknown_fields=True)

    # ---- repository ----

    def repository_index(self, request: Any, context: Any) -> Any:
        if request.repository_name:
            raise UnsupportedError("'repository_name' specification is not supported")
        out = self.m.RepositoryIndexResponse()
        for model in self.server.models(exclude_not_ready=request.ready).values():
            entry = out.models.add()
            entry.name = model.name
            if model.version >= 0:
                entry.version = str(model.version)
            entry.state = model.state or ""
            entry.reason = model.reason or ""
        return out

    def repository_load(self, request: Any, context: Any) -> Any:
        if request.repository_name:
            raise UnsupportedError("'repository_name' specification is not supported")
        parameters = {key: _parameter_value(p) for key, p in request.parameters.items()}
        try:
            self.server.load(request.model_name, parameters)
        finally:
            self.state.forget_models()
        return self.m.RepositoryModelLoadResponse()

    def repository_unload(self, request: Any, context: Any) -> Any:
        if request.repository_name:
            raise UnsupportedError("'repository_name' specification is not supported")
        dependents = False
        for key, p in request.parameters.items():
            if key == "unload_dependents":
                if p.WhichOneof("parameter_choice") != "bool_param":
                    raise InvalidArgumentError(
                        "invalid value type for 'unload_dependents', expected bool_param")
                dependents = p.bool_param
        try:
            self.server.unload(request.model_name, dependents)
        finally:
            self.state.forget_models()
        return self.m.RepositoryModelUnloadResponse()

    # ---- logging, trace, shared memory ----

    def log_settings(self, request: Any, context: Any) -> Any:
        c.check_running(self.server)
        changes = {key: _parameter_value(v) for key, v in request.settings.items()}
        settings = c.update_log_settings(self.server, changes) if changes else \
            c.log_settings(self.server)
        out = self.m.LogSettingsResponse()
        for key, value in settings.__dict__.items():
            target = out.settings[key]
            if isinstance(value, bool):
                target.bool_param = value
            elif isinstance(value, int):
                target.uint32_param = value
            else:
                target.string_param = value
        return out

    def trace_setting(self, request: Any, context: Any) -> Any:
        from tritonserver._trace import parse_grpc

        c.check_running(self.server)
        self.server._check_traced_model(request.model_name)
        tracing = self.server._tracing()
        if request.settings:
            tracing.update(request.model_name, parse_grpc(
                {key: list(v.value) for key, v in request.settings.items()}))
        out = self.m.TraceSettingResponse()
        for key, value in tracing.settings(request.model_name or None).items():
            out.settings[key].value.extend(value if isinstance(value, list) else [value])
        return out

    def shm_status(self, request: Any, context: Any) -> Any:
        out = self.m.SystemSharedMemoryStatusResponse()
        for region in self.server.system_shared_memory_status(request.name or None):
            entry = out.regions[region["name"]]
            entry.name = region["name"]
            entry.key = region["key"]
            entry.offset = region["offset"]
            entry.byte_size = region["byte_size"]
        return out

    def shm_register(self, request: Any, context: Any) -> Any:
        self.server.register_system_shared_memory(request.name, request.key,
                                                  request.byte_size, request.offset)
        return self.m.SystemSharedMemoryRegisterResponse()

    def shm_unregister(self, request: Any, context: Any) -> Any:
        self.server.unregister_system_shared_memory(request.name or None)
        return self.m.SystemSharedMemoryUnregisterResponse()

    def cuda_shm_status(self, request: Any, context: Any) -> Any:
        cuda_status(self.server._shared_memory(), request.name or None)
        return self.m.CudaSharedMemoryStatusResponse()  # no CUDA regions

    def cuda_shm_register(self, request: Any, context: Any) -> Any:
        raise cuda_register_refusal(request.name)

    def cuda_shm_unregister(self, request: Any, context: Any) -> Any:
        return self.m.CudaSharedMemoryUnregisterResponse()  # no CUDA regions: nothing to do

    # ---- inference ----

    def model_infer(self, request: Any, context: Any) -> Any:
        read = time.monotonic_ns() if c.tracing(self.server) else 0
        call, _ = _call_from_request(request)
        if read:  # the trace's gRPC timestamps, as Triton's frontend takes them
            call.trace_marks = [("GRPC_WAITREAD_START", read),
                                ("GRPC_WAITREAD_END", time.monotonic_ns())]
        entry = self.state.entry(self.server, call.model_name, call.version)
        if entry.decoupled:
            raise UnsupportedError(
                "ModelInfer RPC doesn't support models with decoupled transaction policy; "
                "use ModelStreamInfer")
        iterator = self._infer(entry.model, call)
        if call.trace_marks:
            c.mark_sent(call, iterator._request)
        self.inflight.add(iterator)
        try:
            response = None
            for r in iterator:
                if r.final and not r.outputs and response is not None:
                    break
                if response is not None:
                    raise UnsupportedError("the model sent more than one response; use "
                                           "ModelStreamInfer")
                response = r
        except BaseException:
            iterator.cancel()
            raise
        finally:
            self.inflight.discard(iterator)
        if response is None:
            raise InternalError("the model sent no response")
        c.select_outputs(response, call.outputs, call.model_name)
        if call.classification is not None:
            call.classification.apply(response)
        if self.compress:
            import grpc  # type: ignore[import-untyped, unused-ignore]

            context.set_compression(grpc.Compression.Gzip)
        if call.traced is None:
            return _infer_response(self.m, response, call, c.model_version(entry, call.version))
        send_start = time.monotonic_ns()
        out = _infer_response(self.m, response, call, c.model_version(entry, call.version))
        c.mark(call, ("GRPC_SEND_START", send_start), ("GRPC_SEND_END", time.monotonic_ns()))
        return out

    def model_stream_infer(self, requests: Iterator[bytes], context: Any) -> Iterator[Any]:
        """The requests of a stream reach the core in the order they came,
        and their responses are written in the order the core gave them, as
        Triton does: a sequence's requests run, and answer, in order. One
        queue per stream takes every request's responses on the core's
        callbacks, each tagged with its request (a thread per request would
        race to write them)."""
        if self.restrictions:
            try:
                self._check_restriction(Protocols.INFERENCE, context)
            except Exception as e:
                self._abort(context, e)
        if self.compress:
            import grpc  # type: ignore[import-untyped, unused-ignore]

            context.set_compression(grpc.Compression.Gzip)
        out: queue.SimpleQueue[Any] = queue.SimpleQueue()
        running: dict[int, Any] = {}  # request number -> its iterator, until final
        lock = threading.Lock()

        def read() -> None:
            try:
                for number, data in enumerate(requests):
                    self._stream_send(number, data, out, running, lock)
            except Exception:  # the stream broke (cancelled): end it
                pass
            finally:
                out.put(_READ_DONE)

        threading.Thread(target=read, name="tritonserver-grpc-stream", daemon=True).start()
        reading = True
        try:
            while True:
                with lock:
                    if not reading and not running:
                        break
                item = out.get()
                if item is _READ_DONE:
                    reading = False
                    continue
                if not isinstance(item, _Sent):
                    yield item  # a request that failed before the core had it
                    continue
                sent, response = item, item.responses.popleft()
                if response.final:
                    with lock:
                        iterator = running.pop(sent.number, None)
                    if iterator is not None:
                        self.inflight.discard(iterator)
                message = self._stream_message(sent, response)
                if message is not None:
                    yield message
        finally:
            with lock:
                left = list(running.values())
                running.clear()
            for iterator in left:
                iterator.cancel()
                self.inflight.discard(iterator)

    def _stream_send(self, number: int, data: bytes, out: "queue.SimpleQueue[Any]",
                     running: dict[int, Any], lock: threading.Lock) -> None:
        """Parses one request of a stream and sends it to the core (on the
        stream's reader, in order); a failure is written in its place."""
        m = self.m
        try:
            call, empty_final = _call_from_request(_parse(m.ModelInferRequest, data))
            entry = self.state.entry(self.server, call.model_name, call.version)
            model = entry.model
            sent = _Sent(number, out, call, empty_final, entry,
                         c.model_version(entry, call.version))
            request = call.request(model) or InferenceRequest(model=model, inputs=call.inputs)
            request.response_queue = cast("queue.SimpleQueue[Any]", sent)  # it has put()
            with lock:  # in the table before a response can arrive
                running[number] = None
                iterator = model.infer(request, raise_on_error=False)
                running[number] = iterator
            self.inflight.add(iterator)
        except Exception as e:
            with lock:
                running.pop(number, None)
            error = c.unavailable_if_stopped(self.server, e)
            out.put(m.ModelStreamInferResponse(error_message=c.error_message(error)))

    def _stream_message(self, sent: "_Sent", response: Any) -> Any:
        """The stream message of one response (None: nothing to write)."""
        m, call = self.m, sent.call
        try:
            if response.error is not None:
                return m.ModelStreamInferResponse(error_message=c.error_message(response.error))
            if not response.outputs and not response.parameters and response.final \
                    and sent.entry.decoupled:
                if not sent.empty_final:
                    return None
                message = m.ModelInferResponse(model_name=call.model_name,
                                               model_version=sent.version, id=call.request_id)
                message.parameters["triton_final_response"].bool_param = True
                return m.ModelStreamInferResponse(infer_response=message)
            c.select_outputs(response, call.outputs, call.model_name)
            if call.classification is not None:
                call.classification.apply(response)
            message = _infer_response(m, response, call, sent.version)
            message.parameters["triton_final_response"].bool_param = response.final
            return m.ModelStreamInferResponse(infer_response=message)
        except Exception as e:
            error = c.unavailable_if_stopped(self.server, e)
            return m.ModelStreamInferResponse(error_message=c.error_message(error))

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
            request = _parse(self.m.HealthCheckRequest, data)
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


def _parse(message_type: Any, data: bytes) -> Any:
    try:
        return message_type.FromString(data)
    except Exception as e:  # google.protobuf.message.DecodeError and kin
        raise InvalidArgumentError(f"malformed {message_type.DESCRIPTOR.name} message: {e}") \
            from None


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
        ``restricted_features``: protocol groups that need a metadata key
        (sent as ``triton-grpc-protocol-<key>``), see RestrictedFeatures.
        ``infer_thread_count``: threads running RPCs (an RPC holds one while
        it runs; an open stream or health Watch holds one for its life), and
        as many more running the requests of streams.
        ``infer_allocation_pool_size``, ``max_response_pool_size`` and
        ``forward_header_pattern`` are accepted for compatibility: there are
        no allocation pools to size, and headers are not forwarded over gRPC.
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

    def __init__(self, server: Server, options: Optional["KServeGrpc.Options"] = None):
        super().__init__(server, options, KServeGrpc.Options)
        o = self.options
        name = "KServeGrpc.Options"
        check_socket_options("KServeGrpc", o)
        for flag in ("use_ssl", "use_mutual_auth", "keepalive_permit_without_calls"):
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
        if not isinstance(o.forward_header_pattern, str):
            raise InvalidArgumentError(f"{name}.forward_header_pattern: expected a str")
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
                           self._compression != Grpc_compression_level.NONE)
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
