"""What the onnxruntime backend alone does (python/tritonserver/_onnx):
auto-complete (with strict_model_config=False) that completes and never
contradicts, the default batch limit and how to raise it, a folder with
external-data weights, strict checks that name the mismatch, the session
settings of the configuration, accelerators and parameters it cannot
honour, bad requests and errors inside run that fail requests, never the
server, and unloading that frees the sessions. Shared with the other
frameworks: test_loading.py, test_execution.py."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within
from frameworks.conftest import FRAMEWORKS, add_sub_works as works, typed_values

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from frameworks import models_onnx as models  # noqa: E402

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT
ONNX = FRAMEWORKS["onnxruntime"]
# One instance where a load fails beside a loaded model (models.ONE_INSTANCE).
ONE_INSTANCE = models.ONE_INSTANCE
ADD_SUB_CONFIG = ONNX.add_sub_config(ONNX.naming("platform"))


def add_sub_works(model: tritonserver.Model, batch: int = 2) -> None:
    works(ONNX, model, rows=batch)


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
    return root


def test_a_folder_with_external_data(explicit):
    s, repo = explicit
    models.write(repo, "external", models.scaled(5.0, size=1024), external_data=True)
    assert os.path.isfile(os.path.join(repo, "external", "1", "model.onnx", "weights.bin"))
    s.load("external")
    out = next(s.model("external").infer(inputs={"X": np.ones((2, 1024), np.float32)}))
    assert np.from_dlpack(out.outputs["Y"]).tolist() == [[5.0] * 1024] * 2


def test_auto_complete_from_the_model_alone(explicit):
    s, repo = explicit
    models.write(repo, "bare", models.add_sub())  # 1/model.onnx, no config.pbtxt
    s.load("bare")
    config = s.model("bare").config()
    assert config["platform"] == "onnxruntime_onnx" and config["backend"] == "onnxruntime"
    assert config["max_batch_size"] == 4 and "dynamic_batching" in config
    tensors = {t["name"]: (t["data_type"], [int(d) for d in t["dims"]])
               for t in config["input"] + config["output"]}
    assert tensors == {n: ("TYPE_FP32", [4]) for n in ("A", "B", "SUM", "DIFF")}
    add_sub_works(s.model("bare"), batch=3)


def test_the_default_batch_limit_says_how_to_raise_it(explicit, caplog):
    s, repo = explicit
    models.write(repo, "bare_limit", models.add_sub())
    with caplog.at_level(logging.WARNING, logger="tritonserver.onnxruntime"):
        s.load("bare_limit")
    said = caplog.text
    assert "model 'bare_limit': max_batch_size set to 4" in said
    assert "a request of more than 4 rows is refused" in said
    assert "--backend-config=onnxruntime,default-max-batch-size=N" in said
    assert "backend_configuration={'onnxruntime': {'default-max-batch-size': 'N'}}" in said
    rows = np.ones((5, 4), np.float32)
    # Triton's own text for the request, unchanged: clients read it.
    with pytest.raises(tritonserver.InvalidArgumentError,
                       match="inference request batch-size must be <= 4"):
        list(s.model("bare_limit").infer(inputs={"A": rows, "B": rows}))
    assert s.live()


def test_auto_complete_keeps_what_the_config_says(explicit):
    s, repo = explicit
    models.write(repo, "partial", models.add_sub(), 'max_batch_size: 16\n'
                 'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] },'
                 '        { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]')
    s.load("partial")
    config = s.model("partial").config()
    assert config["max_batch_size"] == 16  # kept
    assert sorted(o["name"] for o in config["output"]) == ["DIFF", "SUM"]  # completed
    add_sub_works(s.model("partial"), batch=9)


def test_a_fixed_first_dimension_is_not_batched(explicit):
    s, repo = explicit
    models.write(repo, "fixed", models.add_sub(first_dim=2), ONE_INSTANCE)
    s.load("fixed")
    config = s.model("fixed").config()
    assert config.get("max_batch_size", 0) == 0
    assert [int(d) for d in config["input"][0]["dims"]] == [2, 4]
    models.write(repo, "fixed_batched", models.add_sub(first_dim=2), "max_batch_size: 4")
    with pytest.raises(tritonserver.InvalidArgumentError, match="does not support batching"):
        s.load("fixed_batched")
    assert s.live()


@pytest.mark.parametrize("change,message", [
    (('name: "A"', 'name: "C"'), "unexpected inference input 'C'"),
    (('name: "SUM" data_type: TYPE_FP32', 'name: "SUM" data_type: TYPE_INT32'),
     "expects datatype TYPE_INT32 for output 'SUM', the model provides TYPE_FP32"),
    (('name: "B" data_type: TYPE_FP32 dims: [ 4 ]', 'name: "B" data_type: TYPE_FP32 dims: [ 5 ]'),
     "input 'B' has shape [-1, 4] in the model, but the configuration gives [-1, 5]"),
    (('max_batch_size: 8', 'max_batch_size: 0'),
     "input 'A' has shape [-1, 4] in the model, but the configuration gives [4]"),
], ids=["name", "datatype", "dims", "batch-dimension"])
def test_strict_config_that_disagrees_fails_the_load(tmp_path, change, message):
    assert change[0] in ADD_SUB_CONFIG
    config = ADD_SUB_CONFIG.replace(*change)
    models.write(str(tmp_path), "wrong", models.add_sub(), config)
    models.write(str(tmp_path), "right", models.add_sub(),
                 ADD_SUB_CONFIG)
    s = start_server(model_repository=str(tmp_path), model_control_mode=EXPLICIT)
    try:
        with pytest.raises(tritonserver.TritonError) as caught:
            s.load("wrong")
        assert message in str(caught.value)
        s.load("right")
        add_sub_works(s.model("right"))
    finally:
        stop_within(s)




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
    inputs = typed_values(ONNX.identity_types, ONNX.identity_shape)
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
