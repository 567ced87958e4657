"""Ray Serve replicas, as `python -m tritonserver serve --ray` in a child
process (a Ray cluster of its own, stopped with it): Ray's HTTP proxy on a
free loopback port, waited for until the model is ready, always stopped."""

from __future__ import annotations

import sys

from .server_process import HOST, ServerProcess


class RayServeServer(ServerProcess):
    """A running `serve --ray` with ``replicas`` replicas; a context manager."""

    def __init__(self, repository: str, replicas: int, log_path: str):
        super().__init__(log_path)
        self.repository = repository
        self.replicas = replicas
        self.label = f"serve --ray ({replicas} replica{'s' if replicas > 1 else ''})"

    def _command(self) -> list:
        return [
            sys.executable, "-m", "tritonserver", "serve", "--ray",
            f"--model-repository={self.repository}",
            "--disable-auto-complete-config",
            f"--http-address={HOST}", f"--http-port={self.http_port}",
            f"--num-replicas={self.replicas}", "--num-cpus=0.5",
            "--log-info=false", "--log-warning=false", "--log-error=true",
            "--exit-timeout-secs=10",
        ]
