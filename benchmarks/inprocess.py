#!/usr/bin/env python3
"""Python models: the inprocess backend against Triton's python backend.

    python benchmarks/inprocess.py                 # 5 runs x 2 s per figure
    python benchmarks/inprocess.py --quick         # a smoke run
    python benchmarks/inprocess.py --pin --json out.json

The same identity model written in Python (one FP32 input of 16 values
copied to one output), through our Python API, in one run: as a
tritonserver.PythonModel (inprocess), as a python-backend model.py run by
the inprocess backend (inprocess-pb-utils), and as that model.py on the
python backend (a stub process). Then three pairs, each model.py with the
server's python_backend in-process against the stub: a BLS call to the
identity (bls-*), the identity behind `serve` over HTTP with tritonclient
(serve-http-*), and a pure-Python CPU-bound model with two instances, where
the GIL is the difference (gil-*; tsbench/inprocess_worker.py). Workloads
sync and async64 (see tsbench/loops.py). Each system runs in its own
process, interleaved round by round; every figure is the median (min-max)
of the runs, and each ratio is to its baseline's median of the same run.

    python benchmarks/inprocess.py --systems bls-inprocess,bls-stub
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from tsbench import interleaved  # noqa: E402
from tsbench.inprocess_worker import SYSTEMS  # noqa: E402
from tsbench.procs import note  # noqa: E402

WORKER = os.path.join(HERE, "tsbench", "inprocess_worker.py")
WORKLOADS = ("sync", "async64")
# Each system's baseline (the stub running the same model.py).
BASELINES = {"inprocess": "python-backend", "inprocess-pb-utils": "python-backend",
             "bls-inprocess": "bls-stub", "serve-http-inprocess": "serve-http-stub",
             "gil-inprocess": "gil-stub"}
# PyTriton 0.7.0 (a Python function behind the tritonserver executable), sync
# inferences/s measured once on the 2-core machines these figures come from;
# a reference point, not measured in each run.
PYTRITON_SYNC = 230.0


def main(argv: list) -> int:
    wanted = SYSTEMS
    if "--systems" in argv:
        at = argv.index("--systems")
        wanted = tuple(argv[at + 1].split(","))
        argv = argv[:at] + argv[at + 2:]
        unknown = set(wanted) - set(SYSTEMS)
        if unknown:
            note(f"unknown systems: {', '.join(sorted(unknown))} (known: {', '.join(SYSTEMS)})")
            return 2
    args = interleaved.parse_args(__doc__, os.path.join(HERE, "build", "logs-inprocess"), argv)
    pinned = interleaved.pin(args)
    runs: dict = {s: {w: [] for w in WORKLOADS} for s in wanted}

    def measure(system: str) -> None:
        figures = interleaved.run_worker(WORKER, system, args,
                                         ["--workloads", ",".join(WORKLOADS)])["rounds"][0]
        for w in WORKLOADS:
            runs[system][w].append(figures[w]["ips"])
        note(f"  {system:20s} " + "  ".join(f"{w} {figures[w]['ips']:,.0f}/s"
                                            for w in WORKLOADS))

    if not interleaved.each_round(args, wanted, measure):
        return 1
    results, ratios = interleaved.baseline_table(runs, BASELINES, WORKLOADS)
    if "inprocess" in results:
        ratios["inprocess_vs_pytriton_sync"] = results["inprocess"]["sync"]["median"] / PYTRITON_SYNC
        print(f"\ninprocess sync / PyTriton's 230/s: {ratios['inprocess_vs_pytriton_sync']:.0f}x")
    print(interleaved.settings_line(args, pinned))
    interleaved.write_json(args, pinned, {"results": results, "ratios": ratios})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
