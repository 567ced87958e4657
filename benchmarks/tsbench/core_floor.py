"""The core's own floor, for benchmarks that compare a model's server figures
with a ceiling outside Triton (onnx_backend.py --core-floor).

The raw C API driver (benchmarks/native, C++) runs the identity backend on 16
FP32 values: a backend that does no work, called with no Python anywhere.
What it reaches is the most any model served by this core can reach on this
machine, whatever its backend; a target above it cannot be met by a backend.
"""

from __future__ import annotations

import json
import os
from typing import Optional

from . import native
from .procs import BenchError, run_logged

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = "identity_fp32"
TIMEOUT_S = 300


class CoreFloor:
    """Builds the driver once (or takes one built already: `driver`);
    measure() runs one round of it."""

    def __init__(self, logs: str, driver: Optional[str] = None) -> None:
        import tritonserver
        from tritonserver._core import backend_directory, find_core
        from tritonserver._runtime import package_backends_dir

        self.logs = logs
        self.core = find_core()
        self.repository = tritonserver.example_model_repository()
        self.backend_dir = backend_directory(self.core, package_backends_dir())
        self.driver = driver or native.build_driver(
            self.core.library, os.path.join(BENCHMARKS, "build"),
            os.path.join(BENCHMARKS, ".venv-client"), os.path.join(logs, "core-floor-build.log"))

    def command(self, workloads: tuple, loop: list) -> tuple:
        """(argv, env) of one run of the driver (`loop`: its loop options)."""
        return native.driver_command(
            self.driver, self.core, self.repository, self.backend_dir, MODEL,
            ["--workloads", ",".join(workloads), *loop])

    def measure(self, workloads: tuple, loop: list) -> dict:
        """{workload: {"ips": ..., "p50_us": ...}} of one round (`loop`: its loop options)."""
        args, env = self.command(workloads, loop)
        out = run_logged(args, os.path.join(self.logs, "core-floor.log"), TIMEOUT_S,
                         "the core-floor benchmark", env=env)
        try:
            return dict(json.loads(out.strip().splitlines()[-1])["rounds"][0])
        except (IndexError, ValueError, KeyError, TypeError):
            raise BenchError("the C API driver printed no results "
                             f"(log: {os.path.join(self.logs, 'core-floor.log')})") from None
