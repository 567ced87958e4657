"""The core's teardown races, avoided in the package's layer
(docs/reliability.md): two-instance models loaded, loaded down and unloaded
in a loop without a crash, a stop that returns as soon as the models are
gone, and a stop after a failed reload that does not wait for the stale
entry the core keeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import tritonserver
from reliability import support
from reliability.teardown_cycles import IDENTITY  # the two-instance identity config

HERE = os.path.dirname(os.path.abspath(__file__))

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT


@pytest.mark.stress
def test_two_instance_models_loaded_under_load_and_unloaded_200_times():
    """A PythonModel and a C++ SDK model, each with count 2 (one core
    instance, two workers), 200 cycles in one child process: no crash."""
    cycles = 200
    start = time.monotonic()
    result = subprocess.run([sys.executable, os.path.join(HERE, "teardown_cycles.py"), str(cycles)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (
        f"the loop ended with {result.returncode} (a negative code is a signal: a crash)\n"
        f"{result.stdout[-1000:]}\n{result.stderr[-3000:]}")
    assert f"cycles: {cycles}" in result.stdout
    support.record("two-instance load/infer/unload loop",
                   f"{cycles} cycles, 0 crashes, {time.monotonic() - start:.0f} s")


def _write(repo, name: str, config: str) -> None:
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(config)


def test_stop_after_a_failed_reload_returns_at_once_and_loses_nothing(tmp_path):
    """A reload that fails while the old version serves leaves an entry the
    core's stop would wait on for the whole exit timeout (30 s)."""
    _write(tmp_path, "ident", IDENTITY)
    server = tritonserver.Server(model_repository=str(tmp_path), model_control_mode=EXPLICIT,
                                 startup_models=["ident"]).start(wait_until_ready=True)
    x = np.arange(4, dtype=np.float32)
    broken = json.dumps({"backend": "no_such_backend", "max_batch_size": 0})
    with pytest.raises(tritonserver.TritonError):
        server.load("ident", {"config": broken})
    # The old version still serves, untouched.
    answer = next(server.model("ident").infer(inputs={"INPUT0": x}))
    np.testing.assert_array_equal(np.from_dlpack(answer.outputs["OUTPUT0"]), x)
    del answer
    began = time.monotonic()
    server.stop()  # no UnavailableError: nothing was left running
    took = time.monotonic() - began
    assert took < 2, f"stop took {took:.1f} s"
    support.record("stop after a failed reload", f"{took * 1000:.0f} ms")


def test_an_idle_server_stops_without_the_cores_one_second_poll():
    """The models are unloaded before the core's stop, which then finds
    none (it polls once a second otherwise)."""
    server = tritonserver.Server(model_repository=tritonserver.example_model_repository())
    server.start(wait_until_ready=True)
    began = time.monotonic()
    server.stop()
    took = time.monotonic() - began
    assert took < 0.9, f"stop took {took:.2f} s"
    support.record("stop, idle, the example models", f"{took * 1000:.0f} ms")


def test_none_mode_still_refuses_what_the_core_refuses(tmp_path):
    """The core runs in EXPLICIT mode under a NONE-mode server: the package
    refuses model control as the core would, with the core's words."""
    _write(tmp_path, "ident", IDENTITY)
    with tritonserver.Server(model_repository=str(tmp_path)) as server:
        assert server.model("ident").ready()
        with pytest.raises(tritonserver.UnavailableError,
                           match="explicit model load / unload is not allowed"):
            server.load("ident")
        with pytest.raises(tritonserver.UnavailableError,
                           match="explicit model load / unload is not allowed"):
            server.unload("ident")
        with pytest.raises(tritonserver.UnsupportedError,
                           match="repository registration is not allowed"):
            server.register_model_repository(str(tmp_path))
        assert server.model("ident").ready()
