"""Trace settings and trace files, as Triton's executable keeps them: what
the core records, for the in-process API and every frontend. The settings
as gRPC sends them are read in ``frontends/grpc/trace.py``, the command
line's ``--trace-config`` in ``_cli/trace_flags.py``.

One ``Tracing`` per Server (tritonserver._registries) holds the global setting,
the per-model settings and the trace files, so every frontend and the
in-process API share them. The rules are those of Triton's ``tritonserver``
(its src/tracer.cc, 2.51): a model's setting copies what it does not specify
from the global one, and follows the global one when that changes; a
cleared (null) global field goes back to the startup value; a setting
samples every ``trace_rate``-th request of its models, ``trace_count`` times
(-1: no limit).

Two modes, as Triton's: "triton" (the JSON trace file, below) and
"opentelemetry" (spans exported over OTLP: tritonserver._otel, imported only
for that mode). The mode is chosen at startup; the settings work the same in
both, but that in mode opentelemetry a request that continues a W3C trace
context (a frontend's ``traceparent`` header, or the in-process caller's
current span) is traced whatever the rate and count, as in Triton, and a
setting needs no file.

A sampled request is sent with a core trace (tritonserver._c TraceSink /
InferenceRequest.set_trace): the binding records the core's activities in
C++ and hands each finished trace's JSON records to its setting, which
writes them as Triton does: every ``log_frequency`` traces to
``<trace_file>.<index>``, and when ``trace_count`` runs out; with
``log_frequency`` 0 the rest goes to ``<trace_file>`` itself when the setting
is replaced or the server stops (a JSON array of the records).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from tritonserver._c import triton_bindings as _bindings
from tritonserver._errors import (InternalError, InvalidArgumentError, InvalidArgumentTypeError,
                                  UnsupportedError)

_LEVELS = _bindings.enum_tables()["InferenceTraceLevel"]
DISABLED: int = _LEVELS["DISABLED"]
TIMESTAMPS: int = _LEVELS["TIMESTAMPS"]
TENSORS: int = _LEVELS["TENSORS"]
MIN_TRACE_COUNT = -1
_INT32 = (-(1 << 31), (1 << 31) - 1)
_UINT32_MAX = (1 << 32) - 1

if TYPE_CHECKING:
    from tritonserver._otel import OtelConfig, OtelExport

_log = logging.getLogger("tritonserver.trace")
TRITON = "triton"
OPENTELEMETRY = "opentelemetry"
MODES = (TRITON, OPENTELEMETRY)
# The W3C trace context headers a frontend hands on (its carrier, lowercase).
CONTEXT_HEADERS = ("traceparent", "tracestate")

# A field of a setting update: absent (not in the dict), None (cleared: the
# value it falls back to), or the new value.
NewSetting = dict[str, Optional[int]]


def stoi(text: str) -> int:
    """std::stoi: leading blanks, a sign and digits; the rest is ignored.
    ValueError when there are no digits, OverflowError outside int32."""
    match = re.match(r"[ \t\n\v\f\r]*([+-]?[0-9]+)", text)
    if match is None:
        raise ValueError(text)
    value = int(match.group(1))
    if not _INT32[0] <= value <= _INT32[1]:
        raise OverflowError(text)
    return value


def stoul(text: str) -> int:
    """std::stoul as Triton's executable reads a uint32 option: blanks, a
    sign, digits, the rest ignored; a minus wraps (as stoul does); then cut
    to 32 bits. ValueError when there are no digits, OverflowError past 64 bits."""
    match = re.match(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)", text)
    if match is None:
        raise ValueError(text)
    value = int(match.group(2))
    if value >= 1 << 64:
        raise OverflowError(text)
    if match.group(1) == "-":
        value = -value % (1 << 64)
    return value & _UINT32_MAX


def option_number(read: Callable[[str], int], text: str) -> int:
    """``read(text)`` (stoi, stoul) with the executable's texts for an
    option value it cannot read (ValueError)."""
    try:
        return read(text)
    except ValueError:
        raise ValueError(f"Invalid option value. Got {text}") from None
    except OverflowError:
        raise ValueError(f"Provided option value is out of bound. Got {text}") from None


def level_names(level: int) -> list[str]:
    if level == DISABLED:
        return ["OFF"]
    return [name for bit, name in ((TIMESTAMPS, "TIMESTAMPS"), (TENSORS, "TENSORS"))
            if level & bit]


def parse_levels(values: list[str]) -> Optional[int]:
    """A trace_level list as Triton's frontends read it; None when it names
    no level (unknown names are ignored, as Triton does)."""
    level: Optional[int] = None
    for name in values:
        if name == "OFF":
            if len(values) != 1:
                raise InvalidArgumentError("Expect only one trace level 'OFF' is specified")
            level = DISABLED
        elif name == "TIMESTAMPS":
            level = (level or 0) | TIMESTAMPS
        elif name == "TENSORS":
            level = (level or 0) | TENSORS
    return level


def context_headers(pairs: Any) -> Optional[dict[str, str]]:
    """The W3C trace context among a request's headers or metadata
    (``pairs``: (name, value) with lowercase names, str or bytes), or None."""
    found: Optional[dict[str, str]] = None
    for name, value in pairs:
        key = name.decode("latin-1") if isinstance(name, bytes) else name
        if key in CONTEXT_HEADERS:
            if found is None:
                found = {}
            found[key] = value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return found


def context_carrier(context_text: Optional[str]) -> Optional[dict[str, str]]:
    """The W3C trace context headers in a core trace's context (its JSON
    text, where mode opentelemetry sets the request span's traceparent; the
    python backend's request.trace().get_context()), or None."""
    if not context_text:
        return None
    try:
        found = json.loads(context_text)
    except ValueError:
        return None
    if not isinstance(found, dict) or not isinstance(found.get("traceparent"), str):
        return None
    return {key: found[key] for key in CONTEXT_HEADERS if isinstance(found.get(key), str)}


