"""What the HTTP and gRPC frontends share: error mapping, per-server state
(model handles, log settings), tensor decoding and the inference call.

Inputs reach the core in place: a fixed-size tensor is a numpy view
(``np.frombuffer``) of the request's own bytes, a BYTES or BF16 tensor a
``Tensor`` over them; nothing is copied or looped over per element, except
that BYTES tensors have their length prefixes checked (one step per element).
"""

from __future__ import annotations

import ctypes
import math
import struct
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import numpy as np

import tritonserver
from tritonserver._c import triton_bindings as _bindings
from tritonserver._enums import RequestFlag
from tritonserver._shared_memory import SystemSharedMemoryOutputs
from tritonserver.frontends._classification import Classification
from tritonserver import (
    CancelledError,
    DataType,
    InferenceRequest,
    InferenceResponse,
    InternalError,
    InvalidArgumentError,
    MemoryBuffer,
    MemoryType,
    Model,
    NotFoundError,
    Server,
    Tensor,
    TritonError,
    UnavailableError,
    UnsupportedError,
)

DEFAULT_MAX_INPUT_SIZE = 64 << 20  # Triton's --http-max-input-size default
MAX_DIMS = 32
MAX_SEQUENCE_PARAMETER = (1 << 64) - 1

# Triton datatype name -> numpy dtype (None: no numpy form) and element size.
NUMPY_DTYPE: dict[str, Optional[np.dtype[Any]]] = {
    "BOOL": np.dtype(np.bool_), "UINT8": np.dtype(np.uint8), "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"), "UINT64": np.dtype("<u8"), "INT8": np.dtype(np.int8),
    "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"), "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"),
    "BF16": None, "BYTES": None,
}
ELEMENT_SIZE = {name: (dt.itemsize if dt is not None else 0) for name, dt in NUMPY_DTYPE.items()}
ELEMENT_SIZE["BF16"] = 2
DATATYPE_NAME = {int(m): m.name for m in DataType if m.name != "INVALID"}
HOST_MEMORY = (MemoryType.CPU, MemoryType.CPU_PINNED)

_U32 = struct.Struct("<I")


# ---- Errors ---------------------------------------------------------------------------

# (HTTP status, gRPC status code name) per error class, as Triton maps them.
_HTTP_STATUS: list[tuple[type, int]] = [
    (NotFoundError, 404), (UnavailableError, 503), (UnsupportedError, 501),
    (InternalError, 500),
]
_GRPC_CODE: list[tuple[type, str]] = [
    (NotFoundError, "NOT_FOUND"), (InvalidArgumentError, "INVALID_ARGUMENT"),
    (UnavailableError, "UNAVAILABLE"), (UnsupportedError, "UNIMPLEMENTED"),
    (InternalError, "INTERNAL"), (tritonserver.AlreadyExistsError, "ALREADY_EXISTS"),
    (CancelledError, "CANCELLED"),
]


class Forbidden(TritonError):
    """A restricted API called without its header (HTTP 403)."""


class PayloadTooLarge(InvalidArgumentError):
    """A request body over the frontend's max_input_size (HTTP 413)."""


def http_status(error: BaseException) -> int:
    """Triton's HTTP status for an error: not found 404, unavailable 503,
    unsupported 501, internal 500, anything else 400."""
    if isinstance(error, Forbidden):
        return 403
    if isinstance(error, PayloadTooLarge):
        return 413
    for cls, status in _HTTP_STATUS:
        if isinstance(error, cls):
            return status
    if not isinstance(error, TritonError):
        return 500  # a bug of ours: said as such, the server goes on
    return 400


def grpc_code_name(error: BaseException) -> str:
    """The grpc.StatusCode name for an error (Triton's mapping)."""
    if isinstance(error, Forbidden):
        return "UNAVAILABLE"  # what Triton answers for a restricted protocol
    if isinstance(error, PayloadTooLarge):
        return "RESOURCE_EXHAUSTED"
    for cls, code in _GRPC_CODE:
        if isinstance(error, cls):
            return code
    if not isinstance(error, TritonError):
        return "INTERNAL"
    return "UNKNOWN"


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


@dataclass
class LogSettings:
    """The core's logger is process-wide and has no getter: what was set last."""

    log_file: str = ""
    log_info: bool = False
    log_warning: bool = False
    log_error: bool = False
    log_verbose_level: int = 0
    log_format: str = "default"


