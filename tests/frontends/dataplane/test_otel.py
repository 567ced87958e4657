"""Trace mode opentelemetry against the real core, exported over OTLP/HTTP
to a real receiver (tests/frontends/otlp_receiver.py): the spans of Triton's
tracer, a client's W3C trace context continued over HTTP, gRPC (unary and
streaming) and in-process (a request sent inside an application's span
becomes its child), the trace setting endpoints switching it at run time,
python models reading their request's span context, a collector that is
down never holding a request, and ``serve --trace-config mode=opentelemetry``."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import time
from typing import Any, Iterator

import numpy as np
import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http",
                    reason="the otel extra is not installed")

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.trace.propagation.tracecontext import (  # noqa: E402
    TraceContextTextMapPropagator,
)

import tritonserver  # noqa: E402
from conftest import stop_within  # noqa: E402
from frontends import support  # noqa: E402
from frontends.conftest import Endpoints  # noqa: E402
from frontends.dataplane.conftest import ENSEMBLE  # noqa: E402
from frontends.otlp_receiver import Receiver  # noqa: E402
from tritonserver._server import tracing_of  # noqa: E402
from tritonserver.frontends import KServeHttp  # noqa: E402

CLIENT_TRACE = "0af7651916cd43dd8448eb211c12666c"
CLIENT_SPAN = "b7ad6b7169242424"
CLIENT = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01", "tracestate": "vendor=1"}
MODEL_EVENTS = ["REQUEST_START", "QUEUE_START", "REQUEST_END"]
COMPUTE_EVENTS = ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"]


@pytest.fixture(scope="module")
def frontend_server(trace_server: tritonserver.Server) -> tritonserver.Server:
    return trace_server


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


@pytest.fixture
def traced(endpoints: Endpoints, receiver: Receiver) -> Iterator[Endpoints]:
    """The endpoints' server in mode opentelemetry, every request traced,
    exported to ``receiver`` (emptied) within 50 ms."""
    receiver.clear()
    otel(endpoints.server, receiver)
    yield endpoints
    endpoints.server.configure_tracing()


def otel(server: tritonserver.Server, receiver: Receiver, rate: int = 1,
         **settings: Any) -> dict[str, Any]:
    return server.configure_tracing(
        trace_level="TIMESTAMPS", trace_rate=rate, trace_mode="opentelemetry",
        opentelemetry={"url": receiver.url, "bsp_schedule_delay": 50,
                       "resource": {"service.name": "tests", "test.key": "v"}, **settings})


def by_name(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


def tree(spans: list[dict[str, Any]]) -> dict[str, list[str]]:
    """{parent name: sorted child names} (the nesting, as Triton's QA reads it)."""
    names = {s["spanId"]: s["name"] for s in spans}
    out: dict[str, list[str]] = {}
    for s in spans:
        if s["parentSpanId"] in names:
            out.setdefault(names[s["parentSpanId"]], []).append(s["name"])
    return {k: sorted(v) for k, v in out.items()}


def events(span: dict[str, Any]) -> list[str]:
    return [e["name"] for e in span.get("events", [])]


def attributes(item: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in item.get("attributes", [])}


def check_request(spans: list[dict[str, Any]], frontend: str,
                  continued: bool = True) -> dict[str, Any]:
    """One traced identity_fp32 request: its three spans as Triton's tracer
    makes them; returns the InferRequest span."""
    assert sorted(s["name"] for s in spans) == ["InferRequest", "compute", "identity_fp32"]
    assert tree(spans) == {"InferRequest": ["identity_fp32"], "identity_fp32": ["compute"]}
    root = by_name(spans, "InferRequest")[0]
    model = by_name(spans, "identity_fp32")[0]
    assert events(model) == MODEL_EVENTS
    assert events(by_name(spans, "compute")[0]) == COMPUTE_EVENTS
    ours = {"http": ["HTTP_RECV_START", "HTTP_RECV_END", "INFER_RESPONSE_COMPLETE",
                     "HTTP_SEND_START", "HTTP_SEND_END"],
            "grpc": ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "INFER_RESPONSE_COMPLETE",
                     "GRPC_SEND_START", "GRPC_SEND_END"],
            "stream": ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END"], "none": []}[frontend]
    assert events(root) == ours
    model_attributes = attributes(model)
    assert model_attributes["triton.model_name"] == "identity_fp32"
    assert model_attributes["triton.model_version"] == "1"  # an int: a string in OTLP/JSON
    assert model_attributes["triton.trace_parent_id"] == "0"
    assert {s["kind"] for s in spans} == {2}  # SERVER
    assert {s["traceId"] for s in spans} == {root["traceId"]}
    if continued:
        assert root["traceId"] == CLIENT_TRACE and root["parentSpanId"] == CLIENT_SPAN
        assert root.get("traceState") == "vendor=1"
    else:
        assert root["parentSpanId"] == ""
    assert attributes(root["resource"])["service.name"] == "tests"
    assert attributes(root["resource"])["test.key"] == "v"
    assert int(root["startTimeUnixNano"]) <= int(model["startTimeUnixNano"]) \
        <= int(model["endTimeUnixNano"]) <= int(root["endTimeUnixNano"])
    # The wall clock: the core's monotonic nanoseconds moved by the trace's offset.
    assert abs(int(root["startTimeUnixNano"]) / 1e9 - time.time()) < 60
    return root


def infer_http(client: Any, headers: Any = None) -> None:
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(np.ones(4, np.float32))
    # A copy: tritonclient adds its own headers to the dict it is given.
    client.infer("identity_fp32", [inp], headers=dict(headers) if headers else None)


def infer_grpc(client: Any, headers: Any = None) -> None:
    inp = grpcclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(np.ones(4, np.float32))
    # A copy: tritonclient adds its own headers to the dict it is given.
    client.infer("identity_fp32", [inp], headers=dict(headers) if headers else None)


def infer_in_process(server: tritonserver.Server) -> None:
    list(server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(4, np.float32)}))


