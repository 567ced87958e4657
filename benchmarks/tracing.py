#!/usr/bin/env python3
"""What tracing costs: the identity_fp32 model with tracing off and with
every request traced in trace mode opentelemetry (spans exported over
OTLP/HTTP), in process and behind ``serve`` over HTTP, in one run.

    python benchmarks/tracing.py                 # 5 runs x 2 s per figure
    python benchmarks/tracing.py --quick         # a smoke run
    python benchmarks/tracing.py --pin --json out.json

Systems (tsbench/tracing_worker.py): python-api and python-api-otel
(Model.infer / async_infer), serve-http and serve-http-otel (tritonclient
over HTTP); the spans go to an OTLP/HTTP endpoint in a process of its own
(tsbench/otlp_sink.py, which answers as a collector and counts what it got),
with the default batch span processor settings. Workloads sync and async64
(tsbench/loops.py). Each system runs in its own process, interleaved round by
round; every figure is the median (min-max) of the runs, and each ratio is
the traced system's median over its untraced one's of the same run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from tsbench import interleaved  # noqa: E402
from tsbench.procs import note  # noqa: E402
from tsbench.server_process import _free_ports  # noqa: E402

WORKER = os.path.join(HERE, "tsbench", "tracing_worker.py")
SINK = os.path.join(HERE, "tsbench", "otlp_sink.py")
SYSTEMS = ("python-api", "python-api-otel", "serve-http", "serve-http-otel")
BASELINES = {"python-api-otel": "python-api", "serve-http-otel": "serve-http"}
WORKLOADS = ("sync", "async64")


def main(argv: list) -> int:
    args = interleaved.parse_args(__doc__, os.path.join(HERE, "build", "logs-tracing"), argv)
    pinned = interleaved.pin(args)
    port = _free_ports(1)[0]
    sink = subprocess.Popen([sys.executable, SINK, str(port)], stdout=subprocess.PIPE, text=True)
    assert sink.stdout is not None
    sink.stdout.readline()  # "ready"
    url = f"http://127.0.0.1:{port}/v1/traces"
    runs: dict = {s: {w: [] for w in WORKLOADS} for s in SYSTEMS}
    dropped: dict = {s: 0 for s in SYSTEMS}

    def measure(system: str) -> None:
        document = interleaved.run_worker(WORKER, system, args,
                                          ["--workloads", ",".join(WORKLOADS), "--sink", url])
        figures = document["rounds"][0]
        for w in WORKLOADS:
            runs[system][w].append(figures[w]["ips"])
        dropped[system] += document.get("dropped_spans") or 0
        note(f"  {system:16s} " + "  ".join(f"{w} {figures[w]['ips']:,.0f}/s"
                                            for w in WORKLOADS))

    try:
        ok = interleaved.each_round(args, SYSTEMS, measure)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/count", timeout=10) as r:
            received = json.load(r)
    finally:
        sink.kill()
        sink.wait()
    if not ok:
        return 1
    results, ratios = interleaved.baseline_table(runs, BASELINES, WORKLOADS)
    print(f"\nthe sink got {received['exports']:,} exports ({received['bytes']:,} bytes); "
          f"spans dropped in process: {dropped['python-api-otel']:,}")
    print(interleaved.settings_line(args, pinned))
    interleaved.write_json(args, pinned, {"results": results, "ratios": ratios,
                                          "sink": received, "dropped_spans": dropped})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