class ServerState:
    """What every frontend of one Server shares: model handles (and whether
    each is decoupled), and the log settings. Found with ``state_of``."""

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
                             & int(tritonserver.ModelTxnPropertyFlag.DECOUPLED))
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
_log_settings: Optional[LogSettings] = None


def state_of(server: Server) -> ServerState:
    with _states_lock:
        state = _states.get(server)
        if state is None:
            state = _states[server] = ServerState(server)
        return state


def log_settings(server: Server) -> LogSettings:
    """The process's log settings, first read from the server's options."""
    global _log_settings
    with _states_lock:
        if _log_settings is None:
            o = server.options
            _log_settings = LogSettings(
                log_file=o.log_file or "", log_info=bool(o.log_info),
                log_warning=bool(o.log_warn), log_error=bool(o.log_error),
                log_verbose_level=int(o.log_verbose),
                log_format="ISO8601" if int(o.log_format) == int(tritonserver.LogFormat.ISO8601)
                else "default")
        return _log_settings


def update_log_settings(server: Server, changes: dict[str, Any]) -> LogSettings:
    """Apply ``{setting: value}`` to the core's (process-wide) logger.

    The C API has no run-time log setters: like Triton's own frontends this
    calls the TRITONSERVER_ServerOptionsSetLog* functions, which set the
    global logger at once whatever options object they are given.
    """
    settings = log_settings(server)
    checked: list[tuple[str, Any]] = []
    for key, value in changes.items():
        if value is None:
            continue
        if key == "log_file":
            raise UnsupportedError("log file location can not be updated through network protocol")
        if key in ("log_info", "log_warning", "log_error"):
            if not isinstance(value, bool):
                raise InvalidArgumentError(f"log setting '{key}' expects a boolean, got {value!r}")
        elif key == "log_verbose_level":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
                raise InvalidArgumentError(
                    f"log setting '{key}' expects a non-negative integer, got {value!r}")
        elif key == "log_format":
            if value not in ("default", "ISO8601"):
                raise InvalidArgumentError(
                    f"log setting 'log_format' expects 'default' or 'ISO8601', got {value!r}")
        else:
            raise InvalidArgumentError(f"unknown log setting '{key}'")
        checked.append((key, value))
    if not checked:
        return settings
    from tritonserver._c import triton_bindings

    options = triton_bindings.ServerOptions()
    with _states_lock:
        for key, value in checked:
            if key == "log_info":
                options.set_log_info(value)
            elif key == "log_warning":
                options.set_log_warn(value)
            elif key == "log_error":
                options.set_log_error(value)
            elif key == "log_verbose_level":
                options.set_log_verbose(value)
            elif key == "log_format":
                options.set_log_format(int(tritonserver.LogFormat.ISO8601 if value == "ISO8601"
                                           else tritonserver.LogFormat.DEFAULT))
            setattr(settings, key, value)
    return settings


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


# ---- Requests --------------------------------------------------------------------------


def parse_version(text: str) -> int:
    """A model version as the protocol gives it: empty (the server picks) or digits."""
    if not text:
        return -1
    if not text.isdigit() or len(text) > 18:
        raise InvalidArgumentError(f"failed to get model version from specified version string '{text}'")
    return int(text)


def element_count(name: str, shape: Any) -> int:
    """Product of a shape given by a client, checked (ints >= 0, at most MAX_DIMS)."""
    if not isinstance(shape, (list, tuple)) and not hasattr(shape, "__len__"):
        raise InvalidArgumentError(f"input '{name}': shape must be a list of integers")
    if len(shape) > MAX_DIMS:
        raise InvalidArgumentError(f"input '{name}': shape has {len(shape)} dimensions, "
                                   f"more than the {MAX_DIMS} allowed")
    count = 1
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise InvalidArgumentError(
                f"input '{name}': shape must hold non-negative integers, got {list(shape)!r}")
        count *= d
    return count


def check_datatype(name: str, datatype: Any) -> str:
    if not isinstance(datatype, str) or datatype not in NUMPY_DTYPE:
        raise InvalidArgumentError(f"input '{name}': invalid datatype {datatype!r}")
    return datatype