# ---- the wire ----------------------------------------------------------------------------

def test_http_continues_the_clients_trace(traced: Endpoints, receiver: Receiver):
    infer_http(httpclient.InferenceServerClient(traced.http_url), CLIENT)
    check_request(receiver.wait_spans(3), "http")
    receiver.clear()
    infer_http(httpclient.InferenceServerClient(traced.http_url))  # a trace of its own
    root = check_request(receiver.wait_spans(3), "http", continued=False)
    assert root["traceId"] != CLIENT_TRACE


def test_grpc_continues_the_clients_trace(traced: Endpoints, receiver: Receiver):
    infer_grpc(grpcclient.InferenceServerClient(traced.grpc_url), CLIENT)
    check_request(receiver.wait_spans(3), "grpc")


def test_grpc_stream_continues_the_streams_trace(traced: Endpoints, receiver: Receiver):
    client = grpcclient.InferenceServerClient(traced.grpc_url)
    answers: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put(error or result),
                        headers=dict(CLIENT))
    inp = grpcclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(np.ones(4, np.float32))
    client.async_stream_infer("identity_fp32", [inp])
    assert not isinstance(answers.get(timeout=20), Exception)
    client.stop_stream()
    check_request(receiver.wait_spans(3), "stream")


def test_trace_settings_switch_it_at_run_time(traced: Endpoints, receiver: Receiver):
    http = httpclient.InferenceServerClient(traced.http_url)
    grpc = grpcclient.InferenceServerClient(traced.grpc_url)
    settings = http.get_trace_settings()
    assert {k: settings[k] for k in ("trace_level", "trace_rate", "trace_count", "trace_mode",
                                     "url", "bsp_schedule_delay", "bsp_max_queue_size",
                                     "bsp_max_export_batch_size")} == {
        "trace_level": ["TIMESTAMPS"], "trace_rate": "1", "trace_count": "-1",
        "trace_mode": "opentelemetry", "url": receiver.url, "bsp_schedule_delay": "50",
        "bsp_max_queue_size": "2048", "bsp_max_export_batch_size": "512"}
    assert "trace_file" not in settings and "log_frequency" not in settings
    grpc_settings = grpc.get_trace_settings(as_json=True)["settings"]
    assert grpc_settings["trace_mode"]["value"] == ["opentelemetry"]
    # Off: nothing is traced, not even a continued context.
    http.update_trace_settings(settings={"trace_level": ["OFF"]})
    infer_http(http, CLIENT)
    infer_grpc(grpc, CLIENT)
    # Rate 0, set at startup (Triton's way to trace only the requests that
    # continue a context; an update to rate 0 is refused, as in Triton).
    with pytest.raises(Exception, match="sample rate must be non-zero"):
        grpc.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "0"})
    otel(traced.server, receiver, rate=0)
    for _ in range(3):
        infer_http(http)
    infer_http(http, CLIENT)
    spans = receiver.wait_spans(3)
    time.sleep(0.3)  # nothing more comes
    spans = receiver.spans()
    assert len(spans) == 3
    check_request(spans, "http")
    # A model's own setting: count 1 at rate 2, then only contexts.
    receiver.clear()
    http.update_trace_settings(model_name="identity_fp32",
                               settings={"trace_rate": "2", "trace_count": "1"})
    for _ in range(4):
        infer_http(http)
    infer_http(http, CLIENT)
    spans = receiver.wait_spans(6)
    time.sleep(0.3)
    roots = by_name(receiver.spans(), "InferRequest")
    assert sorted(r["parentSpanId"] for r in roots) == ["", CLIENT_SPAN]
    assert http.get_trace_settings(model_name="identity_fp32")["trace_count"] == "0"


