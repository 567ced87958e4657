"""The rounds of a model benchmark (onnx_backend.py, frameworks.py): every system's
worker run once per round on the models built for the run, interleaved,
and the core's floor in the same rounds when asked (--core-floor)."""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Callable, Optional

from tsbench import interleaved
from tsbench.core_floor import CoreFloor
from tsbench.procs import note

FLOOR = "core-floor"


def measure(args: argparse.Namespace, worker: str, systems: tuple, models: tuple,
            workloads: tuple, build: Callable[[str], object]) -> Optional[tuple]:
    """({model: {system: {workload: [round figures]}}}, the floor's {workload:
    [round figures]} (empty without --core-floor)), or None when a round failed."""
    runs: dict = {m: {s: {} for s in systems} for m in models}
    floor: dict = {}
    core_floor = None
    if args.core_floor:
        os.makedirs(args.logs, exist_ok=True)
        core_floor = CoreFloor(args.logs)
    with tempfile.TemporaryDirectory(prefix="tsbench-models-") as folder:
        build(folder)

        def one(system: str) -> None:
            if system == FLOOR:
                got = core_floor.measure(workloads, interleaved.one_round(args))
                for w, figures in got.items():
                    floor.setdefault(w, []).append(figures)
                note(f"  {system:18s} " + "  ".join(
                    f"{w} {f['ips']:,.0f}/s" for w, f in got.items()))
                return
            document = interleaved.run_worker(worker, system, args, [
                "--workloads", ",".join(workloads), "--model-dir", folder])
            for model, rounds in document["models"].items():
                for w, figures in rounds[0].items():
                    runs[model][system].setdefault(w, []).append(figures)
            note(f"  {system:18s} " + "  ".join(
                f"{m} {w} {f[-1]['ips']:,.0f}/s" for m in models
                for w, f in runs[m][system].items()))

        if not interleaved.each_round(args, systems + ((FLOOR,) if core_floor else ()), one):
            return None
    return runs, floor