def parse_number(key: str, text: str, http: bool) -> int:
    try:
        value = stoi(text)
    except ValueError:
        raise InvalidArgumentError(f"Unable to parse '{key}', got: {text}") from None
    except OverflowError:
        low = MIN_TRACE_COUNT if key == "trace_count" else 0
        high = _INT32[1] if key == "trace_count" else _UINT32_MAX
        raise InvalidArgumentError(f"Unable to parse '{key}', value is out of range [ {low}, "
                                   f"{high} ], got: {text}") from None
    if key == "trace_count":
        if value < MIN_TRACE_COUNT:
            sep = "" if http else " "
            raise InvalidArgumentError(f"Unable to parse 'trace_count'. Expecting value >= "
                                       f"{MIN_TRACE_COUNT}, got:{sep}{text}")
        return value
    return value & _UINT32_MAX  # Triton stores them as uint32


FIELDS = {"trace_level": "level", "trace_rate": "rate", "trace_count": "count",
           "log_frequency": "log_frequency"}


def parse_update(body: dict[str, Any]) -> NewSetting:
    """The update in a trace setting request's JSON object, as HTTP's body
    and Server.update_trace_settings give it (Triton's texts for what it
    refuses). gRPC's settings: tritonserver.frontends.grpc.trace."""
    if "trace_file" in body:
        raise UnsupportedError("trace file location can not be updated through network protocol")
    new: NewSetting = {}
    for key, name in FIELDS.items():
        if key not in body:
            continue
        value = body[key]
        if value is None:
            new[name] = None
        elif key == "trace_level":
            if not isinstance(value, list):
                raise InternalError("JSON, failed accessing non-array as array")
            if not all(isinstance(v, str) for v in value):
                raise InternalError("JSON, failed accessing non-string as string")
            level = parse_levels(value)
            if level is not None:
                new[name] = level
        else:
            if not isinstance(value, str):
                raise InternalError("JSON, failed accessing non-string as string")
            new[name] = parse_number(key, value, http=True)
    return new


