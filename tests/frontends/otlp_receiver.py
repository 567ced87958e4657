"""An OTLP/HTTP trace receiver for the tests: what an OpenTelemetry
collector's OTLP receiver takes (POST /v1/traces, protobuf or JSON bodies,
gzip or not), decoded with the OpenTelemetry protobufs (opentelemetry-proto),
and what its file exporter writes (``collector_json``: OTLP/JSON as the
collector writes it, ids in hex, 64-bit numbers as strings, enums as
numbers). The tests of trace mode opentelemetry read the spans it got
(``Receiver``); tests/qa_check/otelcol.py stands in for the collector
binary Triton's QA downloads, on the same code.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

# Fields that hold ids: bytes in protobuf, hex in OTLP/JSON.
ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _ids(value: Any, convert: Callable[[str], str]) -> Any:
    """``value`` (a decoded JSON document) with its id fields converted."""
    if isinstance(value, dict):
        return {k: (convert(v) if k in ID_FIELDS and isinstance(v, str) else _ids(v, convert))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_ids(v, convert) for v in value]
    return value


def parse_request(body: bytes, content_type: str,
                  encoding: str = "") -> trace_service_pb2.ExportTraceServiceRequest:
    """An ExportTraceServiceRequest from an OTLP/HTTP body (protobuf, or
    JSON with hex ids)."""
    if encoding.lower() == "gzip":
        body = gzip.decompress(body)
    request = trace_service_pb2.ExportTraceServiceRequest()
    if content_type.split(";")[0].strip().lower() == "application/json":
        document = _ids(json.loads(body), lambda h: base64.b64encode(bytes.fromhex(h)).decode())
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    else:
        request.ParseFromString(body)
    return request


def collector_json(request: trace_service_pb2.ExportTraceServiceRequest) -> dict[str, Any]:
    """The request as the collector's file exporter writes a batch: ids in
    hex (an empty parentSpanId as ""), every span with its status."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    document = _ids(document, lambda b: base64.b64decode(b).hex())
    document.setdefault("resourceSpans", [])
    for resource in document["resourceSpans"]:
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                span.setdefault("parentSpanId", "")
                span.setdefault("status", {})
    return document


def span_count(document: dict[str, Any]) -> int:
    return sum(len(scope.get("spans", [])) for resource in document.get("resourceSpans", [])
               for scope in resource.get("scopeSpans", []))


class Receiver:
    """An OTLP/HTTP receiver on ``host``:``port`` (0: a free one) in a thread
    of its own. Each request it gets is decoded, handed to ``on_request`` (its
    collector_json document) when given, and kept in ``requests``; it answers
    200 with an empty ExportTraceServiceResponse, as the collector does."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0,
                 on_request: Optional[Callable[[dict[str, Any]], None]] = None):
        self.requests: list[dict[str, Any]] = []
        self.on_request = on_request
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                content_type = self.headers.get("Content-Type") or "application/x-protobuf"
                try:
                    request = parse_request(body, content_type,
                                            self.headers.get("Content-Encoding") or "")
                except Exception as e:  # a body the receiver cannot read: 400, as the collector
                    self.send_error(400, str(e))
                    return
                receiver.received(collector_json(request))
                response = trace_service_pb2.ExportTraceServiceResponse()
                if content_type.startswith("application/json"):
                    out = json_format.MessageToJson(response).encode()
                else:
                    out = response.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", content_type.split(";")[0])
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="otlp-receiver", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1/traces"

    def received(self, document: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(document)
        if self.on_request is not None:
            self.on_request(document)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def spans(self) -> list[dict[str, Any]]:
        """Every span received so far, in order, each with its resource's
        attributes under "resource"."""
        with self._lock:
            documents = list(self.requests)
        out = []
        for document in documents:
            for resource in document["resourceSpans"]:
                for scope in resource.get("scopeSpans", []):
                    for span in scope.get("spans", []):
                        out.append(dict(span, resource=resource.get("resource", {})))
        return out

    def wait_spans(self, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        """The spans once at least ``count`` came (what came, at the timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if len(spans) >= count or time.monotonic() >= deadline:
                return spans
            time.sleep(0.05)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
