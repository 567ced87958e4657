"""The measuring loops every Python-side system shares (worker side).

A worker process (our Python API, or a tritonclient protocol) supplies the
calls; this module runs the four workloads with the same bounds, warm-ups
and arithmetic as the C API driver (benchmarks/native/c_api_bench.cc):

* sync: one request in flight, 16 FP32 values; inferences/s, p50/p99 in µs
  (nearest rank, per request, measured around the whole call);
* async64: 64 coroutines each sending its next request as soon as its last
  one completed; inferences/s (sent requests, all completed, over the time
  to the last completion);
* large16MiB: one 16 MiB FP32 input, one in flight; GB/s = input bytes
  per second / 1e9;
* large16MiB-shm: the same through system shared memory: the input is
  written once into a registered region (as a producer would put it
  there), each call infers with input and output in regions and reads the
  output from its region (System.shm_call);
* threads4: 4 threads, each running the sync loop, started together;
  total inferences/s.

Every loop ends on a time bound and on a count bound. Needs only the
standard library and numpy: it also runs in the private tritonclient venv.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import json
import math
import resource
import sys
import threading
import time
from typing import Any, Awaitable, Callable, Optional, Sequence

import numpy as np

WORKLOADS = ("sync", "async64", "large16MiB", "large16MiB-shm", "threads4")
SMALL_COUNT = 16
LARGE_BYTES = 16 << 20
LARGE_COUNT = LARGE_BYTES // 4
ASYNC_IN_FLIGHT = 64
THREADS = 4
THREAD_JOIN_GRACE_S = 60.0

Call = Callable[[], Any]
AsyncCall = Callable[[], Awaitable[Any]]


def small_input() -> np.ndarray:
    return np.arange(SMALL_COUNT, dtype=np.float32)


def large_input() -> np.ndarray:
    return (np.arange(LARGE_COUNT, dtype=np.int64) % 1024).astype(np.float32)


class Bounds:
    """When a run stops: past `seconds` once `min_requests` are done, and in
    any case past `max_seconds` or at `max_requests`."""

    def __init__(self, seconds: float, max_seconds: float, min_requests: int,
                 max_requests: int, start: Optional[float] = None):
        self.start = time.perf_counter() if start is None else start
        self.soft_end = self.start + seconds
        self.hard_end = self.start + max(seconds, max_seconds)
        self.min_requests = min_requests
        self.max_requests = max_requests

    def done(self, now: float, count: int) -> bool:
        if count >= self.max_requests or now >= self.hard_end:
            return True
        return now >= self.soft_end and count >= self.min_requests


def percentile(values: Sequence[float], percent: float) -> float:
    """Nearest rank: the smallest value with `percent` % of all at or below it."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = min(max(math.ceil(percent / 100.0 * len(ordered) - 1e-9), 1), len(ordered))
    return ordered[rank - 1]


LATENCY_RESERVE = 1 << 20  # as the C driver reserves; doubled when a run needs more


def latency_room() -> "array.array[float]":
    """Room for a run's latencies (run_sequential)."""
    return array.array("d", bytes(8 * LATENCY_RESERVE))


def run_sequential(call: Call, bounds: Bounds, latencies: Optional["array.array[float]"] = None
                   ) -> tuple:
    """One request in flight; returns (count, seconds). With `latencies`
    (latency_room()): each request's time around the call, in seconds,
    written into room made before the run, as the C driver reserves its
    vector, so that recording makes no object per request; it ends holding
    exactly the run's."""
    count = 0
    clock = time.perf_counter
    now = clock()
    if latencies is None:
        while not bounds.done(now, count):
            call()
            count += 1
            now = clock()
    else:
        room = len(latencies)
        while not bounds.done(now, count):
            sent = now
            call()
            now = clock()
            if count == room:
                latencies.frombytes(bytes(8 * room))
                room *= 2
            latencies[count] = now - sent
            count += 1
        del latencies[count:]
    return count, now - bounds.start