class TraceFile:
    """One trace file path: its indexed files and the file itself (a JSON
    array, closed when the server stops; a trace that finishes later is
    still added to it)."""

    def __init__(self, path: str):
        self.path = path
        self._index = 0
        # Reentrant, as Setting's lock (see there).
        self._lock = threading.RLock()
        self._stream: Any = None
        self._first = True  # nothing written to the file yet
        self._any = False  # it holds a record
        self._closed = False

    def save(self, records: list[str], indexed: bool) -> None:
        text = ",".join(r for r in records if r)
        try:
            with self._lock:
                if indexed:
                    name = f"{self.path}.{self._index}"
                    self._index += 1
                    with open(name, "w", encoding="utf-8") as f:
                        f.write("[" + text + "]")
                    return
                if self._closed:
                    self._add_after_close(text)
                    return
                if self._first:
                    self._stream = open(self.path, "w", encoding="utf-8")
                    self._stream.write("[")
                    self._first = False
                if text:
                    self._stream.write(("," if self._any else "") + text)
                    self._any = True
                self._stream.flush()
        except OSError as e:
            _log.error("failed creating trace file: %s", e)

    def _add_after_close(self, text: str) -> None:
        if not text:
            return
        if self._first:
            with open(self.path, "w", encoding="utf-8") as f:
                f.write("[" + text + "]")
            self._first = False
        else:
            with open(self.path, "r+", encoding="utf-8") as f:
                end = f.seek(0, 2)
                f.seek(end - 1)  # before the closing bracket
                f.write(("," if self._any else "") + text + "]")
        self._any = True

    def close(self) -> None:
        with self._lock:
            stream, self._stream = self._stream, None
            self._closed = True
            if stream is not None:
                try:
                    stream.write("]")
                    stream.close()
                except OSError as e:
                    _log.error("failed writing trace file: %s", e)


@dataclass(eq=False)
class Setting:
    """One trace setting (global or a model's) and the traces it sampled."""

    level: int
    rate: int
    count: int
    log_frequency: int
    file: TraceFile
    specified: dict[str, bool] = field(default_factory=dict)
    mode: str = TRITON
    reason: str = ""
    # Reentrant: a trace is handed over when its request is freed, which a
    # garbage collection may do on this very thread while it holds the lock.
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _sampled: int = 0  # requests counted for the rate
    _created: int = 0
    _collected: int = 0
    _pending: int = 0  # sampled traces not yet finished
    _stream: list[str] = field(default_factory=list)  # finished, not yet written
    _retired: bool = False

    def __post_init__(self) -> None:
        if self.level == DISABLED:
            self.reason = "tracing is disabled"
        elif self.rate == 0:
            self.reason = "sample rate must be non-zero"
        elif self.mode == TRITON and not self.file.path:
            self.reason = "trace file name is not given"

    def valid(self) -> bool:
        return not self.reason and self.count != 0

    def sample(self) -> bool:
        """Whether this request is traced (counts it for the rate)."""
        with self._lock:
            if self.rate == 0 or not self.valid():
                return False
            self._sampled += 1
            if self._sampled % self.rate != 0:
                return False
            if self.count > 0:
                self.count -= 1
            self._created += 1
            self._pending += 1
            return True

    def sample_forced(self, forced: bool) -> bool:
        """Mode opentelemetry (Triton's SampleTrace): a request continuing a
        trace context (``forced``) is traced whatever the rate and count,
        and still counts for the rate (a count hit when the count is spent
        samples nothing more)."""
        with self._lock:
            hit = False
            if self.rate != 0:
                if not self.valid() and not forced:
                    return False
                self._sampled += 1
                hit = self._sampled % self.rate == 0
                if hit and self.count > 0:
                    self.count -= 1
                elif hit and self.count == 0:
                    hit = False
            return hit or forced

    def sink(self) -> Any:
        """Where one sampled trace goes. One per trace (not kept here): the
        trace keeps its setting alive until it is written, as Triton's do,
        and no cycle through the binding keeps a replaced setting."""
        return _bindings.TraceSink(self._collect)

    def _collect(self, records: str) -> None:
        """A sampled trace finished (on the thread that released it)."""
        write: Optional[tuple[list[str], bool]] = None
        with self._lock:
            self._stream.append(records)
            self._collected += 1
            self._pending -= 1
            if (self.count == 0 and self._collected == self._created) or \
                    (self.log_frequency != 0 and len(self._stream) >= self.log_frequency):
                write = (self._stream, True)
                self._stream = []
            elif self._retired and self._pending == 0:
                write = self._take_rest()
        if write is not None:
            self.file.save(*write)

    def _take_rest(self) -> Optional[tuple[list[str], bool]]:
        if not self._stream:
            return None
        rest, self._stream = self._stream, []
        return rest, self.log_frequency != 0

    def retire(self) -> None:
        """Replaced or stopped: what is left is written once its traces finish."""
        with self._lock:
            self._retired = True
            write = self._take_rest() if self._pending == 0 else None
        if write is not None:
            self.file.save(*write)


