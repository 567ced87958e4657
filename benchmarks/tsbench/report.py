"""Turning per-round figures into the results document, a table and a chart."""

from __future__ import annotations

import os
import re
import statistics
from typing import Optional

SYSTEMS = ("c-api", "python-api", "python-api-batched", "python-floor", "python-floor-1us", "tritonclient-http", "tritonclient-grpc", "serve-http",
           "serve-grpc", "echo-http", "echo-grpc", "echo-core-http", "echo-core-grpc",
           "tritonclient-http-json", "serve-http-json", "echo-core-http-json", "mlserver-http-json", "mlserver-grpc", "mlserver-default-http-json",
           "mlserver-default-grpc")
# MLServer's systems need their own venv with mlserver (minutes to make),
# python-api-batched is an experiment (tsbench/pyapi_worker.py) and
# python-floor a bound that needs Python's headers (tsbench/floor_worker.py),
# python-floor-1us that bound plus a microsecond of Python per request:
# asked for by name.
BY_NAME = ("python-api-batched", "python-floor", "python-floor-1us")
DEFAULT_SYSTEMS = tuple(s for s in SYSTEMS if not s.startswith("mlserver-") and s not in BY_NAME)
# (ours, theirs, key) of the ratios given beside the table: our frontends
# (`python -m tritonserver serve`) against Triton's C++ ones through the same
# client; the echo servers' rows are the ceiling of the libraries under our
# frontends (tsbench/echo_server.py), the echo-core ones the floor of a
# Python frontend over the in-process API; and our frontends against MLServer
# (tsbench/mlserver_server.py), over HTTP with JSON tensors (MLServer takes no
# binary ones) and over gRPC.
FRONTEND_PAIRS = (("serve-http", "tritonclient-http", "http"),
                  ("serve-grpc", "tritonclient-grpc", "grpc"),
                  ("echo-http", "tritonclient-http", "http-echo"),
                  ("echo-grpc", "tritonclient-grpc", "grpc-echo"),
                  ("serve-http-json", "tritonclient-http-json", "http-json"),
                  ("serve-http", "echo-core-http", "http-core-floor"),
                  ("serve-grpc", "echo-core-grpc", "grpc-core-floor"),
                  ("serve-http-json", "echo-core-http-json", "http-json-core-floor"),
                  ("echo-core-http-json", "mlserver-http-json", "http-json-core-floor-mlserver"),
                  ("echo-core-grpc", "mlserver-grpc", "grpc-core-floor-mlserver"),
                  ("serve-http-json", "mlserver-http-json", "http-json-mlserver"),
                  ("serve-grpc", "mlserver-grpc", "grpc-mlserver"),
                  ("serve-http-json", "mlserver-default-http-json", "http-json-mlserver-default"),
                  ("serve-grpc", "mlserver-default-grpc", "grpc-mlserver-default"))
