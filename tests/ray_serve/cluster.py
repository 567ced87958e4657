"""What the Ray Serve tests share: the cluster's address, Ray's processes,
replicas seen through the handle API, and HTTP traffic from threads that
records every answer."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ray import serve

from frontends import support

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOYMENT = "tritonserver"
REQUEST_TIMEOUT_S = 30.0  # a request that takes longer counts as hung


@dataclass
class Cluster:
    port: int  # Serve's HTTP proxy

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"


def replica_env() -> dict[str, str]:
    """Environment of Ray's workers: this folder importable (replica_models)."""
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": TESTS_DIR + (os.pathsep + path if path else "")}


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def ray_processes() -> dict[int, str]:
    """{pid: command line} of this machine's Ray processes (raylet, GCS,
    workers and their helpers)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            line = _cmdline(int(entry))
            if ("ray::" in line or "/ray/" in line or "raylet" in line
                    or "gcs_server" in line) and "pytest" not in line:
                found[int(entry)] = line
    return found


def wait_gone(before: dict[int, str], timeout: float = 30.0) -> None:
    """Wait until no Ray process is left but those there before; fail naming them."""
    deadline = time.monotonic() + timeout
    while True:
        left = {pid: line for pid, line in ray_processes().items() if pid not in before}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, f"Ray processes left behind: {left}"


def replica_statistics(app: str, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    """The statistics of ``count`` replicas, asked through the handle API (its
    router spreads calls over the replicas) until that many answered."""
    handle = serve.get_app_handle(app)
    by_replica: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    while len(by_replica) < count and time.monotonic() < deadline:
        try:
            stats = handle.statistics.remote().result(timeout_s=REQUEST_TIMEOUT_S)
        except Exception:  # a replica going away: ask again
            time.sleep(0.1)
            continue
        by_replica[stats["replica"]] = stats
    assert len(by_replica) >= count, \
        f"only {len(by_replica)} of {count} replicas answered: {list(by_replica)}"
    return list(by_replica.values())


def replicas(app: str, count: int, timeout: float = 60.0) -> dict[str, int]:
    """{replica id: pid} of ``count`` replicas."""
    return {s["replica"]: s["pid"] for s in replica_statistics(app, count, timeout)}


def running_replicas(app: str) -> int:
    status = serve.status().applications.get(app)
    if status is None or DEPLOYMENT not in status.deployments:
        return 0
    states = status.deployments[DEPLOYMENT].replica_states
    return int(states.get("RUNNING", 0))


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` (slowly: each call may ask Serve's controller)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.25)


def sleep_body(delay_us: int) -> bytes:
    return json.dumps({"inputs": [{"name": "DELAY_US", "shape": [1], "datatype": "INT64",
                                   "data": [delay_us]}]}).encode()


@dataclass
class Answer:
    start: float
    status: Optional[int]  # None: the connection failed or timed out
    error: str = ""


@dataclass
class Traffic:
    """Threads sending one request after another through the proxy until
    stopped; every answer is kept with its start time."""

    port: int
    path: str
    body: bytes
    threads: int = 4
    answers: list[Answer] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> "Traffic":
        for _ in range(self.threads):
            t = threading.Thread(target=self._run, daemon=True)
            t.start()
            self._workers.append(t)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        for t in self._workers:
            t.join(REQUEST_TIMEOUT_S + 5)
        assert not any(t.is_alive() for t in self._workers), "a request hung"

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.monotonic()
            try:
                status, _, data = support.request(
                    self.port, "POST", self.path, self.body,
                    {"Content-Type": "application/json"}, timeout=REQUEST_TIMEOUT_S)
                answer = Answer(start, status, "" if status == 200 else data[:300].decode(
                    errors="replace"))
            except Exception as e:  # refused, reset or timed out: all recorded
                answer = Answer(start, None, f"{type(e).__name__}: {e}")
            with self._lock:
                self.answers.append(answer)

    def count_since(self, since: float, status: int = 200) -> int:
        with self._lock:
            return sum(1 for a in self.answers if a.start >= since and a.status == status)

    def failures(self) -> list[Answer]:
        with self._lock:
            return [a for a in self.answers if a.status != 200]
