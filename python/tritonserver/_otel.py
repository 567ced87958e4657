"""Trace mode "opentelemetry": the spans of Triton's tracer (its
src/tracer.cc, 2.51), built from the core's trace records and exported over
OTLP/HTTP with the OpenTelemetry SDK (the ``otel`` extra).

The settings (level, rate, count, per model) are tritonserver._trace's; this
module is what the mode adds, imported only when a server is configured in it:

* ``OtelConfig``: the mode's settings (``--trace-config opentelemetry,url=...``,
  ``resource=k=v``, ``bsp_*``; Triton's defaults and its ``OTEL_BSP_*``
  variables; the exporter reads the ``OTEL_EXPORTER_OTLP_*`` ones itself).
* ``incoming``: the W3C trace context a request continues: a frontend's
  ``traceparent``/``tracestate`` headers, else the caller's current
  OpenTelemetry span (a request sent in-process inside a span becomes its
  child). Either way the request is traced whatever the rate, as in Triton;
  one whose parent is not sampled is not traced (Triton's parent-based
  sampler records none of its spans).
* ``OtelExport``: per sampled request, a core trace whose records go to the
  binding's TraceSink in OpenTelemetry form (csrc/bindings/trace.h: a span id
  per request, set as the core trace's context, so the python backend's
  ``request.trace().get_context()`` gives it); when the core releases the
  trace, the records are queued, and a worker thread of this module turns
  them into spans and exports them in batches. Nothing on a request's path
  waits for it: a trace whose spans do not fit in the queue
  (``bsp_max_queue_size``) is dropped and counted, with the batch span
  processor's warning, and a slow or absent collector only fills the queue.

The spans are Triton's: ``InferRequest`` per request (its parent the
propagated span; the frontend's timestamps, HTTP_RECV_START..., as events),
under it a span named after the model with the core's REQUEST_START,
QUEUE_START, REQUEST_END as events and the attributes ``triton.model_name``,
``triton.model_version``, ``triton.trace_id``, ``triton.trace_parent_id``,
``triton.request_id``; a ``compute`` span under it (COMPUTE_*); a child
request (an ensemble's step, a BLS call) a model span under its parent's
current span; a backend's custom activity ``<NAME>_START`` ... ``<NAME>_END`` a
span ``<NAME>``. Spans nest in the order the core reported the activities
(the records keep it), as Triton's span stacks do.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from tritonserver._c import triton_bindings as _bindings
from tritonserver._distribution import install_command
from tritonserver._errors import InvalidArgumentError, UnavailableError
from tritonserver._trace import option_number, stoul

try:
    from opentelemetry import trace as _api
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as _missing:
    raise UnavailableError(
        f"trace mode 'opentelemetry' needs the OpenTelemetry SDK ({_missing}); install it with "
        f"{install_command('otel')}") from None

_log = logging.getLogger("tritonserver.trace")

EXTRA = "otel"
SCOPE = "triton-server"  # Triton's tracer name (kTritonTracer)
ROOT_SPAN = "InferRequest"
SERVICE_NAME = "triton-inference-server"
# What the batch span processor logs for a span it drops (opentelemetry-cpp's text).
QUEUE_FULL = "BatchSpanProcessor queue is full - dropping span."
# (setting, environment variable, default): Triton's batch span processor settings.
BSP_SETTINGS = (("bsp_max_queue_size", "OTEL_BSP_MAX_QUEUE_SIZE", 2048),
                ("bsp_schedule_delay", "OTEL_BSP_SCHEDULE_DELAY", 5000),
                ("bsp_max_export_batch_size", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512))
# The activities the core names itself; any other name is a backend's custom one.
CORE_ACTIVITIES = frozenset((
    "REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
    "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END", "TENSOR_QUEUE_INPUT",
    "TENSOR_BACKEND_INPUT", "TENSOR_BACKEND_OUTPUT", "CUSTOM_ACTIVITY"))


def _uint32(text: str) -> int:
    return option_number(stoul, text)


@dataclass
class OtelConfig:
    """The mode's settings: ``entries`` as given (``--trace-config
    opentelemetry,<setting>=<value>``, in order, then the batch span
    processor's defaults), which the trace setting endpoints show, and what
    they mean. ``exporter``: a SpanExporter to use instead of OTLP/HTTP to
    ``url`` (in-process: an application's own)."""

    entries: list[tuple[str, str]] = field(default_factory=list)
    url: Optional[str] = None
    resource: dict[str, str] = field(default_factory=dict)
    max_queue_size: int = 2048
    schedule_delay_ms: int = 5000
    max_export_batch_size: int = 512
    exporter: Any = None

    @classmethod
    def parse(cls, entries: list[tuple[str, str]],
              environ: Optional[Mapping[str, str]] = None) -> "OtelConfig":
        """The settings of ``entries`` (setting, value), with Triton's errors
        (ValueError, the executable's texts); unknown settings are kept and
        shown, as Triton does. The batch span processor settings not given
        come from ``OTEL_BSP_*`` (``environ``, default os.environ) or Triton's
        defaults."""
        env = os.environ if environ is None else environ
        config = cls(entries=list(entries))
        given = set()
        for setting, value in entries:
            if setting == "url":
                config.url = value
            elif setting == "resource":
                key, _, rest = value.partition("=")
                # Triton's split: no "=" gives the whole text as key and value.
                config.resource[key] = rest if "=" in value else value
            elif setting in {s for s, _, _ in BSP_SETTINGS}:
                try:
                    config._set_bsp(setting, _uint32(value))
                except ValueError as e:
                    raise ValueError(f'Bad option: "--trace-config opentelemetry,{setting}".\n'
                                     f"{e}") from None
                given.add(setting)
        for setting, variable, default in BSP_SETTINGS:
            if setting in given:
                continue
            text = env.get(variable, str(default))
            try:
                number = _uint32(text)
            except ValueError as e:
                raise ValueError(f'Bad option: "{variable}".\n{e}') from None
            config._set_bsp(setting, number)
            config.entries.append((setting, str(number)))
        return config

    def pipeline(self) -> "OtelExport":
        """The export these settings describe, started (its worker thread)."""
        return OtelExport(self)

    def _set_bsp(self, setting: str, value: int) -> None:
        if setting == "bsp_max_queue_size":
            self.max_queue_size = value
        elif setting == "bsp_schedule_delay":
            self.schedule_delay_ms = value
        else:
            self.max_export_batch_size = value

    @classmethod
    def from_mapping(cls, settings: Optional[Mapping[str, Any]]) -> "OtelConfig":
        """The settings as Server.configure_tracing takes them: a dict of the
        same settings (``resource`` a dict, or a list of "key=value"; numbers
        as ints or strings), and ``exporter``."""
        entries: list[tuple[str, str]] = []
        exporter = None
        for key, value in (settings or {}).items():
            if key == "exporter":
                exporter = value
            elif key == "resource" and isinstance(value, Mapping):
                entries += [("resource", f"{k}={v}") for k, v in value.items()]
            elif key == "resource" and isinstance(value, (list, tuple)):
                entries += [("resource", str(v)) for v in value]
            elif isinstance(value, (str, int)) and not isinstance(value, bool):
                entries.append((str(key), str(value)))
            else:
                raise InvalidArgumentError(
                    f"opentelemetry setting {key!r} must be a str or int, not "
                    f"{type(value).__name__}")
        try:
            config = cls.parse(entries)
        except ValueError as e:
            raise InvalidArgumentError(str(e)) from None
        config.exporter = exporter
        return config


# ---- The context a request continues -------------------------------------------------

_propagator = TraceContextTextMapPropagator()


def incoming(carrier: Optional[Mapping[str, str]]) -> Optional[Any]:
    """The SpanContext a request continues: ``carrier``'s W3C headers
    (traceparent, tracestate) when it has them, else the caller's current
    span; None when neither is valid."""
    if carrier:
        span = _api.get_current_span(_propagator.extract(carrier))
    else:
        span = _api.get_current_span()
    context = span.get_span_context()
    return context if context.is_valid else None


# ---- One sampled request --------------------------------------------------------------

_ids = random.Random(int.from_bytes(os.urandom(16), "little"))
_ids_lock = threading.Lock()


def _new_id(bits: int) -> int:
    with _ids_lock:
        value = 0
        while value == 0:
            value = _ids.getrandbits(bits)
        return value


@dataclass(eq=False)
class Identity:
    """What a sampled request's spans share, fixed when it is sampled."""

    trace_id: int
    parent: Optional[Any]  # the remote SpanContext continued, or None
    flags: int
    state: Any  # TraceState
    start_ns: int  # time.monotonic_ns() when sampled: the InferRequest span's start
    offset_ns: int  # wall clock minus monotonic clock (the core's)


class _Open:
    """A span being built."""

    __slots__ = ("name", "span_id", "parent", "start", "end", "attributes", "events")

    def __init__(self, name: str, span_id: int, parent: Optional[Any], start: int):
        self.name = name
        self.span_id = span_id
        self.parent = parent  # SpanContext
        self.start = start
        self.end: Optional[int] = None
        self.attributes: dict[str, Any] = {}
        self.events: list[tuple[str, int]] = []


def build_spans(identity: Identity, records: list[dict[str, Any]], end_ns: int,
                resource: Any) -> list[Any]:
    """The ReadableSpans of one finished trace (its records in the order
    the core reported them), ended in Triton's order; ``end_ns`` (monotonic)
    ends the InferRequest span and any span left open, as the SDK ends a
    span when its trace goes."""
    flags = _api.TraceFlags(identity.flags)

    def context_of(span: _Open) -> Any:
        return _api.SpanContext(identity.trace_id, span.span_id, False, flags, identity.state)

    root = _Open(ROOT_SPAN, _new_id(64), identity.parent, identity.start_ns)
    stacks: dict[int, list[_Open]] = {}
    requests: dict[int, dict[str, Any]] = {}
    finished: list[_Open] = []
    root_id: Optional[int] = None

    def start(trace: int, name: str, ns: int, activity: str) -> None:
        info = requests.get(trace, {})
        parent_trace = info.get("parent_id", 0)
        # Triton: a request's span goes under its parent request's current
        # span (a child trace), every other under the current span of its own.
        owner = parent_trace if activity == "REQUEST_START" and parent_trace else trace
        below = stacks.get(owner) or []
        parent = context_of(below[-1]) if below else None
        if activity == "REQUEST_START":
            span_id = int(info["span_id"], 16) if "span_id" in info else _new_id(64)
        else:
            span_id = _new_id(64)
        span = _Open(name, span_id, parent, ns)
        if activity == "REQUEST_START":
            span.attributes = {"triton.model_name": name,
                               "triton.model_version": int(info.get("model_version", -1)),
                               "triton.trace_id": trace,
                               "triton.trace_parent_id": parent_trace}
            if info.get("request_id"):
                span.attributes["triton.request_id"] = info["request_id"]
        stacks.setdefault(trace, []).append(span)

    for record in records:
        trace = record.get("id", 0)
        if "model_name" in record:
            requests[trace] = record
            if not record.get("parent_id") and root_id is None:
                root_id = trace
                stacks.setdefault(trace, []).insert(0, root)
            continue
        for stamp in record.get("timestamps", ()):
            name, ns = stamp["name"], stamp["ns"]
            if record.get("frontend"):
                root.events.append((name, ns))
                continue
            custom = name not in CORE_ACTIVITIES
            if name == "REQUEST_START":
                start(trace, requests.get(trace, {}).get("model_name", ""), ns, name)
            elif name == "COMPUTE_START":
                start(trace, "compute", ns, name)
            elif custom and len(name) > 6 and name.endswith("_START"):
                start(trace, name[:-6], ns, "CUSTOM_ACTIVITY")
            stack = stacks.get(trace)
            if stack:
                stack[-1].events.append((name, ns))
            if name in ("REQUEST_END", "COMPUTE_END") or \
                    (custom and len(name) > 4 and name.endswith("_END")):
                if stack and stack[-1] is not root:
                    span = stack.pop()
                    span.end = ns
                    finished.append(span)
    # What the core left open ends with the trace, innermost first; then the root.
    for stack in stacks.values():
        while stack and stack[-1] is not root:
            span = stack.pop()
            span.end = end_ns
            finished.append(span)
    root.end = end_ns
    finished.append(root)

    scope = InstrumentationScope(SCOPE)
    offset = identity.offset_ns
    return [ReadableSpan(
        name=span.name, context=context_of(span), parent=span.parent, resource=resource,
        attributes=span.attributes,
        events=[Event(name, timestamp=ns + offset) for name, ns in span.events],
        kind=_api.SpanKind.SERVER, start_time=span.start + offset,
        end_time=(span.end if span.end is not None else end_ns) + offset,
        instrumentation_scope=scope) for span in finished]


def _estimate(records: str) -> int:
    """How many spans a trace's records make (the queue counts in spans):
    one per request, one per compute, and the InferRequest span."""
    return records.count('"span_id"') + records.count('"COMPUTE_START"') + 1


# ---- Export ---------------------------------------------------------------------------

class OtelExport:
    """One server's OpenTelemetry pipeline: sinks for sampled requests, a
    queue of finished traces and a worker thread that builds their spans
    and exports them in batches (see the module's docstring)."""

    def __init__(self, config: OtelConfig):
        self.config = config
        attributes = {"service.name": SERVICE_NAME, **config.resource}
        self.resource = Resource.create(attributes)
        exporter = config.exporter
        if exporter is None:
            url = config.url
            if url is not None and "://" not in url:
                url = "http://" + url  # Triton's form, host:port/path, is plain HTTP
            exporter = OTLPSpanExporter(endpoint=url)
        self.exporter = exporter
        self.dropped = 0  # spans dropped because the queue was full
        self.exported = 0  # spans handed to the exporter
        self._cv = threading.Condition(threading.Lock())
        self._traces: deque[tuple[Identity, str, int, int]] = deque()
        self._queued = 0  # spans in the queue (traces counted by _estimate)
        self._stopping = False
        self._last_warning = 0.0
        self._thread = threading.Thread(target=self._run, name="tritonserver-otel-export",
                                        daemon=True)
        self._thread.start()

    # -- on the requests' side: never waits for the worker --

    incoming = staticmethod(incoming)

    def sink(self, parent: Optional[Any]) -> Any:
        """The TraceSink of one sampled request, continuing ``parent`` (a
        SpanContext) or starting a trace of its own."""
        identity = self.start(parent)

        def collect(records: str) -> None:
            self.finished(identity, records)

        return _bindings.TraceSink(collect, f"{identity.trace_id:032x}",
                                   f"{identity.flags:02x}", identity.state.to_header())

    @staticmethod
    def start(parent: Optional[Any]) -> Identity:
        """A sampled request's identity, from now (its InferRequest span's start)."""
        if parent is not None:
            identity = Identity(parent.trace_id, parent, int(parent.trace_flags),
                                parent.trace_state, 0, 0)
        else:
            identity = Identity(_new_id(128), None, 1, _api.TraceState(), 0, 0)
        identity.start_ns = time.monotonic_ns()
        identity.offset_ns = time.time_ns() - identity.start_ns
        return identity

    def finished(self, identity: Identity, records: str) -> None:
        """A sampled request's trace finished (the core released it): its
        records are queued, or dropped when its spans do not fit."""
        end_ns = time.monotonic_ns()
        spans = _estimate(records)
        with self._cv:
            if self._stopping or self._queued + spans > self.config.max_queue_size:
                self.dropped += spans
                warn = True
            else:
                self._traces.append((identity, records, end_ns, spans))
                self._queued += spans
                warn = False
                if self.config.schedule_delay_ms == 0 or \
                        self._queued >= self.config.max_export_batch_size:
                    self._cv.notify()
        if warn:
            self._warn_dropped()

    def _warn_dropped(self) -> None:
        now = time.monotonic()
        if now - self._last_warning >= 1.0:  # at most once a second, with the count
            self._last_warning = now
            _log.warning("%s (%d spans dropped so far)", QUEUE_FULL, self.dropped)

    # -- the worker --

    def _run(self) -> None:
        delay = self.config.schedule_delay_ms / 1000.0
        while True:
            with self._cv:
                if delay > 0:
                    self._cv.wait_for(lambda: self._stopping or
                                      self._queued >= self.config.max_export_batch_size,
                                      timeout=delay)
                else:
                    self._cv.wait_for(lambda: self._stopping or bool(self._traces))
                taken = list(self._traces)
                self._traces.clear()
                stopping = self._stopping
            self._export(taken)
            if stopping:
                with self._cv:
                    if not self._traces:
                        return

    def _export(self, taken: list[tuple[Identity, str, int, int]]) -> None:
        spans: list[Any] = []
        for identity, records, end_ns, estimated in taken:
            try:
                spans += build_spans(identity, json.loads("[" + records + "]"), end_ns,
                                     self.resource)
            except Exception:  # a record the builder cannot read: that trace is lost
                _log.exception("failed building the spans of a trace")
            with self._cv:
                self._queued -= estimated
        # Schedule delay 0: no batching wait, every span in an export of its own.
        size = 1 if self.config.schedule_delay_ms == 0 else \
            max(1, self.config.max_export_batch_size)
        for at in range(0, len(spans), size):
            batch = spans[at:at + size]
            try:
                self.exporter.export(batch)
            except Exception:
                _log.exception("failed exporting %d spans", len(batch))
            self.exported += len(batch)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Export what is queued (waiting up to ``timeout`` seconds), then
        shut the exporter down; traces finishing later are dropped."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
        self._thread.join(timeout)
        try:
            self.exporter.shutdown()
        except Exception:
            _log.exception("failed shutting the span exporter down")
        if self.dropped:
            _log.warning("OpenTelemetry tracing: %d spans were dropped (the queue of %d was "
                         "full)", self.dropped, self.config.max_queue_size)
