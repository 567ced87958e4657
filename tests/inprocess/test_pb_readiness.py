"""A python-backend model's own ``is_ready()`` (Triton 2.67+) run in-process:
what Triton's QA (qa/L0_backend_python/model_readiness) asks of it, on the
real core: True, False, an exception and a non-bool; a coroutine; a check
slower than the 5 s wait, whose answer the next caller gets; one check in
flight per instance however many callers; strict server readiness; the
reasons in the server's log, in Triton's words."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within, write_model
from tritonserver._inprocess import _readiness

CONFIG = """
backend: "python"
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [-1] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1] }]
instance_group [{ count: 1 kind: KIND_CPU }]
parameters { key: "ANSWER" value { string_value: "%s" } }
parameters { key: "DELAY_S" value { string_value: "%s" } }
"""

# Its answer from the config (as QA's readiness_model.py); each call is
# appended to calls.txt beside the model, to count them.
MODEL = """
import asyncio
import json
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"])["parameters"]
        self.answer = parameters["ANSWER"]["string_value"]
        self.delay = float(parameters["DELAY_S"]["string_value"])
        self.calls = os.path.join(pb_utils.get_model_dir(), "calls.txt")

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests]

    def is_ready(self):
        with open(self.calls, "a") as f:
            f.write("call\\n")
        if self.answer == "coroutine":
            return self.later()
        time.sleep(self.delay)
        if self.answer == "exception":
            raise RuntimeError("the check failed")
        return {"true": True, "false": False}.get(self.answer, "ready")

    async def later(self):
        await asyncio.sleep(self.delay)
        return True
"""

PLAIN = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests]
"""

MODELS = {"returns_true": ("true", 0), "returns_false": ("false", 0),
          "raises": ("exception", 0), "non_boolean": ("non_boolean", 0),
          "coroutine": ("coroutine", 0.05), "slow": ("true", 1.5), "shared": ("true", 0.5)}


def _folder(repo, name: str, source: str, config: str) -> None:
    write_model(repo, name, config, {"model.py": source})


def _repository(repo) -> None:
    for name, (answer, delay) in MODELS.items():
        _folder(repo, name, MODEL, CONFIG % (answer, delay))
    _folder(repo, "plain", PLAIN, CONFIG % ("", 0))


def _calls(repo, name: str) -> int:
    path = repo / name / "1" / "calls.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture(scope="module")
def readiness_server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("readiness")
    _repository(repo)
    server = start_server(model_repository=str(repo), python_backend="inprocess",
                          strict_readiness=False)
    yield server, repo
    stop_within(server)


def _infers(server: tritonserver.Server, name: str) -> None:
    out = next(server.model(name).infer(inputs={"INPUT0": np.ones(4, np.float32)}))
    assert np.array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), np.ones(4, np.float32))


@pytest.mark.parametrize("name, ready", [("returns_true", True), ("returns_false", False),
                                         ("raises", False), ("non_boolean", False),
                                         ("coroutine", True), ("plain", True)])
def test_the_models_answer_is_its_readiness(readiness_server, name, ready):
    server, repo = readiness_server
    before = _calls(repo, name)
    for _ in range(3):
        assert server.model(name).ready() is ready
        _infers(server, name)  # readiness is not the model's health for inference
    assert _calls(repo, name) == (0 if name == "plain" else before + 3)
    assert server.model("returns_true").ready()  # one model's failure is its own


def test_a_check_slower_than_the_wait_answers_the_next_caller(readiness_server, monkeypatch):
    """The first caller gives up after the wait (5 s; 0.5 s here); the check
    goes on, and a caller that comes while it runs gets its answer: one run
    of is_ready() for both."""
    server, repo = readiness_server
    monkeypatch.setattr(_readiness, "TIMEOUT_S", 0.5)
    before = _calls(repo, "slow")
    assert server.model("slow").ready() is False
    _infers(server, "slow")  # the instance serves while its check runs
    monkeypatch.setattr(_readiness, "TIMEOUT_S", 5.0)
    assert server.model("slow").ready() is True
    assert _calls(repo, "slow") == before + 1


def test_concurrent_callers_share_one_check(readiness_server):
    server, repo = readiness_server
    before = _calls(repo, "shared")
    results: list[bool] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        results.append(server.model("shared").ready())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [True] * 8
    assert _calls(repo, "shared") == before + 1


def test_strict_server_readiness_asks_every_instance(tmp_path):
    repo = tmp_path / "repo"
    _folder(repo, "returns_false", MODEL, CONFIG % ("false", 0))
    _folder(repo, "plain", PLAIN, CONFIG % ("", 0))
    # the start waits for the models to load, not for their own checks
    strict = start_server(model_repository=str(repo), python_backend="inprocess",
                          model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                          startup_models=["returns_false", "plain"])
    try:
        assert strict.model("plain").ready()
        assert strict.ready() is False
        strict.unload("returns_false", wait_until_unloaded=True)
        assert strict.ready() is True  # its checks left with it
    finally:
        stop_within(strict)


_LOGGED = """
import sys
import tritonserver
server = tritonserver.Server(model_repository=sys.argv[1], python_backend="inprocess",
                             log_file=sys.argv[2], log_verbose=1, strict_readiness=False).start()
for name in ("returns_false", "raises", "non_boolean", "returns_true"):
    server.model(name).ready()
server.stop()
"""


def test_why_a_model_is_not_ready_is_in_the_servers_log(tmp_path):
    repo = tmp_path / "repo"
    for name in ("returns_false", "raises", "non_boolean", "returns_true"):
        _folder(repo, name, MODEL, CONFIG % MODELS[name])
    log_file = tmp_path / "server.log"
    done = subprocess.run([sys.executable, "-c", _LOGGED, str(repo), str(log_file)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    log = log_file.read_text()
    assert ("Model 'returns_false' version 1 is not ready: Model 'returns_false_0_0' is not "
            "ready (user-defined check failed).") in log
    assert "Model 'raises' version 1 is not ready: RuntimeError: the check failed" in log
    assert ("Model 'non_boolean' version 1 is not ready: is_ready() must return a boolean "
            "value") in log
    assert "Model 'returns_true' version 1 is not ready" not in log