async def run_pipelined(acall: AsyncCall, bounds: Bounds, depth: int) -> tuple:
    """`depth` requests in flight; returns (count, seconds)."""
    count = 0
    clock = time.perf_counter

    async def lane() -> None:
        nonlocal count
        while not bounds.done(clock(), count):
            count += 1  # counted when sent; all have completed when gather returns
            await acall()

    await asyncio.gather(*(lane() for _ in range(depth)))
    return count, clock() - bounds.start


def run_threads(factories: Sequence[Callable[[], Call]], settings: "Settings") -> tuple:
    """One thread per factory, each with one request in flight; returns
    (total count, seconds) of the measured phase.

    Each thread makes its own call with its factory (a client bound to the
    thread, say), then all warm up together and measure together: a barrier
    starts each phase, so every thread's clock starts at the same instant.
    """
    n = len(factories)
    stamps: list = []  # phase start times, set by the barrier's action
    ends = [0.0] * n
    counts = [0] * n
    errors: list = []
    barrier = threading.Barrier(n, action=lambda: stamps.append(time.perf_counter()),
                                timeout=settings.max_seconds + THREAD_JOIN_GRACE_S)

    def body(i: int) -> None:
        call = None
        try:
            call = factories[i]()
            barrier.wait()
            run_sequential(call, Bounds(settings.warmup_seconds, settings.max_seconds, 1,
                                        settings.max_requests, start=stamps[0]))
            barrier.wait()
            counts[i] = run_sequential(call, Bounds(settings.seconds, settings.max_seconds,
                                                    settings.min_requests,
                                                    settings.max_requests,
                                                    start=stamps[1]))[0]
            ends[i] = time.perf_counter()
        except BaseException as e:  # reported by the caller
            errors.append(e)
            barrier.abort()
        finally:
            close = getattr(call, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    pass

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    limit = time.perf_counter() + 2 * (settings.max_seconds + THREAD_JOIN_GRACE_S)
    for t in threads:
        t.join(max(0.0, limit - time.perf_counter()))
        if t.is_alive():
            raise RuntimeError("a worker thread did not finish in time")
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]
    return sum(counts), max(ends) - stamps[1]


class Settings:
    def __init__(self, args: argparse.Namespace):
        self.workloads = [w for w in args.workloads.split(",") if w]
        unknown = set(self.workloads) - set(WORKLOADS)
        if unknown:
            raise SystemExit(f"unknown workloads: {sorted(unknown)}")
        self.rounds = args.rounds
        self.seconds = args.seconds
        self.warmup_seconds = args.warmup_seconds
        self.min_requests = args.min_requests
        self.max_seconds = max(args.max_seconds, args.seconds)
        self.max_requests = args.max_requests

    def bounds(self) -> Bounds:
        return Bounds(self.seconds, self.max_seconds, self.min_requests, self.max_requests)

    def warmup_bounds(self) -> Bounds:
        return Bounds(self.warmup_seconds, self.max_seconds, 1, self.max_requests)


def argument_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--warmup-seconds", type=float, default=0.3)
    p.add_argument("--min-requests", type=int, default=5)
    p.add_argument("--max-seconds", type=float, default=30.0)
    p.add_argument("--max-requests", type=int, default=20_000_000)
    return p


