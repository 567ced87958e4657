"""The `tritonserver` executable that ships with the pip core, for the
tritonclient systems: started on 127.0.0.1 only (HTTP, gRPC and metrics),
on free ports, waited for, and always stopped with a bound."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from typing import Optional

from .procs import BenchError, die_with_parent, loopback_only, note, tail, with_library_path

HOST = "127.0.0.1"
MODEL = "identity_fp32"
READY_TIMEOUT_S = 90
STOP_TIMEOUT_S = 20
START_ATTEMPTS = 3


def _free_ports(count: int) -> list:
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str) -> int:
    try:
        with _NO_PROXY.open(url, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return 0


class ExecutableServer:
    """A running `tritonserver` process; use as a context manager."""

    def __init__(self, executable: str, libs_dir: str, repository: str, backend_dir: str,
                 cache_dir: Optional[str], log_path: str):
        self.executable = executable
        self.libs_dir = libs_dir
        self.repository = repository
        self.backend_dir = backend_dir
        self.cache_dir = cache_dir
        self.log_path = log_path
        self.process: Optional[subprocess.Popen] = None
        self.http_port = self.grpc_port = self.metrics_port = 0

    @property
    def http_url(self) -> str:
        return f"{HOST}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{HOST}:{self.grpc_port}"

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

    def start(self) -> "ExecutableServer":
        env = loopback_only(with_library_path(os.environ, self.libs_dir))
        for attempt in range(1, START_ATTEMPTS + 1):
            self.http_port, self.grpc_port, self.metrics_port = _free_ports(3)
            with open(self.log_path, "ab") as log:
                log.write(("$ " + " ".join(self._command()) + "\n").encode())
                log.flush()
                self.process = subprocess.Popen(self._command(), stdout=log, stderr=log,
                                                stdin=subprocess.DEVNULL, env=env,
                                                preexec_fn=die_with_parent)
            if self._wait_ready():
                note(f"tritonserver executable ready (pid {self.process.pid}, "
                     f"HTTP {self.http_url}, gRPC {self.grpc_url})")
                return self
            exited = self.process.poll() is not None
            self.stop()
            if not exited or attempt == START_ATTEMPTS:
                break  # not a port race: do not retry
        raise BenchError(f"the tritonserver executable did not become ready "
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
        """SIGTERM, then SIGKILL past STOP_TIMEOUT_S; always reaps the process."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            note(f"tritonserver (pid {process.pid}) ignored SIGTERM; killing it")
            process.kill()
            process.wait(STOP_TIMEOUT_S)

    def __enter__(self) -> "ExecutableServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