WORKLOADS = ("sync", "async64", "large16MiB", "large16MiB-shm", "threads4")
OURS = "python-api"
CEILING = "c-api"
# The least any Python API spends per request (tsbench/floor_worker.py),
# measured on what a request at a time shows: sync and threads4.
FLOOR = "python-floor"
FLOOR_SYSTEMS = (FLOOR, "python-floor-1us")
FLOOR_WORKLOADS = ("sync", "async64", "threads4")
# The C API driver hands the core its own buffer, copying nothing: its
# large16MiB figure is the ceiling of large16MiB-shm too.
CEILING_WORKLOAD = {"large16MiB-shm": "large16MiB"}
# What a worker's process spent per request of a run (all its threads):
# CPU µs, of it in the kernel, and context switches (tsbench/loops.py and
# the C driver measure them the same way, with getrusage). For a client
# worker, the client's side only.
COSTS = ("cpu_us", "sys_us", "switches")
COST_WORKLOADS = ("sync", "async64", "threads4")
# workload -> (figure in a worker's round, unit in the results)
FIGURE = {
    "sync": ("ips", "inferences/s"),
    "async64": ("ips", "inferences/s"),
    "large16MiB": ("gbps", "GB/s"),
    "large16MiB-shm": ("gbps", "GB/s"),
    "threads4": ("ips", "inferences/s"),
}
SYSTEM_LABELS = {
    "c-api": "raw C API, C++ (the ceiling)",
    "python-api": "our Python API",
    "python-api-batched": "our Python API, the core's threads SCHED_BATCH (an experiment)",
    "python-floor": "the C API's request behind one Python call (the floor of any Python API)",
    "python-floor-1us": "python-floor plus 1 µs of Python per request (an experiment)",
    "tritonclient-http": "tritonclient HTTP -> tritonserver executable",
    "tritonclient-grpc": "tritonclient gRPC -> tritonserver executable",
    "serve-http": "tritonclient HTTP -> our frontend (python -m tritonserver serve)",
    "serve-grpc": "tritonclient gRPC -> our frontend (python -m tritonserver serve)",
    "echo-http": "tritonclient HTTP -> our HTTP server echoing the input, no Triton",
    "echo-grpc": "tritonclient gRPC -> grpcio's server echoing the input, no Triton",
    "echo-core-http": "tritonclient HTTP -> our HTTP server, one in-process inference per "
                      "request (the floor of a Python frontend)",
    "echo-core-grpc": "tritonclient gRPC -> grpcio's server, one in-process inference per request",
    "echo-core-http-json": "tritonclient HTTP, JSON tensors -> our HTTP server, one in-process "
                           "inference per request",
    "tritonclient-http-json": "tritonclient HTTP, JSON tensors -> tritonserver executable",
    "serve-http-json": "tritonclient HTTP, JSON tensors -> our frontend",
    "mlserver-http-json": "tritonclient HTTP, JSON tensors -> MLServer, parallel_workers 0",
    "mlserver-grpc": "tritonclient gRPC -> MLServer, parallel_workers 0",
    "mlserver-default-http-json": "tritonclient HTTP, JSON tensors -> MLServer, default workers",
    "mlserver-default-grpc": "tritonclient gRPC -> MLServer, default workers",
}


def system_workloads(system: str, workloads: list) -> list:
    """What `system` measures of the chosen workloads: the C API driver runs
    large16MiB for large16MiB-shm (its ceiling); no shared memory for the
    echo servers and MLServer; no 16 MiB tensors as JSON text."""
    if system == CEILING:
        chosen = [CEILING_WORKLOAD.get(w, w) for w in workloads]
        return [w for w in WORKLOADS if w in chosen]
    out = list(workloads)
    if system in FLOOR_SYSTEMS:
        return [w for w in out if w in FLOOR_WORKLOADS]
    if system.startswith(("echo-", "mlserver-")):
        out = [w for w in out if w != "large16MiB-shm"]
    if system.endswith("-json"):
        out = [w for w in out if not w.startswith("large16MiB")]
    return out


README_BEGIN = "<!-- last-run:begin (written by run.py --update-readme) -->"
README_END = "<!-- last-run:end -->"


def spread(values: list) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summarize(rounds_by_system: dict) -> tuple:
    """(results, ratios, ratios_by_system) from {system: [round figures]}."""
    results = []
    medians: dict = {}
    for system in SYSTEMS:
        rounds = rounds_by_system.get(system)
        if not rounds:
            continue
        for workload in WORKLOADS:
            runs = [r[workload] for r in rounds if workload in r]
            if not runs:
                continue
            key, unit = FIGURE[workload]
            values = [float(run[key]) for run in runs]
            entry = {"system": system, "workload": workload, "unit": unit, **spread(values),
                     "runs": values}
            if workload == "sync":
                entry["p50_us"] = spread([float(run["p50_us"]) for run in runs])
                entry["p99_us"] = spread([float(run["p99_us"]) for run in runs])
            for cost in COSTS:
                if all(cost in run for run in runs):
                    entry[cost] = spread([float(run[cost]) for run in runs])
            results.append(entry)
            medians[(system, workload)] = entry["median"]
    by_system = {}
    for system in SYSTEMS:
        if system == CEILING:
            continue
        row = {}
        for workload in WORKLOADS:
            ceiling = medians.get((CEILING, CEILING_WORKLOAD.get(workload, workload)))
            value = medians.get((system, workload))
            if ceiling and value is not None:
                row[workload] = value / ceiling
        if row:
            by_system[system] = row
    ratios = {w: by_system.get(OURS, {}).get(w) for w in WORKLOADS}
    return results, ratios, by_system


