"""What the reliability tests share: the soak switch, figures for the log,
process measurements (resident memory, threads, descriptors), bounded
waits that turn a hang into a failure, and the check that an object dies
by reference counting alone."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
import weakref
from typing import Any, Callable, Iterator

import pytest

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

# (test, figure) pairs, printed at the end of the session (conftest.py).
FIGURES: list[tuple[str, str]] = []


def soak_mode(config: Any) -> bool:
    """Long mode: ``pytest --soak`` or TRITONSERVER_SOAK=1."""
    return bool(config.getoption("--soak", default=False)) or \
        os.environ.get("TRITONSERVER_SOAK", "") not in ("", "0")


def record(case: str, figure: str) -> None:
    """Print a figure now (visible with -s) and keep it for the summary."""
    print(f"\n[reliability] {case}: {figure}", flush=True)
    FIGURES.append((case, figure))


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_SIZE


def resident_by_mapping() -> dict[str, int]:
    """Resident bytes of each mapping of this process, keyed by its address
    range and name (/proc/self/smaps): what grew, when a figure grows."""
    sizes: dict[str, int] = {}
    key = ""
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if fields and "-" in fields[0] and len(fields) >= 5:
                key = f"{fields[0]} {fields[5] if len(fields) > 5 else '[anon]'}"
            elif fields and fields[0] == "Rss:":
                sizes[key] = int(fields[1]) * 1024
    return sizes


def grown_mappings(before: dict[str, int], after: dict[str, int], least: int = 1 << 20) -> str:
    """The mappings whose resident size grew by `least` bytes or more (new
    ones included), largest first, one per line."""
    grown = sorted(((size - before.get(key, 0), key) for key, size in after.items()
                    if size - before.get(key, 0) >= least), reverse=True)
    return "\n".join(f"  +{delta >> 10} KiB {key}" for delta, key in grown) or "  (none by itself)"


def task_count() -> int:
    """Threads of this process, Python's and the core's alike."""
    return len(os.listdir("/proc/self/task"))


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def settle(baseline: int, measure: Callable[[], int], timeout: float = 10.0) -> int:
    """`measure()` once it is back to `baseline` or below (threads take a
    moment to exit after a join), or its value when `timeout` ran out."""
    deadline = time.monotonic() + timeout
    while True:
        value = measure()
        if value <= baseline or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def python_threads() -> set:
    return {t for t in threading.enumerate() if t.is_alive()}


def run_bounded(fn: Callable[[], Any], timeout: float, what: str) -> Any:
    """fn() on a helper thread; fails the test if it does not return within
    `timeout` seconds (a hang), re-raises what it raised."""
    result: list = []
    errors: list = []

    def target() -> None:
        try:
            result.append(fn())
        except BaseException as e:  # handed to the caller below
            errors.append(e)

    t = threading.Thread(target=target, daemon=True, name=f"bounded: {what}")
    t.start()
    t.join(timeout)
    if t.is_alive():
        pytest.fail(f"{what} did not return within {timeout} s")
    if errors:
        raise errors[0]
    return result[0] if result else None


def released(ref: weakref.ref, timeout: float = 10.0) -> bool:
    """Whether the object dies within `timeout` (the core releases a request
    on its own thread, a moment after the final response) by reference
    counting alone. Call it with the cyclic collector off (collector_off)
    from before the last reference is dropped: an object that only the
    collector frees sits in a reference cycle, and lives on, with what it
    holds, until the collector happens to run."""
    assert not gc.isenabled(), "released() needs the cyclic collector off"
    deadline = time.monotonic() + timeout
    while ref() is not None and time.monotonic() < deadline:
        time.sleep(0.001)
    return ref() is None


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """The cyclic garbage collector off for the block (as it was after)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
