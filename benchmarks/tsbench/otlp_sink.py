"""An OTLP/HTTP endpoint for the tracing benchmark: it answers every POST
as a collector does (200, an empty ExportTraceServiceResponse) and counts
what it got, without decoding it; ``GET /count`` answers the number of
exports and of bytes as JSON. Run by benchmarks/tracing.py in a process of
its own:

    python benchmarks/tsbench/otlp_sink.py PORT
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_counts = {"exports": 0, "bytes": 0}
_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the exporter's session uses it

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        with _lock:
            _counts["exports"] += 1
            _counts["bytes"] += length
        self._answer(b"", self.headers.get("Content-Type") or "application/x-protobuf")

    def do_GET(self) -> None:  # noqa: N802
        with _lock:
            body = json.dumps(_counts).encode()
        self._answer(body, "application/json")

    def _answer(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    print("ready", flush=True)
    server.serve_forever()
