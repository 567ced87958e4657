"""Our frontends, as `python -m tritonserver serve` in a child process, for
the systems "serve-http" and "serve-grpc": the same model repository, core
and flags as the `tritonserver` executable (tsbench/server_exe.py), HTTP,
gRPC and metrics on 127.0.0.1 on free ports, waited for, always stopped."""

from __future__ import annotations

import sys
from typing import Optional

from .server_process import HOST, ServerProcess


class ServeServer(ServerProcess):
    """A running `python -m tritonserver serve`; use as a context manager."""

    label = "python -m tritonserver serve"

    def __init__(self, repository: str, log_path: str, python: Optional[str] = None,
                 extra: Optional[list] = None):
        super().__init__(log_path)
        self.repository = repository
        self.python = python or sys.executable
        self.extra = list(extra or [])  # more flags of serve's

    def _command(self) -> list:
        # The executable's flags of server_exe.py, where this command has them.
        return [
            self.python, "-m", "tritonserver", "serve",
            f"--model-repository={self.repository}",
            "--model-control-mode=none",
            "--model-load-retry-count=0",
            "--disable-auto-complete-config",
            f"--http-address={HOST}", f"--http-port={self.http_port}",
            f"--grpc-address={HOST}", f"--grpc-port={self.grpc_port}",
            f"--metrics-address={HOST}", f"--metrics-port={self.metrics_port}",
            "--log-info=false", "--log-warning=false", "--log-error=true",
            "--exit-timeout-secs=10",
            # large16MiB-shm registers regions, as Triton's QA starts the
            # executable for it (client shared memory is off by default).
            "--allow-client-shm=true",
        ] + self.extra
