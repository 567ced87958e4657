"""Worker: the four workloads through our Python API (system "python-api").

Run by benchmarks/run.py as a subprocess of the same interpreter:

    python benchmarks/tsbench/pyapi_worker.py --model-repository DIR [loop options]

It starts an in-process tritonserver.Server on the repository with the
package's default options (what a user gets), and measures what a user
writes: ``next(model.infer(inputs=...))`` and ``async for ... in
model.async_infer(...)``, each output read through ``np.from_dlpack``;
large16MiB-shm with regions registered through Server.register_system_shared_memory.
Prints one JSON line on stdout.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Optional

if not __package__:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from tsbench import api_calls, loops  # noqa: E402

MODEL = "identity_fp32"
STOP_TIMEOUT_S = 60


class PythonApi(loops.System):
    name = "python-api"

    def __init__(self, repository: str):
        import tritonserver

        self.tritonserver = tritonserver
        t0 = time.perf_counter()
        self.server = tritonserver.Server(model_repository=repository)
        self.server.start(wait_until_ready=True, timeout=60)
        self.startup_s = time.perf_counter() - t0
        self.model = self.server.model(MODEL)
        self._shm_call: Optional[api_calls.ShmCall] = None

    def sync_call(self, x: np.ndarray) -> loops.Call:
        return api_calls.infer_call(self.model, x)

    def thread_call_factories(self, x: np.ndarray, n: int) -> list:
        # Each thread gets its own Model handle, as separate callers would.
        def factory() -> loops.Call:
            return api_calls.infer_call(self.server.model(MODEL), x)

        return [factory] * n

    @contextlib.asynccontextmanager
    async def async_session(self, x: np.ndarray):
        yield api_calls.async_infer_call(self.model, x)

    def shm_call(self, x: np.ndarray) -> loops.Call:
        if self._shm_call is None:  # the regions are made and registered once
            self._shm_call = api_calls.ShmCall(self.server, self.model, x)
        return self._shm_call

    def verify(self, x: np.ndarray) -> None:
        y = api_calls.output(self.model, x)
        if y.dtype != np.float32 or not np.array_equal(y, x):
            raise SystemExit("python-api: the output differs from the input")

    def close(self) -> None:
        if self._shm_call is not None:
            self._shm_call.close()
        self.server.stop()


def batch_core_threads() -> None:
    """Give every thread of this process but the calling one (the core's,
    started with the server) the SCHED_BATCH policy.

    An experiment, never what the package does: a SCHED_BATCH thread does
    not take the CPU from the running thread when it is woken, so the
    core's backend thread, woken by each send, waits until the Python
    thread waits, and then runs every request queued meanwhile back to
    back, as it does for the C driver's async64. The system
    "python-api-batched" measures what ours costs per request then."""
    own = threading.get_native_id()
    for entry in os.listdir("/proc/self/task"):
        tid = int(entry)
        if tid != own:
            with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                os.sched_setscheduler(tid, os.SCHED_BATCH, os.sched_param(0))


def main() -> None:
    parser = loops.argument_parser(__doc__)
    parser.add_argument("--model-repository", required=True)
    parser.add_argument("--core-threads-batch", action="store_true",
                        help="the experiment of batch_core_threads() (system python-api-batched)")
    args = parser.parse_args()
    settings = loops.Settings(args)
    system = PythonApi(args.model_repository)
    if args.core_threads_batch:
        system.name = "python-api-batched"
        batch_core_threads()
    try:
        document = loops.run_rounds(system, settings, {"startup_s": system.startup_s})
    finally:
        system.close()
    document["tritonserver_version"] = system.tritonserver.__version__
    loops.emit(document)


if __name__ == "__main__":
    main()
