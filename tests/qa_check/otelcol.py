"""A stand-in for the OpenTelemetry Collector binary (``otelcol``, v0.91.0)
that Triton's qa/L0_trace/test.sh downloads, which cannot be had here: run
as ``otelcol --config trace-config.yaml`` (run_qa.py puts a launcher of that
name where the QA test starts it), it does what that config asks of the
collector, and only that:

* receivers.otlp.protocols.http.endpoint: OTLP/HTTP on that address
  (tests/frontends/otlp_receiver.py: protobuf or JSON bodies, decoded with
  the OpenTelemetry protobufs);
* processors.batch (send_batch_size, timeout): the batch processor's
  batching: what arrives is gathered (resource spans appended, as the
  collector merges batches), and sent on when it holds send_batch_size spans
  or when the timeout ticks;
* exporters.file.path: created empty at start, then each batch a line of
  OTLP/JSON, as the file exporter writes it (ids in hex).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/
from frontends.otlp_receiver import Receiver, span_count  # noqa: E402


def _duration(text: Any) -> float:
    """A collector duration ("10s", "200ms", "1m") in seconds."""
    text = str(text).strip()
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix):
            return float(text[:-len(suffix)]) * scale
    return float(text)


class BatchToFile:
    """The batch processor feeding the file exporter."""

    def __init__(self, path: str, send_batch_size: int, timeout: float):
        self.path = path
        self.send_batch_size = send_batch_size
        self.timeout = timeout
        self._lock = threading.Lock()
        self._pending: list[Any] = []
        self._count = 0
        self._tick = threading.Event()
        # Created empty at start, as the file exporter does (append: false).
        open(path, "w").close()
        threading.Thread(target=self._ticker, daemon=True).start()

    def add(self, document: dict[str, Any]) -> None:
        with self._lock:
            self._pending += document["resourceSpans"]
            self._count += span_count(document)
            if self.send_batch_size and self._count >= self.send_batch_size:
                self._send()
                self._tick.set()  # the timer starts again

    def _ticker(self) -> None:
        while True:
            if self._tick.wait(self.timeout):
                self._tick.clear()
                continue
            with self._lock:
                if self._pending:
                    self._send()

    def _send(self) -> None:
        line = json.dumps({"resourceSpans": self._pending}, separators=(",", ":"))
        self._pending, self._count = [], 0
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def main(argv: Any = None) -> int:
    import yaml  # the collector's config is YAML

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True)
    args = p.parse_args(argv)
    with open(args.config) as f:
        config = yaml.safe_load(f)
    endpoint = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    host, _, port = endpoint.rpartition(":")
    batch = (config.get("processors") or {}).get("batch") or {}
    writer = BatchToFile(config["exporters"]["file"]["path"],
                         int(batch.get("send_batch_size", 8192)),
                         _duration(batch.get("timeout", "200ms")))
    receiver = Receiver(host or "0.0.0.0", int(port), on_request=writer.add)
    print(f"otelcol stand-in: OTLP/HTTP on {endpoint}, batches to {writer.path}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    receiver.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
