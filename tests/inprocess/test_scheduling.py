"""Python models scheduled by the core: dynamic batching, instances,
decoupled streams, sequences, ensembles, concurrency, unload under load."""

from __future__ import annotations

import asyncio
import shutil
import threading
import time

import numpy as np
import pytest

import tritonserver
from conftest import stats_when

WAIT_S = 30.0
ROW = (np.float32, [1])


def test_dynamic_batching_forms_batches(explicit_empty):
    sizes = []
    gate = threading.Event()

    class Batched(tritonserver.PythonModel):
        def execute(self, requests):
            sizes.append(len(requests))
            gate.wait(WAIT_S)  # the first batch holds the instance while others queue
            return [{"Y": r.inputs["X"] * 2} for r in requests]

    model = explicit_empty.register_model("batched", Batched, inputs={"X": ROW}, outputs={"Y": ROW},
                                    max_batch_size=8, dynamic_batching=True)
    iterators = [model.infer(inputs={"X": np.full((1, 1), i, np.float32)}) for i in range(7)]
    deadline = time.monotonic() + WAIT_S
    while not sizes and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # the other six are queued behind the first batch
    gate.set()
    for i, it in enumerate(iterators):
        assert np.from_dlpack(next(it).outputs["Y"]).tolist() == [[2.0 * i]]
    assert max(sizes) > 1, sizes
    assert sum(sizes) == 7
    # Batch statistics are reported just after the responses: wait for them.
    batched = lambda st: any(int(b["batch_size"]) > 1 for b in st["batch_stats"])  # noqa: E731
    assert batched(stats_when(model, batched))


def test_instances_execute_concurrently(explicit_empty):
    barrier = threading.Barrier(2, timeout=WAIT_S)

    class Meet(tritonserver.PythonModel):
        def execute(self, requests):
            barrier.wait()  # passes only if both instances run at once
            return [{"Y": r.inputs["X"]} for r in requests]

    model = explicit_empty.register_model("meet", Meet, inputs={"X": ROW}, outputs={"Y": ROW},
                                    instance_count=2)
    first = model.infer(inputs={"X": np.ones(1, np.float32)})
    second = model.infer(inputs={"X": np.ones(1, np.float32)})
    assert next(first).outputs and next(second).outputs


def test_decoupled_stream_from_execute_and_from_a_thread(explicit_empty):
    class Stream(tritonserver.PythonModel):
        def execute(self, requests):
            for r in requests:
                n, sender = int(r.inputs["N"][0]), r.sender
                if n % 2:  # odd: answered during execute
                    for i in range(n):
                        sender.send({"OUT": np.array([i], np.int32)})
                    sender.finish()
                else:  # even: by a thread, after execute returned
                    def later(sender=sender, n=n):
                        for i in range(n):
                            sender.send({"OUT": np.array([i], np.int32)}, final=i == n - 1)
                    threading.Thread(target=later).start()

    model = explicit_empty.register_model("stream", Stream, inputs={"N": (np.int32, [1])},
                                    outputs={"OUT": (np.int32, [1])}, decoupled=True)
    for n in (3, 4, 1, 2):
        got = [int(np.from_dlpack(r.outputs["OUT"])[0])
               for r in model.infer(inputs={"N": np.array([n], np.int32)}) if r.outputs]
        assert got == list(range(n))


def test_decoupled_sender_dropped_unfinished_fails_the_request(explicit_empty):
    class Forgetful(tritonserver.PythonModel):
        def execute(self, requests):
            for r in requests:
                r.sender.send({"OUT": np.array([1], np.int32)})  # never final

    model = explicit_empty.register_model("forgetful", Forgetful, inputs={"N": (np.int32, [1])},
                                    outputs={"OUT": (np.int32, [1])}, decoupled=True)
    with pytest.raises(tritonserver.InternalError, match="final"):
        list(model.infer(inputs={"N": np.array([1], np.int32)}))
    assert explicit_empty.live()


def test_sender_of_a_non_decoupled_model_is_refused(explicit_empty):
    class NotStreaming(tritonserver.PythonModel):
        def execute(self, requests):
            return [r.sender for r in requests]

    model = explicit_empty.register_model("not_streaming", NotStreaming, inputs={"X": ROW},
                                    outputs={"Y": ROW})
    with pytest.raises(tritonserver.UnsupportedError, match="not decoupled"):
        next(model.infer(inputs={"X": np.ones(1, np.float32)}))


def test_sequence_flags_and_correlation_ids(explicit_empty):
    class Running(tritonserver.PythonModel):
        def initialize(self):
            self.totals = {}

        def execute(self, requests):
            out = []
            for r in requests:
                key = r.correlation_id
                if r.sequence_start:
                    self.totals[key] = 0.0
                self.totals[key] += float(r.inputs["X"].reshape(-1)[0])
                total = self.totals.pop(key) if r.sequence_end else self.totals[key]
                out.append({"TOTAL": np.array([[total]], np.float32),
                            "FLAGS": np.array([[r.flags]], np.int32)})
            return out

    model = explicit_empty.register_model(
        "running", Running, inputs={"X": ROW},
        outputs={"TOTAL": ROW, "FLAGS": (np.int32, [1])}, max_batch_size=4,
        sequence_batching={"max_sequence_idle_microseconds": 10_000_000})
    start, end = 1, 2
    for cid in (11, "seq-b"):
        results = []
        for value, flags in ((1.0, start), (2.0, 0), (4.0, end)):
            r = next(model.infer(inputs={"X": np.array([[value]], np.float32)},
                                 correlation_id=cid, flags=flags))
            results.append((float(np.from_dlpack(r.outputs["TOTAL"])[0, 0]),
                            int(np.from_dlpack(r.outputs["FLAGS"])[0, 0])))
        assert results == [(1.0, start), (3.0, 0), (7.0, end)]


