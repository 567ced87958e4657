"""ONNX models run as Triton's ONNX Runtime backend runs them on CPU: batches
of the dynamic batcher in one run, instances in parallel (the GIL is free
while ONNX Runtime runs), only the requested outputs, the session settings
of the configuration, every data type, and errors that fail requests, never
the server; unloading frees the sessions."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within
from onnx_backend import models
from parallel_runs import all_at_once, batched, overlapping

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("onnx_repo"))
    models.write(root, "add_sub", models.add_sub(), """
platform: "onnxruntime_onnx"
max_batch_size: 16
dynamic_batching { max_queue_delay_microseconds: 200000 }
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] } ]
""")
    models.write(root, "identities", models.identities())  # auto-completed
    models.write(root, "reshaper", models.reshaper())
    models.write(root, "slow", models.slow(), """
platform: "onnxruntime_onnx"
instance_group [ { kind: KIND_CPU count: 2 } ]
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
""")
    return root


@pytest.fixture(scope="module")
def server(repo):
    s = start_server(model_repository=repo, strict_model_config=False)
    yield s
    stop_within(s)


def test_requests_batched_by_the_dynamic_batcher_run_together(server):
    model = server.model("add_sub")
    before = model.statistics()["model_stats"][0]
    feeds = [{"A": np.full((1, 4), i, np.float32),
              "B": np.full((1, 4), i, np.float32)} for i in range(12)]
    for i, out in enumerate(all_at_once(model, feeds)):
        assert out["SUM"].tolist() == [[2.0 * i] * 4]
        assert out["DIFF"].tolist() == [[0.0] * 4]
    batched(model, before, 12)  # some requests shared a run


def test_only_the_requested_outputs_reach_the_model(server):
    """tritonclient names the outputs it wants: the request carries them to
    the model (ONNX Runtime is asked for those only), the answer holds them."""
    import tritonclient.http as httpclient

    from tritonserver.frontends import KServeHttp

    a = np.ones((1, 4), np.float32)
    with KServeHttp(server, KServeHttp.Options(port=0)) as frontend:
        client = httpclient.InferenceServerClient(frontend.url)
        inputs = [httpclient.InferInput(n, [1, 4], "FP32") for n in ("A", "B")]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        result = client.infer("add_sub", inputs,
                              outputs=[httpclient.InferRequestedOutput("DIFF")])
        assert result.as_numpy("DIFF").tolist() == [[0.0] * 4]
        assert result.as_numpy("SUM") is None
        client.close()


def identity_inputs() -> dict:
    """One [2, 3] value of each type, for the identities model."""
    rng = np.random.default_rng(7)
    inputs = {}
    for config_type in models.TYPES:
        suffix = config_type[len("TYPE_"):]
        if config_type == "TYPE_STRING":
            value = np.array([["a", "h\u00e9llo", ""], ["x" * 300, "z", "\u00e9t\u00e9"]],
                             dtype=object)
        elif config_type == "TYPE_BOOL":
            value = rng.integers(0, 2, (2, 3)).astype(bool)
        else:
            dtype = tritonserver._datatypes.to_numpy_dtype(
                tritonserver._datatypes.from_config_name(config_type))
            value = (rng.random((2, 3)) * 100).astype(dtype)
        inputs[f"IN_{suffix}"] = value
    return inputs


def test_every_data_type_round_trips(server):
    inputs = identity_inputs()
    out = next(server.model("identities").infer(inputs=inputs)).outputs
    assert len(out) == len(models.TYPES)
    for name, value in inputs.items():
        tensor = out["OUT_" + name[len("IN_"):]]
        if value.dtype == object:
            assert tensor.to_bytes_array().tolist() == [[v.encode() for v in row] for row in value]
        else:
            got = np.from_dlpack(tensor)
            assert got.dtype == value.dtype
            np.testing.assert_array_equal(got, value)


def test_instances_run_in_parallel_with_the_gil_free(server):
    """Two instances, two long runs at once: they overlap, and a Python
    thread keeps ticking while they run (ONNX Runtime releases the GIL)."""
    model = server.model("slow")
    x = np.ones((512, 512), np.float32)
    next(model.infer(inputs={"X": x}))  # warm both paths up
    for y in overlapping(model, {"X": x}, "Y").outputs:
        np.testing.assert_allclose(np.from_dlpack(y), 1.0, rtol=1e-4)
    stats = model.statistics()["model_stats"][0]
    assert stats["execution_count"] >= 3


def test_session_settings_reach_onnxruntime(tmp_path, caplog):
    models.write(str(tmp_path), "tuned", models.add_sub(), """
