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

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from tsbench import interleaved  # noqa: E402
from tsbench.inprocess_worker import SYSTEMS  # noqa: E402
from tsbench.procs import note  # noqa: E402

WORKER = os.path.join(HERE, "tsbench", "inprocess_worker.py")
WORKLOADS = ("sync", "async64")
BASELINE = "python-backend"
# PyTriton 0.7.0 (a Python function behind the tritonserver executable), sync
# inferences/s measured once on the 2-core machines these figures come from;
# a reference point, not measured in each run.
PYTRITON_SYNC = 230.0


def main(argv: list) -> int:
    args = interleaved.parse_args(__doc__, os.path.join(HERE, "build", "logs-inprocess"), argv)
    pinned = interleaved.pin(args)
    runs: dict = {s: {w: [] for w in WORKLOADS} for s in SYSTEMS}

    def measure(system: str) -> None:
        figures = interleaved.run_worker(WORKER, system, args,
                                         ["--workloads", ",".join(WORKLOADS)])["rounds"][0]
        for w in WORKLOADS:
            runs[system][w].append(figures[w]["ips"])
        note(f"  {system:20s} " + "  ".join(f"{w} {figures[w]['ips']:,.0f}/s"
                                            for w in WORKLOADS))

    if not interleaved.each_round(args, SYSTEMS, measure):
        return 1
    results = {s: {w: interleaved.spread(v) for w, v in by_w.items()} for s, by_w in runs.items()}
    ratios = {s: {w: results[s][w]["median"] / results[BASELINE][w]["median"] for w in WORKLOADS}
              for s in SYSTEMS if s != BASELINE}
    ratios["inprocess_vs_pytriton_sync"] = results["inprocess"]["sync"]["median"] / PYTRITON_SYNC
    print("\n| system | sync inf/s | async64 inf/s | sync vs python backend | async64 vs python backend |")
    print("|---|---|---|---|---|")
    for s in SYSTEMS:
        cells = [interleaved.cell(results[s][w]) for w in WORKLOADS]
        ratio = [f"{ratios[s][w]:.1f}x" if s != BASELINE else "1" for w in WORKLOADS]
        print(f"| {s} | " + " | ".join(cells + ratio) + " |")
    print(f"\ninprocess sync / PyTriton's 230/s: {ratios['inprocess_vs_pytriton_sync']:.0f}x; "
          f"{interleaved.settings_line(args, pinned)}")
    interleaved.write_json(args, pinned, {"results": results, "ratios": ratios})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
