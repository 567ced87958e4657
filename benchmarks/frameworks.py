#!/usr/bin/env python3
"""Framework backends: our onnxruntime, pytorch and openvino backends, each
against its framework called directly from Python.

    python benchmarks/frameworks.py                  # 5 runs x 2 s per figure
    python benchmarks/frameworks.py --quick          # a smoke run
    python benchmarks/frameworks.py --pin --core-floor --json out.json

The two models of onnx_backend.py (an MLP on 16 FP32 values and a ResNet-style
network on a 3x224x224 image, batch 1), built at run time in three formats
with the same weights (tsbench/framework_models.py): ONNX, TorchScript
(torch.jit.trace) and OpenVINO IR (openvino.convert_model of the ONNX file).
Nine systems (tsbench/framework_worker.py): for each framework F, F-direct
(the framework from Python with our backend's default settings, the
ceiling), F-python (the same call inside a PythonModel of our Server: what
running F on the server's instance thread costs with no framework layer)
and F-server (our Server, the model on F's backend, one CPU instance). Workload sync; each system in its own process, interleaved round
by round; every figure is the median (min-max) of the runs.

Printed: server / direct inf/s per model and framework (the ResNet's target:
at least 0.95), and for the MLP the µs each backend adds to its framework,
p50(F-server) - p50(F-direct) - p50(core floor) (medians of the run), with
the targets pytorch's <= onnxruntime's and openvino's <= onnxruntime's; beside
it the same for F-python, and F-server - F-python: what the framework layer
itself adds.
--core-floor measures the floor in the same rounds (tsbench/core_floor.py:
the raw C API on the identity backend, what the core itself costs); without
it nothing is subtracted (the comparisons are the same either way).
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # for tsbench

from tsbench import framework_models, interleaved, model_rounds, onnx_models  # noqa: E402
from tsbench.framework_worker import SYSTEMS  # noqa: E402

WORKER = os.path.join(HERE, "tsbench", "framework_worker.py")
WORKLOADS = ("sync",)
FRAMEWORKS = framework_models.FRAMEWORKS
RATIO_TARGETS = {"mlp": None, "resnet": 0.95}  # server / direct inf/s, at least
ADDED_MODEL = "mlp"
BASELINE = "onnxruntime"  # the others' added µs must be at most its
FLOOR = model_rounds.FLOOR
FLOOR_MODEL = "identity"
FLAGS = (("--core-floor", "also measure the raw C API on the identity backend (the core's "
                          "floor; builds benchmarks/native with CMake)"),)


def summarize(runs: dict, floor: dict) -> dict:
    """The results document from {model: {system: {workload: [round figures]}}}
    and the core floor's {workload: [round figures]} (empty when not measured)."""
    results = {m: {s: {w: interleaved.spreads(w, figures) for w, figures in by_w.items()}
                   for s, by_w in by_s.items()}
               for m, by_s in runs.items()}
    if floor:
        results[FLOOR_MODEL] = {FLOOR: {w: interleaved.spreads(w, figures)
                                        for w, figures in floor.items()}}
    ratios = {}
    for model, target in RATIO_TARGETS.items():
        for f in FRAMEWORKS:
            value = (results[model][f"{f}-server"]["sync"]["median"] /
                     results[model][f"{f}-direct"]["sync"]["median"])
            ratios[f"{model}: {f}-server sync / {f}-direct sync"] = {
                "model": model, "framework": f, "of": [f"{f}-server", "sync"],
                "over": [f"{f}-direct", "sync"], "value": value, "target": target,
                "met": None if target is None else value >= target}

    def p50(model: str, system: str) -> dict:
        return results[model][system]["sync"]["p50_us"]

    floor_us = p50(FLOOR_MODEL, FLOOR)["median"] if floor else 0.0
    added = {}
    for f in FRAMEWORKS:
        server, direct = p50(ADDED_MODEL, f"{f}-server"), p50(ADDED_MODEL, f"{f}-direct")
        python = p50(ADDED_MODEL, f"{f}-python")
        added[f] = {"model": ADDED_MODEL, "value": server["median"] - direct["median"] - floor_us,
                    "server_p50_us": server["median"], "direct_p50_us": direct["median"],
                    "python_p50_us": python["median"],
                    "python_value": python["median"] - direct["median"] - floor_us,
                    "layer_us": server["median"] - python["median"],
                    "core_floor_p50_us": floor_us if floor else None}
    for f in FRAMEWORKS:
        if f != BASELINE:
            added[f]["target"] = f"<= {BASELINE}"
            added[f]["met"] = added[f]["value"] <= added[BASELINE]["value"]
    return {"results": results, "ratios": ratios, "added_us": added}


def print_tables(document: dict) -> None:
    results = document["results"]
    print("\n| model | system | sync inf/s | sync p50 µs |")
    print("|---|---|---|---|")
    rows = [(m, s, results[m][s]) for m in onnx_models.MODELS for s in SYSTEMS]
    if FLOOR_MODEL in results:
        rows.append(("identity, 16 FP32", f"{FLOOR} (C API)", results[FLOOR_MODEL][FLOOR]))
    for model, system, figures in rows:
        print(f"| {model} | {system} | {interleaved.cell(figures['sync'])} | "
              f"{figures['sync']['p50_us']['median']:,.1f} |")
    interleaved.print_ratios(document["ratios"])
    floor = FLOOR_MODEL in results
    minus = " - core floor" if floor else ""
    print(f"\n| {ADDED_MODEL}: µs added to the framework's own call (p50 - direct{minus}) | "
          "our backend | a PythonModel making the direct call | our layer (backend - "
          "PythonModel) | target | met |")
    print("|---|---|---|---|---|---|")
    for f, a in document["added_us"].items():
        met = "-" if "met" not in a else ("yes" if a["met"] else "no")
        print(f"| {f} | {a['value']:,.1f} | {a['python_value']:,.1f} | {a['layer_us']:,.1f} | "
              f"{a.get('target', '-')} | {met} |")


def main(argv: list) -> int:
    args = interleaved.parse_args(__doc__, os.path.join(HERE, "build", "logs-frameworks"),
                                  argv, FLAGS)
    pinned = interleaved.pin(args)
    measured = model_rounds.measure(args, WORKER, SYSTEMS, onnx_models.MODELS, WORKLOADS,
                                    framework_models.build)
    if measured is None:
        return 1
    runs, floor = measured
    document = summarize(runs, floor)
    print_tables(document)
    print(f"\n{interleaved.settings_line(args, pinned)}")
    interleaved.write_json(args, pinned, document)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
