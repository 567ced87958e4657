"""Trace mode opentelemetry without a core (tritonserver._otel): its settings
with Triton's texts, the spans built from a trace's records as Triton's
tracer makes them, the queue that drops what does not fit, and the settings
the trace endpoints answer in that mode (tritonserver._trace)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Optional

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags, TraceState  # noqa: E402

from tritonserver import InvalidArgumentError  # noqa: E402
from tritonserver._otel import (  # noqa: E402
    QUEUE_FULL,
    Identity,
    OtelConfig,
    OtelExport,
    build_spans,
    incoming,
)
from tritonserver._trace import (  # noqa: E402
    DISABLED,
    TIMESTAMPS,
    Setting,
    TraceFile,
    Tracing,
    context_carrier,
    context_headers,
    stoul,
)

CLIENT = "00-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01"


# ---- settings ----------------------------------------------------------------------------

def test_stoul_reads_as_triton_reads_a_uint32():
    assert stoul("42") == 42
    assert stoul("  7abc") == 7
    assert stoul("+5") == 5
    assert stoul("-1") == (1 << 32) - 1  # stoul wraps, then the cast to 32 bits
    assert stoul(str(1 << 33)) == 0
    with pytest.raises(ValueError):
        stoul("x")
    with pytest.raises(OverflowError):
        stoul(str(1 << 64))


def test_config_defaults_environment_and_order():
    config = OtelConfig.parse([("url", "localhost:1/v1/traces"), ("resource", "a=b=c"),
                               ("resource", "bare"), ("bsp_schedule_delay", "10"),
                               ("other", "kept")],
                              environ={"OTEL_BSP_MAX_QUEUE_SIZE": "64"})
    assert config.url == "localhost:1/v1/traces"
    assert config.resource == {"a": "b=c", "bare": "bare"}  # Triton's split at the first "="
    assert (config.max_queue_size, config.schedule_delay_ms,
            config.max_export_batch_size) == (64, 10, 512)
    # As given, then the processor's settings not given (what the endpoints show).
    assert config.entries == [("url", "localhost:1/v1/traces"), ("resource", "a=b=c"),
                              ("resource", "bare"), ("bsp_schedule_delay", "10"),
                              ("other", "kept"), ("bsp_max_queue_size", "64"),
                              ("bsp_max_export_batch_size", "512")]
    defaults = OtelConfig.parse([], environ={})
    assert (defaults.url, defaults.max_queue_size, defaults.schedule_delay_ms,
            defaults.max_export_batch_size) == (None, 2048, 5000, 512)


@pytest.mark.parametrize("entries,environ,message", [
    ([("bsp_max_queue_size", "x")], {},
     'Bad option: "--trace-config opentelemetry,bsp_max_queue_size".\nInvalid option value. '
     'Got x'),
    ([("bsp_max_export_batch_size", "9" * 25)], {},
     'Bad option: "--trace-config opentelemetry,bsp_max_export_batch_size".\nProvided option '
     "value is out of bound. Got " + "9" * 25),
    ([], {"OTEL_BSP_SCHEDULE_DELAY": "soon"},
     'Bad option: "OTEL_BSP_SCHEDULE_DELAY".\nInvalid option value. Got soon'),
])
def test_config_refusals(entries, environ, message):
    with pytest.raises(ValueError) as e:
        OtelConfig.parse(entries, environ)
    assert str(e.value) == message


def test_config_from_the_in_process_mapping():
    exporter = InMemorySpanExporter()
    config = OtelConfig.from_mapping({"url": "http://h:1/v1/traces",
                                      "resource": {"service.name": "app", "k": "v"},
                                      "bsp_max_queue_size": 10, "exporter": exporter})
    assert config.resource == {"service.name": "app", "k": "v"}
    assert config.max_queue_size == 10 and config.exporter is exporter
    assert OtelConfig.from_mapping({"resource": ["x=1"]}).resource == {"x": "1"}
    with pytest.raises(InvalidArgumentError, match="must be a str or int"):
        OtelConfig.from_mapping({"bsp_schedule_delay": 1.5})
    with pytest.raises(InvalidArgumentError, match="bsp_max_queue_size"):
        OtelConfig.from_mapping({"bsp_max_queue_size": "many"})


# ---- contexts ----------------------------------------------------------------------------

def test_context_headers_and_carriers():
    assert context_headers([(b"content-type", b"x"), (b"traceparent", CLIENT.encode()),
                            (b"tracestate", b"a=b")]) == {"traceparent": CLIENT,
                                                         "tracestate": "a=b"}
    assert context_headers([("traceparent", CLIENT)]) == {"traceparent": CLIENT}
    assert context_headers([("x", "y")]) is None
    parent = incoming({"traceparent": CLIENT, "tracestate": "a=b"})
    assert parent is not None and parent.is_remote
    assert (parent.trace_id, parent.span_id) == (0x0af7651916cd43dd8448eb211c12666c,
                                                 0xb7ad6b7169242424)
    assert parent.trace_state.to_header() == "a=b"
    assert incoming({"traceparent": "00-garbage"}) is None
    assert incoming(None) is None  # no current span here
    text = json.dumps({"traceparent": CLIENT, "123": "CUSTOM_ACTIVITY_START"})
    assert context_carrier(text) == {"traceparent": CLIENT}
    assert context_carrier(None) is None and context_carrier("{}") is None


# ---- spans from records ------------------------------------------------------------------

def _identity(parent: Optional[SpanContext] = None) -> Identity:
    trace_id = parent.trace_id if parent is not None else 0x1234
    state = parent.trace_state if parent is not None else TraceState()
    return Identity(trace_id, parent, 1, state, start_ns=100, offset_ns=1_000_000)


def _request(trace: int, model: str, span_id: str, ns: int, parent: int = 0,
             request_id: str = "") -> list[dict[str, Any]]:
    record: dict[str, Any] = {"id": trace, "model_name": model, "model_version": 1,
                              "span_id": span_id}
    if parent:
        record["parent_id"] = parent
    if request_id:
        record["request_id"] = request_id
    return [record, _stamp(trace, "REQUEST_START", ns)]


def _stamp(trace: int, name: str, ns: int, frontend: bool = False) -> dict[str, Any]:
    record: dict[str, Any] = {"id": trace, "timestamps": [{"name": name, "ns": ns}]}
    if frontend:
        record["frontend"] = True
    return record


def _compute(trace: int, ns: int) -> list[dict[str, Any]]:
    return [_stamp(trace, name, ns + i) for i, name in enumerate(
        ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"))]


def _tree(spans: list[Any]) -> dict[str, list[str]]:
    """{parent name: sorted child names}, as the QA test reads the nesting."""
    names = {s.context.span_id: s.name for s in spans}
    tree: dict[str, list[str]] = {}
    for s in spans:
        if s.parent is not None and s.parent.span_id in names:
            tree.setdefault(names[s.parent.span_id], []).append(s.name)
    return {k: sorted(v) for k, v in tree.items()}


def test_a_request_makes_three_spans_as_tritons_tracer():
    records = [_stamp(1, "HTTP_RECV_START", 110, frontend=True),
               *_request(1, "simple", "00000000000000aa", 120, request_id="r1"),
               _stamp(1, "QUEUE_START", 121), *_compute(1, 130), _stamp(1, "REQUEST_END", 140),
               _stamp(1, "HTTP_SEND_END", 150, frontend=True)]
    spans = build_spans(_identity(), records, 200, resource=None)
    assert [s.name for s in spans] == ["compute", "simple", "InferRequest"]  # ended in order
    compute, model, root = spans
    assert _tree(spans) == {"InferRequest": ["simple"], "simple": ["compute"]}
    assert root.parent is None and root.context.trace_id == 0x1234
    assert {s.context.trace_id for s in spans} == {0x1234}
    assert model.context.span_id == 0xaa  # the span id the core's context gave the model
    assert dict(model.attributes) == {"triton.model_name": "simple",
                                      "triton.model_version": 1, "triton.trace_id": 1,
                                      "triton.trace_parent_id": 0, "triton.request_id": "r1"}
    assert [e.name for e in model.events] == ["REQUEST_START", "QUEUE_START", "REQUEST_END"]
    assert [e.name for e in compute.events] == ["COMPUTE_START", "COMPUTE_INPUT_END",
                                                "COMPUTE_OUTPUT_START", "COMPUTE_END"]
    assert [e.name for e in root.events] == ["HTTP_RECV_START", "HTTP_SEND_END"]
    # Core nanoseconds (monotonic) to the wall clock by the trace's offset.
    assert (model.start_time, model.end_time) == (1_000_120, 1_000_140)
    assert (root.start_time, root.end_time) == (1_000_100, 1_000_200)
    assert root.events[0].timestamp == 1_000_110
    assert all(s.kind == SpanKind.SERVER for s in spans)
    assert {s.instrumentation_scope.name for s in spans} == {"triton-server"}


def test_ensemble_and_bls_children_nest_by_the_order_the_core_reported():
    # bls_simple (1) calls an ensemble (2) whose step runs simple (3); the
    # core reports bls_simple's compute after its execute, so the ensemble
    # goes under bls_simple itself, as in Triton.
    records = [*_request(1, "bls_simple", "0000000000000001", 10), _stamp(1, "QUEUE_START", 11),
               *_request(2, "ensemble_add_sub_int32_int32_int32", "0000000000000002", 20,
                         parent=1),
               _stamp(2, "QUEUE_START", 21),
               *_request(3, "simple", "0000000000000003", 30, parent=2),
               _stamp(3, "QUEUE_START", 31), *_compute(3, 32), _stamp(3, "REQUEST_END", 40),
               _stamp(2, "REQUEST_END", 41), *_compute(1, 12), _stamp(1, "REQUEST_END", 50)]
    spans = build_spans(_identity(), records, 60, resource=None)
    assert _tree(spans) == {
        "InferRequest": ["bls_simple"],
        "bls_simple": ["compute", "ensemble_add_sub_int32_int32_int32"],
        "ensemble_add_sub_int32_int32_int32": ["simple"], "simple": ["compute"]}
    ensemble = next(s for s in spans if s.name.startswith("ensemble"))
    assert ensemble.attributes["triton.trace_parent_id"] == 1


def test_custom_activities_are_spans_and_events():
    records = [*_request(1, "custom_identity_int32", "00000000000000c1", 10),
               _stamp(1, "QUEUE_START", 11),
               _stamp(1, "CUSTOM_ACTIVITY_START", 12), _stamp(1, "CUSTOM_ACTIVITY_END", 13),
               _stamp(1, "CUSTOM_SINGLE_ACTIVITY", 14),
               _stamp(1, "CUSTOM_ACTIVITY0_START", 15), _stamp(1, "CUSTOM_SINGLE_ACTIVITY", 16),
               _stamp(1, "CUSTOM_ACTIVITY1_START", 17), _stamp(1, "CUSTOM_ACTIVITY1_END", 18),
               _stamp(1, "CUSTOM_ACTIVITY0_END", 19), *_compute(1, 20),
               _stamp(1, "REQUEST_END", 30)]
    spans = {s.name: s for s in build_spans(_identity(), records, 40, resource=None)}
    assert _tree(list(spans.values())) == {
        "InferRequest": ["custom_identity_int32"],
        "custom_identity_int32": ["CUSTOM_ACTIVITY", "CUSTOM_ACTIVITY0", "compute"],
        "CUSTOM_ACTIVITY0": ["CUSTOM_ACTIVITY1"]}
    assert [e.name for e in spans["custom_identity_int32"].events] == [
        "REQUEST_START", "QUEUE_START", "CUSTOM_SINGLE_ACTIVITY", "REQUEST_END"]
    assert [e.name for e in spans["CUSTOM_ACTIVITY0"].events] == [
        "CUSTOM_ACTIVITY0_START", "CUSTOM_SINGLE_ACTIVITY", "CUSTOM_ACTIVITY0_END"]


def test_a_continued_context_and_spans_left_open():
    parent = SpanContext(0xabc, 0xdef, True, TraceFlags(1), TraceState([("k", "v")]))
    # Cancelled while computing: no COMPUTE_END nor REQUEST_END came.
    records = [*_request(1, "m", "0000000000000009", 10), _stamp(1, "COMPUTE_START", 12)]
    spans = build_spans(_identity(parent), records, 99, resource=None)
    assert [s.name for s in spans] == ["compute", "m", "InferRequest"]
    root = spans[-1]
    assert root.parent == parent and root.context.trace_id == 0xabc
    assert root.context.trace_state.to_header() == "k=v"
    assert all(s.end_time == 99 + 1_000_000 for s in spans)


# ---- the queue ---------------------------------------------------------------------------

def _records(trace: int) -> str:
    return ",".join(json.dumps(r) for r in [
        *_request(trace, "m", f"{trace:016x}", 10), *_compute(trace, 11),
        _stamp(trace, "REQUEST_END", 20)])


def test_export_in_batches_and_drop_what_does_not_fit(caplog):
    exporter = InMemorySpanExporter()
    config = OtelConfig.parse([("bsp_max_queue_size", "5"), ("bsp_schedule_delay", "50"),
                               ("bsp_max_export_batch_size", "2")], environ={})
    config.exporter = exporter
    export = OtelExport(config)
    with caplog.at_level(logging.WARNING, logger="tritonserver.trace"):
        export.finished(export.start(None), _records(1))  # 3 spans: fits
        export.finished(export.start(None), _records(2))  # 3 more: the queue holds 5
    assert export.dropped == 3
    assert QUEUE_FULL in caplog.text
    deadline = time.monotonic() + 10
    while len(exporter.get_finished_spans()) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    export.shutdown()
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["compute", "m", "InferRequest"]
    assert export.exported == 3
    export.finished(export.start(None), _records(3))  # after shutdown: dropped
    assert export.dropped == 6


def test_schedule_delay_zero_exports_each_span_alone():
    batches: list[int] = []

    class Counting(InMemorySpanExporter):
        def export(self, spans: Any) -> Any:
            batches.append(len(spans))
            return super().export(spans)

    config = OtelConfig.parse([("bsp_schedule_delay", "0")], environ={})
    config.exporter = Counting()
    export = OtelExport(config)
    export.finished(export.start(None), _records(1))
    export.shutdown()
    assert batches == [1, 1, 1]


# ---- the settings in mode opentelemetry --------------------------------------------------

def test_settings_in_mode_opentelemetry():
    tracing = Tracing()
    try:
        tracing.configure(level=TIMESTAMPS, rate=0, mode="opentelemetry",
                          otel=OtelConfig.parse([("url", "localhost:9/v1/traces")], environ={}))
        # Rate 0 samples nothing but the requests that continue a context.
        assert tracing.active
        assert tracing.settings() == {
            "trace_level": ["TIMESTAMPS"], "trace_rate": "0", "trace_count": "-1",
            "trace_mode": "opentelemetry", "url": "localhost:9/v1/traces",
            "bsp_max_queue_size": "2048", "bsp_schedule_delay": "5000",
            "bsp_max_export_batch_size": "512"}
        tracing.update("", {"level": DISABLED})
        assert not tracing.active
        tracing.update("", {"level": TIMESTAMPS, "rate": 1})  # no file needed
        assert tracing.settings()["trace_rate"] == "1"
    finally:
        tracing.close()


def test_forced_sampling_ignores_rate_and_count():
    setting = Setting(TIMESTAMPS, 2, 1, 0, TraceFile(""), mode="opentelemetry")
    assert [setting.sample_forced(False) for _ in range(4)] == [False, True, False, False]
    assert setting.count == 0
    assert setting.sample_forced(True)  # a context is traced after the count is spent
    rate_zero = Setting(TIMESTAMPS, 0, -1, 0, TraceFile(""), mode="opentelemetry")
    assert not rate_zero.sample_forced(False) and rate_zero.sample_forced(True)
