"""Our frontends, as `python -m tritonserver serve` in a child process, for
the systems "serve-http" and "serve-grpc": the same model repository, core
and flags as the `tritonserver` executable (tsbench/server_exe.py), HTTP,
gRPC and metrics on 127.0.0.1 on free ports, waited for, always stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Optional

from .procs import BenchError, die_with_parent, loopback_only, note, tail
from .server_exe import HOST, MODEL, READY_TIMEOUT_S, START_ATTEMPTS, STOP_TIMEOUT_S, \
    _free_ports, _get


class ServeServer:
    """A running `python -m tritonserver serve`; use as a context manager."""

    def __init__(self, repository: str, log_path: str, python: Optional[str] = None):
        self.repository = repository
        self.log_path = log_path
        self.python = python or sys.executable
        self.process: Optional[subprocess.Popen] = None
        self.http_port = self.grpc_port = self.metrics_port = 0

    @property
    def http_url(self) -> str:
        return f"{HOST}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{HOST}:{self.grpc_port}"

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
        ]

    def start(self) -> "ServeServer":
        env = loopback_only(dict(os.environ))
        for attempt in range(1, START_ATTEMPTS + 1):
            self.http_port, self.grpc_port, self.metrics_port = _free_ports(3)
            with open(self.log_path, "ab") as log:
                log.write(("$ " + " ".join(self._command()) + "\n").encode())
                log.flush()
                self.process = subprocess.Popen(self._command(), stdout=log, stderr=log,
                                                stdin=subprocess.DEVNULL, env=env,
                                                preexec_fn=die_with_parent)
            if self._wait_ready():
                note(f"python -m tritonserver serve ready (pid {self.process.pid}, "
                     f"HTTP {self.http_url}, gRPC {self.grpc_url})")
                return self
            exited = self.process.poll() is not None
            self.stop()
            if not exited or attempt == START_ATTEMPTS:
                break
        raise BenchError(f"`python -m tritonserver serve` did not become ready "
                         f"(log: {self.log_path})\n{tail(self.log_path)}")

    def _wait_ready(self) -> bool:
        assert self.process is not None
        base = f"http://{self.http_url}"
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if _get(f"{base}/v2/health/ready") == 200 and \
                    _get(f"{base}/v2/models/{MODEL}/ready") == 200:
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        """SIGTERM (a clean stop, exit status 0), then SIGKILL past STOP_TIMEOUT_S."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            note(f"serve (pid {process.pid}) ignored SIGTERM; killing it")
            process.kill()
            process.wait(STOP_TIMEOUT_S)

    def __enter__(self) -> "ServeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
