"""ONNX models found and configured as Triton does: platform or backend
names, default_model_filename, a folder with external-data weights,
versions, auto-complete (with strict_model_config=False) that completes and
never contradicts, strict checks that name the mismatch, and bad files or a
missing onnxruntime that fail the load, never the server."""

from __future__ import annotations

import logging

import os

import numpy as np
import pytest

import tritonserver
from conftest import run_python, start_server, stop_within
from onnx_backend import models

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT
# One instance where a load fails beside a loaded model (models.ONE_INSTANCE).
ONE_INSTANCE = models.ONE_INSTANCE
ADD_SUB_CONFIG = ONE_INSTANCE.replace("{", "{{").replace("}", "}}") + """
max_batch_size: 8
input [ {{ name: "A" data_type: TYPE_FP32 dims: [ 4 ] }},
        {{ name: "B" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] }},
         {{ name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] }} ]
{naming}
"""


def add_sub_works(model: tritonserver.Model, batch: int = 2) -> None:
    a = np.arange(4 * batch, dtype=np.float32).reshape(batch, 4)
    b = np.full((batch, 4), 0.5, np.float32)
    out = next(model.infer(inputs={"A": a, "B": b})).outputs
    np.testing.assert_array_equal(np.from_dlpack(out["SUM"]), a + b)
    np.testing.assert_array_equal(np.from_dlpack(out["DIFF"]), a - b)


@pytest.fixture
def explicit(tmp_path):
    """An EXPLICIT-mode server over an empty repository (tmp_path/repo), not strict."""
    repo = tmp_path / "repo"
    repo.mkdir()
    s = start_server(model_repository=str(repo), model_control_mode=EXPLICIT,
                     strict_model_config=False)
    yield s, str(repo)
    stop_within(s)


@pytest.mark.parametrize("naming", ['platform: "onnxruntime_onnx"', 'backend: "onnxruntime"'])
def test_found_by_platform_or_backend(tmp_path, naming):
    models.write(str(tmp_path), "add_sub", models.add_sub(),
                 ADD_SUB_CONFIG.format(naming=naming))
    s = start_server(model_repository=str(tmp_path))  # strict model config
    try:
        add_sub_works(s.model("add_sub"))
        assert s.model("add_sub").config()["backend"] == "onnxruntime"
    finally:
        stop_within(s)


def test_default_model_filename_and_versions(explicit):
    s, repo = explicit
    config = """
platform: "onnxruntime_onnx"
default_model_filename: "net.onnx"
version_policy: { all { } }
max_batch_size: 2
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
    models.write(repo, "versions", models.scaled(2.0), config, version=1, filename="net.onnx")
    models.write(repo, "versions", models.scaled(3.0), None, version=2, filename="net.onnx")
    s.load("versions")
    x = np.ones((1, 4), np.float32)
    for version, scale in ((1, 2.0), (2, 3.0)):
        out = next(s.model("versions", version).infer(inputs={"X": x}))
        assert np.from_dlpack(out.outputs["Y"]).tolist() == [[scale] * 4]


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
    config = ADD_SUB_CONFIG.format(naming='platform: "onnxruntime_onnx"').replace(*change)
    models.write(str(tmp_path), "wrong", models.add_sub(), config)
    models.write(str(tmp_path), "right", models.add_sub(),
                 ADD_SUB_CONFIG.format(naming='platform: "onnxruntime_onnx"'))
    s = start_server(model_repository=str(tmp_path), model_control_mode=EXPLICIT)
    try:
        with pytest.raises(tritonserver.TritonError) as caught:
            s.load("wrong")
        assert message in str(caught.value)
        s.load("right")
        add_sub_works(s.model("right"))
    finally:
        stop_within(s)


@pytest.mark.parametrize("content", [b"", b"not an onnx model" * 100, None],
                         ids=["empty", "garbage", "missing"])
def test_a_bad_model_file_fails_the_load_with_onnxruntimes_message(explicit, content):
    s, repo = explicit
    folder = os.path.join(repo, "bad", "1")
    os.makedirs(folder)
    with open(os.path.join(repo, "bad", "config.pbtxt"), "w") as f:
        f.write(ADD_SUB_CONFIG.format(naming='platform: "onnxruntime_onnx"'))
    if content is not None:
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(content)
    with pytest.raises(tritonserver.TritonError) as caught:
        s.load("bad")
    text = str(caught.value)
    if content is None:
        assert "unable to find the ONNX model file" in text
    else:
        assert "ONNX Runtime could not load" in text and "ONNXRuntimeError" in text
    assert s.live()
    models.write(repo, "good", models.add_sub(), ONE_INSTANCE)
    s.load("good")
    add_sub_works(s.model("good"))


def test_without_onnxruntime_the_error_names_the_extra(tmp_path):
    models.write(str(tmp_path), "add_sub", models.add_sub(),
                 ADD_SUB_CONFIG.format(naming='platform: "onnxruntime_onnx"'))
    code = (
        "import sys; sys.modules['onnxruntime'] = None  # as if not installed\n"
        "import tritonserver as t\n"
        f"s = t.Server(model_repository={str(tmp_path)!r}, exit_timeout=10,"
        " model_control_mode=t.ModelControlMode.EXPLICIT).start(wait_until_ready=True)\n"
        "try:\n"
        "    s.load('add_sub')\n"
        "except t.TritonError as e:\n"
        "    print('REFUSED', type(e).__name__, e)\n"
        "print('LIVE', s.live())\n"
        "s.stop()\n")
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert 'pip install "tritonserver-embedded[onnx]"' in done.stdout
    assert "LIVE True" in done.stdout
