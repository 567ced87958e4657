"""Leaks: 100,000 sync and 100,000 async inferences (and the same with BYTES
tensors and with decoupled streams). After a warm-up, resident memory grows
by less than 2 MiB, and tracemalloc sees no growth in our package."""

from __future__ import annotations

import asyncio
import gc
import os
import tracemalloc

import numpy as np
import pytest

from reliability.support import grown_mappings, record, resident_by_mapping, rss_bytes, settle

RSS_LIMIT = 2 << 20
TRACED_LIMIT = 4 << 10  # bytes of our package's memory (none expected)


def sync_identity(server):
    model = server.model("identity_fp32")

    def run(i: int) -> None:
        x = np.full(16, i % 1000, np.float32)
        for r in model.infer(inputs={"INPUT0": x}):
            assert np.from_dlpack(r.outputs["OUTPUT0"])[0] == i % 1000
    return run


def sync_bytes(server):
    model = server.model("identity_bytes")

    def run(i: int) -> None:
        x = np.array([b"item-%d" % i, "h\u00e9llo"], dtype=object)
        for r in model.infer(inputs={"INPUT0": x}):
            assert r.outputs["OUTPUT0"].to_bytes_array()[0] == b"item-%d" % i
    return run


def sync_decoupled(server):
    model = server.model("repeat_int32")

    def run(i: int) -> None:
        got = [int(np.from_dlpack(r.outputs["OUT"])[0])
               for r in model.infer(inputs={"IN": np.array([i, i + 1, i + 2], np.int32)})
               if r.outputs]
        assert got == [i, i + 1, i + 2]
    return run


def async_identity(server):
    """Calls in groups of 100 concurrent tasks on one event loop."""
    model = server.model("identity_fp32")
    loop = asyncio.new_event_loop()

    async def one(i: int) -> None:
        x = np.full(16, i % 1000, np.float32)
        async for r in model.async_infer(inputs={"INPUT0": x}):
            assert np.from_dlpack(r.outputs["OUTPUT0"])[0] == i % 1000

    async def group(start: int) -> None:
        await asyncio.gather(*(one(start + k) for k in range(100)))

    def run(i: int) -> None:
        if i % 100 == 0:
            loop.run_until_complete(group(i))
    run.close = loop.close  # type: ignore[attr-defined]
    return run


def async_decoupled(server):
    model = server.model("repeat_int32")
    loop = asyncio.new_event_loop()

    async def one(i: int) -> None:
        got = [int(np.from_dlpack(r.outputs["OUT"])[0])
               async for r in model.async_infer(inputs={"IN": np.array([i, i + 1], np.int32)})
               if r.outputs]
        assert got == [i, i + 1]

    async def group(start: int) -> None:
        await asyncio.gather(*(one(start + k) for k in range(100)))

    def run(i: int) -> None:
        if i % 100 == 0:
            loop.run_until_complete(group(i))
    run.close = loop.close  # type: ignore[attr-defined]
    return run


WORKLOADS = {
    "sync identity_fp32": sync_identity,
    "async identity_fp32": async_identity,
    "sync BYTES": sync_bytes,
    "sync decoupled": sync_decoupled,
    "async decoupled": async_decoupled,
}


def quiesce(server) -> None:
    """Until the binding has deleted every request the core released (it
    does so on a thread of its own, just after the response), then a
    collection: what is measured then is what stays."""
    settle(0, lambda: server._handle().in_flight())
    gc.collect()


def traced_package_bytes() -> int:
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, "*/tritonserver/*")])
    return sum(stat.size for stat in snapshot.statistics("filename"))


@pytest.mark.skipif(bool(os.environ.get("TRITONSERVER_UNDER_ASAN")),
                    reason="AddressSanitizer's quarantine and slowdown distort memory figures")
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_no_growth(server, soak, workload):
    count = 1_000_000 if soak else 100_000
    traced_count = 100_000 if soak else 10_000
    run = WORKLOADS[workload](server)
    try:
        for i in range(20_000):  # warm-up: pools, caches, arenas settle
            run(i)
        quiesce(server)
        before, mappings = rss_bytes(), resident_by_mapping()
        for i in range(count):
            run(i)
        quiesce(server)
        growth = rss_bytes() - before
        grown = grown_mappings(mappings, resident_by_mapping())

        tracemalloc.start()
        try:
            for i in range(1000):
                run(i)
            quiesce(server)
            traced_before = traced_package_bytes()
            for i in range(traced_count):
                run(i)
            quiesce(server)
            traced = traced_package_bytes() - traced_before
        finally:
            tracemalloc.stop()
    finally:
        getattr(run, "close", lambda: None)()
    record(f"leaks: {workload}", f"{count} calls: RSS growth {growth / 1024:.0f} KiB after warm-up; "
                                 f"tracemalloc growth in tritonserver over {traced_count} calls: "
                                 f"{traced} B")
    assert growth < RSS_LIMIT, (f"resident memory grew by {growth / 1024:.0f} KiB; "
                                f"the mappings that grew:\n{grown}")
    assert traced < TRACED_LIMIT, f"our package's traced memory grew by {traced} B"
