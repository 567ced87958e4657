#!/usr/bin/env python3
"""Where the time of one synchronous request goes, layer by layer, in the C
API driver and in our Python API, measured in the same run.

    python benchmarks/hotpath.py                  # pinned to CPU 0, 6 s each
    python benchmarks/hotpath.py --pin 1 --seconds 10 --json out.json
    python benchmarks/hotpath.py --quick          # 1 s each: checks that it works

Both systems run the `sync` workload of run.py on identity_fp32 (16 FP32
values, one request in flight) under `perf record` (a cpu-clock sampler), one
after the other, pinned to the same CPU, so every thread of each process
shares that CPU and its samples add up to the whole cost of a request. The
samples of the measured phase (the middle of each recording: after start-up
and warm-up, before shutdown) are grouped by the library they fell in, and
each group's share times the run's own mean time per request (1 / its
inferences per second, under perf) gives microseconds per request:

* kernel: system calls, context switches, page faults;
* C runtime: libc, libstdc++, the dynamic loader (malloc, mutexes, condition
  variables);
* core: libtritonserver and the identity backend;
* interpreter: libpython and the extension modules other than ours (numpy);
* binding: tritonserver._c.triton_bindings;
* driver: the C API driver's own loop.

What the two columns share (kernel, C runtime, core) is what the core's
threading costs either way; what only ours has is what the Python API adds.
Needs Linux `perf` with permission to sample its own processes
(kernel.perf_event_paranoid <= 2). Prints a Markdown table; --json writes
the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from tsbench import machine  # noqa: E402
from tsbench.core_floor import CoreFloor  # noqa: E402
from tsbench.procs import BenchError, note, run_logged  # noqa: E402

WORKER = os.path.join(HERE, "tsbench", "pyapi_worker.py")
LOGS = os.path.join(HERE, "build", "logs-hotpath")
FREQUENCY_HZ = 2000
TIMEOUT_S = 300
# The share of each recording read: start-up, warm-up and shutdown fall outside.
WINDOW = "35%-90%"
GROUPS = ("kernel", "C runtime", "core", "interpreter", "binding", "driver")


def group_of(dso: str) -> str:
    """The layer a perf DSO name belongs to."""
    base = os.path.basename(dso)
    if dso.startswith("[kernel") or dso in ("[vdso]", "[vsyscall]"):
        return "kernel"
    if base.startswith("triton_bindings"):
        return "binding"
    if base.startswith(("libtritonserver", "libtriton_")):
        return "core"
    if base.startswith(("libc.so", "libc-", "libstdc++", "ld-linux", "libm.so", "libgcc_s",
                        "libpthread")):
        return "C runtime"
    if base.startswith("c_api_bench"):
        return "driver"
    if base.startswith(("libpython", "python")) or ".cpython-" in base:
        return "interpreter"
    return "other"


def shares(data: str) -> dict:
    """{group: fraction of the samples} of the measured window of a recording."""
    out = subprocess.run(
        ["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso",
         "-F", "sample,dso", "--time", WINDOW],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=TIMEOUT_S, check=True)
    counts: dict = {}
    for line in out.stdout.decode("utf-8", "replace").splitlines():
        parts = line.split(None, 1)
        if len(parts) != 2 or line.startswith("#") or not parts[0].isdigit():
            continue
        group = group_of(parts[1].strip())
        counts[group] = counts.get(group, 0) + int(parts[0])
    total = sum(counts.values())
    if total == 0:
        raise BenchError(f"perf found no samples in {data}")
    return {g: n / total for g, n in counts.items()}


def recorded(name: str, args: list, env: dict, folder: str) -> tuple:
    """Run `args` under perf record; (the sync figures it printed, its shares)."""
    data = os.path.join(folder, name + ".data")
    perf = ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(FREQUENCY_HZ), "-o", data, "--"]
    out = run_logged(perf + args, os.path.join(LOGS, name + ".log"), TIMEOUT_S,
                     f"{name} under perf", env=env)
    doc = json.loads(out.strip().splitlines()[-1])
    return doc["rounds"][0]["sync"], shares(data)


def table(results: dict) -> str:
    names = list(results)
    lines = ["| µs per request | " + " | ".join(names) + " | difference |",
             "|---" * (len(names) + 2) + "|"]
    per = {n: {g: s * 1e6 / r["ips"] for g, s in results[n]["shares"].items()}
           for n, r in results.items()}
    for group in GROUPS + ("other",):
        values = [per[n].get(group, 0.0) for n in names]
        if not any(v >= 0.005 for v in values):
            continue
        lines.append(f"| {group} | " + " | ".join(f"{v:.2f}" for v in values) +
                     f" | {values[-1] - values[0]:+.2f} |")
    totals = [1e6 / results[n]["ips"] for n in names]
    lines.append("| **whole request (1 / rate)** | " + " | ".join(f"**{t:.2f}**" for t in totals) +
                 f" | **{totals[-1] - totals[0]:+.2f}** |")
    p50 = [results[n]["p50_us"] for n in names]
    lines.append("| p50 latency | " + " | ".join(f"{v:.2f}" for v in p50) +
                 f" | {p50[-1] - p50[0]:+.2f} |")
    lines.append(f"\npython-api / c-api under perf: {totals[0] / totals[-1]:.3f} "
                 f"(rates {results[names[0]]['ips']:,.0f}/s and "
                 f"{results[names[-1]]['ips']:,.0f}/s)")
    return "\n".join(lines)


def main(argv: list) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pin", default="0", metavar="CPUS",
                   help="the CPUs of both runs, like taskset -c (default: %(default)s)")
    p.add_argument("--seconds", type=float, default=6.0,
                   help="length of each measured phase (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="1 s each: checks that the tool works (figures too short to compare)")
    p.add_argument("--json", metavar="PATH", help="write the figures here")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds = 1.0
    if not args.seconds > 0:
        p.error(f"--seconds must be above 0 (got {args.seconds})")
    try:
        machine.pin(machine.parse_cpu_list(args.pin))
    except (ValueError, OSError) as e:
        p.error(f"--pin {args.pin!r}: expected CPUs of this machine, like 0 or 0,2 or 0-3 ({e})")
    if shutil.which("perf") is None:
        note("hotpath.py needs Linux perf (linux-tools, or the distribution's perf package)")
        return 2
    os.makedirs(LOGS, exist_ok=True)
    loop = ["--rounds", "1", "--seconds", str(args.seconds), "--max-seconds",
            str(args.seconds), "--warmup-seconds", "0.5"]
    floor = CoreFloor(LOGS)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="hotpath-") as folder:
        try:
            c_args, c_env = floor.command(("sync",), loop)
            figures, parts = recorded("c-api", c_args, c_env, folder)
            results["c-api"] = {**figures, "shares": parts}
            py_args = [sys.executable, WORKER, "--model-repository", floor.repository,
                       "--workloads", "sync", *loop]
            figures, parts = recorded("python-api", py_args, dict(os.environ), folder)
            results["python-api"] = {**figures, "shares": parts}
        except (BenchError, subprocess.SubprocessError) as e:
            note(f"hotpath.py: {e}")
            return 1
    print(f"pinned to CPU {args.pin}; perf record -e cpu-clock -F {FREQUENCY_HZ}, "
          f"window {WINDOW} of each recording\n")
    print(table(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"pin": args.pin, "seconds": args.seconds, "results": results}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
