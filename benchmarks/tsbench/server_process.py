"""A Triton server in a child process for the network systems: HTTP, gRPC
and metrics on 127.0.0.1 on free ports, waited for until the model is ready,
and always stopped with a bound. Subclasses give the command line
(server_exe.py: the `tritonserver` executable; serve_server.py: ours)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from typing import Optional

from .procs import BenchError, die_with_parent, loopback_only, note, tail

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


class ServerProcess:
    """A running server process; use as a context manager."""

    label = "the server"  # for messages

    def __init__(self, log_path: str):
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
        raise NotImplementedError

    def _environment(self) -> dict:
        return dict(os.environ)

    def start(self) -> "ServerProcess":
        env = loopback_only(self._environment())
        for attempt in range(1, START_ATTEMPTS + 1):
            self.http_port, self.grpc_port, self.metrics_port = _free_ports(3)
            with open(self.log_path, "ab") as log:
                log.write(("$ " + " ".join(self._command()) + "\n").encode())
                log.flush()
                self.process = subprocess.Popen(self._command(), stdout=log, stderr=log,
                                                stdin=subprocess.DEVNULL, env=env,
                                                preexec_fn=die_with_parent)
            if self._wait_ready():
                note(f"{self.label} ready (pid {self.process.pid}, "
                     f"HTTP {self.http_url}, gRPC {self.grpc_url})")
                return self
            exited = self.process.poll() is not None
            self.stop()
            if not exited or attempt == START_ATTEMPTS:
                break  # not a port race: do not retry
        raise BenchError(f"{self.label} did not become ready "
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
        """SIGTERM (a clean stop), then SIGKILL past STOP_TIMEOUT_S; always reaps."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            note(f"{self.label} (pid {process.pid}) ignored SIGTERM; killing it")
            process.kill()
            process.wait(STOP_TIMEOUT_S)

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
