"""Trace settings over HTTP and gRPC, with NVIDIA's tritonclient, and the
trace files traced inferences produce (Triton's trace extension; the rules
of tritonserver._trace)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
from typing import Any, Iterator, Optional

import numpy as np
import pytest

import tritonserver
from conftest import stop_within
from frontends import support
from frontends.conftest import Endpoints, start_test_server
from frontends.dataplane.conftest import ENSEMBLE

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tritonserver._cli.trace_flags import deprecation_warnings, start_settings  # noqa: E402

DEFAULTS = {"trace_level": ["OFF"], "trace_rate": "1000", "trace_count": "-1",
            "log_frequency": "0", "trace_file": "", "trace_mode": "triton"}
# The core's activities of one request, in the order they happen.
CORE_TIMESTAMPS = ["REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
                   "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END"]


@pytest.fixture(scope="module")
def frontend_server(trace_server: tritonserver.Server) -> tritonserver.Server:
    return trace_server


@pytest.fixture
def clients(endpoints: Endpoints, tmp_path: Any) -> Iterator[tuple[Any, Any, str]]:
    """Both clients, with tracing configured afresh (a trace file in tmp_path)."""
    path = str(tmp_path / "trace.json")
    endpoints.server.configure_tracing(trace_file=path)
    yield (httpclient.InferenceServerClient(endpoints.http_url),
           grpcclient.InferenceServerClient(endpoints.grpc_url), path)
    endpoints.server.configure_tracing()


def grpc_settings(client: Any, model_name: Any = None, **update: Any) -> dict[str, Any]:
    """gRPC settings as the HTTP JSON has them (lists for trace_level)."""
    if update:
        answer = client.update_trace_settings(model_name=model_name, settings=update,
                                              as_json=True)
    else:
        answer = client.get_trace_settings(model_name=model_name, as_json=True)
    return {key: value["value"] if key == "trace_level" else value["value"][0]
            for key, value in answer["settings"].items()}


def http_error(call: Any) -> tuple[str, str]:
    with pytest.raises(InferenceServerException) as e:
        call()
    return e.value.status(), e.value.message()


def grpc_error(call: Any) -> tuple[str, str]:
    with pytest.raises(InferenceServerException) as e:
        call()
    return str(e.value.status()), e.value.message()


def infer_http(client: Any, n: int = 1) -> None:
    for i in range(n):
        inp = httpclient.InferInput("INPUT0", [4], "FP32")
        inp.set_data_from_numpy(np.full(4, i, np.float32))
        client.infer("identity_fp32", [inp])


def infer_grpc(client: Any, n: int = 1) -> None:
    for i in range(n):
        inp = grpcclient.InferInput("INPUT0", [4], "FP32")
        inp.set_data_from_numpy(np.full(4, i, np.float32))
        client.infer("identity_fp32", [inp])


def written_records(name: str) -> Optional[list[dict[str, Any]]]:
    """The records of a trace file, or None while it is missing or being
    written (a reader can catch the writer between creating and filling it)."""
    try:
        with open(name) as f:
            return list(json.load(f))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def read_traces(pattern: str, count: int) -> list[dict[str, Any]]:
    """The records of the files matching `pattern` once `count` traces (ids
    with a model name) are there."""
    records: list[dict[str, Any]] = []

    def enough() -> bool:
        records.clear()
        for name in sorted(glob.glob(pattern)):
            found = written_records(name)
            if found is None:
                return False
            records.extend(found)
        return sum("model_name" in r for r in records) >= count

    support.wait_until(enough, timeout=20)
    return records


def by_trace(records: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """{id: {"model_name", "model_version", "names": [timestamp names in file order],
    "ns": {name: ns}, "tensors": [tensor records]}}."""
    out: dict[int, dict[str, Any]] = {}
    for r in records:
        t = out.setdefault(r["id"], {"names": [], "ns": {}, "tensors": []})
        if "model_name" in r:
            t["model_name"], t["model_version"] = r["model_name"], r["model_version"]
            t["parent_id"] = r.get("parent_id")
        for ts in r.get("timestamps", []):
            t["names"].append(ts["name"])
            t["ns"][ts["name"]] = ts["ns"]
        if "tensor" in r:
            t["tensors"].append(r)
    return out


def check_request_trace(trace: dict[str, Any], frontend: str) -> None:
    assert trace["model_name"] == "identity_fp32"
    assert trace["model_version"] == 1
    core = [n for n in trace["names"] if n in CORE_TIMESTAMPS]
    assert core == CORE_TIMESTAMPS
    stamps = [trace["ns"][n] for n in CORE_TIMESTAMPS]
    assert stamps == sorted(stamps)
    # As Triton's frontends: the request read, the response complete, then sent.
    ours = (["HTTP_RECV_START", "HTTP_RECV_END", "INFER_RESPONSE_COMPLETE", "HTTP_SEND_START",
             "HTTP_SEND_END"] if frontend == "http" else
            ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "INFER_RESPONSE_COMPLETE",
             "GRPC_SEND_START", "GRPC_SEND_END"])
    assert [n for n in trace["names"] if n not in CORE_TIMESTAMPS] == ours
    # The frontend's clock is the core's: read before the request starts, sent
    # once computing started (the core may end it after the response is sent).
    assert trace["ns"][ours[1]] <= trace["ns"]["REQUEST_START"]
    assert trace["ns"]["COMPUTE_START"] <= trace["ns"][ours[2]] <= trace["ns"][ours[3]] \
        <= trace["ns"][ours[4]]


# ---- Settings ----------------------------------------------------------------------------


def test_defaults_and_extension(endpoints: Endpoints):
    endpoints.server.configure_tracing()
    http = httpclient.InferenceServerClient(endpoints.http_url)
    grpc = grpcclient.InferenceServerClient(endpoints.grpc_url)
    assert http.get_trace_settings() == DEFAULTS
    assert grpc_settings(grpc) == DEFAULTS
    assert http.get_trace_settings(model_name="identity_fp32") == DEFAULTS
    assert "trace" in http.get_server_metadata()["extensions"]
    assert "trace" in grpc.get_server_metadata(as_json=True)["extensions"]
    # Triton refuses a level while no trace file is set.
    status, message = http_error(lambda: http.update_trace_settings(
        settings={"trace_level": ["TIMESTAMPS"]}))
    assert (status, message) == (
        "400", "Attempting to set invalid trace setting :trace file name is not given")
    assert http.get_trace_settings() == DEFAULTS


def test_round_trip(clients):
    http, grpc, path = clients
    expected = dict(DEFAULTS, trace_file=path)
    assert http.get_trace_settings() == expected
    update = {"trace_level": ["TIMESTAMPS", "TENSORS"], "trace_rate": "5",
              "trace_count": "7", "log_frequency": "3"}
    expected.update(update)
    assert http.update_trace_settings(settings=update) == expected
    assert grpc_settings(grpc) == expected
    # gRPC: an empty value list clears a field back to its startup value.
    expected["trace_rate"] = "1000"
    assert grpc_settings(grpc, trace_rate=None) == expected
    assert grpc_settings(grpc, trace_rate="9", trace_level="TIMESTAMPS") == dict(
        expected, trace_rate="9", trace_level=["TIMESTAMPS"])
    # HTTP: null clears.
    assert http.update_trace_settings(settings={k: None for k in update}) == dict(
        DEFAULTS, trace_file=path)
    # Unknown level names are ignored, as Triton does; a rate wraps as its uint32.
    assert http.update_trace_settings(settings={"trace_level": ["NOPE"],
                                                "trace_rate": "-1"})["trace_rate"] == \
        "4294967295"


def test_model_settings_copy_and_follow_the_global_ones(clients):
    http, grpc, path = clients
    http.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "2"})
    model = http.update_trace_settings(model_name="identity_fp32",
                                       settings={"trace_count": "4"})
    assert model == dict(DEFAULTS, trace_file=path, trace_level=["TIMESTAMPS"],
                         trace_rate="2", trace_count="4")
    assert http.get_trace_settings()["trace_count"] == "-1"  # the global one is unchanged
    # A global change reaches the fields the model did not set.
    http.update_trace_settings(settings={"trace_rate": "3"})
    assert grpc_settings(grpc, "identity_fp32")["trace_rate"] == "3"
    assert grpc_settings(grpc, "identity_fp32")["trace_count"] == "4"
    # Another model still shows the global setting.
    assert http.get_trace_settings(model_name="add_sub_int32")["trace_count"] == "-1"
    # Clearing the model's only field drops its setting: the global one again.
    assert grpc_settings(grpc, "identity_fp32", trace_count=None) == \
        http.get_trace_settings()


def test_bad_settings_get_triton_errors(clients, endpoints: Endpoints):
    http, grpc, _ = clients
    for settings, message in [
        ({"trace_count": "-2"}, "Unable to parse 'trace_count'. Expecting value >= -1, got:-2"),
        ({"trace_rate": "abc"}, "Unable to parse 'trace_rate', got: abc"),
        ({"log_frequency": "x"}, "Unable to parse 'log_frequency', got: x"),
        ({"trace_rate": "99999999999"}, "Unable to parse 'trace_rate', value is out of range "
                                        "[ 0, 4294967295 ], got: 99999999999"),
        ({"trace_level": ["OFF", "TIMESTAMPS"]},
         "Expect only one trace level 'OFF' is specified"),
        ({"trace_count": "0", "trace_level": ["TIMESTAMPS"]},
         "Attempting to set invalid trace setting :"),
    ]:
        assert http_error(lambda: http.update_trace_settings(settings=settings)) == \
            ("400", message), settings
    assert http_error(lambda: http.update_trace_settings(settings={"trace_file": "x"})) == \
        ("501", "trace file location can not be updated through network protocol")
    assert http_error(lambda: http.update_trace_settings(settings={"trace_rate": 5})) == \
        ("500", "JSON, failed accessing non-string as string")
    assert http_error(lambda: http.get_trace_settings(model_name="nope")) == \
        ("400", "Request for unknown model : nope")
    assert grpc_error(lambda: grpc.update_trace_settings(settings={"trace_count": "-2"})) == \
        ("StatusCode.INVALID_ARGUMENT",
         "Unable to parse 'trace_count'. Expecting value >= -1, got: -2")
    assert grpc_error(lambda: grpc.update_trace_settings(
        settings={"trace_rate": ["1", "2"]})) == \
        ("StatusCode.INVALID_ARGUMENT", "expect only 1 value for 'trace_rate'")
    assert grpc_error(lambda: grpc.update_trace_settings(settings={"trace_file": "x"})) == \
        ("StatusCode.UNIMPLEMENTED",
         "trace file location can not be updated through network protocol")
    assert grpc_error(lambda: grpc.get_trace_settings(model_name="nope")) == \
        ("StatusCode.INVALID_ARGUMENT", "Request for unknown model : nope")
    # Nothing changed, and the server serves on.
    assert http.get_trace_settings()["trace_rate"] == "1000"
    assert http.is_server_live() and grpc.is_server_live()
    assert endpoints.server.live()


# ---- Traces -----------------------------------------------------------------------------


def test_traced_requests_write_triton_records(clients):
    http, grpc, path = clients
    http.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "1",
                                         "log_frequency": "1"})
    infer_http(http, 2)
    infer_grpc(grpc, 2)
    records = read_traces(path + ".*", 4)
    assert len(glob.glob(path + ".*")) == 4  # one file per trace at log_frequency 1
    traces = by_trace(records)
    assert len(traces) == 4
    ids = sorted(traces)
    for trace_id in ids[:2]:
        check_request_trace(traces[trace_id], "http")
    for trace_id in ids[2:]:
        check_request_trace(traces[trace_id], "grpc")
    assert all(t["parent_id"] is None for t in traces.values())


def test_rate_and_count(clients):
    http, grpc, path = clients
    http.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "2",
                                         "trace_count": "2"})
    infer_http(http, 6)
    # Every second request, twice; then the count is spent and the traces are
    # written to the first indexed file.
    records = read_traces(path + ".0", 2)
    assert len(by_trace(records)) == 2
    assert http.get_trace_settings()["trace_count"] == "0"
    assert not os.path.exists(path + ".1")


def test_tensors(clients):
    http, grpc, path = clients
    http.update_trace_settings(settings={"trace_level": ["TIMESTAMPS", "TENSORS"],
                                         "trace_rate": "1", "trace_count": "1"})
    inp = httpclient.InferInput("INPUT0", [3], "FP32")
    inp.set_data_from_numpy(np.array([1.5, 2, 3], np.float32))
    http.infer("identity_fp32", [inp])
    records = read_traces(path + ".0", 1)
    (trace,) = by_trace(records).values()
    check_request_trace(trace, "http")
    activities = {r["activity"]: r["tensor"] for r in trace["tensors"]}
    assert activities["TENSOR_QUEUE_INPUT"] == {"name": "INPUT0", "data": "1.5,2,3",
                                                "shape": "3", "dtype": "FP32"}
    assert activities["TENSOR_BACKEND_OUTPUT"]["data"] == "1.5,2,3"


def test_tensor_data_of_every_kind_is_valid_json(clients):
    http, grpc, path = clients
    http.update_trace_settings(settings={"trace_level": ["TENSORS"], "trace_rate": "1",
                                         "log_frequency": "2"})
    text = httpclient.InferInput("INPUT0", [2], "BYTES")
    text.set_data_from_numpy(np.array([b'say "hi"', b"\xff\n"], dtype=np.object_))
    http.infer("identity_bytes", [text])
    ints = [grpcclient.InferInput(name, [2], "INT32") for name in ("INPUT0", "INPUT1")]
    ints[0].set_data_from_numpy(np.array([-1, 2], np.int32))
    ints[1].set_data_from_numpy(np.array([3, 4], np.int32))
    grpc.infer("add_sub_int32", ints)
    # TENSORS alone: tensor records only (no model name record to wait for).
    records: list[dict[str, Any]] = []

    def written() -> bool:
        found = written_records(path + ".0")
        records.extend(found or [])
        return found is not None

    support.wait_until(written, timeout=20)
    tensors = {(r["activity"], r["tensor"]["name"], r["tensor"]["dtype"]): r["tensor"]["data"]
               for r in records}
    assert tensors[("TENSOR_QUEUE_INPUT", "INPUT0", "BYTES")] == '"say "hi"","\ufffd\n"'
    assert tensors[("TENSOR_QUEUE_INPUT", "INPUT0", "INT32")] == "-1,2"
    assert tensors[("TENSOR_BACKEND_OUTPUT", "OUTPUT1", "INT32")] == "-4,-2"
    assert all("timestamps" not in r for r in records)


def test_in_process_requests_and_the_file_at_stop(tmp_path):
    """The in-process API shares the settings; with log_frequency 0 the
    traces go to the trace file itself when the server stops."""
    path = str(tmp_path / "trace.json")
    server = start_test_server(startup_models=["add_sub_int32"])
    try:
        assert server.configure_tracing(trace_file=path, trace_level="TIMESTAMPS",
                                        trace_rate=1)["trace_level"] == ["TIMESTAMPS"]
        assert server.update_trace_settings({"trace_count": 2})["trace_count"] == "2"
        model = server.model("add_sub_int32")
        for _ in range(3):
            list(model.infer(inputs={"INPUT0": np.array([1, 2], np.int32),
                                     "INPUT1": np.array([3, 4], np.int32)}))
        assert server.trace_settings()["trace_count"] == "0"
        with pytest.raises(tritonserver.InvalidArgumentError, match="unknown model : nope"):
            server.trace_settings("nope")
    finally:
        stop_within(server)
    # The count ran out: both traces went to the indexed file at once.
    traces = by_trace(read_traces(path + ".0", 2))
    assert [t["model_name"] for t in traces.values()] == ["add_sub_int32"] * 2
    assert all(t["names"] == CORE_TIMESTAMPS for t in traces.values())


def test_log_frequency_zero_writes_the_file_at_stop(tmp_path):
    path = str(tmp_path / "trace.json")
    server = start_test_server(startup_models=["add_sub_int32"])
    try:
        server.configure_tracing(trace_file=path, trace_level="TIMESTAMPS", trace_rate=1)
        model = server.model("add_sub_int32")
        for _ in range(3):
            list(model.infer(inputs={"INPUT0": np.array([1], np.int32),
                                     "INPUT1": np.array([3], np.int32)}))
    finally:
        stop_within(server)
    with open(path) as f:
        records = json.load(f)
    assert len(by_trace(records)) == 3
    assert not glob.glob(path + ".*")


# ---- serve flags ------------------------------------------------------------------------


def test_trace_config_flags():
    assert start_settings(["triton,file=/tmp/t.json", "level=TIMESTAMPS", "level=tensors",
                           "rate=1", "count=5", "triton,log-frequency=2"]) == {
        "trace_file": "/tmp/t.json", "level": 4 | 8, "rate": 1, "count": 5,
        "log_frequency": 2, "mode": "triton", "extras": []}
    assert start_settings(["level=TIMESTAMPS", "level=OFF"])["level"] == 0
    # The deprecated flags, which --trace-config overrides (a level adds up).
    old = {"trace_file": "/tmp/old.json", "trace_level": ["TENSORS"], "trace_rate": "3",
           "trace_count": "4", "trace_log_frequency": "5"}
    assert start_settings(["rate=7", "level=TIMESTAMPS"], old) == {
        "trace_file": "/tmp/old.json", "level": 4 | 8, "rate": 7, "count": 4,
        "log_frequency": 5, "mode": "triton", "extras": []}
    assert deprecation_warnings({"trace_rate": "3"}) == [
        "Warning: '--trace-rate' has been deprecated and will be removed in future releases. "
        "Please use '--trace-config rate=<rate value> instead."]
    with pytest.raises(ValueError) as e:
        start_settings([], {"trace_rate": "x"})
    assert str(e.value) == 'Bad option: "--trace-rate".\nInvalid option value. Got x'
    for flags, message in [
        (["rate=abc"], 'Bad option: "--trace-config rate".\nInvalid option value. Got abc'),
        (["count=99999999999"], 'Bad option: "--trace-config count".\nProvided option value '
                                'is out of bound. Got 99999999999'),
        (["level=loud"], 'Bad option: "--trace-config level".\ninvalid value for trace level '
                         'option: loud'),
        (["triton,log-frequency=x"], 'Bad option: "--trace-config triton,log-frequency".\n'
                                     'Invalid option value. Got x'),
        ([",file=x"], "No trace mode specified. --trace-config option format is "
                      "<trace mode>,<setting>=<value> or <setting>=<value>. Got ,file=x"),
        (["foo,file=x"], 'invalid value for trace mode option: foo. Available options are '
                         '"triton" and "opentelemetry"'),
        (["rate"], "--trace-config option format is '<trace mode>,<setting>=<value>'. "
                   "Got rate"),
    ]:
        with pytest.raises(ValueError) as e:
            start_settings(flags)
        assert str(e.value) == message, flags


def test_serve_flags_end_to_end(tmp_path):
    """`serve --trace-config ...`: the settings as given, the trace file at
    SIGINT; a bad value stops the command with Triton's message."""
    from frontends.serve_process import Serve

    path = str(tmp_path / "trace.json")
    serve = Serve("--model-repository", tritonserver.example_model_repository(),
                  "--model-control-mode", "explicit", "--load-model", "identity_fp32",
                  "--http-port", "0", "--grpc-port", "0", "--allow-metrics", "false",
                  "--trace-config", f"triton,file={path}", "--trace-config", "level=TIMESTAMPS",
                  "--trace-config", "rate=1", "--trace-config", "count=3")
    try:
        serve.wait_ready()
        http = httpclient.InferenceServerClient(f"127.0.0.1:{serve.ports['HTTPService']}")
        assert http.get_trace_settings() == dict(DEFAULTS, trace_file=path, trace_rate="1",
                                                 trace_count="3", trace_level=["TIMESTAMPS"])
        infer_http(http, 2)
        assert http.get_trace_settings()["trace_count"] == "1"
        serve.process.send_signal(signal.SIGINT)
        assert serve.wait() == 0, serve.output()
    finally:
        serve.end()
    with open(path) as f:
        traces = by_trace(json.load(f))
    assert len(traces) == 2
    for trace in traces.values():
        check_request_trace(trace, "http")

    bad = Serve("--model-repository", tritonserver.example_model_repository(),
                "--trace-config", "rate=often")
    try:
        assert bad.wait() == 2
        assert 'Bad option: "--trace-config rate".\nInvalid option value. Got often' in \
            bad.output()
    finally:
        bad.end()


