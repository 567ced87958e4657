"""Worker: gpu16MiB through our Python API (system "python-api" of
benchmarks/gpu.py). Needs a GPU and CuPy.

    python benchmarks/tsbench/gpu_worker.py --model-repository DIR [loop options]

It starts an in-process tritonserver.Server on the repository with the
package's default options and measures, one request in flight,
``next(model.infer(inputs={"INPUT0": x}, output_memory_type="gpu"))`` where
x is a CuPy array of 16 MiB of FP32 on GPU 0: the input goes to the core as
device memory in place, the output lands in device memory from the default
GPU allocator (a cudaMalloc per output, freed when the response goes), and
the output tensor is taken from the response (its description, as the C
driver's response callback reads it). The output is checked against the
input once, read back through CuPy, before the runs. Prints one JSON line on
stdout (loops.emit), with the rounds as the C driver's.
"""

from __future__ import annotations

import os
import sys
import time

if not __package__:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tsbench import loops  # noqa: E402

MODEL = "identity_fp32"
WORKLOAD = "gpu16MiB"


def main() -> None:
    parser = loops.argument_parser(__doc__)
    parser.add_argument("--system", default="python-api", choices=("python-api",))
    parser.add_argument("--model-repository", required=True)
    args = parser.parse_args()

    import cupy

    import tritonserver

    with cupy.cuda.Device(0):
        x = cupy.asarray(loops.large_input())
    t0 = time.perf_counter()
    server = tritonserver.Server(model_repository=args.model_repository)
    server.start(wait_until_ready=True, timeout=60)
    startup_s = time.perf_counter() - t0
    try:
        model = server.model(MODEL)
        inputs = {"INPUT0": x}

        def call() -> "tritonserver.Tensor":
            return next(model.infer(inputs=inputs, output_memory_type="gpu")).outputs["OUTPUT0"]

        first = next(model.infer(inputs=inputs, output_memory_type="gpu")).outputs["OUTPUT0"]
        if first.memory_type != tritonserver.MemoryType.GPU:
            raise SystemExit(f"python-api: the output is in {first.memory_type.name} memory")
        if not bool((cupy.from_dlpack(first) == x).all()):
            raise SystemExit("python-api: the output differs from the input")
        del first

        rounds = []
        for r in range(args.rounds):
            loops.run_sequential(call, loops.Bounds(args.warmup_seconds, args.max_seconds, 1,
                                                    args.max_requests))
            n, secs = loops.run_sequential(call, loops.Bounds(
                args.seconds, args.max_seconds, args.min_requests, args.max_requests))
            figures = {"gbps": n * x.nbytes / secs / 1e9, "ips": n / secs, "n": n,
                       "seconds": secs}
            print(f"python-api round {r + 1} {WORKLOAD} {figures}", file=sys.stderr, flush=True)
            rounds.append({WORKLOAD: figures})
    finally:
        server.stop()
    loops.emit({"system": "python-api", "rounds": rounds, "startup_s": startup_s,
                "tritonserver_version": tritonserver.__version__})


if __name__ == "__main__":
    main()
