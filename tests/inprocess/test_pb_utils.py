"""python-backend models (model.py with TritonPythonModel and pb_utils) run
in-process by changing only the config's backend line; and Python models
under numpy 1 and numpy 2."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tritonserver
from conftest import TEST_MODELS, TESTS_DIR, copy_in_process, start_server, stop_within

INPROCESS_MODELS = os.path.join(TESTS_DIR, "inprocess_models")
NUMPY1_ENV = "TRITONSERVER_TEST_NUMPY1_PYTHON"


@pytest.fixture(scope="module")
def pb_server(tmp_path_factory):
    """The python-backend test models, each config rewritten to
    backend: "inprocess", plus tests/inprocess_models."""
    repo = copy_in_process(str(tmp_path_factory.mktemp("pb_repo")))
    for name in os.listdir(INPROCESS_MODELS):
        shutil.copytree(os.path.join(INPROCESS_MODELS, name), os.path.join(repo, name),
                        ignore=shutil.ignore_patterns("__pycache__"))
    s = start_server(model_repository=repo)
    yield s
    stop_within(s)


def test_python_affine_runs_in_process(pb_server):
    model = pb_server.model("python_affine")
    assert model.config()["backend"] == "inprocess"
    x = np.array([0.0, 1.5, -2.0, 1e6, 3.25], dtype=np.float32)
    out = next(model.infer(inputs={"INPUT0": x}))
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), 2 * x + 1)


def test_request_parameters_and_id_reach_the_model(pb_server):
    out = next(pb_server.model("python_echo_params").infer(
        inputs={"INPUT0": np.ones(1, np.float32)}, request_id="abc",
        parameters={"temperature": 0.5, "name": "x", "n": 3, "flag": True}))
    seen = json.loads(out.outputs["PARAMS"].to_bytes_array()[0])
    assert seen == {"parameters": {"temperature": 0.5, "name": "x", "n": 3, "flag": True},
                    "request_id": "abc"}


def test_cancellation_is_seen_and_the_error_keeps_its_code(pb_server):
    model = pb_server.model("python_sleep")
    running = model.infer(inputs={"SECONDS": np.array([[30.0]], np.float32)})
    time.sleep(0.3)
    running.cancel()
    with pytest.raises(tritonserver.CancelledError, match="cancelled while sleeping"):
        list(running)
    out = next(model.infer(inputs={"SECONDS": np.array([[0.0]], np.float32)}))
    assert np.from_dlpack(out.outputs["SLEPT"]).tolist() == [[0.0]]


def test_decoupled_pb_utils_model_with_a_sender_thread(pb_server):
    model = pb_server.model("pb_repeat")
    for values in ([3, 1, 4, 1, 5], [7]):
        got = [int(np.from_dlpack(r.outputs["OUT"])[0])
               for r in model.infer(inputs={"IN": np.array(values, np.int32)}) if r.outputs]
        assert got == values


def test_pb_utils_helpers():
    from tritonserver._inprocess import pb_utils

    t = pb_utils.Tensor("T", np.arange(3, dtype=np.int16))
    assert t.name() == "T" and t.shape() == [3] and t.is_cpu()
    assert t.triton_dtype() == int(tritonserver.DataType.INT16)
    assert np.from_dlpack(pb_utils.Tensor.from_dlpack("U", t.as_numpy()).as_numpy()).tolist() \
        == [0, 1, 2]
    response = pb_utils.InferenceResponse([t])
    assert pb_utils.get_output_tensor_by_name(response, "T") is t
    assert not response.has_error()
    error = pb_utils.TritonError("nope", pb_utils.TritonError.NOT_FOUND)
    assert error.message() == "nope" and error.code() == pb_utils.TritonError.NOT_FOUND
    assert pb_utils.triton_string_to_numpy("TYPE_FP32") is np.float32
    assert pb_utils.triton_string_to_numpy("TYPE_STRING") is np.object_
    config = {"input": [{"name": "A"}], "output": [{"name": "B"}]}
    assert pb_utils.get_input_config_by_name(config, "A") == {"name": "A"}
    assert pb_utils.get_output_config_by_name(config, "C") is None
    # A BLS call that cannot run answers with an error response, as in the
    # python backend (here: no server of this test runs a model "x").
    failed = pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[]).exec()
    assert failed.has_error() and failed.error().code() in (
        pb_utils.TritonError.NOT_FOUND, pb_utils.TritonError.INTERNAL,
        pb_utils.TritonError.INVALID_ARG, pb_utils.TritonError.UNAVAILABLE)


_NUMPY_SCRIPT = textwrap.dedent("""
    import json, shutil, sys, tempfile
    import numpy as np
    import tritonserver

    class Affine(tritonserver.PythonModel):
        def execute(self, requests):
            return [{"Y": 2 * r.inputs["X"] + 1} for r in requests]

    repo = tempfile.mkdtemp()
    shutil.copytree(sys.argv[1], repo + "/python_affine")
    path = repo + "/python_affine/config.pbtxt"
    text = open(path).read().replace('backend: "python"', 'backend: "inprocess"')
    open(path, "w").write(text)
    server = tritonserver.Server(model_repository=repo, exit_timeout=10)
    spec = (np.float32, [-1])
    server.register_model("affine", Affine, inputs={"X": spec}, outputs={"Y": spec})
    server.start(wait_until_ready=True, timeout=60)
    x = np.random.default_rng(3).random(1000, dtype=np.float32)
    results = []
    for name, key_in, key_out in (("affine", "X", "Y"), ("python_affine", "INPUT0", "OUTPUT0")):
        out = next(server.model(name).infer(inputs={key_in: x}))
        results.append(bool(np.array_equal(np.from_dlpack(out.outputs[key_out]), 2 * x + 1)))
    server.stop()
    print(json.dumps({"numpy": np.__version__, "exact": results}))
