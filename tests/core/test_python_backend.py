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
