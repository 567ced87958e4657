"""MLServer (Seldon's Python KServe-v2 server, PyPI `mlserver`) in a child
process, serving identity_fp32 through the small custom runtime of
tsbench/mlserver_identity.py: HTTP, gRPC and metrics on 127.0.0.1 on free
ports, waited for until the model is ready, always stopped.

MLServer runs from a private venv of its own (benchmarks/.venv-mlserver by
default, made once through clientenv.ensure_venv): its pins (fastapi,
pydantic 2, grpcio, protobuf) are not the benchmark's. Its model repository
(settings.json and identity_fp32/) is written into `folder`, by default next
to the log: `<log without extension>.mlserver/`.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
from typing import Optional

from .clientenv import ensure_venv
from .server_process import HOST, MODEL, ServerProcess

DEFAULT_VENV = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            ".venv-mlserver")
# mlserver 1.7.1's inference workers fail at start under uvloop 0.22 and later.
MLSERVER_REQUIREMENTS = ("mlserver==1.7.1", "uvloop<0.22", "numpy")
GRPC_MAX_MESSAGE = 2**31 - 1  # as Triton's (MLServer's default is gRPC's 4 MiB)
RUNTIME = "mlserver_identity"  # the module (file) of the runtime


def _children(pid: int) -> list:
    pids: list = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        with contextlib.suppress(OSError), open(path) as f:
            pids += [int(p) for p in f.read().split()]
    return pids


def mlserver_python(venv: str, log_path: str) -> str:
    """The interpreter of the venv with MLSERVER_REQUIREMENTS (made once)."""
    return ensure_venv(venv, MLSERVER_REQUIREMENTS, log_path)


class MLServerServer(ServerProcess):
    """A running `mlserver start`; use as a context manager.

    parallel_workers: MLServer's setting of that name; 0 runs inference in
    the server process itself, n > 0 in a pool of n worker processes, None
    leaves MLServer's default (1). metrics: False disables MLServer's metrics
    server (and its Prometheus middleware)."""

    def __init__(self, log_path: str, parallel_workers: Optional[int] = None,
                 python: Optional[str] = None, folder: Optional[str] = None,
                 metrics: bool = True):
        super().__init__(log_path)
        self.parallel_workers = parallel_workers
        self.metrics = metrics
        self.python = python or mlserver_python(DEFAULT_VENV, log_path)
        self.folder = os.path.abspath(folder or os.path.splitext(log_path)[0] + ".mlserver")
        workers = "default" if parallel_workers is None else parallel_workers
        self.label = f"mlserver (parallel_workers {workers})"
        self._workers: list = []
        self._write_model()

    def start(self) -> "MLServerServer":
        super().start()
        assert self.process is not None
        self._workers = _children(self.process.pid)  # started before the model is ready
        return self

    def stop(self) -> None:
        """ServerProcess.stop; then, unless MLServer exited cleanly, SIGKILL
        its inference workers: they ignore SIGTERM and outlive their server."""
        process = self.process
        super().stop()
        workers, self._workers = self._workers, []
        if process is None or process.returncode == 0:
            return
        for pid in workers:
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    program = os.fsdecode(f.read().split(b"\0")[0])
                if os.path.realpath(program) == os.path.realpath(self.python):  # not reused
                    os.kill(pid, signal.SIGKILL)

    def _write_model(self) -> None:
        model = os.path.join(self.folder, MODEL)
        os.makedirs(model, exist_ok=True)
        shutil.copyfile(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     RUNTIME + ".py"),
                        os.path.join(model, RUNTIME + ".py"))
        self._write_json(os.path.join(model, "model-settings.json"), {
            "name": MODEL,
            "implementation": f"{RUNTIME}.IdentityFP32",
        })

    @staticmethod
    def _write_json(path: str, content: dict) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(content, f, indent=1)

    def _settings(self) -> dict:
        settings = {
            "debug": False,  # no per-request access log, INFO (not DEBUG) logging
            "host": HOST,
            "http_port": self.http_port,
            "grpc_port": self.grpc_port,
            "grpc_max_message_length": GRPC_MAX_MESSAGE,
            "metrics_port": self.metrics_port,
            "metrics_dir": os.path.join(self.folder, ".metrics"),
            "environments_dir": os.path.join(self.folder, ".envs"),
        }
        if not self.metrics:
            settings["metrics_endpoint"] = None
        if self.parallel_workers is not None:
            settings["parallel_workers"] = self.parallel_workers
        return settings

    def _command(self) -> list:
        # Called once the ports of this attempt are chosen: MLServer takes
        # them from settings.json only.
        self._write_json(os.path.join(self.folder, "settings.json"), self._settings())
        return [os.path.join(os.path.dirname(self.python), "mlserver"), "start", self.folder]