def test_ensemble_steps_are_child_traces(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(os.path.join(tritonserver.example_model_repository(), "identity_fp32"),
                    repo / "identity_fp32")
    (repo / "twice" / "1").mkdir(parents=True)
    (repo / "twice" / "config.pbtxt").write_text(ENSEMBLE)
    path = str(tmp_path / "trace.json")
    server = tritonserver.Server(model_repository=str(repo)).start(wait_until_ready=True,
                                                                   timeout=120)
    try:
        server.configure_tracing(trace_file=path, trace_level="TIMESTAMPS", trace_rate=1)
        for _ in range(2):
            list(server.model("twice").infer(inputs={"IN": np.array([1.0, 2.0], np.float32)}))
    finally:
        stop_within(server)
    with open(path) as f:
        traces = by_trace(json.load(f))
    parents = [i for i, t in traces.items() if t["parent_id"] is None]
    assert [traces[i]["model_name"] for i in parents] == ["twice", "twice"]
    for parent in parents:
        children = [t for t in traces.values() if t["parent_id"] == parent]
        assert [t["model_name"] for t in children] == ["identity_fp32"] * 2
        for child in children:
            assert child["names"] == CORE_TIMESTAMPS
            assert traces[parent]["ns"]["REQUEST_START"] <= child["ns"]["REQUEST_START"]