def check_bytes_layout(name: str, buffer: Any, offset: int, size: int, count: int) -> None:
    """BYTES data must be exactly ``count`` elements of 4-byte length + bytes."""
    end = offset + size
    pos = offset
    unpack = _U32.unpack_from
    for _ in range(count):
        if pos + 4 > end:
            raise InvalidArgumentError(
                f"input '{name}': BYTES data holds fewer elements than its shape says ({count})")
        pos += 4 + unpack(buffer, pos)[0]
        if pos > end:
            raise InvalidArgumentError(
                f"input '{name}': a BYTES element runs past the end of the tensor data")
    if pos != end:
        raise InvalidArgumentError(
            f"input '{name}': BYTES data holds more bytes than its {count} elements")


def tensor_from_buffer(name: str, datatype: str, shape: list[int], buffer: Any,
                       offset: int, size: int) -> Any:
    """An input over ``size`` bytes of ``buffer`` (bytes-like) at ``offset``, in place."""
    count = element_count(name, shape)
    itemsize = ELEMENT_SIZE[datatype]
    if datatype == "BYTES":
        check_bytes_layout(name, buffer, offset, size, count)
    elif count * itemsize != size:
        raise InvalidArgumentError(
            f"input '{name}': {size} bytes of data for shape {list(shape)} of {datatype} "
            f"({count * itemsize} expected)")
    dtype = NUMPY_DTYPE[datatype]
    if dtype is not None:
        return np.frombuffer(buffer, dtype=dtype, count=count, offset=offset).reshape(shape)
    raw = np.frombuffer(buffer, dtype=np.uint8, count=size, offset=offset)
    ptr = _bindings.buffer_address(raw) if size else 0
    return Tensor(DataType[datatype], tuple(shape), MemoryBuffer(ptr, MemoryType.CPU, 0, size, raw))


_JSON_KINDS = {"BOOL": "b", "FP16": "biuf", "FP32": "biuf", "FP64": "biuf"}


def tensor_from_list(name: str, datatype: str, shape: list[int], data: Any) -> Any:
    """An input from JSON elements (flat or nested lists)."""
    count = element_count(name, shape)
    if not isinstance(data, list):
        data = [data]
    if datatype == "BYTES":
        flat = data if all(not isinstance(x, list) for x in data) else list(_flatten(name, data))
        if len(flat) != count:
            raise InvalidArgumentError(
                f"input '{name}': {len(flat)} elements of data for shape {list(shape)}")
        parts = []
        for item in flat:
            if not isinstance(item, str):
                raise InvalidArgumentError(
                    f"input '{name}': BYTES elements must be strings, got {type(item).__name__}")
            raw = item.encode("utf-8", "surrogatepass")
            parts.append(_U32.pack(len(raw)))
            parts.append(raw)
        blob = b"".join(parts)
        return tensor_from_buffer(name, "BYTES", shape, blob, 0, len(blob))
    dtype = NUMPY_DTYPE[datatype]
    if dtype is None:
        raise InvalidArgumentError(
            f"input '{name}': {datatype} data cannot be given as JSON; send it as binary data")
    try:
        array = np.asarray(data)
    except (ValueError, TypeError, OverflowError, RecursionError):
        raise InvalidArgumentError(
            f"input '{name}': 'data' is not a list of numbers matching the shape") from None
    allowed = _JSON_KINDS.get(datatype, "biu")
    if array.dtype.kind in "fO" and dtype.kind in "iu":
        # Python ints past int64 (UINT64's upper half) make numpy guess float
        # or object: take them one by one, exactly.
        flat = list(_flatten(name, data))
        if all(type(v) is int for v in flat):
            try:
                array = np.array(flat, dtype=dtype)
            except OverflowError:
                raise InvalidArgumentError(
                    f"input '{name}': a value does not fit in {datatype}") from None
    if array.size and array.dtype.kind not in allowed:
        raise InvalidArgumentError(
            f"input '{name}': 'data' holds values that are not {datatype} "
            f"(got {array.dtype.kind!r} kind elements)")
    if array.size != count:
        raise InvalidArgumentError(
            f"input '{name}': {array.size} elements of data for shape {list(shape)}")
    try:
        with np.errstate(over="raise", invalid="raise"):
            if array.dtype.kind in "iu" and dtype.kind in "iu":
                info = np.iinfo(dtype)
                if array.size and (array.min() < info.min or array.max() > info.max):
                    raise OverflowError
            converted = array.astype(dtype, copy=False)
    except (OverflowError, FloatingPointError, ValueError, TypeError):
        raise InvalidArgumentError(
            f"input '{name}': a value does not fit in {datatype}") from None
    return np.ascontiguousarray(converted).reshape(shape)


