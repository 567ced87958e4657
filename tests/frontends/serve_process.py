"""A ``python -m tritonserver serve`` child process for the tests: its
output read as it comes, the ports it prints, readiness, and always ended."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from typing import Optional

import tritonserver

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tritonserver.__file__)))
READY_TIMEOUT_S = 120
EXIT_TIMEOUT_S = 60
STARTED = re.compile(r"Started (GRPCInferenceService|HTTPService|Metrics Service|OpenAIService) "
                     r"at (\S+):(\d+)")


class Serve:
    """A `python -m tritonserver serve` child process, always ended."""

    def __init__(self, *flags: str, command: Optional[list[str]] = None):
        env = dict(os.environ, PYTHONPATH=PACKAGE_PARENT)
        for key in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "grpc_proxy"):
            env.pop(key, None)
        self.process = subprocess.Popen(
            (command or [sys.executable, "-m", "tritonserver", "serve"]) + list(flags),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, text=True)
        self.lines: list[str] = []
        self.ports: dict[str, int] = {}
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            match = STARTED.search(line)
            if match:
                self.ports[match.group(1)] = int(match.group(3))
            if "tritonserver serve: ready" in line or "tritonserver serve: live but not" in line:
                self.ready.set()
        self.ready.set()

    def wait_ready(self) -> "Serve":
        assert self.ready.wait(READY_TIMEOUT_S), self.output()
        assert self.process.poll() is None, self.output()
        return self

    def output(self) -> str:
        return "".join(self.lines)

    def wait(self, timeout: float = EXIT_TIMEOUT_S) -> int:
        try:
            code = self.process.wait(timeout)
        finally:
            self._reader.join(10)
        return code

    def end(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
