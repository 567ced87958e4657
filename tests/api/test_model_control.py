"""Loading with parameters, and options that must reach the core."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import tritonserver
from conftest import python_backend_refusal, start_server, stats_when, stop_within

PYTHON_DOUBLE = b'''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (2 * x).astype(np.float32))]))
        return out
'''


@pytest.fixture
def explicit(example_repo, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(example_repo, repo)
    s = start_server(model_repository=str(repo),
                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    yield s
    stop_within(s)


def test_load_with_a_config_override(explicit):
    config = {"backend": "identity", "max_batch_size": 4, "dynamic_batching": {},
              "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}]}
    model = explicit.load("identity_fp32", {"config": json.dumps(config)})
    assert model.ready()
    assert model.config()["max_batch_size"] == 4
    assert model.batch_properties() == tritonserver.ModelBatchFlag.FIRST_DIM
    out = next(model.infer(inputs={"INPUT0": np.ones((2, 3), np.float32)}))
    assert np.from_dlpack(out.outputs["OUTPUT0"]).shape == (2, 3)


def test_load_a_model_given_as_bytes(explicit):
    # A model that exists nowhere on disk: config and file content given in
    # the load call (the core writes them to a temporary repository).
    config = {"backend": "python", "max_batch_size": 0,
              "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1]}],
              "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}]}
    parameters = {"config": json.dumps(config), "file:1/model.py": PYTHON_DOUBLE}
    if python_backend_refusal() is not None:
        # The config given names the python backend: refused like one on disk.
        with pytest.raises(tritonserver.UnsupportedError, match="inprocess"):
            explicit.load("doubler", parameters)
        assert explicit.live()
        return
    model = explicit.load("doubler", parameters)
    out = next(model.infer(inputs={"X": np.array([1.5, -2.0], np.float32)}))
    assert np.from_dlpack(out.outputs["Y"]).tolist() == [3.0, -4.0]
    explicit.unload("doubler", wait_until_unloaded=True, timeout=30)
    assert ("doubler", 1) not in explicit.models(exclude_not_ready=True)


def test_load_parameter_types_are_checked(explicit):
    with pytest.raises(tritonserver.InvalidArgumentError):
        explicit.load("identity_fp32", {"config": 3.5})
    assert explicit.live()


@pytest.mark.parametrize("config", ["{not json", "[1, 2]", '"text"', json.dumps({"backend": 7})])
def test_a_bad_config_in_the_load_call_is_refused_by_the_core(explicit, config):
    # The python-backend check reads this config first: it must leave the
    # verdict to the core, which refuses the load with its own class
    # (INTERNAL, as Triton answers; tests/frontends/http/test_http.py) and stays live.
    with pytest.raises(tritonserver.InternalError, match="given"):
        explicit.load("given", {"config": config, "file:1/model.py": b"pass\n"})
    assert explicit.live()


def test_local_response_cache_serves_hits(example_repo, tmp_path):
    repo = tmp_path / "repo"
    os.makedirs(repo / "cached" / "1")
    (repo / "cached" / "config.pbtxt").write_text(
        'backend: "identity"\nmax_batch_size: 0\nresponse_cache { enable: true }\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n')
    s = start_server(model_repository=str(repo), cache_config={"local": {"size": 1 << 20}})
    try:
        model = s.model("cached")
        x = np.arange(8, dtype=np.float32)
        for _ in range(3):
            out = next(model.infer(inputs={"INPUT0": x}))
            np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), x)
        stats = stats_when(model, lambda st: st["inference_stats"]["cache_miss"]["count"] == 1)
        stats = stats["inference_stats"]
        assert stats["cache_hit"]["count"] == 2 and stats["cache_miss"]["count"] == 1
        del out
    finally:
        stop_within(s)


def test_metrics_are_prometheus_text(server):
    next(server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(2, np.float32)}))
    text = server.metrics()
    assert "nv_inference_request_success" in text
    assert 'model="identity_fp32"' in text


def test_metrics_as_json(server):
    next(server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(2, np.float32)}))
    text = server.metrics()
    families = json.loads(server.metrics(tritonserver.MetricFormat.JSON))
    success = families["nv_inference_request_success"]
    assert success["type"] == "counter" and "successful" in success["help"]
    by_model = {s["labels"]["model"]: s["value"] for s in success["samples"]}
    assert by_model["identity_fp32"] >= 1
    # Every sample line of the text is in the JSON, under its family.
    sample_lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert sum(len(f["samples"]) for f in families.values()) == len(sample_lines)
    assert set(families) == {line.split()[2] for line in text.splitlines()
                             if line.startswith("# TYPE")}


def test_metrics_summary_samples_keep_their_names():
    from tritonserver._metrics import prometheus_to_json

    text = ('# HELP lat A latency\n# TYPE lat summary\n'
            'lat{model="m",quantile="0.5"} 12\nlat_sum{model="m"} 30\nlat_count{model="m"} 2\n'
            '# TYPE up gauge\nup{path="a\\"b,c"} +Inf\n')
    families = json.loads(prometheus_to_json(text))
    assert families["lat"]["samples"] == [
        {"labels": {"model": "m", "quantile": "0.5"}, "value": 12.0},
        {"labels": {"model": "m"}, "value": 30.0, "name": "lat_sum"},
        {"labels": {"model": "m"}, "value": 2.0, "name": "lat_count"}]
    assert families["up"]["samples"] == [{"labels": {"path": 'a"b,c'}, "value": "+Inf"}]


def test_an_unknown_metric_format_is_refused(server):
    with pytest.raises(tritonserver.InvalidArgumentError, match="metric_format"):
        server.metrics(7)
    assert server.live()


RATE_LIMITED = '''backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU
                   rate_limiter { resources [ { name: "R" global: true count: 2 } ] } } ]
'''


@pytest.mark.parametrize("available,loads", [(1, False), (2, True)])
def test_rate_limiter_resources_reach_the_core(tmp_path, available, loads):
    os.makedirs(tmp_path / "limited" / "1")
    (tmp_path / "limited" / "config.pbtxt").write_text(RATE_LIMITED)
    options = tritonserver.Options(
        model_repository=str(tmp_path), exit_on_error=False, strict_readiness=True, exit_timeout=10,
        rate_limiter_mode=tritonserver.RateLimitMode.EXEC_COUNT,
        rate_limiter_resources=[tritonserver.RateLimiterResource("R", available, -1)])
    s = tritonserver.Server(options).start()
    try:
        assert s.model("limited").ready() is loads
        if loads:
            out = next(s.model("limited").infer(inputs={"INPUT0": np.ones(2, np.float32)}))
            assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [1.0, 1.0]
            del out
    finally:
        stop_within(s)


def test_metrics_configuration_reaches_the_core(example_repo):
    # Summary latencies are off by default; settings outside any group go
    # under the "" group. The core's metrics registry is process-wide and did
    # not always take a later server's setting in a process that had run
    # other servers, so each case runs in a fresh process.
    import subprocess
    import sys
    import textwrap

    for config, expected in (({}, "False"), ({"": {"summary_latencies": "true"}}, "True")):
        code = textwrap.dedent(f"""
            import numpy as np
            import tritonserver
            s = tritonserver.Server(model_repository={example_repo!r},
                                    metrics_configuration={config!r}).start(wait_until_ready=True)
            next(s.model("identity_fp32").infer(inputs={{"INPUT0": np.ones(2, np.float32)}}))
            print("SUMMARY", "nv_inference_request_summary_us" in s.metrics())
            s.stop()
        """)
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        assert f"SUMMARY {expected}" in result.stdout


def test_none_mode_refuses_every_repository_change(server):
    # NONE: what the repository held at start is what the server serves.
    with pytest.raises(tritonserver.UnavailableError):
        server.load("identity_fp32")
    with pytest.raises(tritonserver.UnavailableError):
        server.unload("identity_fp32")
    with pytest.raises(tritonserver.UnavailableError, match="polling is disabled"):
        server.poll_model_repository()
    with pytest.raises(tritonserver.UnsupportedError, match="not EXPLICIT"):
        server.register_model_repository(os.path.dirname(__file__))
    with pytest.raises(tritonserver.UnsupportedError, match="not EXPLICIT"):
        server.unregister_model_repository(os.path.dirname(__file__))
    assert server.live() and server.model("identity_fp32").ready()


def test_wildcard_beside_other_startup_models_is_refused_as_the_core_does(example_repo):
    """The package loads startup models itself (tritonserver._control), so it
    refuses "*" beside other names with the core's text, as the core would;
    "*" alone loads every model."""
    options = dict(model_repository=example_repo,
                   model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    with pytest.raises(tritonserver.InvalidArgumentError,
                       match=r"^Wildcard model name '\*' must be the ONLY startup model if "
                             r"specified at all\.$"):
        tritonserver.Server(startup_models=["*", "identity_fp32"], **options).start()
    server = start_server(startup_models=["*"], **options)
    try:
        assert server.model("identity_fp32").ready() and server.model("add_sub_fp32").ready()
    finally:
        stop_within(server)
