#!/usr/bin/env python3
"""ONNX models: our onnxruntime backend against onnxruntime called directly
and against onnxruntime inside a python-backend model.py.

    python benchmarks/onnx_backend.py                  # 5 runs x 2 s per figure
    python benchmarks/onnx_backend.py --quick          # a smoke run
    python benchmarks/onnx_backend.py --pin --json out.json
    python benchmarks/onnx_backend.py --pin --core-floor  # and the core's own floor

Two models built at run time (tsbench/onnx_models.py): a 3-layer MLP on 16
FP32 values and a small ResNet-style network on a 3x224x224 image, batch 1.
Five systems (tsbench/onnx_worker.py): onnxruntime's InferenceSession.run
from Python (direct, the ceiling), our Server with platform
"onnxruntime_onnx" (server), a python-backend model.py running the same
session on Triton's python backend (python-backend), and our Server with
instance_group count 2 as one core instance with two workers (server-x2) and
as two core instances (server-x2-core, the layout before). Workload sync for
all, and async64 on a copy of the model with dynamic batching: the MLP on the
server, both models on the two-instance systems. Each system runs in its own process, interleaved round by round;
every figure is the median (min-max) of the runs, and the ratios divide
medians of the same run, each printed next to its target.

--core-floor adds, in the same rounds, the raw C API driver (benchmarks/native,
built with CMake) on the identity backend with 16 FP32 values: what this core
reaches with a backend that does nothing and no Python anywhere, the most any
served model can reach here (tsbench/core_floor.py). Its ratios to direct
onnxruntime are the best the MLP ratios could be.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # for tsbench

from tsbench import interleaved, model_rounds, onnx_models  # noqa: E402
from tsbench.onnx_worker import SYSTEMS  # noqa: E402

WORKER = os.path.join(HERE, "tsbench", "onnx_worker.py")
WORKLOADS = ("sync", "async64")
# (model, (system, workload), over (system, workload), target: at least this)
RATIOS = (
    ("mlp", ("server", "sync"), ("direct", "sync"), 0.5),
    ("mlp", ("server", "sync"), ("python-backend", "sync"), 3.0),
    ("mlp", ("server", "async64"), ("direct", "sync"), 2.0),
    ("resnet", ("server", "sync"), ("direct", "sync"), 0.95),
    ("resnet", ("server", "sync"), ("python-backend", "sync"), None),
    # count 2: one core instance with two workers against two core instances
    ("mlp", ("server-x2", "async64"), ("server-x2-core", "async64"), 0.95),
    ("resnet", ("server-x2", "async64"), ("server-x2-core", "async64"), 0.95),
)
FLOOR = model_rounds.FLOOR
FLOOR_MODEL = "identity"  # tsbench/core_floor.py: identity_fp32, 16 FP32 values
FLAGS = (("--core-floor", "also measure the raw C API on the identity backend (the core's "
                          "floor; builds benchmarks/native with CMake)"),)


def ratio_name(model: str, ours: tuple, theirs: tuple) -> str:
    return f"{model}: {' '.join(ours)} / {' '.join(theirs)}"


def summarize(runs: dict, floor: dict) -> tuple:
    """(results, ratios) from {model: {system: {workload: [round figures]}}}
    and the core floor's {workload: [round figures]} (empty when not measured)."""
    results = {m: {s: {w: interleaved.spreads(w, figures) for w, figures in by_w.items()}
                   for s, by_w in by_s.items()}
               for m, by_s in runs.items()}
    ratios = {}
    for model, ours, theirs, target in RATIOS:
        value = (results[model][ours[0]][ours[1]]["median"] /
                 results[model][theirs[0]][theirs[1]]["median"])
        ratios[ratio_name(model, ours, theirs)] = {
            "model": model, "of": list(ours), "over": list(theirs), "value": value,
            "target": target, "met": None if target is None else value >= target}
    if floor:
        results[FLOOR_MODEL] = {FLOOR: {w: interleaved.spreads(w, figures)
                                        for w, figures in floor.items()}}
        direct = results["mlp"]["direct"]["sync"]["median"]
        for w in floor:  # the best the MLP's ratios to direct could be
            ratios[f"{FLOOR_MODEL} {FLOOR} {w} / mlp direct sync"] = {
                "of_model": FLOOR_MODEL, "of": [FLOOR, w], "model": "mlp",
                "over": ["direct", "sync"], "target": None, "met": None,
                "value": results[FLOOR_MODEL][FLOOR][w]["median"] / direct}
    return results, ratios


def print_tables(results: dict, ratios: dict) -> None:
    print("\n| model | system | sync inf/s | sync p50 µs | async64 inf/s |")
    print("|---|---|---|---|---|")
    rows = [(m, s, results[m][s]) for m in onnx_models.MODELS for s in SYSTEMS]
    if FLOOR_MODEL in results:
        rows.append(("identity, 16 FP32", f"{FLOOR} (C API)", results[FLOOR_MODEL][FLOOR]))
    for model, system, figures in rows:
        cells = [interleaved.cell(figures["sync"]),
                 f"{figures['sync']['p50_us']['median']:,.0f}",
                 interleaved.cell(figures["async64"]) if "async64" in figures else "-"]
        print(f"| {model} | {system} | " + " | ".join(cells) + " |")
    interleaved.print_ratios(ratios)


def main(argv: list) -> int:
    args = interleaved.parse_args(__doc__, os.path.join(HERE, "build", "logs-onnx"), argv, FLAGS)
    pinned = interleaved.pin(args)
    measured = model_rounds.measure(args, WORKER, SYSTEMS, onnx_models.MODELS, WORKLOADS,
                                    onnx_models.build)
    if measured is None:
        return 1
    runs, floor = measured
    results, ratios = summarize(runs, floor)
    print_tables(results, ratios)
    print(f"\n{interleaved.settings_line(args, pinned)}")
    interleaved.write_json(args, pinned, {"results": results, "ratios": ratios})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
