"""The package's SDK backends beyond identity/add_sub/repeat: accumulate
(sequences), sleep (cancellation, timeouts, concurrency), and the statistics
the SDK reports under dynamic batching."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within

START, END = 1, 2  # TRITONSERVER_RequestFlag


def accumulate(model, cid, values, flags=0) -> list:
    response = next(model.infer(inputs={"INPUT": np.array(values, np.int64)},
                                correlation_id=cid, flags=flags))
    return np.from_dlpack(response.outputs["OUTPUT"]).tolist()


def test_accumulate_interleaved_sequences(server):
    model = server.model("accumulate_int64")
    assert accumulate(model, 11, [5], START) == [5]
    assert accumulate(model, 12, [100, 1], START) == [101, 101]  # OUTPUT has INPUT's shape
    assert accumulate(model, "text-id", [7], START) == [7]
    assert accumulate(model, 11, [3]) == [8]
    assert accumulate(model, 12, [-1]) == [100]
    assert accumulate(model, "text-id", [1], END) == [8]
    assert accumulate(model, 11, [2], END) == [10]
    assert accumulate(model, 11, [4], START | END) == [4]  # a new sequence, same id
    assert accumulate(model, 12, [0], END) == [100]


def test_accumulate_rules_come_from_the_core(server):
    model = server.model("accumulate_int64")
    with pytest.raises(tritonserver.InvalidArgumentError, match="START"):
        accumulate(model, 99, [1])  # never started
    with pytest.raises(tritonserver.InvalidArgumentError, match="correlation ID"):
        accumulate(model, 0, [1], START)


def test_accumulate_concurrent_sequences(server):
    model = server.model("accumulate_int64")
    results = {}

    def run(cid):
        sums = [accumulate(model, cid, [cid], START)[0]]
        for step in range(1, 10):
            sums.append(accumulate(model, cid, [step], END if step == 9 else 0)[0])
        results[cid] = sums

    threads = [threading.Thread(target=run, args=(cid,)) for cid in range(1000, 1008)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for cid in range(1000, 1008):
        assert results[cid] == [cid + step * (step + 1) // 2 for step in range(10)]


def test_accumulate_refuses_a_model_without_sequence_batching(tmp_path):
    model_dir = tmp_path / "acc"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(
        'backend: "accumulate"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT" data_type: TYPE_INT64 dims: [ -1 ] } ]\n'
        'output [ { name: "OUTPUT" data_type: TYPE_INT64 dims: [ -1 ] } ]\n')
    s = start_server(model_repository=str(tmp_path),
                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    try:
        with pytest.raises(tritonserver.InvalidArgumentError, match="needs sequence_batching"):
            s.load("acc")
        assert s.live()
    finally:
        stop_within(s)


def sleep(model, us, **kwargs):
    return model.infer(inputs={"DELAY_US": np.array([us], np.int64)}, **kwargs)


def waited(it) -> int:
    return int(np.from_dlpack(next(it).outputs["WAITED_US"])[0])


def test_sleep_waits(server):
    t0 = time.monotonic()
    assert 50_000 <= waited(sleep(server.model("sleep_us"), 50_000)) < 5_000_000
    assert time.monotonic() - t0 >= 0.05


def test_sleep_cancel_stops_the_wait(server):
    it = sleep(server.model("sleep_us"), 20_000_000)
    time.sleep(0.1)
    t0 = time.monotonic()
    it.cancel()
    with pytest.raises(tritonserver.CancelledError):
        next(it)
    assert time.monotonic() - t0 < 5


def test_sleep_timeout(server):
    t0 = time.monotonic()
    with pytest.raises(tritonserver.UnavailableError, match="timed out"):
        next(sleep(server.model("sleep_us"), 20_000_000, timeout=100_000))
    assert time.monotonic() - t0 < 5


def test_sleep_two_instances_run_concurrently(server):
    model = server.model("sleep_us")
    t0 = time.monotonic()
    iterators = [sleep(model, 500_000) for _ in range(2)]
    assert all(waited(it) >= 500_000 for it in iterators)
    assert time.monotonic() - t0 < 0.9  # two instances: not one after the other (1 s)


def test_request_cancelled_while_queued_never_runs(server):
    model = server.model("sleep_us")
    busy = [sleep(model, 400_000) for _ in range(2)]  # both instances taken
    time.sleep(0.05)
    queued = sleep(model, 20_000_000)
    queued.cancel()
    t0 = time.monotonic()
    with pytest.raises(tritonserver.CancelledError, match="before it was executed"):
        next(queued)  # the SDK answers it; the backend never sees it
    assert time.monotonic() - t0 < 5
    assert all(waited(it) >= 400_000 for it in busy)


def test_dynamic_batching_statistics(tmp_path):
    """Concurrent requests to a model with dynamic batching execute as
    batches of several requests, and the statistics show it."""
    model_dir = tmp_path / "sleep_batched"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(
        'backend: "sleep"\nmax_batch_size: 8\n'
        "dynamic_batching { max_queue_delay_microseconds: 100000 }\n"
        'input [ { name: "DELAY_US" data_type: TYPE_INT64 dims: [ 1 ] } ]\n'
        'output [ { name: "WAITED_US" data_type: TYPE_INT64 dims: [ 1 ] } ]\n'
        "instance_group [ { kind: KIND_CPU, count: 1 } ]\n")
    s = start_server(model_repository=str(tmp_path))
    try:
        model = s.model("sleep_batched")
        iterators = [model.infer(inputs={"DELAY_US": np.array([[20_000]], np.int64)})
                     for _ in range(16)]
        for it in iterators:
            assert np.from_dlpack(next(it).outputs["WAITED_US"])[0, 0] >= 20_000
        deadline = time.monotonic() + 10
        while (stats := model.statistics()["model_stats"][0])["inference_count"] < 16:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert stats["inference_count"] == 16
        assert stats["execution_count"] < 16
        batches = {b["batch_size"]: b for b in stats["batch_stats"]}
        assert max(batches) > 1
        assert sum(size * b["compute_infer"]["count"] for size, b in batches.items()) == 16
        # Real compute times: every execution slept at least 20 ms.
        for b in batches.values():
            assert b["compute_infer"]["ns"] >= 20_000_000 * b["compute_infer"]["count"]
        infer = stats["inference_stats"]
        assert infer["success"]["count"] == 16
        assert infer["compute_infer"]["ns"] >= 16 * 20_000_000
        assert infer["queue"]["count"] == 16
    finally:
        stop_within(s)