def test_a_parent_not_sampled_is_not_traced(traced: Endpoints, receiver: Receiver):
    unsampled = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-00"}
    infer_http(httpclient.InferenceServerClient(traced.http_url), unsampled)
    infer_in_process(traced.server)  # the next one is traced, alone
    spans = receiver.wait_spans(3)
    time.sleep(0.3)
    assert len(receiver.spans()) == 3
    check_request(spans, "none", continued=False)


# ---- in-process --------------------------------------------------------------------------

def test_an_in_process_request_inside_a_span_is_its_child(traced: Endpoints,
                                                          receiver: Receiver):
    """An application that uses OpenTelemetry sees inference inside its own
    traces: the request's InferRequest span is a child of the caller's span."""
    tracer = TracerProvider().get_tracer("application")
    with tracer.start_as_current_span("handle order") as span:
        infer_in_process(traced.server)
        context = span.get_span_context()
    spans = receiver.wait_spans(3)
    root = by_name(spans, "InferRequest")[0]
    assert root["traceId"] == f"{context.trace_id:032x}"
    assert root["parentSpanId"] == f"{context.span_id:016x}"
    assert tree(spans) == {"InferRequest": ["identity_fp32"], "identity_fp32": ["compute"]}
    # Outside a span, at rate 1: a trace of its own.
    receiver.clear()
    infer_in_process(traced.server)
    assert by_name(receiver.wait_spans(3), "InferRequest")[0]["parentSpanId"] == ""


def test_an_applications_own_exporter(endpoints: Endpoints):
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    endpoints.server.configure_tracing(trace_level="TIMESTAMPS", trace_rate=1,
                                       trace_mode="opentelemetry",
                                       opentelemetry={"exporter": exporter,
                                                      "bsp_schedule_delay": 20})
    try:
        infer_in_process(endpoints.server)
        support.wait_until(lambda: len(exporter.get_finished_spans()) >= 3)
        names = [s.name for s in exporter.get_finished_spans()]
        assert names == ["compute", "identity_fp32", "InferRequest"]
        resource = exporter.get_finished_spans()[0].resource.attributes
        assert resource["service.name"] == "triton-inference-server"
    finally:
        endpoints.server.configure_tracing()


def test_a_collector_down_never_holds_a_request(endpoints: Endpoints):
    """Nothing listens where spans go: requests take no longer, the queue
    fills and what does not fit is dropped and counted."""
    server = endpoints.server
    port = support.free_port()
    server.configure_tracing(trace_level="TIMESTAMPS", trace_rate=1, trace_mode="opentelemetry",
                             opentelemetry={
                                 "exporter": OTLPSpanExporter(
                                     endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=2),
                                 "bsp_max_queue_size": 6, "bsp_schedule_delay": 10})
    try:
        took = []
        for _ in range(20):
            began = time.monotonic()
            infer_in_process(server)
            took.append(time.monotonic() - began)
        assert max(took) < 1.0, took
        support.wait_until(lambda: tracing_of(server).dropped_spans > 0)
    finally:
        server.configure_tracing()


