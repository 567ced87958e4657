"""Worker: sync, async64 and threads4 through python_floor (system "python-floor").

Run by benchmarks/run.py as a subprocess of the same interpreter:

    python benchmarks/tsbench/floor_worker.py --model-repository DIR \\
        --module-dir BUILD/native [loop options]

It starts an in-process tritonserver.Server on the repository with the
package's default options, as the python-api worker does, and measures
``python_floor.infer(x)`` (benchmarks/native/python_floor.cc) on its core
server: the C API driver's request behind one Python call that releases the
GIL once and returns the output's bytes. async64 runs 64 coroutines on one
event loop, each sending with ``python_floor.send`` (the GIL released around
the send only) and taking the output's bytes with ``take``; a coroutine
whose response is not there yet waits on a future, woken through one
eventfd per batch of arrivals (``arm`` and ``woken``), as the API's
iterators wait. No Python API can do less per request, so python-floor /
c-api bounds what ours can reach on this core and machine.

``--extra-us N`` (system "python-floor-1us" with N = 1) adds N µs of Python
work (a loop on time.perf_counter) to each request, after its output came:
how a thicker API would fare with everything else equal. Prints one JSON
line on stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
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


def busy(seconds: float) -> None:
    """Spends `seconds` of CPU in this thread."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class PythonFloor(loops.System):
    name = "python-floor"

    def __init__(self, repository: str, module_dir: str, extra_us: float = 0.0):
        import tritonserver

        sys.path.insert(0, module_dir)
        import python_floor

        self.server = tritonserver.Server(model_repository=repository)
        self.server.start(wait_until_ready=True, timeout=60)
        # The core server's address, as NVIDIA's C++ frontends take it.
        python_floor.bind(self.server._ptr(), MODEL)
        self.floor = python_floor
        self.extra_s = extra_us * 1e-6
        if extra_us:
            self.name = f"python-floor-{extra_us:g}us"
            infer = python_floor.infer

            def thicker(x: np.ndarray) -> bytes:
                out = infer(x)
                busy(self.extra_s)
                return out

            self.infer = thicker
        else:
            self.infer = python_floor.infer

    def sync_call(self, x: np.ndarray) -> loops.Call:
        return functools.partial(self.infer, x)

    def thread_call_factories(self, x: np.ndarray, n: int) -> list:
        return [functools.partial(self.sync_call, x)] * n

    @contextlib.asynccontextmanager
    async def async_session(self, x: np.ndarray):
        floor = self.floor
        send, take, arm, extra_s = floor.send, floor.take, floor.arm, self.extra_s
        loop = asyncio.get_running_loop()
        fd = floor.slots()
        waiting: dict = {}  # slot -> the future its coroutine awaits
        free = list(range(loops.ASYNC_IN_FLIGHT))

        def wake() -> None:
            for slot in floor.woken():
                waiting.pop(slot).set_result(None)

        async def acall() -> bytes:
            slot = free.pop()
            send(slot, x)
            out = take(slot)
            while out is None:
                future = loop.create_future()
                waiting[slot] = future
                if arm(slot):
                    await future
                else:
                    del waiting[slot]
                out = take(slot)
            free.append(slot)
            if extra_s:
                busy(extra_s)
            return out

        loop.add_reader(fd, wake)
        try:
            yield acall
        finally:
            loop.remove_reader(fd)

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
    parser.add_argument("--extra-us", type=float, default=0.0,
                        help="µs of Python work added to each request (python-floor-1us: 1)")
    args = parser.parse_args()
    settings = loops.Settings(args)
    other = [w for w in settings.workloads if w not in FLOOR_WORKLOADS]
    if other:
        raise SystemExit(f"python-floor measures only {', '.join(FLOOR_WORKLOADS)}, not {other}")
    t0 = time.perf_counter()
    system = PythonFloor(args.model_repository, args.module_dir, args.extra_us)
    startup_s = time.perf_counter() - t0
    try:
        document = loops.run_rounds(system, settings, {"startup_s": startup_s})
    finally:
        system.close()
    loops.emit(document)


if __name__ == "__main__":
    main()
