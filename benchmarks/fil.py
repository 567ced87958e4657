#!/usr/bin/env python3
"""The FIL backend (plugins/fil) against the engines it runs, called directly.

    python benchmarks/fil.py                 # 5 runs x 1 s per figure
    python benchmarks/fil.py --quick         # a smoke run
    python benchmarks/fil.py --json out.json

Two models trained at run time on 32 scikit-learn features: XGBoost
(binary:logistic, 500 trees, depth 6) and LightGBM (binary, 500 trees, 31
leaves), served as a FIL repository (predict_proba, max_batch_size 1024,
dynamic batching, one CPU instance) from an in-process Server.

Batches of 1, 64 and 1,000 rows, one request at a time, rows/s of:
- gtil-direct: treelite.gtil.predict on the model Treelite read (what the
  backend runs by default);
- native-direct: xgboost Booster.inplace_predict / lightgbm Booster.predict;
- server-gtil, server-native: Model.infer on the backend with engine gtil /
  native (FIL's outputs: [1 - p, p]).
The targets: server / direct at 1,000 rows at least 0.9 for each engine.

Single rows under load: 16 threads each sending one-row requests to the
server (dynamic batching gathers them) against one thread calling the native
engine one row at a time; target: the server's rows/s above the direct loop's.
Every figure is the median (min-max) of the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Callable

import numpy as np

FEATURES = 32
BATCHES = (1, 64, 1000)
CLIENTS = 16  # --clients
TARGET_RATIO = 0.9

CONFIG = """backend: "fil"
max_batch_size: 1024
input [{{ name: "input__0" data_type: TYPE_FP32 dims: [ {features} ] }}]
output [{{ name: "output__0" data_type: TYPE_FP32 dims: [ 2 ] }}]
instance_group [{{ kind: KIND_CPU count: 1 }}]
parameters [
  {{ key: "model_type" value: {{ string_value: "{model_type}" }} }},
  {{ key: "output_class" value: {{ string_value: "true" }} }},
  {{ key: "threshold" value: {{ string_value: "0.5" }} }},
  {{ key: "predict_proba" value: {{ string_value: "true" }} }},
  {{ key: "engine" value: {{ string_value: "{engine}" }} }}
]
dynamic_batching {{}}
"""


def train(trees: int) -> dict[str, tuple[Any, str, str]]:
    """name -> (booster, model_type, file name)."""
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.datasets import make_classification

    x, y = make_classification(5000, FEATURES, n_informative=16, random_state=0)
    return {
        "xgboost": (xgb.train({"objective": "binary:logistic", "max_depth": 6},
                              xgb.DMatrix(x, y), trees), "xgboost_json", "xgboost.json"),
        "lightgbm": (lgb.train({"objective": "binary", "num_leaves": 31, "verbose": -1},
                               lgb.Dataset(x, y), trees), "lightgbm", "model.txt"),
    }


def write_repo(root: str, models: dict[str, tuple[Any, str, str]]) -> None:
    for name, (booster, model_type, filename) in models.items():
        for engine in ("gtil", "native"):
            folder = os.path.join(root, f"{name}_{engine}")
            os.makedirs(os.path.join(folder, "1"))
            booster.save_model(os.path.join(folder, "1", filename))
            with open(os.path.join(folder, "config.pbtxt"), "w") as f:
                f.write(CONFIG.format(features=FEATURES, model_type=model_type, engine=engine))


def direct(name: str, booster: Any, path: str) -> dict[str, Callable[[np.ndarray], Any]]:
    import treelite

    tl = (treelite.frontend.load_xgboost_model(path) if name == "xgboost"
          else treelite.frontend.load_lightgbm_model(path))
    if name == "xgboost":
        def native(x: np.ndarray) -> Any:
            return booster.inplace_predict(x)
    else:
        def native(x: np.ndarray) -> Any:
            return booster.predict(x)
    return {"gtil-direct": lambda x: treelite.gtil.predict(tl, x),
            "native-direct": native}


def rate(fn: Callable[[np.ndarray], Any], x: np.ndarray, seconds: float) -> float:
    """rows/s of calls of fn(x) one after the other for `seconds`."""
    fn(x)
    calls, start = 0, time.perf_counter()
    while True:
        fn(x)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls * x.shape[0] / elapsed


def concurrent_rate(fn: Callable[[np.ndarray], Any], rows: np.ndarray, clients: int,
                    seconds: float) -> float:
    """rows/s of `clients` threads each calling fn on one row after another."""
    counts = [0] * clients
    stop = threading.Event()

    def client(k: int) -> None:
        i = k
        while not stop.is_set():
            fn(rows[i % len(rows):i % len(rows) + 1])
            counts[k] += 1
            i += clients

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: Any = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="1 run x 0.2 s, 50 trees: a smoke run")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seconds", type=float, default=1.0, help="per figure and run")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--clients", type=int, default=CLIENTS,
                   help="threads sending single rows (default 16)")
    args = p.parse_args(argv)
    runs, seconds, trees = (1, 0.2, 50) if args.quick else (args.runs, args.seconds, 500)

    import tritonserver

    models = train(trees)
    root = tempfile.mkdtemp(prefix="fil_bench-")
    write_repo(root, models)
    server = tritonserver.Server(model_repository=root, log_error=True).start(
        wait_until_ready=True)
    rng = np.random.default_rng(0)
    data = {b: rng.normal(size=(b, FEATURES)).astype(np.float32) for b in BATCHES}
    singles = rng.normal(size=(4096, FEATURES)).astype(np.float32)
    results: dict[str, Any] = {"trees": trees, "runs": runs, "seconds": seconds,
                               "clients": args.clients, "models": {}}
    try:
        for name, (booster, _, filename) in models.items():
            systems = direct(name, booster, os.path.join(root, f"{name}_gtil", "1", filename))
            for engine in ("gtil", "native"):
                model = server.model(f"{name}_{engine}")

                def infer(x: np.ndarray, model: Any = model) -> Any:
                    return next(model.infer(inputs={"input__0": x})).outputs["output__0"]

                systems[f"server-{engine}"] = infer
            figures: dict[str, dict[str, list[float]]] = {
                s: {str(b): [] for b in BATCHES} for s in systems}
            load: dict[str, list[float]] = {"server-gtil": [], "server-native": [],
                                            "native-direct": []}
            for _ in range(runs):  # interleaved: every system once per run
                for batch in BATCHES:
                    for system, fn in systems.items():
                        figures[system][str(batch)].append(rate(fn, data[batch], seconds))
                for system in ("server-gtil", "server-native"):
                    load[system].append(concurrent_rate(systems[system], singles,
                                                        args.clients, seconds))
                load["native-direct"].append(rate(systems["native-direct"], singles[:1],
                                                  seconds))
            results["models"][name] = {
                "rows_per_s": {s: {b: spread(v) for b, v in by_b.items()}
                               for s, by_b in figures.items()},
                "single_rows": {s: spread(v) for s, v in load.items()}}
    finally:
        server.stop()
    report(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


def _fmt(s: dict[str, float]) -> str:
    return f"{s['median']:,.0f} ({s['min']:,.0f}-{s['max']:,.0f})"


def report(results: dict[str, Any]) -> None:
    print(f"FIL backend, {results['trees']} trees, {results['runs']} runs x "
          f"{results['seconds']} s per figure: rows/s, median (min-max)\n")
    for name, doc in results["models"].items():
        rows = doc["rows_per_s"]
        print(f"{name}\n| system | " + " | ".join(f"{b} rows" for b in BATCHES) + " |")
        print("|---|" + "---|" * len(BATCHES))
        for system, by_b in rows.items():
            print(f"| {system} | " + " | ".join(_fmt(by_b[str(b)]) for b in BATCHES) + " |")
        for engine, base in (("gtil", "gtil-direct"), ("native", "native-direct")):
            ratio = rows[f"server-{engine}"]["1000"]["median"] / rows[base]["1000"]["median"]
            verdict = "met" if ratio >= TARGET_RATIO else "missed"
            print(f"server-{engine} / {base} at 1,000 rows: {ratio:.2f} (target "
                  f"{TARGET_RATIO}: {verdict})")
        load = doc["single_rows"]
        print(f"single rows, {results['clients']} clients: server-gtil {_fmt(load['server-gtil'])}, "
              f"server-native {_fmt(load['server-native'])}; native-direct one at a time "
              f"{_fmt(load['native-direct'])} rows/s (target: server above: "
              f"{'met' if load['server-native']['median'] > load['native-direct']['median'] else 'missed'})\n")


if __name__ == "__main__":
    sys.exit(main())
