"""Worker: the identity_fp32 model of the example repository with tracing
off and with every request traced in mode opentelemetry, spans exported
over OTLP/HTTP to tsbench/otlp_sink.py (``--sink URL``).

Run by benchmarks/tracing.py, one process per system:

    python benchmarks/tsbench/tracing_worker.py --system NAME --sink URL [loop options]

* ``python-api``: Model.infer / async_infer in process, tracing never configured;
* ``python-api-otel``: the same, after Server.configure_tracing(trace_level="TIMESTAMPS",
  trace_rate=1, trace_mode="opentelemetry", opentelemetry={"url": SINK});
* ``serve-http``: ``python -m tritonserver serve`` with tritonclient over HTTP;
* ``serve-http-otel``: the same with ``--trace-config mode=opentelemetry``,
  ``level=TIMESTAMPS``, ``rate=1``, ``opentelemetry,url=SINK``.

The exports use the default batch span processor settings (a 2048-span
queue, an export every 5 s or every 512 spans). Prints one JSON line on
stdout, with the spans dropped (in process) besides the figures.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Optional

if not __package__:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from tsbench import loops  # noqa: E402
from tsbench.local_or_served import LocalOrServed, served  # noqa: E402

SYSTEMS = ("python-api", "python-api-otel", "serve-http", "serve-http-otel")
MODEL = "identity_fp32"


class Traced(LocalOrServed):
    def __init__(self, system: str, sink: str):
        import tritonserver

        self.name = system
        repository = tritonserver.example_model_repository()
        t0 = time.perf_counter()
        if system.startswith("serve-http"):
            extra = []
            if system.endswith("-otel"):
                extra = ["--trace-config", "mode=opentelemetry",
                         "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1",
                         "--trace-config", f"opentelemetry,url={sink}"]
            self.serving = served(repository,
                                  os.path.join(tempfile.gettempdir(), f"tsbench-{system}.log"),
                                  extra)
        else:
            self.server = tritonserver.Server(model_repository=repository)
            self.server.start(wait_until_ready=True, timeout=60)
            if system.endswith("-otel"):
                self.server.configure_tracing(trace_level="TIMESTAMPS", trace_rate=1,
                                              trace_mode="opentelemetry",
                                              opentelemetry={"url": sink})
            self.model = self.server.model(MODEL)
        self.startup_s = time.perf_counter() - t0

    def dropped(self) -> Optional[int]:
        """The spans the in-process server's queue dropped (None behind serve)."""
        if self.server is None:
            return None
        from tritonserver._server import tracing_of

        return int(tracing_of(self.server).dropped_spans)


def main() -> None:
    parser = loops.argument_parser(__doc__)
    parser.add_argument("--system", required=True, choices=SYSTEMS)
    parser.add_argument("--sink", required=True, help="the OTLP/HTTP endpoint of the spans")
    args = parser.parse_args()
    settings = loops.Settings(args)
    system = Traced(args.system, args.sink)
    try:
        document = loops.run_rounds(system, settings, {"startup_s": system.startup_s})
        document["dropped_spans"] = system.dropped()
    finally:
        system.close()
    loops.emit(document)


if __name__ == "__main__":
    main()