""")


def _interpreters() -> list:
    found = [pytest.param(sys.executable, id=f"numpy{np.__version__.split('.')[0]}")]
    other = os.environ.get(NUMPY1_ENV) or _stub_env_python()
    if other:
        found.append(pytest.param(other, id="numpy-other"))
    return found


def _stub_env_python():
    """The numpy<2 venv install-core builds for the python backend's stub
    (it sees this environment's packages, tritonserver included), when the
    test interpreter has numpy 2: a numpy-1 interpreter on any machine."""
    if int(np.__version__.split(".")[0]) < 2:
        return None
    try:
        from tritonserver._core import locate, stub_env

        env = stub_env.stub_env_path(locate.install_base(locate.find_core()))
    except Exception:
        return None
    python = os.path.join(env, "bin", "python3")
    return python if os.path.exists(python) else None


@pytest.mark.parametrize("python", _interpreters())
def test_numpy_versions(python, tmp_path):
    """In this interpreter (numpy 2 on the test machines) and, when
    TRITONSERVER_TEST_NUMPY1_PYTHON names one, an interpreter with numpy 1."""
    script = tmp_path / "numpy_check.py"
    script.write_text(_NUMPY_SCRIPT)
    env = dict(os.environ)
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(tritonserver.__file__)))
    # A source tree goes first on the path; site-packages never does (its
    # numpy would shadow the other interpreter's, which sees it anyway).
    if package_parent not in site.getsitepackages():
        env["PYTHONPATH"] = os.pathsep.join([package_parent] + [p for p in [env.get("PYTHONPATH")]
                                                               if p])
    if python != sys.executable and "TRITONSERVER_CORE" not in env:
        from tritonserver._core import locate

        env["TRITONSERVER_CORE"] = locate.find_core().library  # this environment's core
    proc = subprocess.run([python, str(script), os.path.join(TEST_MODELS, "python_affine")],
                          env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["exact"] == [True, True], result
    if python != sys.executable:  # really the other numpy
        assert result["numpy"].split(".")[0] != np.__version__.split(".")[0], result