class System:
    """What a worker provides: the calls of each workload.

    sync_call(x) returns a callable that makes one inference with input x;
    thread_call_factories(x, n) returns n factories, each called on its own
    thread to make that thread's callable (which may have a close() method,
    called on that thread at the end); async_session(x) is an async context
    manager yielding the coroutine function of one inference (it may open a
    client bound to the running loop). verify(x) checks one inference's
    output against x. shm_call(x) returns a callable that makes one
    inference with x through system shared memory and returns the output
    (a view of its region); close() frees the regions it made.
    """

    name = "?"

    def sync_call(self, x: np.ndarray) -> Call:
        raise NotImplementedError

    def thread_call_factories(self, x: np.ndarray, n: int) -> list:
        raise NotImplementedError

    def async_session(self, x: np.ndarray) -> Any:
        raise NotImplementedError

    def shm_call(self, x: np.ndarray) -> Call:
        raise NotImplementedError

    def verify(self, x: np.ndarray) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _usage() -> tuple:
    """(CPU seconds, system CPU seconds, context switches) of this process
    so far, all its threads together."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime, u.ru_stime, u.ru_nvcsw + u.ru_nivcsw


def _with_costs(figures: dict, before: tuple) -> dict:
    """`figures` with what the process spent per request over the run (all
    its threads, the core's too when it runs in it): CPU µs, of it in the
    kernel, and context switches (voluntary and not), as the C driver
    reports them."""
    after, n = _usage(), figures["n"]
    if n > 0:
        figures["cpu_us"] = (after[0] - before[0]) / n * 1e6
        figures["sys_us"] = (after[1] - before[1]) / n * 1e6
        figures["switches"] = (after[2] - before[2]) / n
    return figures


def _one_workload(system: System, workload: str, s: Settings, small: np.ndarray,
                  large: Optional[np.ndarray]) -> dict:
    if workload == "sync":
        call = system.sync_call(small)
        run_sequential(call, s.warmup_bounds())
        latencies = latency_room()
        before = _usage()
        n, secs = run_sequential(call, s.bounds(), latencies)
        figures = _with_costs({"ips": n / secs, "n": n, "seconds": secs}, before)
        # After the costs were read: sorting the latencies is no request's work.
        figures["p50_us"] = percentile(latencies, 50) * 1e6
        figures["p99_us"] = percentile(latencies, 99) * 1e6
        return figures
    if workload in ("large16MiB", "large16MiB-shm"):
        assert large is not None
        call = system.sync_call(large) if workload == "large16MiB" else system.shm_call(large)
        run_sequential(call, s.warmup_bounds())
        n, secs = run_sequential(call, s.bounds())
        return {"gbps": n * large.nbytes / secs / 1e9, "ips": n / secs, "n": n,
                "seconds": secs}
    if workload == "threads4":
        before = _usage()
        n, secs = run_threads(system.thread_call_factories(small, THREADS), s)
        return _with_costs({"ips": n / secs, "n": n, "seconds": secs}, before)
    if workload == "async64":
        async def measure() -> tuple:
            async with system.async_session(small) as acall:
                await run_pipelined(acall, s.warmup_bounds(), ASYNC_IN_FLIGHT)
                before = _usage()
                n, secs = await run_pipelined(acall, s.bounds(), ASYNC_IN_FLIGHT)
                return _with_costs({"ips": n / secs, "n": n, "seconds": secs}, before)

        return asyncio.run(measure())
    raise ValueError(workload)


def run_rounds(system: System, settings: Settings, extra: Optional[dict] = None,
               small: Optional[np.ndarray] = None) -> dict:
    """All rounds of all workloads; returns the worker's JSON document.
    `small`: the input of sync, async64 and threads4 (default: 16 FP32 values)."""
    small = small_input() if small is None else small
    large = (large_input() if {"large16MiB", "large16MiB-shm"} & set(settings.workloads)
             else None)
    system.verify(small)
    if "large16MiB" in settings.workloads:
        system.verify(large)
    if "large16MiB-shm" in settings.workloads:
        y = system.shm_call(large)()
        if y is None or y.dtype != np.float32 or not np.array_equal(y, large):
            raise SystemExit(f"{system.name}: the output in shared memory differs from the input")
    rounds = []
    for r in range(settings.rounds):
        figures = {}
        for workload in settings.workloads:
            figures[workload] = _one_workload(system, workload, settings, small, large)
            print(f"{system.name} round {r + 1} {workload} {json.dumps(figures[workload])}",
                  file=sys.stderr, flush=True)
        rounds.append(figures)
    out = {"system": system.name, "rounds": rounds}
    out.update(extra or {})
    return out


def emit(document: dict) -> None:
    """The worker's result: one JSON line, the last on stdout."""
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()
