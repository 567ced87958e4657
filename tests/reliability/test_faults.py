"""Faults from below: backends that fail at load, fail one request of a
batch, send no response at all, or are slow; a python-backend model that
raises, and one whose stub process is killed mid-request. The caller gets
the right exception and the server stays live."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import tritonserver
from conftest import TEST_MODELS, start_server, stop_within
from reliability.support import record, run_bounded

HERE = os.path.dirname(os.path.abspath(__file__))
EXPLICIT = tritonserver.ModelControlMode.EXPLICIT
IO = ('input [ { name: "INPUT0" data_type: TYPE_INT64 dims: [ -1 ] } ]\n'
      'output [ { name: "OUTPUT0" data_type: TYPE_INT64 dims: [ -1 ] },\n'
      '         { name: "BATCH" data_type: TYPE_INT64 dims: [ 1 ] } ]\n')


def write_model(repo: str, name: str, backend: str, body: str = "", instances: int = 1) -> None:
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(f'backend: "{backend}"\n{body}\n'
                f'instance_group [ {{ kind: KIND_CPU, count: {instances} }} ]\n')


@pytest.fixture(scope="module")
def fault_server(fault_backends, tmp_path_factory):
    repo = str(tmp_path_factory.mktemp("fault_repo"))
    # Two instances: one may be busy with a slow request while the other serves.
    write_model(repo, "faulty", "faulty", "max_batch_size: 0\n" + IO, instances=2)
    write_model(repo, "fails_to_load", "faulty", "max_batch_size: 0\n" + IO +
                'parameters { key: "fail_load" value { string_value: "refused on purpose" } }')
    # A batch forms only when 4 requests wait (or after 5 s): the four sent
    # together below always execute together.
    write_model(repo, "faulty_batched", "faulty",
                "max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 4 ] "
                "max_queue_delay_microseconds: 5000000 }\n" + IO)
    s = start_server(model_repository=repo, backend_directory=fault_backends,
                     model_control_mode=EXPLICIT, log_error=False)
    for name in ("faulty", "faulty_batched"):
        s.load(name)
    yield s
    stop_within(s)


def assert_serving(server) -> None:
    assert server.live()
    x = np.arange(4, dtype=np.int64)
    out = next(server.model("faulty").infer(inputs={"INPUT0": x}))
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), x)


def test_backend_failing_at_load(fault_server):
    # The core reports every failed load as INVALID_ARG, quoting the cause.
    with pytest.raises(tritonserver.InvalidArgumentError, match="faulty: refused on purpose") as info:
        fault_server.load("fails_to_load")
    assert not fault_server.model("fails_to_load").ready()
    assert_serving(fault_server)
    record("fault: fails at load", f"load raised {type(info.value).__name__}; server live")


def test_backend_failing_one_request_of_a_batch(fault_server):
    model = fault_server.model("faulty_batched")
    values = [[1, 2], [3, -4], [5, 6], [7, 8]]
    iterators = [model.infer(inputs={"INPUT0": np.array([v], np.int64)}) for v in values]
    results = []
    for it in iterators:
        try:
            results.append(run_bounded(lambda: next(it), 30, "a batched response"))
        except tritonserver.TritonError as e:
            results.append(e)
    for v, r in zip(values, results):
        if min(v) < 0:
            assert isinstance(r, tritonserver.InvalidArgumentError), r
            assert "faulty: negative value -4" in str(r)
        else:
            assert np.from_dlpack(r.outputs["OUTPUT0"]).tolist() == [v]
            assert np.from_dlpack(r.outputs["BATCH"]).tolist() == [4]  # ran together
    assert_serving(fault_server)
    record("fault: fails one request of a batch of 4",
           "1 InvalidArgumentError, 3 correct responses from the same batch")


def test_backend_sending_no_response(fault_backends, tmp_path):
    # The raw backend releases the request and sends nothing; core 2.51 then
    # sends nothing either. The caller must not wait past stop(): the
    # binding ends such a request with UnavailableError when the server
    # stops (regression test for csrc/bindings/server.cc Server::Stop).
    repo = str(tmp_path / "repo")
    write_model(repo, "silent", "silent", "max_batch_size: 0\n" + IO)
    write_model(repo, "faulty", "faulty", "max_batch_size: 0\n" + IO)
    s = start_server(model_repository=repo, backend_directory=fault_backends, log_error=False)
    iterators = [s.model("silent").infer(inputs={"INPUT0": np.arange(3, dtype=np.int64)})
                 for _ in range(3)]
    outcome: list = []

    def read_all() -> None:
        for it in iterators:
            try:
                outcome.append(next(it))
            except tritonserver.TritonError as e:
                outcome.append(e)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    reader.join(1.0)
    assert reader.is_alive() and not outcome  # nothing came, as the backend chose
    iterators[0].cancel()  # cancelling a released request is harmless
    assert_serving(s)
    stop_within(s)
    reader.join(10)
    assert not reader.is_alive(), "a request without a response outlived stop()"
    assert len(outcome) == 3
    assert all(isinstance(e, tritonserver.UnavailableError) for e in outcome), outcome
    record("fault: releases requests without any response",
           "3 requests waited while the server served others; stop() ended each "
           "with UnavailableError")


def test_slow_backend_cancelled_while_others_answer(fault_server):
    slow = fault_server.model("faulty").infer(inputs={"INPUT0": np.ones(2, np.int64)},
                                             parameters={"sleep_ms": 20_000})
    time.sleep(0.2)
    assert_serving(fault_server)  # the other instance answers meanwhile
    started = time.monotonic()
    slow.cancel()
    with pytest.raises(tritonserver.CancelledError):
        run_bounded(lambda: next(slow), 15, "the cancelled slow request")
    waited = time.monotonic() - started
    assert_serving(fault_server)
    record("fault: slow backend (20 s request)", f"cancelled -> CancelledError after {waited:.2f} s")


@pytest.fixture(scope="module")
def python_fault_server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("python_fault_repo")
    shutil.copytree(os.path.join(HERE, "models", "python_raises"), repo / "python_raises")
    s = start_server(model_repository=str(repo), log_error=False)
    yield s
    stop_within(s)


def test_python_model_that_raises(python_fault_server):
    model = python_fault_server.model("python_raises")
    with pytest.raises(tritonserver.TritonError, match="python_raises: negative input") as info:
        next(model.infer(inputs={"INPUT0": np.array([1, -2], np.float32)}))
    for _ in range(3):  # the model keeps serving after its exception
        out = next(model.infer(inputs={"INPUT0": np.array([1.5, 2.5], np.float32)}))
        assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [1.5, 2.5]
    assert python_fault_server.live()
    record("fault: python model raises", f"{type(info.value).__name__} with the model's message; "
                                         "the model answers the next requests")


STUB_KILL = textwrap.dedent("""
    import os, signal, time
    import numpy as np
    import tritonserver
    from tritonserver._control import teardown as _runtime

    s = tritonserver.Server(model_repository={repo!r}, exit_timeout=3,
                            log_error=False).start(wait_until_ready=True, timeout=60)
    slow = s.model("python_sleep").infer(inputs={{"SECONDS": np.array([[5.0]], np.float32)}})
    time.sleep(0.5)
    victims = [p for p in _runtime._stub_children()
               if b"python_sleep" in open(f"/proc/{{p}}/cmdline", "rb").read()]
    assert len(victims) == 1, victims
    os.kill(victims[0], signal.SIGKILL)
    started = time.monotonic()
    try:
        next(slow)
        print("NO ERROR")
    except tritonserver.TritonError as e:
        print("ERROR", type(e).__name__, round(time.monotonic() - started, 2), e)
    print("LIVE", s.live())
    out = next(s.model("python_affine").infer(inputs={{"INPUT0": np.ones(2, np.float32)}}))
    print("OTHER", np.from_dlpack(out.outputs["OUTPUT0"]).tolist())
    del out, slow
    started = time.monotonic()
    try:
        s.stop()
        print("STOPPED", round(time.monotonic() - started, 2))
    except tritonserver.UnavailableError:
        print("STOP GAVE UP", round(time.monotonic() - started, 2))
""")


def test_python_stub_killed_mid_request():
    # In a child process: core 2.51's python backend never finishes
    # unloading a model whose stub died, so stop() gives up after the exit
    # timeout and that server is kept until the process exits.
    code = STUB_KILL.format(repo=TEST_MODELS)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=110)
    out = result.stdout
    assert result.returncode == 0, result.stderr[-3000:]
    error_line = next(line for line in out.splitlines() if line.startswith(("ERROR", "NO ERROR")))
    assert error_line.startswith("ERROR InternalError"), out
    assert "not healthy" in error_line
    assert "LIVE True" in out and "OTHER [3.0, 3.0]" in out
    stop_line = next(line for line in out.splitlines() if line.startswith("STOP"))
    record("fault: python stub killed mid-request",
           f"{' '.join(error_line.split()[:3])} s after the kill; other models answer; "
           f"stop(): {stop_line.lower()} s (exit_timeout 3); process exited cleanly")