def repository(tmp_path: Any, **models: tuple[str, str]) -> str:
    """identity_fp32 (the examples') and ``models``: name -> (config, model.py or "")."""
    repo = tmp_path / "repo"
    shutil.copytree(os.path.join(tritonserver.example_model_repository(), "identity_fp32"),
                    repo / "identity_fp32")
    for name, (config, code) in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
        if code:
            (repo / name / "1" / "model.py").write_text(code)
    return str(repo)


def test_ensemble_steps_are_child_spans(tmp_path: Any, receiver: Receiver):
    repo = repository(tmp_path, twice=(ENSEMBLE, ""))
    receiver.clear()
    server = tritonserver.Server(model_repository=repo).start(wait_until_ready=True,
                                                              timeout=120)
    try:
        otel(server, receiver)
        list(server.model("twice").infer(inputs={"IN": np.array([1.0, 2.0], np.float32)}))
        spans = receiver.wait_spans(6)
    finally:
        stop_within(server)
    assert tree(spans) == {"InferRequest": ["twice"],
                           "twice": ["identity_fp32", "identity_fp32"],
                           "identity_fp32": ["compute", "compute"]}
    twice = by_name(spans, "twice")[0]
    for step in by_name(spans, "identity_fp32"):
        assert attributes(step)["triton.trace_parent_id"] == attributes(twice)["triton.trace_id"]



# ---- python models read their request's span context ---------------------------------

PB_CONTEXT = '''import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Answers with its request's trace context (the python backend's API),
    after calling identity_fp32 with it (BLS)."""

    def execute(self, requests):
        responses = []
        for request in requests:
            context = request.trace().get_context()
            call = pb_utils.InferenceRequest(
                model_name="identity_fp32", requested_output_names=["OUTPUT0"],
                inputs=[pb_utils.Tensor("INPUT0", np.ones(2, np.float32))],
                trace=request.trace())
            call.exec()
            out = np.array([(context or "").encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("CONTEXT", out)]))
        return responses
'''
PB_CONFIG = '''name: "pb_context"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "CONTEXT", data_type: TYPE_STRING, dims: [ 1 ] } ]
'''


class ContextModel(tritonserver.PythonModel):
    """A PythonModel answering with its request's W3C trace context."""

    def execute(self, requests: Any) -> Any:
        return [{"CONTEXT": np.array([json.dumps(r.trace_context).encode()], dtype=object)}
                for r in requests]


def test_python_models_read_their_span_context(tmp_path: Any, receiver: Receiver):
    repo = repository(tmp_path, pb_context=(PB_CONFIG, PB_CONTEXT))
    server = tritonserver.Server(model_repository=repo, python_backend="inprocess")
    server.register_model("context_model", ContextModel,
                          inputs={"INPUT0": (np.float32, [-1])},
                          outputs={"CONTEXT": (np.object_, [1])})
    receiver.clear()
    server.start(wait_until_ready=True, timeout=120)
    try:
        # Not traced: no context.
        answer = next(server.model("context_model").infer(
            inputs={"INPUT0": np.ones(1, np.float32)}))
        assert json.loads(answer.outputs["CONTEXT"].to_bytes_array()[0]) is None
        otel(server, receiver)
        answer = next(server.model("context_model").infer(
            inputs={"INPUT0": np.ones(1, np.float32)}))
        carrier = json.loads(answer.outputs["CONTEXT"].to_bytes_array()[0])
        spans = receiver.wait_spans(3)
        model = by_name(spans, "context_model")[0]
        assert carrier == {"traceparent": f"00-{model['traceId']}-{model['spanId']}-01"}
        # An OpenTelemetry propagator reads it as the model span's context.
        extracted = TraceContextTextMapPropagator().extract(carrier)
        from opentelemetry import trace

        assert f"{trace.get_current_span(extracted).get_span_context().span_id:016x}" == \
            model["spanId"]

        # pb_utils: request.trace().get_context(), and a BLS call given it is a child.
        receiver.clear()
        answer = next(server.model("pb_context").infer(
            inputs={"INPUT0": np.ones(1, np.float32)}))
        text = answer.outputs["CONTEXT"].to_bytes_array()[0].decode()
        spans = receiver.wait_spans(6)
        outer = by_name(spans, "pb_context")[0]
        assert json.loads(text) == {
            "traceparent": f"00-{outer['traceId']}-{outer['spanId']}-01"}
        assert tree(spans) == {"InferRequest": ["identity_fp32", "pb_context"],
                               "pb_context": ["InferRequest", "compute"],
                               "identity_fp32": ["compute"]}
        assert {s["traceId"] for s in spans} == {outer["traceId"]}
    finally:
        stop_within(server)


