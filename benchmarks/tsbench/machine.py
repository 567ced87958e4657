"""The "machine" block of the results: where and how the run was made."""

from __future__ import annotations

import datetime
import os
import platform
from typing import Optional


def parse_cpu_list(text: str) -> list:
    """'0', '0,1', '0-3,6' -> sorted CPU numbers."""
    cpus = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            cpus.update(range(int(low), int(high) + 1))
        else:
            cpus.add(int(part))
    if not cpus:
        raise ValueError(f"no CPU in {text!r}")
    return sorted(cpus)


def pin(cpus: list) -> None:
    """Pin this process; every child started afterwards inherits it (the
    workers, the C API driver and the tritonserver executable)."""
    os.sched_setaffinity(0, set(cpus))


def _cpu_model() -> Optional[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib() -> Optional[float]:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / (1 << 20), 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def machine_block(*, pinned_cpus: Optional[list], mode: str, rounds: int, seconds: float,
                  warmup_seconds: float, interleaved: bool, core: object,
                  core_version: Optional[str], tritonclient: Optional[str],
                  started: datetime.datetime) -> dict:
    import numpy
    import tritonserver

    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "pinned": pinned_cpus is not None,
        "affinity": sorted(os.sched_getaffinity(0)),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "tritonserver_package": tritonserver.__version__,
        "core_version": core_version,
        "core_library": getattr(core, "library", None),
        "core_source": getattr(core, "source", None),
        "tritonclient": tritonclient,
        "mode": mode,
        "rounds": rounds,
        "seconds_per_run": seconds,
        "warmup_seconds_per_run": warmup_seconds,
        "interleaved": interleaved,
        "load_average_at_start": load,
        "date": started.isoformat(timespec="seconds"),
    }