platform: "onnxruntime_onnx"
max_batch_size: 4
optimization { graph { level: 1 } }
parameters [
  { key: "intra_op_thread_count" value: { string_value: "2" } },
  { key: "inter_op_thread_count" value: { string_value: "3" } },
  { key: "execution_mode" value: { string_value: "1" } },
  { key: "enable_mem_arena" value: { string_value: "off" } },
  { key: "enable_mem_pattern" value: { string_value: "false" } }
]
""")
    caplog.set_level(logging.INFO, logger="tritonserver.onnxruntime")
    s = start_server(model_repository=str(tmp_path), strict_model_config=False)
    try:
        a = np.ones((1, 4), np.float32)
        assert np.from_dlpack(next(s.model("tuned").infer(
            inputs={"A": a, "B": a})).outputs["SUM"]).tolist() == [[2.0] * 4]
    finally:
        stop_within(s)
    # The last session made is the instance's (auto-complete opens one first).
    line = [r.getMessage() for r in caplog.records if "model 'tuned'" in r.getMessage()][-1]
    for expected in ("intra_op_num_threads=2", "inter_op_num_threads=3",
                     "execution_mode=ORT_PARALLEL", "enable_cpu_mem_arena=False",
                     "enable_mem_pattern=False", "graph_optimization_level=ORT_ENABLE_EXTENDED",
                     "CPUExecutionProvider"):
        assert expected in line, line


def _accelerator(group: str, name: str) -> str:
    return f"optimization {{ execution_accelerators {{ {group} : [ {{ name : \"{name}\" }} ] }} }}"


def _parameter(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}'


@pytest.mark.parametrize("extra,message", [
    (_accelerator("gpu_execution_accelerator", "cuda"), "CUDAExecutionProvider"),
    (_accelerator("gpu_execution_accelerator", "tensorrt"), "TensorrtExecutionProvider"),
    (_accelerator("cpu_execution_accelerator", "openvino"), "OpenVINOExecutionProvider"),
    (_accelerator("cpu_execution_accelerator", "warp-drive"), "unknown Execution Accelerator"),
    (_parameter("execution_mode", "2"), "execution_mode"),
    (_parameter("intra_op_thread_count", "x"), "intra_op_thread_count"),
    (_parameter("enable_mem_arena", "maybe"), "enable_mem_arena"),
], ids=["cuda", "tensorrt", "openvino", "unknown-accelerator", "execution_mode",
        "thread-count", "mem-arena"])
def test_what_cannot_be_honoured_fails_the_load(tmp_path, extra, message):
    """Accelerators this machine lacks and bad session parameters: the load
    fails saying why; never a silent fallback to something else."""
    models.write(str(tmp_path), "asks", models.add_sub(),
                 f'platform: "onnxruntime_onnx"\nmax_batch_size: 4\n{extra}')
    s = start_server(model_repository=str(tmp_path), strict_model_config=False,
                     model_control_mode=EXPLICIT)
    try:
        with pytest.raises(tritonserver.TritonError, match=message):
            s.load("asks")
        assert s.live()
    finally:
        stop_within(s)


def test_bad_requests_are_refused_before_onnxruntime(server):
    model = server.model("add_sub")
    a = np.ones((1, 4), np.float32)
    with pytest.raises(tritonserver.InvalidArgumentError):
        model.infer(inputs={"A": a, "B": np.ones((1, 5), np.float32)})  # wrong shape
    with pytest.raises(tritonserver.InvalidArgumentError):
        model.infer(inputs={"A": a, "B": np.ones((1, 4), np.int32)})  # wrong type
    with pytest.raises(tritonserver.InvalidArgumentError):
        model.infer(inputs={"A": a})  # an input missing
    inputs = identity_inputs()
    inputs["IN_STRING"] = np.array([[b"\xff\xfe"] * 3] * 2, dtype=object)
    with pytest.raises(tritonserver.InvalidArgumentError, match="UTF-8"):
        list(server.model("identities").infer(inputs=inputs))  # ONNX strings are UTF-8
    assert server.live()


def test_an_error_inside_run_fails_the_request_not_the_server(server):
    model = server.model("reshaper")
    x = np.arange(6, dtype=np.float32)
    with pytest.raises(tritonserver.TritonError, match="(?i)reshape"):
        list(model.infer(inputs={"X": x, "SHAPE": np.array([4, 4], np.int64)}))
    out = next(model.infer(inputs={"X": x, "SHAPE": np.array([2, 3], np.int64)}))
    assert np.from_dlpack(out.outputs["Y"]).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert server.live()


def _rss_kib() -> int:
    with open(f"/proc/{os.getpid()}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_load_and_unload_fifty_times_frees_the_sessions(tmp_path):
    # 4 MiB weights; one instance (models.ONE_INSTANCE): unloading right after
    # an inference is where the two-instance crash was seen.
    models.write(str(tmp_path), "weighty", models.scaled(1.5, size=1 << 20),
                 models.ONE_INSTANCE)
    s = start_server(model_repository=str(tmp_path), strict_model_config=False,
                     model_control_mode=EXPLICIT)
    x = np.ones((1, 1 << 20), np.float32)
    try:
        samples = []
        for cycle in range(50):
            s.load("weighty")
            assert float(np.from_dlpack(next(s.model("weighty").infer(
                inputs={"X": x})).outputs["Y"])[0, 0]) == 1.5
            s.unload("weighty", wait_until_unloaded=True, timeout=30)
            if cycle in (9, 49):
                samples.append(_rss_kib())
        growth = samples[1] - samples[0]
        assert growth < 64 * 1024, f"RSS grew {growth} KiB over 40 load/unload cycles"
    finally:
        stop_within(s)


def test_generated_bad_inputs_fail_alone(server):
    """Random arrays (any dtype, shape and layout; the reliability suite's
    generator) as the inputs of an ONNX model: each request either answers
    A + B and A - B or raises a TritonError, and the server keeps answering."""
    from hypothesis import HealthCheck, given, seed, settings
    from hypothesis import strategies as st

    from reliability.test_bad_input import FIXED_SEED, arrays

    model, outcomes = server.model("add_sub"), {"succeeded": 0, "refused": 0}

    @seed(FIXED_SEED)
    @settings(max_examples=80, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(a=arrays(), b=st.one_of(arrays(), st.just(None)))
    def one(a, b):
        inputs = {"A": a, "B": a if b is None else b}
        try:
            out = next(model.infer(inputs=inputs)).outputs
        except tritonserver.TritonError:
            outcomes["refused"] += 1
        else:
            outcomes["succeeded"] += 1
            np.testing.assert_array_equal(np.from_dlpack(out["SUM"]), inputs["A"] + inputs["B"])
        ok = np.ones((1, 4), np.float32)
        served = next(model.infer(inputs={"A": ok, "B": ok})).outputs["SUM"]
        assert np.from_dlpack(served).tolist() == [[2.0] * 4]

    one()
    assert outcomes["refused"] > 0 and server.live()
