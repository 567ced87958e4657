"""Concurrency: 16 threads calling infer, and 1,000 asyncio tasks calling
async_infer, on the same models. Every response matches its own request
(no mix-ups, decoupled streams included), and the event loop is never
blocked: a heartbeat keeps ticking while long requests run."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np

from reliability.support import record

THREADS = 16
TASKS = 1000


def tagged(thread: int, i: int) -> np.ndarray:
    """An input no other request shares: (thread, i, then a counter)."""
    return np.array([thread, i, *range(i % 7)], np.float32)


def test_16_threads_no_mix_ups(server, soak):
    per_thread = 2000 if soak else 300
    failures: list = []
    counts = [0] * THREADS

    def worker(t: int) -> None:
        identity, add_sub = server.model("identity_fp32"), server.model("add_sub_int32")
        repeat = server.model("repeat_int32")
        try:
            for i in range(per_thread):
                x = tagged(t, i)
                out = next(identity.infer(inputs={"INPUT0": x}))
                np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), x)
                a = np.array([t, i], np.int32)
                out = next(add_sub.infer(inputs={"INPUT0": a, "INPUT1": a * 3}))
                assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == (a * 4).tolist()
                assert np.from_dlpack(out.outputs["OUTPUT1"]).tolist() == (-2 * a).tolist()
                if i % 10 == 0:  # a stream: its values, in order, and nobody else's
                    values = np.array([t, i, t + i], np.int32)
                    got = [int(np.from_dlpack(r.outputs["OUT"])[0])
                           for r in repeat.infer(inputs={"IN": values}) if r.outputs]
                    assert got == values.tolist()
                counts[t] += 1
        except BaseException as e:
            failures.append((t, e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    assert not failures, failures[:3]
    assert counts == [per_thread] * THREADS
    total = sum(counts) * 2 + THREADS * ((per_thread + 9) // 10)
    record("concurrency: 16 threads", f"{total} requests (identity, add_sub, decoupled streams), "
                                      "every response matched its own request")


def test_1000_async_tasks_and_a_heartbeat(server, soak):
    rounds = 10 if soak else 2
    identity, sleep = server.model("identity_fp32"), server.model("sleep_us")

    async def main():
        ticks: list[float] = []
        stop = asyncio.Event()

        async def heartbeat():
            while not stop.is_set():
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        async def one(i: int) -> None:
            x = tagged(i % 97, i)
            responses = [r async for r in identity.async_infer(inputs={"INPUT0": x})]
            assert len(responses) == 1
            np.testing.assert_array_equal(np.from_dlpack(responses[0].outputs["OUTPUT0"]), x)

        async def long_request() -> tuple[float, float]:
            started = time.monotonic()
            async for r in sleep.async_infer(inputs={"DELAY_US": np.array([500_000], np.int64)}):
                assert int(np.from_dlpack(r.outputs["WAITED_US"])[0]) >= 500_000
            return started, time.monotonic()

        beat = asyncio.ensure_future(heartbeat())
        windows = []
        for r in range(rounds):
            long = asyncio.ensure_future(long_request())
            await asyncio.wait_for(asyncio.gather(*(one(r * TASKS + i) for i in range(TASKS))), 120)
            windows.append(await asyncio.wait_for(long, 60))
        stop.set()
        await beat
        return ticks, windows

    ticks, windows = asyncio.run(main())
    gaps = np.diff(ticks)
    during = [sum(start <= t <= end for t in ticks) for start, end in windows]
    # A loop blocked for the whole long request would tick at most once in it.
    assert min(during) >= 10, during
    assert gaps.max() < 5.0, f"the event loop stalled for {gaps.max():.2f} s"
    record("concurrency: 1000 asyncio tasks", f"{rounds} x {TASKS} concurrent async_infer calls, "
           f"all matched; heartbeat ticked {min(during)}+ times during each 0.5 s request, "
           f"longest gap {gaps.max() * 1000:.0f} ms")
