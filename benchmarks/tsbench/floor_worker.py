"""Worker: sync and threads4 through python_floor (system "python-floor").

Run by benchmarks/run.py as a subprocess of the same interpreter:

    python benchmarks/tsbench/floor_worker.py --model-repository DIR \\
        --module-dir BUILD/native [loop options]

It starts an in-process tritonserver.Server on the repository with the
package's default options, as the python-api worker does, and measures
``python_floor.infer(x)`` (benchmarks/native/python_floor.cc) on its core
server: the C API driver's request behind one Python call that releases the
GIL once and returns the output's bytes. No Python API can do less per
request, so python-floor / c-api bounds what ours can reach on this core and
machine. Prints one JSON line on stdout.
"""

from __future__ import annotations

import functools
import os
import sys
import time

if not __package__:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from tsbench import loops  # noqa: E402
from tsbench.report import FLOOR_WORKLOADS  # noqa: E402

MODEL = "identity_fp32"


class PythonFloor(loops.System):
    name = "python-floor"

    def __init__(self, repository: str, module_dir: str):
        import tritonserver

        sys.path.insert(0, module_dir)
        import python_floor

        self.server = tritonserver.Server(model_repository=repository)
        self.server.start(wait_until_ready=True, timeout=60)
        # The core server's address, as NVIDIA's C++ frontends take it.
        python_floor.bind(self.server._ptr(), MODEL)
        self.infer = python_floor.infer

    def sync_call(self, x: np.ndarray) -> loops.Call:
        return functools.partial(self.infer, x)

    def thread_call_factories(self, x: np.ndarray, n: int) -> list:
        return [functools.partial(self.sync_call, x)] * n

    def verify(self, x: np.ndarray) -> None:
        if not np.array_equal(np.frombuffer(self.infer(x), dtype=np.float32), x):
            raise SystemExit("python-floor: the output differs from the input")

    def close(self) -> None:
        self.server.stop()


def main() -> None:
    parser = loops.argument_parser(__doc__)
    parser.add_argument("--model-repository", required=True)
    parser.add_argument("--module-dir", required=True,
                        help="the folder holding the built python_floor extension")
    args = parser.parse_args()
    settings = loops.Settings(args)
    other = [w for w in settings.workloads if w not in FLOOR_WORKLOADS]
    if other:
        raise SystemExit(f"python-floor measures only {', '.join(FLOOR_WORKLOADS)}, not {other}")
    t0 = time.perf_counter()
    system = PythonFloor(args.model_repository, args.module_dir)
    startup_s = time.perf_counter() - t0
    try:
        document = loops.run_rounds(system, settings, {"startup_s": startup_s})
    finally:
        system.close()
    loops.emit(document)


if __name__ == "__main__":
    main()