def test_ensemble_with_cpp_and_python_models(explicit_empty, tmp_path, example_repo):
    class Triple(tritonserver.PythonModel):
        def execute(self, requests):
            return [{"Y": r.inputs["X"] * 3} for r in requests]

    explicit_empty.register_model("triple", Triple, inputs={"X": (np.float32, [-1])},
                            outputs={"Y": (np.float32, [-1])})
    repo = tmp_path / "ens_repo"
    shutil.copytree(f"{example_repo}/identity_fp32", repo / "identity_fp32")
    (repo / "triple_then_identity" / "1").mkdir(parents=True)
    (repo / "triple_then_identity" / "config.pbtxt").write_text("""
platform: "ensemble"
input [ { name: "IN", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: [ -1 ] } ]
ensemble_scheduling { step [
  { model_name: "triple" model_version: -1
    input_map { key: "X" value: "IN" } output_map { key: "Y" value: "tripled" } },
  { model_name: "identity_fp32" model_version: -1
    input_map { key: "INPUT0" value: "tripled" } output_map { key: "OUTPUT0" value: "OUT" } }
] }
""")
    explicit_empty.register_model_repository(str(repo))
    try:
        explicit_empty.load("identity_fp32")
        ensemble = explicit_empty.load("triple_then_identity")
        x = np.arange(4, dtype=np.float32)
        out = next(ensemble.infer(inputs={"IN": x}))
        np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUT"]), 3 * x)
        explicit_empty.unload("triple_then_identity", wait_until_unloaded=True, timeout=WAIT_S)
        explicit_empty.unload("identity_fp32", wait_until_unloaded=True, timeout=WAIT_S)
    finally:
        explicit_empty.unregister_model_repository(str(repo))


class Scale(tritonserver.PythonModel):
    def execute(self, requests):
        return [{"Y": r.inputs["X"] * 2} for r in requests]


def test_sixteen_threads_on_one_model(explicit_empty):
    model = explicit_empty.register_model("scale16", Scale, inputs={"X": ROW}, outputs={"Y": ROW},
                                    max_batch_size=16, dynamic_batching=True, instance_count=2)
    errors = []

    def worker(k: int) -> None:
        try:
            handle = explicit_empty.model("scale16")
            for i in range(50):
                x = np.array([[k * 1000 + i]], np.float32)
                y = np.from_dlpack(next(handle.infer(inputs={"X": x})).outputs["Y"])
                assert y.tolist() == [[2 * (k * 1000 + i)]]
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 4)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors[:3]
    # Statistics are reported just after each final response: wait for them.
    stats = stats_when(model, lambda s: int(s["inference_stats"]["success"]["count"]) >= 800)
    assert int(stats["inference_stats"]["success"]["count"]) >= 800


def test_a_thousand_asyncio_tasks_on_one_model(explicit_empty):
    model = explicit_empty.register_model("scale_async", Scale, inputs={"X": ROW},
                                    outputs={"Y": ROW}, max_batch_size=64,
                                    dynamic_batching=True)

    async def one(i: int) -> float:
        async for response in model.async_infer(inputs={"X": np.array([[i]], np.float32)}):
            return float(np.from_dlpack(response.outputs["Y"])[0, 0])
        raise AssertionError("no response")

    async def main() -> list:
        return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(1000))),
                                      WAIT_S * 4)

    assert asyncio.run(main()) == [2.0 * i for i in range(1000)]


def test_unload_during_traffic_waits_for_running_executions(explicit_empty):
    state = {"running": 0, "running_at_finalize": None, "executed": 0}
    lock = threading.Lock()

    class Slow(tritonserver.PythonModel):
        def execute(self, requests):
            with lock:
                state["running"] += 1
            time.sleep(0.01)
            with lock:
                state["running"] -= 1
                state["executed"] += 1
            return [{"Y": r.inputs["X"]} for r in requests]

        def finalize(self):
            state["running_at_finalize"] = state["running"]

    explicit_empty.register_model("slow", Slow, inputs={"X": ROW}, outputs={"Y": ROW},
                            instance_count=2)
    stop = threading.Event()
    outcomes = {"ok": 0, "refused": 0, "other": []}

    def client() -> None:
        handle = explicit_empty.model("slow")
        while not stop.is_set():
            try:
                next(handle.infer(inputs={"X": np.ones(1, np.float32)}))
                outcomes["ok"] += 1
            except tritonserver.TritonError:
                outcomes["refused"] += 1  # not ready, or unloading
                time.sleep(0.005)
            except BaseException as e:
                outcomes["other"].append(e)
                return

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + WAIT_S
    while state["executed"] < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    explicit_empty.unload("slow", wait_until_unloaded=True, timeout=WAIT_S)
    stop.set()
    for t in threads:
        t.join(WAIT_S)
    assert not outcomes["other"], outcomes["other"][:3]
    assert outcomes["ok"] >= 20
    assert state["running_at_finalize"] == 0
    assert explicit_empty.live()


def test_the_gil_is_free_while_the_model_waits(explicit_empty):
    entered, release = threading.Event(), threading.Event()

    class Waits(tritonserver.PythonModel):
        def execute(self, requests):
            entered.set()
            release.wait(WAIT_S)  # blocks the core thread, not the GIL
            return [{"Y": r.inputs["X"]} for r in requests]

    model = explicit_empty.register_model("waits", Waits, inputs={"X": ROW}, outputs={"Y": ROW})
    pending = model.infer(inputs={"X": np.ones(1, np.float32)})
    assert entered.wait(WAIT_S)
    ticks = sum(1 for _ in range(100_000))  # plain Python runs meanwhile
    release.set()
    assert ticks == 100_000 and next(pending).outputs
