#!/usr/bin/env python3
"""Scale-out on Ray Serve: what Ray's HTTP ingress adds to a request, and
what a second replica adds to throughput.

    python benchmarks/scale_out.py             # 5 runs x 2 s per figure
    python benchmarks/scale_out.py --quick     # a smoke run
    python benchmarks/scale_out.py --pin --json out.json

Five servers on one model repository, each started once and measured round
by round: our HTTP frontend (`python -m tritonserver serve`, "direct"), and
`python -m tritonserver serve --ray` with one and with two replicas behind
Ray's proxy ("ray-1", "ray-2") and behind Ray's HAProxy ingress
("ray-1-haproxy", "ray-2-haproxy"), each with a Ray cluster of its own. The
same plain HTTP client (tsbench/http_load.py) measures:

- latency: one 16-value FP32 request at a time to identity_fp32; p50, and
  Ray's addition = p50(ray-1) - p50(direct) (target: under 2 ms);
- throughput: 8 client threads against a model that waits 5 ms per request
  on one instance (the package's sleep backend); ray-2 / ray-1 (target: at
  least 1.7).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(HERE)

from tsbench import http_load, interleaved  # noqa: E402
from tsbench.procs import BenchError, note  # noqa: E402
from tsbench.ray_server import RayServeServer  # noqa: E402
from tsbench.serve_server import ServeServer  # noqa: E402

SYSTEMS = ("direct", "ray-1", "ray-2", "ray-1-haproxy", "ray-2-haproxy")
INGRESSES = {"proxy": "", "haproxy": "-haproxy"}  # ingress -> suffix of its systems
LATENCY_PATH = "/v2/models/identity_fp32/infer"
LATENCY_BODY = http_load.infer_body("INPUT0", "FP32", [float(i) for i in range(16)])
SLEEP_PATH = "/v2/models/sleep_us/infer"
SLEEP_BODY = http_load.infer_body("DELAY_US", "INT64", [5000])
THREADS = 8
ADDED_P50_TARGET_US = 2000.0
SCALING_TARGET = 1.7


def make_repository(folder: str) -> str:
    """identity_fp32 from the examples, and sleep_us with one instance."""
    import tritonserver

    examples = tritonserver.example_model_repository()
    repo = os.path.join(folder, "models")
    for name in ("identity_fp32", "sleep_us"):
        shutil.copytree(os.path.join(examples, name), os.path.join(repo, name))
    config = os.path.join(repo, "sleep_us", "config.pbtxt")
    with open(config, encoding="utf-8") as f:
        text = f.read()
    with open(config, "w", encoding="utf-8") as f:
        f.write(text.replace("count: 2", "count: 1"))
    return repo


def p50(values: list) -> float:
    return float(statistics.median(values))


def summarize(runs: dict) -> dict:
    results = {s: {k: interleaved.spread(v) for k, v in by_k.items()} for s, by_k in runs.items()}
    ratios = {}
    for ingress, suffix in INGRESSES.items():
        one, two = runs["ray-1" + suffix], runs["ray-2" + suffix]
        added = [r - d for r, d in zip(one["p50_us"], runs["direct"]["p50_us"])]
        scaling = [b / a for b, a in zip(two["sleep_ips"], one["sleep_ips"])]
        ratios[ingress] = {
            "added_p50_us": {**interleaved.spread(added), "target_below": ADDED_P50_TARGET_US},
            "two_over_one_replica": {**interleaved.spread(scaling), "target": SCALING_TARGET},
        }
    results["ratios"] = ratios
    return results


def print_tables(results: dict) -> None:
    print("\n| system | p50 µs (16 FP32) | sleep 5 ms, 8 threads: inf/s |")
    print("|---|---|---|")
    for system in SYSTEMS:
        r = results[system]
        print(f"| {system} | {interleaved.cell(r['p50_us'])} | "
              f"{interleaved.cell(r['sleep_ips'])} |")
    print("\n| ingress | figure (median of runs) | value | target | met |")
    print("|---|---|---|---|---|")
    for ingress, ratios in results["ratios"].items():
        added = ratios["added_p50_us"]["median"]
        scaling = ratios["two_over_one_replica"]["median"]
        print(f"| {ingress} | p50 added (ray-1 - direct) | {added:,.0f} µs "
              f"| < {ADDED_P50_TARGET_US:,.0f} µs | {'yes' if added < ADDED_P50_TARGET_US else 'no'} |")
        print(f"| {ingress} | throughput ray-2 / ray-1 | {scaling:.2f} | >= {SCALING_TARGET} | "
              f"{'yes' if scaling >= SCALING_TARGET else 'no'} |")


def main(argv: list) -> int:
    args = interleaved.parse_args(__doc__, os.path.join(HERE, "build", "logs-scale-out"), argv)
    pinned = interleaved.pin(args)
    os.makedirs(args.logs, exist_ok=True)
    runs: dict = {s: {"p50_us": [], "sleep_ips": []} for s in SYSTEMS}
    with tempfile.TemporaryDirectory(prefix="tsbench-scale-out-") as folder:
        repo = make_repository(folder)
        servers = {"direct": ServeServer(repo, os.path.join(args.logs, "direct.log"))}
        for ingress, suffix in INGRESSES.items():
            for replicas in (1, 2):
                name = f"ray-{replicas}{suffix}"
                servers[name] = RayServeServer(repo, replicas, ingress,
                                               os.path.join(args.logs, name + ".log"))
        try:
            for server in servers.values():
                server.start()

            def measure(system: str) -> None:
                port = servers[system].http_port
                try:
                    latency = p50(http_load.latencies_us(port, LATENCY_PATH, LATENCY_BODY,
                                                         args.seconds))
                    ips = http_load.throughput(port, SLEEP_PATH, SLEEP_BODY, THREADS,
                                               args.seconds)
                except (OSError, RuntimeError) as e:
                    raise BenchError(f"{system}: {e}") from None
                runs[system]["p50_us"].append(latency)
                runs[system]["sleep_ips"].append(ips)
                note(f"  {system:7s} p50 {latency:,.0f} µs   sleep {ips:,.0f} inf/s")

            if not interleaved.each_round(args, SYSTEMS, measure):
                return 1
        except BenchError as e:
            note(f"benchmark failed: {e}")
            return 1
        finally:
            for server in servers.values():
                server.stop()
    results = summarize(runs)
    print_tables(results)
    print(f"\n{interleaved.settings_line(args, pinned)}")
    interleaved.write_json(args, pinned, {"results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