def _flatten(name: str, data: list[Any], depth: int = 0) -> Any:
    if depth > MAX_DIMS:
        raise InvalidArgumentError(f"input '{name}': 'data' is nested too deeply")
    for item in data:
        if isinstance(item, list):
            yield from _flatten(name, item, depth + 1)
        else:
            yield item


def set_parameter(parameters: dict[str, Any], key: str, value: Any) -> None:
    """A request parameter from the wire (str, int, bool or float)."""
    if key.startswith("triton_"):
        raise InvalidArgumentError(
            "parameter keys starting with 'triton_' are reserved for Triton usage "
            "and should not be specified.")
    if isinstance(value, bool) or isinstance(value, str) or isinstance(value, float):
        parameters[key] = value
    elif isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 63):
            raise InvalidArgumentError(f"parameter '{key}' does not fit in 64 bits")
        parameters[key] = value
    else:
        raise InvalidArgumentError(
            f"parameter '{key}' must be a string, number or boolean, not {type(value).__name__}")


@dataclass
class Call:
    """One inference call, decoded from the wire."""

    model_name: str
    version: int
    inputs: dict[str, Any] = field(default_factory=dict)
    request_id: str = ""
    correlation_id: Union[int, str, None] = None
    flags: int = 0
    priority: int = 0
    timeout: int = 0
    parameters: dict[str, Any] = field(default_factory=dict)
    outputs: Optional[list[str]] = None  # requested outputs, in order; None: all
    # Tensors in system shared memory (inputs: their place in self.inputs holds None).
    shm_inputs: dict[str, ShmRef] = field(default_factory=dict)
    shm_outputs: dict[str, ShmRef] = field(default_factory=dict)
    # Outputs asked for as their top classes (requested outputs, so never the fast path).
    classification: Optional[Classification] = None
    # Tracing (tritonserver._trace): the frontend's timestamps taken before
    # the request was sent, and the sent request when the core traces it.
    trace_marks: Optional[list[tuple[str, int]]] = None
    traced: Any = None

    def request(self, model: Model) -> Optional[InferenceRequest]:
        """The InferenceRequest, or None when only inputs are set (fast path).
        Named outputs are the only ones the model computes."""
        allocator = None
        if self.shm_inputs or self.shm_outputs:
            allocator = self._place_in_shared_memory(model._server)
        if (not self.request_id and self.correlation_id is None and not self.flags
                and not self.priority and not self.timeout and not self.parameters
                and self.outputs is None and allocator is None):
            return None
        request = InferenceRequest(
            model=model, request_id=self.request_id or None, flags=self.flags,
            correlation_id=self.correlation_id, priority=self.priority, timeout=self.timeout,
            inputs=self.inputs, parameters=self.parameters, output_memory_allocator=allocator)
        setattr(request, "_requested_outputs", self.outputs)  # noqa: B010 - not a field
        if self.classification is not None:
            self.classification.attach(request, model)
        return request

    def _place_in_shared_memory(self, server: Server) -> Any:
        """Inputs in regions become views of them (in place); returns the
        allocator writing outputs into theirs (None if none is)."""
        registry = server._shared_memory()
        for name, ref in self.shm_inputs.items():
            place = registry.slice(ref.region, ref.offset, ref.byte_size)
            tensor = tensor_from_buffer(name, ref.datatype, ref.shape, place.view, 0,
                                        ref.byte_size)
            self.inputs[name] = tensor
        self.shm_inputs = {}
        if not self.shm_outputs:
            return None
        return SystemSharedMemoryOutputs(registry, {
            name: (ref.region, ref.offset, ref.byte_size)
            for name, ref in self.shm_outputs.items()})


@dataclass
class ShmRef:
    """A tensor's place in a system shared memory region, as a request gives it."""

    region: str
    offset: int
    byte_size: int
    datatype: str = ""
    shape: list[int] = field(default_factory=list)


def sequence_flag(key: str, value: Any) -> int:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"Unable to parse '{key}': expected a boolean")
    if not value:
        return 0
    return int(RequestFlag.SEQUENCE_START if key == "sequence_start" else RequestFlag.SEQUENCE_END)


def unsigned(key: str, value: Any, bits: int = 64) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << bits):
        raise InvalidArgumentError(f"Unable to parse '{key}': expected an unsigned integer")
    return int(value)


