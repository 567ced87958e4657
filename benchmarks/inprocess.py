#!/usr/bin/env python3
"""Python models: the inprocess backend against Triton's python backend.

    python benchmarks/inprocess.py                 # 5 runs x 2 s per figure
    python benchmarks/inprocess.py --quick         # a smoke run
    python benchmarks/inprocess.py --pin --json out.json

The same identity model written in Python (one FP32 input of 16 values
copied to one output), through our Python API, in one run: as a
tritonserver.PythonModel (inprocess), as a python-backend model.py run by
the inprocess backend (inprocess-pb-utils), and as that model.py on the
python backend (a stub process). Workloads sync and async64 (see
tsbench/loops.py). Each system runs in its own process, interleaved round by
round; every figure is the median (min-max) of the runs, and the ratios are
to the python backend's median of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from tsbench import machine  # noqa: E402
from tsbench.inprocess_worker import SYSTEMS  # noqa: E402
from tsbench.procs import BenchError, note, run_logged  # noqa: E402

WORKER = os.path.join(HERE, "tsbench", "inprocess_worker.py")
WORKLOADS = ("sync", "async64")
BASELINE = "python-backend"
# PyTriton 0.7.0 (a Python function behind the tritonserver executable), sync
# inferences/s measured once on the 2-core machines these figures come from;
# a reference point, not measured in each run.
PYTRITON_SYNC = 230.0


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="3 runs x 0.25 s per figure")
    p.add_argument("--rounds", type=int)
    p.add_argument("--seconds", type=float)
    p.add_argument("--pin", nargs="?", const="0", metavar="CPUS",
                   help="pin the run to these CPUs (default when given alone: 0)")
    p.add_argument("--json", metavar="PATH", help="write the results here")
    p.add_argument("--logs", default=os.path.join(HERE, "build", "logs-inprocess"))
    args = p.parse_args(argv)
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.seconds = args.seconds or (0.25 if args.quick else 2.0)
    return args


def measure(system: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, WORKER, "--system", system, "--workloads", ",".join(WORKLOADS),
               "--rounds", "1", "--seconds", str(args.seconds),
               "--warmup-seconds", str(0.05 if args.quick else 0.3),
               "--min-requests", "3", "--max-seconds", "30"]
    out = run_logged(command, os.path.join(args.logs, system + ".log"), 300,
                     f"the {system} benchmark", env=dict(os.environ))
    return json.loads(out.strip().splitlines()[-1])["rounds"][0]


def main(argv: list) -> int:
    args = parse_args(argv)
    pinned = None
    if args.pin is not None:
        pinned = machine.parse_cpu_list(args.pin)
        machine.pin(pinned)
    os.makedirs(args.logs, exist_ok=True)
    runs: dict = {s: {w: [] for w in WORKLOADS} for s in SYSTEMS}
    try:
        for r in range(args.rounds):
            note(f"round {r + 1} of {args.rounds}")
            for system in SYSTEMS:
                figures = measure(system, args)
                for w in WORKLOADS:
                    runs[system][w].append(figures[w]["ips"])
                note(f"  {system:20s} " + "  ".join(f"{w} {figures[w]['ips']:,.0f}/s"
                                                    for w in WORKLOADS))
    except BenchError as e:
        note(f"benchmark failed: {e}")
        return 1
    results = {s: {w: {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v}
                   for w, v in by_w.items()} for s, by_w in runs.items()}
    ratios = {s: {w: results[s][w]["median"] / results[BASELINE][w]["median"] for w in WORKLOADS}
              for s in SYSTEMS if s != BASELINE}
    ratios["inprocess_vs_pytriton_sync"] = results["inprocess"]["sync"]["median"] / PYTRITON_SYNC
    print("\n| system | sync inf/s | async64 inf/s | sync vs python backend | async64 vs python backend |")
    print("|---|---|---|---|---|")
    for s in SYSTEMS:
        cells = [f"{results[s][w]['median']:,.0f} ({results[s][w]['min']:,.0f}-"
                 f"{results[s][w]['max']:,.0f})" for w in WORKLOADS]
        ratio = [f"{ratios[s][w]:.1f}x" if s != BASELINE else "1" for w in WORKLOADS]
        print(f"| {s} | " + " | ".join(cells + ratio) + " |")
    print(f"\ninprocess sync / PyTriton's 230/s: {ratios['inprocess_vs_pytriton_sync']:.0f}x; "
          f"{'pinned to ' + args.pin if pinned else 'unpinned'}, {args.rounds} runs x "
          f"{args.seconds} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"results": results, "ratios": ratios, "pinned": pinned,
                       "rounds": args.rounds, "seconds": args.seconds}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