class Tracing:
    """The trace settings of one server (see the module's docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, TraceFile] = {}
        self._models: dict[str, Setting] = {}
        self._fallback: set[str] = set()
        self._extras: list[tuple[str, str]] = []
        self.mode = TRITON
        self._otel: Optional[OtelExport] = None
        self.configure()

    def configure(self, trace_file: str = "", level: int = DISABLED, rate: int = 1000,
                  count: int = -1, log_frequency: int = 0,
                  extras: Optional[list[tuple[str, str]]] = None, mode: str = TRITON,
                  otel: Optional[OtelConfig] = None) -> None:
        """The startup settings (the executable's --trace-config): what a
        cleared global field returns to. Drops every model's setting. Mode
        opentelemetry exports spans as ``otel`` says (tritonserver._otel's
        OtelConfig, which needs the otel extra), and shows its settings."""
        export: Optional[OtelExport] = None
        if mode == OPENTELEMETRY:
            if otel is None:
                raise InvalidArgumentError("trace mode 'opentelemetry' needs its settings")
            export = otel.pipeline()
            extras = list(otel.entries)
        with self._lock:
            old = [getattr(self, "_global", None), *self._models.values()]
            old_export, self._otel = self._otel, export
            self.mode = mode
            self._models = {}
            self._fallback = set()
            self._extras = list(extras or [])
            file = self._file(trace_file)
            self._default = Setting(level, rate & _UINT32_MAX, count,
                                    log_frequency & _UINT32_MAX, file, mode=mode)
            self._global = Setting(level, rate & _UINT32_MAX, count,
                                   log_frequency & _UINT32_MAX, file, mode=mode)
            self._refresh()
        for setting in old:
            if setting is not None:
                setting.retire()
        if old_export is not None:
            old_export.shutdown()

    def configure_checked(self, trace_file: Any, trace_level: Any, trace_rate: Any,
                          trace_count: Any, log_frequency: Any, trace_mode: Any = TRITON,
                          otel: Optional[OtelConfig] = None) -> None:
        """configure() with Server.configure_tracing's arguments, checked:
        ``trace_level`` "OFF", "TIMESTAMPS", "TENSORS" or a list of them;
        ``trace_mode`` "triton" or "opentelemetry" (with ``otel``, its settings)."""
        if trace_mode not in MODES:
            raise InvalidArgumentError(
                f"trace_mode must be 'triton' or 'opentelemetry', got {trace_mode!r}")
        names = [trace_level] if isinstance(trace_level, str) else list(trace_level)
        level = 0
        for name in names:
            if name not in ("OFF", "TIMESTAMPS", "TENSORS"):
                raise InvalidArgumentError(
                    f"trace_level must be OFF, TIMESTAMPS or TENSORS, got {name!r}")
            level |= {"OFF": 0, "TIMESTAMPS": TIMESTAMPS, "TENSORS": TENSORS}[name]
        if "OFF" in names:
            level = 0
        for key, value in (("trace_rate", trace_rate), ("trace_count", trace_count),
                           ("log_frequency", log_frequency)):
            if isinstance(value, bool) or not isinstance(value, int) or \
                    not -1 <= value < (1 << 32) or (value < 0 and key != "trace_count"):
                raise InvalidArgumentError(f"{key} must be an int in range, got {value!r}")
        if not isinstance(trace_file, str):
            raise InvalidArgumentTypeError("trace_file must be a str")
        self.configure(trace_file, level, trace_rate, trace_count, log_frequency,
                       mode=trace_mode, otel=otel)

    def _file(self, path: str) -> TraceFile:
        file = self._files.get(path)
        if file is None:
            file = self._files[path] = TraceFile(path)
        return file

    def _refresh(self) -> None:
        # Mode opentelemetry samples requests that continue a context even
        # where the rate is 0 (Triton's way to trace only those).
        self.active = any(s.level != DISABLED and (not s.reason or self.mode == OPENTELEMETRY)
                          for s in (self._global, *self._models.values()))

    def settings(self, model_name: Optional[str] = None) -> dict[str, Any]:
        """The setting in force for ``model_name`` (or the global one), as
        Triton's HTTP endpoint answers it."""
        with self._lock:
            s = self._models.get(model_name or "", self._global) if model_name else self._global
        out: dict[str, Any] = {
            "trace_level": level_names(s.level), "trace_rate": str(s.rate),
            "trace_count": str(s.count)}
        if self.mode == TRITON:
            out.update(log_frequency=str(s.log_frequency), trace_file=s.file.path)
        out["trace_mode"] = self.mode
        for key, value in self._extras:
            out[key] = value
        return out

    def update(self, model_name: Optional[str], new: NewSetting) -> None:
        """Apply an update to the global setting (no model name) or a
        model's; then the models that copy global fields follow."""
        retired: list[Setting] = []
        try:
            with self._lock:
                self._update(model_name or "", new, retired)
                if not model_name:
                    for name in sorted(self._fallback):
                        self._update(name, {}, retired)
                self._refresh()
        finally:
            for setting in retired:
                setting.retire()

    def _update(self, model_name: str, new: NewSetting, retired: list[Setting]) -> None:
        if model_name:
            current: Optional[Setting] = self._models.get(model_name)
            fallback = self._global
        else:
            current, fallback = self._global, self._default
        values: dict[str, Any] = {"level": fallback.level, "rate": fallback.rate,
                                  "count": fallback.count,
                                  "log_frequency": fallback.log_frequency}
        specified: dict[str, bool] = {}
        for name in values:
            if name in new and new[name] is None:
                specified[name] = False
            else:
                specified[name] = bool(current is not None and current.specified.get(name)) \
                    or (name in new)
            if specified[name]:
                values[name] = new[name] if new.get(name) is not None else \
                    getattr(current, name)
        file_specified = bool(current is not None and current.specified.get("file"))
        file = current.file if file_specified and current is not None else fallback.file
        if model_name:
            if all(specified.values()) and file_specified:
                self._fallback.discard(model_name)
            elif not any(specified.values()) and not file_specified:
                old = self._models.pop(model_name, None)
                if old is not None:
                    retired.append(old)
                return
            else:
                self._fallback.add(model_name)
        setting = Setting(values["level"], values["rate"], values["count"],
                          values["log_frequency"], file, {**specified, "file": file_specified},
                          mode=self.mode)
        if not setting.valid() and setting.level != DISABLED:
            raise InvalidArgumentError("Attempting to set invalid trace setting :" + setting.reason)
        if model_name:
            old = self._models.get(model_name)
            self._models[model_name] = setting
        else:
            old, self._global = self._global, setting
        if old is not None:
            retired.append(old)

    def attach(self, request: Any, model_name: str,
               carrier: Optional[Mapping[str, str]] = None) -> None:
        """Send ``request`` (the binding's) with a trace if its setting
        samples it. ``carrier``: the W3C trace context headers a frontend
        got (mode opentelemetry continues it; in-process, the caller's
        current span)."""
        setting = self._models.get(model_name, self._global)
        if setting.level == DISABLED:
            return
        export = self._otel
        if export is None:
            if setting.sample():
                request.set_trace(setting.level, setting.sink())
            return
        parent = export.incoming(carrier)
        if parent is not None and not parent.trace_flags.sampled:
            return  # a parent not sampled: none of its spans would be recorded
        if setting.sample_forced(parent is not None):
            request.set_trace(setting.level, export.sink(parent))

    @property
    def dropped_spans(self) -> int:
        """Mode opentelemetry: the spans dropped because the export queue
        was full (0 in mode triton)."""
        export = self._otel
        return 0 if export is None else export.dropped

    def close(self) -> None:
        """The server stopped: write what is left and close the files;
        export the spans left (mode opentelemetry)."""
        with self._lock:
            settings = [self._global, *self._models.values()]
            self.active = False
            export, self._otel = self._otel, None
        for setting in settings:
            setting.retire()
        for file in self._files.values():
            file.close()
        if export is not None:
            export.shutdown()
