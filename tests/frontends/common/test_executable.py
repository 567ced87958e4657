"""``python -m tritonserver executable``: NVIDIA's tritonserver executable of
the installed core, set up by the package, serves a python-backend model.py
and a model on the package's C++ SDK backends to tritonclient; models on the
package's in-process backends (PythonModels, the framework backends) fail
with the loader's error; SIGINT stops it and its exit status is the command's."""

from __future__ import annotations

import os
import shutil
import signal
import sys

import numpy as np
import pytest

import tritonserver
from frontends import support
from frontends.serve_process import Serve

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMAND = [sys.executable, "-m", "tritonserver", "executable"]


def _has_executable() -> bool:
    from tritonserver._core import find_core

    try:
        core = find_core()
    except Exception:
        return False
    return bool(core.executable) and os.path.isfile(core.executable)


pytestmark = pytest.mark.skipif(not _has_executable(),
                                reason="the installed core has no tritonserver executable")


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("executable_repo"))
    shutil.copytree(os.path.join(TESTS, "models", "python_affine"),
                    os.path.join(root, "python_affine"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(tritonserver.example_model_repository(), "identity_fp32"),
                    os.path.join(root, "identity_fp32"))
    shutil.copytree(os.path.join(TESTS, "inprocess_models", "pb_repeat"),
                    os.path.join(root, "pb_repeat"), ignore=shutil.ignore_patterns("__pycache__"))
    os.makedirs(os.path.join(root, "onnx_model", "1"))
    open(os.path.join(root, "onnx_model", "1", "model.onnx"), "wb").close()
    with open(os.path.join(root, "onnx_model", "config.pbtxt"), "w") as f:
        f.write('backend: "onnxruntime"\nmax_batch_size: 0\n'
                'input [ { name: "X", data_type: TYPE_FP32, dims: [ 2 ] } ]\n'
                'output [ { name: "Y", data_type: TYPE_FP32, dims: [ 2 ] } ]\n')
    return root


def test_executable_serves_python_backend_and_sdk_models_and_stops_on_sigint(repository):
    http_port, grpc_port, metrics_port = (support.free_port() for _ in range(3))
    exe = Serve(f"--model-repository={repository}", "--http-address=127.0.0.1",
                f"--http-port={http_port}", "--grpc-address=127.0.0.1",
                f"--grpc-port={grpc_port}", "--metrics-address=127.0.0.1",
                f"--metrics-port={metrics_port}", "--exit-on-error=false",
                "--exit-timeout-secs=5", command=COMMAND)
    try:
        http = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
        support.wait_until(lambda: _live(http), timeout=60, what="the executable live")
        x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
        inp = httpclient.InferInput("INPUT0", [3], "FP32")
        inp.set_data_from_numpy(x)
        np.testing.assert_array_equal(
            http.infer("python_affine", [inp]).as_numpy("OUTPUT0"), 2 * x + 1)
        np.testing.assert_array_equal(
            http.infer("identity_fp32", [inp]).as_numpy("OUTPUT0"), x)
        grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        ginp = grpcclient.InferInput("INPUT0", [3], "FP32")
        ginp.set_data_from_numpy(x)
        np.testing.assert_array_equal(
            grpc.infer("python_affine", [ginp]).as_numpy("OUTPUT0"), 2 * x + 1)
        http.close()
        grpc.close()
        out = exe.output()
        # The package's in-process backends cannot run in the executable.
        assert not _ready(http_port, "pb_repeat") and not _ready(http_port, "onnx_model")
        assert "failed to load 'pb_repeat'" in out and "undefined symbol: Py" in out
        assert ("the onnxruntime backend runs on the inprocess backend, which could not be "
                "loaded") in out
        # exec: the child is the command's own process; SIGINT reaches it directly.
        exe.process.send_signal(signal.SIGINT)
        assert exe.wait() == 0, exe.output()
    finally:
        exe.end()


def test_executable_passes_its_exit_status_through(repository):
    # The executable refuses port 0 for both HTTP and gRPC (status 1).
    exe = Serve(f"--model-repository={repository}", "--http-port=0", "--grpc-port=0",
                command=COMMAND)
    try:
        assert exe.wait() == 1, exe.output()
        assert ("The server cannot listen to HTTP requests and GRPC requests at the same "
                "address and port 0.0.0.0:0") in exe.output()
    finally:
        exe.end()


def test_no_core_executable_is_a_clear_error(monkeypatch, capsys):
    import dataclasses

    from tritonserver._cli import executable
    from tritonserver._core import find_core

    core = dataclasses.replace(find_core(), executable=None)
    monkeypatch.setattr("tritonserver._core.find_core", lambda: core)
    assert executable.main(["--help"]) == 1
    assert "has no tritonserver executable" in capsys.readouterr().err


def _live(client) -> bool:
    try:
        return client.is_server_live()
    except Exception:
        return False


def _ready(port: int, model: str) -> bool:
    status, _, _ = support.request(port, "GET", f"/v2/models/{model}/ready")
    return status == 200
