"""Two requests run at once on a model with two instances, while a Python
thread ticks: how framework backends show that their instances overlap and
that the framework releases the GIL while it computes."""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple


class TwoRuns(NamedTuple):
    outputs: list  # the output `name` of each of the two responses
    ticks: int  # the ticker's ticks while the two ran
    spread: float  # seconds between the two ends (about one run when serialized)
    alone: float  # seconds of one run on its own


def two_at_once(model: Any, inputs: dict, name: str) -> TwoRuns:
    started = time.monotonic()
    next(model.infer(inputs=inputs))
    alone = time.monotonic() - started
    ticks: list[float] = []
    ends: list[float] = []
    outputs: list = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    def one() -> None:
        outputs.append(next(model.infer(inputs=inputs)).outputs[name])
        ends.append(time.monotonic())

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        threads = [threading.Thread(target=one) for _ in range(2)]
        began = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        finished = time.monotonic()
    finally:
        stop.set()
        ticker.join()
    assert len(outputs) == 2, "a request did not answer"
    return TwoRuns(outputs, len([t for t in ticks if began <= t <= finished]),
                   abs(ends[0] - ends[1]), alone)


def overlapping(model: Any, inputs: dict, name: str, tries: int = 3) -> TwoRuns:
    """The first of `tries` attempts whose two runs overlapped (the ticker
    ticked, and the runs ended within half a run of each other); fails the
    test when none did. Timing on a shared machine: the best of a few."""
    seen = []
    for _ in range(tries):
        runs = two_at_once(model, inputs, name)
        if runs.ticks >= 10 and runs.spread < 0.5 * runs.alone:
            return runs
        seen.append((runs.ticks, round(runs.spread, 4), round(runs.alone, 4)))
    raise AssertionError(f"no overlap seen (ticks, end spread, one run alone): {seen}")


def all_at_once(model: Any, feeds: list) -> list:
    """One async inference per feed, all in flight together (so the dynamic
    batcher can join them): each response's outputs as numpy arrays."""
    import asyncio

    import numpy as np

    async def one(feed: dict) -> dict:
        (response,) = [r async for r in model.async_infer(inputs=feed)]
        return {name: np.from_dlpack(t) for name, t in response.outputs.items()}

    async def every() -> list:
        return list(await asyncio.gather(*(one(feed) for feed in feeds)))

    return asyncio.run(every())


def batched(model: Any, before: dict, count: int) -> dict:
    """The model's statistics once `count` more inferences (since `before`)
    are recorded; fails unless some of them shared an execution."""
    from conftest import stats_when

    stats = stats_when(model, lambda s: s["inference_count"] >= before["inference_count"] + count)
    inferences = stats["inference_count"] - before["inference_count"]
    executions = stats["execution_count"] - before["execution_count"]
    assert inferences == count and executions < inferences, (inferences, executions)
    assert any(int(b["batch_size"]) > 1 for b in stats["batch_stats"])
    return stats