# ---- generate and OpenAI -----------------------------------------------------------------

class Echo(tritonserver.PythonModel):
    """A text model: "said: <text_input>"."""

    def execute(self, requests: Any) -> Any:
        return [{"text_output": np.array([b"said: " + r.inputs["text_input"].reshape(-1)[0]],
                                         dtype=object)} for r in requests]


def test_generate_and_openai_continue_the_clients_trace(receiver: Receiver):
    pytest.importorskip("fastapi")
    import requests

    from tritonserver.frontends import OpenAI

    server = tritonserver.Server(model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    server.register_model("echo", Echo, inputs={"text_input": (bytes, [1])},
                          outputs={"text_output": (bytes, [1])})
    server.start(wait_until_ready=True, timeout=120)
    receiver.clear()
    try:
        otel(server, receiver)
        with KServeHttp(server, KServeHttp.Options(port=0)) as http, \
                OpenAI(server, OpenAI.Options(port=0)) as openai:
            reply = requests.post(f"http://{http.url}/v2/models/echo/generate",
                                  json={"text_input": "hi"}, headers=CLIENT, timeout=30)
            assert reply.json()["text_output"] == "said: hi"
            reply = requests.post(f"{openai.url}/completions", headers=CLIENT, timeout=30,
                                  json={"model": "echo", "prompt": "hello"})
            assert reply.json()["choices"][0]["text"] == "said: hello"
            spans = receiver.wait_spans(6)
    finally:
        stop_within(server)
    roots = by_name(spans, "InferRequest")
    assert len(roots) == 2
    assert {(r["traceId"], r["parentSpanId"]) for r in roots} == {(CLIENT_TRACE, CLIENT_SPAN)}
    assert tree(spans) == {"InferRequest": ["echo", "echo"], "echo": ["compute", "compute"]}


# ---- serve -------------------------------------------------------------------------------

def test_serve_exports_spans(receiver: Receiver):
    from frontends.serve_process import Serve

    receiver.clear()
    host_port = receiver.url.split("://", 1)[1]  # Triton's form: host:port/path
    serve = Serve("--model-repository", tritonserver.example_model_repository(),
                  "--model-control-mode", "explicit", "--load-model", "identity_fp32",
                  "--http-port", "0", "--grpc-port", "0", "--allow-metrics", "false",
                  "--trace-config", "mode=opentelemetry", "--trace-config", "level=TIMESTAMPS",
                  "--trace-config", "rate=1",
                  "--trace-config", f"opentelemetry,url={host_port}",
                  "--trace-config", "opentelemetry,resource=service.name=tests",
                  "--trace-config", "opentelemetry,resource=test.key=v",
                  "--trace-config", "opentelemetry,bsp_schedule_delay=50")
    try:
        serve.wait_ready()
        http = httpclient.InferenceServerClient(f"127.0.0.1:{serve.ports['HTTPService']}")
        settings = http.get_trace_settings()
        assert settings["trace_mode"] == "opentelemetry" and settings["url"] == host_port
        infer_http(http, CLIENT)
        check_request(receiver.wait_spans(3), "http")
        serve.process.send_signal(signal.SIGINT)
        assert serve.wait() == 0, serve.output()
    finally:
        serve.end()

    bad = Serve("--model-repository", tritonserver.example_model_repository(),
                "--trace-config", "mode=opentelemetry",
                "--trace-config", "opentelemetry,bsp_max_queue_size=big")
    try:
        assert bad.wait() == 2
        assert 'Bad option: "--trace-config opentelemetry,bsp_max_queue_size".\nInvalid ' \
               "option value. Got big" in bad.output()
    finally:
        bad.end()

