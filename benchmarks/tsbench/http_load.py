"""Plain HTTP load for the scale-out benchmark: one keep-alive connection per
client thread (http.client), the same client for every system measured."""

from __future__ import annotations

import http.client
import json
import threading
import time

HOST = "127.0.0.1"


def infer_body(name: str, datatype: str, values: list) -> bytes:
    return json.dumps({"inputs": [{"name": name, "shape": [len(values)],
                                   "datatype": datatype, "data": values}]}).encode()


class _Client:
    def __init__(self, port: int, path: str, body: bytes):
        self._conn = http.client.HTTPConnection(HOST, port, timeout=30)
        self._path, self._body = path, body
        self._headers = {"Content-Type": "application/json"}

    def call(self) -> None:
        self._conn.request("POST", self._path, self._body, self._headers)
        response = self._conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")

    def close(self) -> None:
        self._conn.close()


def latencies_us(port: int, path: str, body: bytes, seconds: float,
                 warmup_s: float = 0.3) -> list:
    """One request at a time for ``seconds``: each request's latency in µs."""
    client = _Client(port, path, body)
    try:
        end = time.perf_counter() + warmup_s
        while time.perf_counter() < end:
            client.call()
        out = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            start = time.perf_counter()
            client.call()
            out.append((time.perf_counter() - start) * 1e6)
        return out
    finally:
        client.close()


def throughput(port: int, path: str, body: bytes, threads: int, seconds: float,
               warmup_s: float = 0.5) -> float:
    """Requests/s answered with ``threads`` clients each sending one request
    after another, counted after a warm-up."""
    counts = [0] * threads
    errors: list = []
    measuring = threading.Event()
    stop = threading.Event()

    def run(i: int) -> None:
        client = _Client(port, path, body)
        try:
            while not stop.is_set():
                client.call()
                if measuring.is_set():
                    counts[i] += 1
        except Exception as e:  # reported after the run
            errors.append(e)
        finally:
            client.close()

    workers = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    time.sleep(warmup_s)
    measuring.set()
    start = time.perf_counter()
    time.sleep(seconds)
    measuring.clear()
    elapsed = time.perf_counter() - start
    total = sum(counts)
    stop.set()
    for w in workers:
        w.join(60)
    if errors:
        raise RuntimeError(f"{len(errors)} client threads failed: {errors[0]}")
    return total / elapsed
