"""The `tritonserver` executable that ships with the pip core, for the
tritonclient systems (Triton's C++ frontends)."""

from __future__ import annotations

import os
from typing import Optional

from .procs import with_library_path
from .server_process import HOST, ServerProcess


class ExecutableServer(ServerProcess):
    """A running `tritonserver` process; use as a context manager."""

    label = "the tritonserver executable"

    def __init__(self, executable: str, libs_dir: str, repository: str, backend_dir: str,
                 cache_dir: Optional[str], log_path: str):
        super().__init__(log_path)
        self.executable = executable
        self.libs_dir = libs_dir
        self.repository = repository
        self.backend_dir = backend_dir
        self.cache_dir = cache_dir

    def _environment(self) -> dict:
        return with_library_path(os.environ, self.libs_dir)

    def _command(self) -> list:
        args = [
            self.executable,
            f"--model-repository={self.repository}",
            f"--backend-directory={self.backend_dir}",
            "--model-control-mode=none",
            "--model-load-retry-count=0",
            # The C API's default (and the Python API's): strict model config.
            "--disable-auto-complete-config",
            f"--http-address={HOST}", f"--http-port={self.http_port}",
            f"--grpc-address={HOST}", f"--grpc-port={self.grpc_port}",
            f"--metrics-address={HOST}", f"--metrics-port={self.metrics_port}",
            "--allow-sagemaker=false", "--allow-vertex-ai=false",
            "--log-info=false", "--log-warning=false", "--log-error=true",
            "--exit-timeout-secs=10",
        ]
        if self.cache_dir:
            args.append(f"--cache-directory={self.cache_dir}")
        return args
