"""What the entry points that run one worker process per system, interleaved
round by round (inprocess.py, onnx_backend.py), share: their options, pinning, one
worker run, the figures' spreads and the results file."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, Optional

from tsbench import machine, report
from tsbench.procs import BenchError, note, run_logged

WORKER_TIMEOUT_S = 300


def parse_args(description: str, logs: str, argv: list,
               flags: "tuple[tuple[str, str], ...]" = ()) -> argparse.Namespace:
    """The shared options, plus the entry point's own on/off `flags` ((flag, help) pairs)."""
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, help_text in flags:
        p.add_argument(flag, action="store_true", help=help_text)
    p.add_argument("--quick", action="store_true", help="3 runs x 0.25 s per figure")
    p.add_argument("--rounds", type=int)
    p.add_argument("--seconds", type=float)
    p.add_argument("--pin", nargs="?", const="0", metavar="CPUS",
                   help="pin the run to these CPUs (default when given alone: 0)")
    p.add_argument("--json", metavar="PATH", help="write the results here")
    p.add_argument("--logs", default=logs)
    args = p.parse_args(argv)
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.seconds = args.seconds or (0.25 if args.quick else 2.0)
    return args


def pin(args: argparse.Namespace) -> Optional[list]:
    """Pin this process (and so every worker) when --pin says so; the CPUs."""
    if args.pin is None:
        return None
    cpus = machine.parse_cpu_list(args.pin)
    machine.pin(cpus)
    return cpus


def one_round(args: argparse.Namespace) -> list:
    """The loop options (tsbench/loops.py, benchmarks/native) of one round."""
    return ["--rounds", "1", "--seconds", str(args.seconds),
            "--warmup-seconds", str(0.05 if args.quick else 0.3),
            "--min-requests", "3", "--max-seconds", "30"]


def run_worker(worker: str, system: str, args: argparse.Namespace, options: list) -> dict:
    """One round of `system` in a fresh process; the worker's JSON document."""
    command = [sys.executable, worker, "--system", system, *one_round(args), *options]
    out = run_logged(command, os.path.join(args.logs, system + ".log"), WORKER_TIMEOUT_S,
                     f"the {system} benchmark", env=dict(os.environ))
    return json.loads(out.strip().splitlines()[-1])


def each_round(args: argparse.Namespace, systems: tuple,
               measure: Callable[[str], None]) -> bool:
    """measure(system) for every system, round by round; False once one
    failed (said on stderr)."""
    os.makedirs(args.logs, exist_ok=True)
    try:
        for r in range(args.rounds):
            note(f"round {r + 1} of {args.rounds}")
            for system in systems:
                measure(system)
    except BenchError as e:
        note(f"benchmark failed: {e}")
        return False
    return True


def spread(runs: list) -> dict:
    return {**report.spread(runs), "runs": runs}


def spreads(workload: str, figures: list) -> dict:
    """The spread of one system's rounds of one workload: inferences/s, and
    the p50 latency for sync."""
    return {**spread([f["ips"] for f in figures]),
            **({"p50_us": spread([f["p50_us"] for f in figures])}
               if workload == "sync" else {})}


def print_ratios(ratios: dict) -> None:
    """The Markdown table of the ratios ({name: {value, target, met}})."""
    print("\n| ratio of medians | value | target | met |")
    print("|---|---|---|---|")
    for name, r in ratios.items():
        target = "-" if r["target"] is None else f">= {r['target']:g}"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "no")
        print(f"| {name} | {r['value']:.2f} | {target} | {met} |")


def baseline_table(runs: dict, baselines: dict, workloads: tuple) -> "tuple[dict, dict]":
    """The spreads of ``runs`` ({system: {workload: [inferences/s]}}) and each
    system's ratios to its baseline's median ({system: baseline}); prints
    them as a Markdown table, systems in ``runs``' order."""
    results = {s: {w: spread(v) for w, v in by_w.items()} for s, by_w in runs.items()}
    ratios: dict = {s: {w: results[s][w]["median"] / results[b][w]["median"] for w in workloads}
                    for s, b in baselines.items() if s in results and b in results}
    print("\n| system | " + " | ".join(f"{w} inf/s" for w in workloads) + " | vs | "
          + " | ".join(f"{w} ratio" for w in workloads) + " |")
    print("|---|" + "---|" * (2 * len(workloads) + 1))
    for s in runs:
        cells = [cell(results[s][w]) for w in workloads]
        ratio = [f"{ratios[s][w]:.2f}x" if s in ratios else "1" for w in workloads]
        print(f"| {s} | " + " | ".join(cells + [baselines.get(s, "")] + ratio) + " |")
    return results, ratios


def cell(figure: dict) -> str:
    """'median (min-max)' of a spread, in inferences/s."""
    return f"{figure['median']:,.0f} ({figure['min']:,.0f}-{figure['max']:,.0f})"


def settings_line(args: argparse.Namespace, pinned: Optional[list]) -> str:
    return (f"{'pinned to ' + args.pin if pinned else 'unpinned'}, {args.rounds} runs x "
            f"{args.seconds} s")


def write_json(args: argparse.Namespace, pinned: Optional[list], document: dict) -> None:
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({**document, "pinned": pinned, "rounds": args.rounds,
                       "seconds": args.seconds}, f, indent=1)