def frontend_ratios(results: list) -> dict:
    """{"http": {workload: ours/theirs}, "grpc": {...}}: our frontends'
    medians over the `tritonserver` executable's, same client, same run."""
    medians = {(r["system"], r["workload"]): r["median"] for r in results}
    out: dict = {}
    for ours, theirs, protocol in FRONTEND_PAIRS:
        row = {}
        for workload in WORKLOADS:
            a, b = medians.get((ours, workload)), medians.get((theirs, workload))
            if a is not None and b:
                row[workload] = a / b
        if row:
            out[protocol] = row
    return out


# ---- Formatting ---------------------------------------------------------------------


def _fmt(value: Optional[float], unit: str) -> str:
    if value is None:
        return "-"
    if unit == "GB/s":
        return f"{value:.3g}" if value < 100 else f"{value:.0f}"
    if unit == "us":
        return f"{value:.1f}" if value < 1000 else f"{value:,.0f}"
    if value >= 10_000:
        return f"{value / 1000:,.1f}k"
    return f"{value:,.0f}"


def _cell(spread: Optional[dict], unit: str) -> str:
    if not spread:
        return "-"
    return (f"{_fmt(spread['median'], unit)} "
            f"({_fmt(spread['min'], unit)}-{_fmt(spread['max'], unit)})")


def _columns(by_key: dict) -> list:
    """The workloads measured in this run, in canonical order."""
    return [w for w in WORKLOADS if any(k[1] == w for k in by_key)]


def markdown_table(document: dict) -> str:
    by_key = {(r["system"], r["workload"]): r for r in document["results"]}
    columns = _columns(by_key)
    heads = []
    for w in columns:
        heads += (["sync (inf/s)", "sync p50 (µs)", "sync p99 (µs)"] if w == "sync"
                  else [f"{w} ({'GB/s' if FIGURE[w][1] == 'GB/s' else 'inf/s'})"])
    lines = ["| system | " + " | ".join(heads) + " |", "|" + "---|" * (len(heads) + 1)]
    for system in SYSTEMS:
        if not any(s == system for s, _ in by_key):
            continue
        cells = []
        for w in columns:
            entry = by_key.get((system, w))
            unit = "GB/s" if FIGURE[w][1] == "GB/s" else "inf/s"
            cells.append(_cell(entry, unit))
            if w == "sync":
                cells += [_cell(entry.get("p50_us") if entry else None, "us"),
                          _cell(entry.get("p99_us") if entry else None, "us")]
        lines.append(f"| {system}: {SYSTEM_LABELS[system]} | " + " | ".join(cells) + " |")

    def ratio_cells(row: dict) -> str:
        cells = []
        for w in columns:
            cells.append(f"{row[w]:.3f}" if row.get(w) is not None else "-")
            if w == "sync":
                cells += ["", ""]
        return " | ".join(cells)

    for system, row in document.get("ratios_by_system", {}).items():
        name = f"**{system} / c-api**" if system == OURS else f"{system} / c-api"
        lines.append(f"| {name} | {ratio_cells(row)} |")
    pairs = {protocol: (ours, theirs) for ours, theirs, protocol in FRONTEND_PAIRS}
    for protocol, row in document.get("frontend_ratios", {}).items():
        ours, theirs = pairs[protocol]
        lines.append(f"| **{ours} / {theirs}** | {ratio_cells(row)} |")
    return "\n".join(lines)


def cost_table(document: dict) -> str:
    """Per request, medians of the runs: the process's CPU µs (of it in the
    kernel) and context switches, for the systems that report them; empty
    when none did."""
    by_key = {(r["system"], r["workload"]): r for r in document["results"]}
    columns = [w for w in COST_WORKLOADS
               if any(k[1] == w and "cpu_us" in r for k, r in by_key.items())]
    if not columns:
        return ""
    heads = []
    for w in columns:
        heads += [f"{w} CPU µs (kernel)", f"{w} switches"]
    lines = ["| per request | " + " | ".join(heads) + " |", "|" + "---|" * (len(heads) + 1)]
    for system in SYSTEMS:
        entries = [by_key.get((system, w)) for w in columns]
        if not any(e and "cpu_us" in e for e in entries):
            continue
        cells = []
        for e in entries:
            if e and "cpu_us" in e:
                cells += [f"{e['cpu_us']['median']:.2f} ({e['sys_us']['median']:.2f})",
                          f"{e['switches']['median']:.2f}"]
            else:
                cells += ["-", "-"]
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def configuration_line(document: dict) -> str:
    m = document["machine"]
    pinned = (f"pinned to CPU {','.join(map(str, m['affinity']))}" if m["pinned"]
              else f"unpinned (affinity {','.join(map(str, m['affinity']))})")
    return (f"{m['date']}; {m['mode']} mode, {m['rounds']} runs x {m['seconds_per_run']} s per "
            f"workload{', systems interleaved' if m['interleaved'] else ''}; {pinned}; "
            f"{m['cpu_model']}, {m['cpus']} CPUs; Python {m['python']}, numpy {m['numpy']}; "
            f"tritonserver {m['tritonserver_package']}, core {m['core_version']}; "
            f"tritonclient {m['tritonclient'] or '-'}")


