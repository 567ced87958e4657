#!/usr/bin/env python3
"""Device memory to device memory: 16 MiB of FP32 through our Python API
against the raw C API, on the same model in the same run. Needs a GPU.

    python benchmarks/gpu.py                       # 5 runs x 2 s per figure
    python benchmarks/gpu.py --quick               # a smoke run
    python benchmarks/gpu.py --driver PATH --json out.json

Workload gpu16MiB on identity_fp32 of the package's example repository (our
identity backend copies its input to its output with the CUDA runtime,
device to device here), one request in flight:

  c-api       benchmarks/native/c_api_bench --workloads gpu16MiB: the input
              appended as TRITONSERVER_MEMORY_GPU memory of GPU 0 (written
              once), a response allocator that cudaMallocs each output on the
              device and cudaFrees it on release (built with CMake on first
              use, or the one --driver names);
  python-api  tsbench/gpu_worker.py: Model.infer with a CuPy array as input
              and output_memory_type="gpu" (the default GPU allocator, a
              cudaMalloc per output as well).

Each system runs in its own process, interleaved round by round; the figures
are inferences/s and MB/s (input bytes per second / 10^6), the median
(min-max) of the runs, and the ratio python-api / c-api of the medians of the
same run (target 0.9). Without a GPU (or without CuPy) it says so and exits
with status 0, having measured nothing.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from tsbench import interleaved, loops  # noqa: E402
from tsbench.procs import note  # noqa: E402

WORKER = os.path.join(HERE, "tsbench", "gpu_worker.py")
SYSTEMS = ("c-api", "python-api")
WORKLOAD = "gpu16MiB"
TARGET = 0.9


def missing_gpu() -> Optional[str]:
    """Why this machine cannot run the benchmark, or None."""
    from tritonserver import _cuda, _gpu

    if not _gpu.present():
        return "no NVIDIA GPU device file (/dev/nvidia*) is visible"
    if _cuda.device_count() == 0:
        return "the CUDA runtime sees no GPU"
    try:
        import cupy  # noqa: F401
    except ImportError as e:
        return f"CuPy is not importable ({e}); the Python side hands the core a CuPy array"
    return None


def main(argv: list) -> int:
    driver = None
    if "--driver" in argv:
        at = argv.index("--driver")
        driver = os.path.abspath(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    args = interleaved.parse_args(__doc__, os.path.join(HERE, "build", "logs-gpu"), argv)
    why = missing_gpu()
    if why:
        print(f"benchmarks/gpu.py needs a GPU: {why}; nothing measured")
        return 0
    pinned = interleaved.pin(args)
    os.makedirs(args.logs, exist_ok=True)
    from tsbench.core_floor import CoreFloor

    c_api = CoreFloor(args.logs, driver)
    runs: dict = {s: [] for s in SYSTEMS}

    def measure(system: str) -> None:
        if system == "c-api":
            figures = c_api.measure((WORKLOAD,), interleaved.one_round(args))[WORKLOAD]
        else:
            document = interleaved.run_worker(WORKER, system, args,
                                              ["--model-repository", c_api.repository])
            figures = document["rounds"][0][WORKLOAD]
        runs[system].append(figures["ips"])
        note(f"  {system:12s} {figures['ips']:,.1f} inf/s  "
             f"{figures['ips'] * loops.LARGE_BYTES / 1e6:,.0f} MB/s")

    if not interleaved.each_round(args, SYSTEMS, measure):
        return 1
    results = {s: interleaved.spread(v) for s, v in runs.items()}
    ratio = results["python-api"]["median"] / results["c-api"]["median"]
    print(f"\n| system | {WORKLOAD} inf/s | MB/s | ratio to c-api |")
    print("|---|---|---|---|")
    for s in SYSTEMS:
        r = results[s]
        mbps = {k: r[k] * loops.LARGE_BYTES / 1e6 for k in ("median", "min", "max")}
        print(f"| {s} | {r['median']:,.1f} ({r['min']:,.1f}-{r['max']:,.1f}) | "
              f"{mbps['median']:,.0f} ({mbps['min']:,.0f}-{mbps['max']:,.0f}) | "
              f"{r['median'] / results['c-api']['median']:.2f} |")
    ratios = {f"python-api / c-api {WORKLOAD}": {"value": ratio, "target": TARGET,
                                                 "met": ratio >= TARGET}}
    interleaved.print_ratios(ratios)
    print(interleaved.settings_line(args, pinned))
    interleaved.write_json(args, pinned, {"results": results, "ratios": ratios,
                                          "bytes_per_inference": loops.LARGE_BYTES})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