async def infer_once(server: Server, call: Call,
                     state: Optional[ServerState] = None) -> tuple[InferenceResponse, ModelEntry]:
    """Send a call to a model that answers once; returns its (successful)
    response, with only the requested outputs, and the model's entry.
    Raises the call's error. ``state``: the server's, when the caller has it."""
    entry = (state or state_of(server)).entry(server, call.model_name, call.version)
    if entry.decoupled:
        raise UnsupportedError(
            "this endpoint doesn't support models with decoupled transaction policy; "
            "use ModelStreamInfer (gRPC) or generate_stream (HTTP)")
    model = entry.model
    request = call.request(model)
    iterator = model.async_infer(request) if request is not None else \
        model.async_infer(inputs=call.inputs)
    if call.trace_marks:
        mark_sent(call, iterator._request)
    response = None
    try:
        async for r in iterator:
            if r.final and not r.outputs and response is not None:
                break  # a final flag after the response
            if response is not None:
                raise UnsupportedError(
                    "the model sent more than one response; use a streaming endpoint")
            response = r
    except BaseException:
        iterator.cancel()
        raise
    if response is None:
        raise InternalError("the model sent no response")
    select_outputs(response, call.outputs, call.model_name)
    if call.classification is not None:
        call.classification.apply(response)
    return response, entry


def tracing(server: Server) -> bool:
    """Whether a request to ``server`` may be traced (tritonserver._trace):
    the frontends take their timestamps only then."""
    trace = server.__dict__.get("_trace")
    return trace is not None and bool(trace.active)


def mark_sent(call: Call, request: Any) -> None:
    """``request`` (the binding's) was sent for ``call``: its trace, if it
    has one, gets the frontend's timestamps so far, and later ones (mark)."""
    marks = call.trace_marks
    if marks and request.trace_timestamp(*marks[0]):
        for name, ns in marks[1:]:
            request.trace_timestamp(name, ns)
        call.traced = request


def mark(call: Call, *marks: tuple[str, int]) -> None:
    """Timestamps of a traced call taken after its request was sent (its
    response sent back): the trace is written once ``call`` lets go."""
    if call.traced is not None:
        for name, ns in marks:
            call.traced.trace_timestamp(name, ns)


def model_version(entry: ModelEntry, requested: int) -> str:
    """The version a response came from: the one asked for, else the one the
    core picks for -1 (the highest of the model's versions), read once."""
    if requested >= 0:
        return str(requested)
    if entry.version is None:
        versions = entry.model.metadata().get("versions") or []
        numbers = [int(v) for v in versions if str(v).isdigit()]
        entry.version = str(max(numbers)) if numbers else ""
    return entry.version


def select_outputs(response: InferenceResponse, names: Optional[list[str]],
                   model_name: str) -> None:
    """Keep only the requested outputs, in the requested order."""
    if names is None:
        return
    produced = response.outputs
    selected = {}
    for name in names:
        tensor = produced.get(name)
        if tensor is None:
            raise InvalidArgumentError(
                f"unexpected inference output '{name}' for model '{model_name}'")
        selected[name] = tensor
    response.outputs = selected


def tensor_bytes(tensor: Tensor) -> memoryview:
    """The host bytes of an output tensor (a view, valid while it lives)."""
    if tensor.memory_type not in (MemoryType.CPU, MemoryType.CPU_PINNED):
        raise UnsupportedError(f"output in {tensor.memory_type.name} memory cannot be sent")
    size = tensor.size
    if size == 0:
        return memoryview(b"")
    return memoryview((ctypes.c_char * size).from_address(tensor.data_ptr)).cast("B")


def tensor_to_list(name: str, tensor: Tensor) -> list[Any]:
    """A tensor's elements, flattened, as JSON values."""
    datatype = DATATYPE_NAME[int(tensor.data_type)]
    if datatype == "BYTES":
        out = []
        for item in tensor.to_bytes_array().reshape(-1):
            try:
                out.append(item.decode("utf-8"))
            except UnicodeDecodeError:
                raise InvalidArgumentError(
                    f"output '{name}' holds bytes that are not UTF-8 text: request it as "
                    f"binary data") from None
        return out
    if datatype == "BF16":
        raise InvalidArgumentError(
            f"output '{name}' is BF16, which JSON cannot carry: request it as binary data")
    values: list[Any] = np.from_dlpack(tensor).reshape(-1).tolist()
    return values


def shape_list(tensor: Tensor) -> list[int]:
    return [int(d) for d in tensor.shape]


def nbytes_of(shape: list[int], datatype: str) -> int:
    return math.prod(shape) * ELEMENT_SIZE.get(datatype, 0)