# ---- Chart ----------------------------------------------------------------------------


def chart(document: dict, path: str) -> Optional[str]:
    """Write a PNG; returns None, or why it was skipped."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install '.[bench]')"
    by_key = {(r["system"], r["workload"]): r for r in document["results"]}
    systems = [s for s in SYSTEMS if any(k[0] == s for k in by_key)]
    colors = {"c-api": "#555555", "python-api": "#2b7bba", "tritonclient-http": "#e0913a",
              "tritonclient-grpc": "#c4524e", "serve-http": "#f2c46d", "serve-grpc": "#e08e8a",
              "echo-http": "#f7e3b5", "echo-grpc": "#f0c6c4", "echo-core-http": "#efd08a",
              "echo-core-grpc": "#e6a9a6", "echo-core-http-json": "#e8c777",
              "tritonclient-http-json": "#b5651d",
              "serve-http-json": "#d9a441", "mlserver-http-json": "#6a9f58",
              "mlserver-grpc": "#3d7a3a", "mlserver-default-http-json": "#a9cf9b",
              "mlserver-default-grpc": "#86b779"}
    columns = _columns(by_key)
    fig, axes = plt.subplots(1, len(columns), figsize=(4.2 * len(columns), 5.4), squeeze=False)
    for ax, workload in zip(axes[0], columns):
        names, medians, low, high = [], [], [], []
        for system in systems:
            entry = by_key.get((system, workload))
            if entry is None:
                continue
            names.append(system)
            medians.append(entry["median"])
            low.append(entry["median"] - entry["min"])
            high.append(entry["max"] - entry["median"])
        xs = range(len(names))
        ax.bar(xs, medians, yerr=[low, high], capsize=4,
               color=[colors.get(n, "#888888") for n in names])
        ax.set_yscale("log")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([n.replace("tritonclient-", "tc-").replace("mlserver-", "mls-")
                            .replace("default-", "def-") for n in names],
                           rotation=60, ha="right", fontsize=8)
        ax.set_ylabel(FIGURE[workload][1])
        ratio = document["ratios"].get(workload)
        title = workload + (f"\npython-api / c-api = {ratio:.3f}" if ratio else "")
        ax.set_title(title, fontsize=10)
        for x, value, above in zip(xs, medians, high):
            ax.annotate(_fmt(value, FIGURE[workload][1]), (x, value + above), ha="center",
                        va="bottom", fontsize=8, xytext=(0, 3), textcoords="offset points")
    m = document["machine"]
    fig.suptitle(f"tritonserver benchmarks, {m['date'][:10]}, "
                 f"{'pinned' if m['pinned'] else 'unpinned'}, median of {m['rounds']} runs "
                 f"(bars: min-max)", fontsize=11)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


# ---- README -----------------------------------------------------------------------------


def readme_section(document: dict, png_relative: Optional[str]) -> str:
    parts = [README_BEGIN, "",
             f"Last run: {configuration_line(document)}.", "",
             "Each cell: median (min-max) over the runs; the ratios divide medians of the same "
             "run.", "",
             markdown_table(document), ""]
    if png_relative:
        parts += [f"![benchmark chart]({png_relative})", ""]
    parts.append(README_END)
    return "\n".join(parts)


def update_readme(readme: str, document: dict, png_relative: Optional[str]) -> None:
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    section = readme_section(document, png_relative)
    pattern = re.compile(re.escape(README_BEGIN) + ".*?" + re.escape(README_END), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    with open(readme, "w", encoding="utf-8") as f:
        f.write(text)
