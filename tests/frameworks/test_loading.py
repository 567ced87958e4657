"""What every framework backend does the same way when it loads a model
(python/tritonserver/_framework): found by its platform or backend name,
default_model_filename and versions, an input count that must match the
model's, and a bad or missing model file or a missing framework package
failing the load with a text that says why, never the server."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tritonserver
from conftest import run_python, start_server, stop_within
from frameworks.conftest import add_sub_works, model_file, refused

# (framework, configuration line naming it): OpenVINO has no platform name.
NAMINGS = [pytest.param(framework, line, id=f"{framework}-{line.split(':')[0]}")
           for framework, line in (("onnxruntime", 'platform: "onnxruntime_onnx"'),
                                   ("onnxruntime", 'backend: "onnxruntime"'),
                                   ("pytorch", 'platform: "pytorch_libtorch"'),
                                   ("pytorch", 'backend: "pytorch"'),
                                   ("openvino", 'backend: "openvino"'))]


@pytest.mark.parametrize("framework,naming", NAMINGS, indirect=["framework"])
def test_found_by_platform_or_backend(tmp_path, framework, naming):
    framework.write(str(tmp_path), "add_sub", framework.add_sub(),
                    framework.add_sub_config(naming))
    s = start_server(model_repository=str(tmp_path))  # strict model config
    try:
        add_sub_works(framework, s.model("add_sub"), rows=3)
        assert s.model("add_sub").config()["backend"] == framework.backend
    finally:
        stop_within(s)


def test_default_model_filename_and_versions(explicit, framework):
    s, repo = explicit
    filename = "net." + framework.filename.rsplit(".", 1)[1]
    config = framework.config(*([n] for n in framework.scaled_names), extra=(
        f'default_model_filename: "{filename}"\nversion_policy: {{ all {{ }} }}'))
    framework.write(repo, "versions", framework.scaled(2.0), config, filename=filename)
    framework.write(repo, "versions", framework.scaled(3.0), None, version=2, filename=filename)
    s.load("versions")
    x_name, y_name = framework.scaled_names
    x = np.ones((1, 4), np.float32)
    for version, scale in ((1, 2.0), (2, 3.0)):
        out = next(s.model("versions", version).infer(inputs={x_name: x}))
        assert np.from_dlpack(out.outputs[y_name]).tolist() == [[scale] * 4]


def test_an_input_count_other_than_the_model_s_fails_the_load(explicit, framework):
    """The configuration lists one input of add_sub's two (Triton's text)."""
    s, repo = explicit
    (a_name, _), (sum_name, _) = framework.add_sub_names
    framework.write(repo, "count", framework.add_sub(), framework.config([a_name], [sum_name]))
    assert "unable to load model 'count', configuration expects 1 inputs, model provides 2" \
        in refused(s, "count", tritonserver.InvalidArgumentError)


@pytest.mark.parametrize("content", [b"", b"not a model file" * 100, None],
                         ids=["empty", "garbage", "missing"])
def test_a_bad_model_file_fails_the_load_with_the_framework_s_message(explicit, framework,
                                                                      content):
    s, repo = explicit
    path = model_file(repo, "bad", framework)
    os.makedirs(os.path.dirname(path))
    with open(os.path.join(repo, "bad", "config.pbtxt"), "w") as f:
        f.write(framework.add_sub_config())
    if content is not None:
        with open(path, "wb") as f:
            f.write(content)
    text = refused(s, "bad")
    if content is None:
        assert framework.missing_file_text.format(path=path) in text
    else:
        for said in framework.unreadable_file_texts:
            assert said in text
    framework.write(repo, "good", framework.add_sub(), framework.add_sub_config())
    s.load("good")
    add_sub_works(framework, s.model("good"))


def test_without_the_framework_the_error_names_the_extra(tmp_path, framework):
    framework.write(str(tmp_path), "add_sub", framework.add_sub(), framework.add_sub_config())
    code = (
        f"import sys; sys.modules[{framework.runtime!r}] = None  # as if not installed\n"
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
    assert f'pip install "tritonserver-embedded[{framework.extra}]"' in done.stdout, done.stdout
    assert "LIVE True" in done.stdout
