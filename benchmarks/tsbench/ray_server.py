"""Ray Serve replicas, as `python -m tritonserver serve --ray` in a child
process (a Ray cluster of its own, stopped with it): Ray's HTTP ingress (its
proxy, or its HAProxy ingress) on a free loopback port, waited for until the
model is ready, always stopped."""

from __future__ import annotations

import os
import sys

from .server_process import HOST, ServerProcess, _free_ports


class RayServeServer(ServerProcess):
    """A running `serve --ray` with ``replicas`` replicas; a context manager."""

    def __init__(self, repository: str, replicas: int, ingress: str, log_path: str):
        super().__init__(log_path)
        self.repository = repository
        self.replicas = replicas
        self.ingress = ingress  # "proxy" (Ray's) or "haproxy"
        self.label = (f"serve --ray ({replicas} replica{'s' if replicas > 1 else ''}, "
                      f"{ingress})")

    def _command(self) -> list:
        return [
            sys.executable, "-m", "tritonserver", "serve", "--ray",
            f"--model-repository={self.repository}",
            "--disable-auto-complete-config",
            f"--http-address={HOST}", f"--http-port={self.http_port}",
            f"--num-replicas={self.replicas}", "--num-cpus=0.5",
            f"--ray-ingress={self.ingress}",
            "--log-info=false", "--log-warning=false", "--log-error=true",
            "--exit-timeout-secs=10",
        ]

    def _environment(self) -> dict:
        env = dict(os.environ)
        if self.ingress == "haproxy":  # its stats and metrics ports are fixed unless set
            stats, metrics = _free_ports(2)
            env.update(RAY_SERVE_HAPROXY_STATS_PORT=str(stats),
                       RAY_SERVE_HAPROXY_METRICS_PORT=str(metrics))
        return env
