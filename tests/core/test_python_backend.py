"""The python backend (stub process) with the package's default options.

The user's environment here has numpy 2, under which the 2.51 stub silently
corrupts tensors; the package must give the stub an environment where it is
correct, and this test proves the values with known inputs.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import tritonserver


def seconds(value: float) -> np.ndarray:
    return np.array([[value]], np.float32)  # [batch, 1]


def test_python_model_values_are_exact(python_server):
    x = np.array([0.0, 1.5, -2.0, 1e6, 3.25], dtype=np.float32)
    for _ in range(3):
        out = next(python_server.model("python_affine").infer(inputs={"INPUT0": x}))
        np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), 2 * x + 1)


def test_python_model_large_input(python_server):
    x = np.random.default_rng(1).random(1 << 16, dtype=np.float32)
    out = next(python_server.model("python_affine").infer(inputs={"INPUT0": x}))
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), 2 * x + 1)


def test_cancel_a_running_request(python_server):
    model = python_server.model("python_sleep")
    started = time.monotonic()
    running = model.infer(inputs={"SECONDS": seconds(30.0)})
    time.sleep(0.3)
    running.cancel()
    with pytest.raises(tritonserver.CancelledError):
        list(running)
    assert time.monotonic() - started < 20  # it stopped, it did not sleep 30 s
    assert python_server.live()


def test_timeout_of_a_queued_request(python_server):
    model = python_server.model("python_sleep")
    busy = model.infer(inputs={"SECONDS": seconds(1.0)})
    time.sleep(0.2)
    late = model.infer(inputs={"SECONDS": seconds(0.0)}, timeout=1000)
    with pytest.raises(tritonserver.UnavailableError, match="timeout|Timeout"):
        list(late)
    next(busy)
    assert python_server.live()


def test_gil_is_free_while_a_request_runs(python_server):
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.01)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        next(python_server.model("python_sleep").infer(inputs={"SECONDS": seconds(0.5)}))
    finally:
        stop.set()
        t.join()
    # A waiter holding the GIL would have starved the ticker for 0.5 s.
    assert len(ticks) >= 10


def test_stubs_fork_beside_grpc_without_aborting():
    """grpcio's fork handlers (on by default in grpcio 1.85) abort the
    process when two threads fork at once, and the core forks a stub per
    python-backend instance from several loading threads. Importing
    tritonserver first turns them off: servers start and stop beside open
    gRPC channels (without it: "is_forking != was_forking", SIGABRT)."""
    import os
    import subprocess
    import sys
    import textwrap

    import conftest

    conftest.skip_without_python_backend()
    code = textwrap.dedent(f"""
        import tritonserver  # first: grpc reads the setting when it is imported
        import grpc
        from tritonserver.frontends import KServeGrpc
        channels = []
        for _ in range(4):
            s = tritonserver.Server(model_repository={conftest.TEST_MODELS!r},
                                    exit_timeout=10).start(wait_until_ready=True, timeout=120)
            f = KServeGrpc(s, KServeGrpc.Options(port=0)).start()
            channels.append(grpc.insecure_channel(f.url))  # kept open: grpc's threads run
            grpc.channel_ready_future(channels[-1]).result(timeout=30)
            f.stop(timeout=1)
            s.stop()
        print("OK")
    """)
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stderr[-3000:]
