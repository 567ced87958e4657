"""Smoke tests of the benchmark harness: `benchmarks/run.py --quick` and
`benchmarks/onnx_backend.py --quick` and `benchmarks/scale_out.py --quick` work end to end and write complete results
documents; so do `benchmarks/frameworks.py --quick`, `benchmarks/openai_stream.py --quick`,
`benchmarks/tracing.py --quick` and `benchmarks/hotpath.py --quick` (where Linux perf may
sample).

It measures nothing that is checked: no figure is compared with a time or a
rate, only the document's shape (every system x workload present, numbers
positive, ratios present). On a fresh checkout the harness builds the C API
driver (CMake) and makes its private tritonclient venv from PyPI first; both
are reused afterwards (benchmarks/build, benchmarks/.venv-client).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

import tritonserver

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(REPO, "benchmarks", "run.py")
ONNX = os.path.join(REPO, "benchmarks", "onnx_backend.py")
SCALE_OUT = os.path.join(REPO, "benchmarks", "scale_out.py")
FRAMEWORKS = os.path.join(REPO, "benchmarks", "frameworks.py")
HOTPATH = os.path.join(REPO, "benchmarks", "hotpath.py")
WORKLOADS = ("sync", "async64", "large16MiB", "large16MiB-shm", "threads4")
SMALL = ("sync", "async64", "threads4")
# The default systems and what each measures: the C API's large16MiB is the
# ceiling of large16MiB-shm; the echo servers take no shared memory; no 16
# MiB tensors as JSON.
SYSTEMS = {"python-api": WORKLOADS, "c-api": ("sync", "async64", "large16MiB", "threads4"),
           "tritonclient-http": WORKLOADS, "tritonclient-grpc": WORKLOADS,
           "serve-http": WORKLOADS, "serve-grpc": WORKLOADS,
           "echo-http": ("sync", "async64", "large16MiB", "threads4"),
           "echo-grpc": ("sync", "async64", "large16MiB", "threads4"),
           "echo-core-http": ("sync", "async64", "large16MiB", "threads4"),
           "echo-core-grpc": ("sync", "async64", "large16MiB", "threads4"),
           "tritonclient-http-json": SMALL, "serve-http-json": SMALL, "echo-core-http-json": SMALL}
# frontend_ratios: key -> (system, the one it is divided by)
FRONTEND_RATIOS = {"http": ("serve-http", "tritonclient-http"),
                   "grpc": ("serve-grpc", "tritonclient-grpc"),
                   "http-echo": ("echo-http", "tritonclient-http"),
                   "grpc-echo": ("echo-grpc", "tritonclient-grpc"),
                   "http-json": ("serve-http-json", "tritonclient-http-json"),
                   "http-core-floor": ("serve-http", "echo-core-http"),
                   "grpc-core-floor": ("serve-grpc", "echo-core-grpc"),
                   "http-json-core-floor": ("serve-http-json", "echo-core-http-json")}
UNITS = {"sync": "inferences/s", "async64": "inferences/s", "large16MiB": "GB/s",
         "large16MiB-shm": "GB/s", "threads4": "inferences/s"}
RUN_TIMEOUT_S = 600  # generous: a cold venv (PyPI) and a cold build come first
ONNX_TIMEOUT_S = 300  # about 20 s here
SCALE_OUT_TIMEOUT_S = 300  # about 60 s here: two Ray clusters start
FRAMEWORKS_TIMEOUT_S = 300  # about as long as the ONNX run (both ~50 s on a busy machine here)
ONNX_FIGURES = {("mlp", "direct"): {"sync"}, ("mlp", "server"): {"sync", "async64"},
                ("mlp", "python-backend"): {"sync"}, ("resnet", "direct"): {"sync"},
                ("resnet", "server"): {"sync"}, ("resnet", "python-backend"): {"sync"},
                ("identity", "core-floor"): {"sync", "async64"},  # --core-floor: the C API
                # count 2: one core instance with two workers, and two core instances
                ("mlp", "server-x2"): {"sync", "async64"},
                ("mlp", "server-x2-core"): {"sync", "async64"},
                ("resnet", "server-x2"): {"sync", "async64"},
                ("resnet", "server-x2-core"): {"sync", "async64"}}


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _run_quick(script: str, out, timeout: float, *options: str) -> dict:
    """`script --quick --json out [options]`; the document it wrote."""
    env = dict(os.environ)
    # The workers must load the package under test: the source tree's when
    # that is what this process imported, else the installed one.
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(tritonserver.__file__)))
    if os.path.realpath(pkg_parent) == os.path.realpath(os.path.join(REPO, "python")):
        env["PYTHONPATH"] = os.pathsep.join(
            [pkg_parent] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, script, "--quick", "--json", str(out), *options],
                          cwd=REPO,
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, (proc.stdout[-3000:] + "\n" + proc.stderr[-6000:])
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_quick_run_writes_every_figure(tmp_path):
    doc = _run_quick(RUN, tmp_path / "bench.json", RUN_TIMEOUT_S)
    assert set(doc) >= {"machine", "results", "ratios"}

    m = doc["machine"]
    for key in ("cpu_model", "cpus", "pinned", "python", "numpy", "core_version", "date"):
        assert key in m, key
    assert m["pinned"] is False and m["mode"] == "quick"

    found = {}
    for r in doc["results"]:
        key = (r["system"], r["workload"])
        assert key not in found, f"{key} listed twice"
        found[key] = r
    assert set(found) == {(s, w) for s, workloads in SYSTEMS.items() for w in workloads}
    for (system, workload), r in found.items():
        assert r["unit"] == UNITS[workload], (system, workload, r["unit"])
        for stat in ("min", "median", "max"):
            assert _positive(r[stat]), (system, workload, stat, r[stat])
        assert r["min"] <= r["median"] <= r["max"]
        assert len(r["runs"]) >= 3 and all(_positive(v) for v in r["runs"])
        if workload == "sync":
            for latency in ("p50_us", "p99_us"):
                assert _positive(r[latency]["median"]), (system, latency)
        if workload in SMALL:  # what each worker process spent per request
            cpu, kernel, switches = r["cpu_us"], r["sys_us"], r["switches"]
            assert _positive(cpu["median"]), (system, workload, cpu)
            assert 0 <= kernel["median"] <= cpu["max"], (system, workload, kernel, cpu)
            assert switches["min"] >= 0, (system, workload, switches)

    assert set(doc["ratios"]) == set(WORKLOADS)
    for workload, ratio in doc["ratios"].items():
        assert _positive(ratio), (workload, ratio)
        ceiling = "large16MiB" if workload == "large16MiB-shm" else workload
        expected = (found[("python-api", workload)]["median"] /
                    found[("c-api", ceiling)]["median"])
        assert math.isclose(ratio, expected, rel_tol=1e-9)

    assert set(doc["frontend_ratios"]) == set(FRONTEND_RATIOS)
    for key, (system, over) in FRONTEND_RATIOS.items():
        row = doc["frontend_ratios"][key]
        assert set(row) == set(SYSTEMS[system]) & set(SYSTEMS[over]), key
        for workload, ratio in row.items():
            expected = found[(system, workload)]["median"] / found[(over, workload)]["median"]
            assert math.isclose(ratio, expected, rel_tol=1e-9), (key, workload)


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_quick_run_of_the_python_floor(tmp_path):
    # python_floor is built beside the C driver for this interpreter; asked for large16MiB too,
    # it measures only what it has (sync, async64, threads4), and its worker checked its output.
    # python-floor-1us is the same worker with a microsecond of Python added per request.
    systems = ("c-api", "python-floor", "python-floor-1us")
    doc = _run_quick(RUN, tmp_path / "floor.json", RUN_TIMEOUT_S, "--systems", ",".join(systems),
                     "--workloads", "sync,async64,threads4,large16MiB")
    found = {(r["system"], r["workload"]): r for r in doc["results"]}
    assert set(found) == {(s, w) for s in systems
                          for w in ("sync", "async64", "threads4", "large16MiB")} - {
                              ("python-floor", "large16MiB"), ("python-floor-1us", "large16MiB")}
    for (system, workload), r in found.items():
        assert _positive(r["median"]), r
        if workload != "large16MiB":  # GB/s, no cost per request
            assert _positive(r["cpu_us"]["median"]), r
    floor = doc["ratios_by_system"]["python-floor"]
    assert set(floor) == {"sync", "async64", "threads4"}
    for workload, ratio in floor.items():
        expected = found[("python-floor", workload)]["median"] / found[("c-api", workload)]["median"]
        assert math.isclose(ratio, expected, rel_tol=1e-9), workload


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_quick_run_against_mlserver(tmp_path):
    # MLServer from its private venv (made on first use), best setting and default, over HTTP
    # with JSON tensors and over gRPC, beside our frontends.
    systems = ("serve-http-json", "serve-grpc", "mlserver-http-json", "mlserver-grpc",
               "mlserver-default-http-json", "mlserver-default-grpc")
    doc = _run_quick(RUN, tmp_path / "mlserver.json", RUN_TIMEOUT_S,
                     "--systems", ",".join(systems), "--workloads", "sync,async64")
    found = {(r["system"], r["workload"]): r for r in doc["results"]}
    assert set(found) == {(s, w) for s in systems for w in ("sync", "async64")}
    assert all(_positive(r["median"]) for r in found.values())
    pairs = {"http-json-mlserver": ("serve-http-json", "mlserver-http-json"),
             "grpc-mlserver": ("serve-grpc", "mlserver-grpc"),
             "http-json-mlserver-default": ("serve-http-json", "mlserver-default-http-json"),
             "grpc-mlserver-default": ("serve-grpc", "mlserver-default-grpc")}
    assert set(doc["frontend_ratios"]) == set(pairs)
    for key, (ours, theirs) in pairs.items():
        for workload, ratio in doc["frontend_ratios"][key].items():
            expected = found[(ours, workload)]["median"] / found[(theirs, workload)]["median"]
            assert math.isclose(ratio, expected, rel_tol=1e-9), (key, workload)


@pytest.mark.slow
@pytest.mark.timeout(ONNX_TIMEOUT_S + 60)
def test_quick_onnx_run_writes_every_figure_and_ratio(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    doc = _run_quick(ONNX, tmp_path / "onnx.json", ONNX_TIMEOUT_S, "--core-floor")
    assert doc["pinned"] is None and doc["rounds"] == 3

    results = doc["results"]
    found = {(m, s): set(by_w) for m, by_s in results.items() for s, by_w in by_s.items()}
    assert found == ONNX_FIGURES
    for (model, system), workloads in ONNX_FIGURES.items():
        for workload in workloads:
            r = results[model][system][workload]
            assert r["min"] <= r["median"] <= r["max"], (model, system, workload)
            assert len(r["runs"]) == 3 and all(_positive(v) for v in r["runs"])
        assert _positive(results[model][system]["sync"]["p50_us"]["median"])

    medians = {(m, s, w): r["median"] for m, by_s in results.items()
               for s, by_w in by_s.items() for w, r in by_w.items()}
    targets = {"mlp: server sync / direct sync": 0.5,
               "mlp: server sync / python-backend sync": 3.0,
               "mlp: server async64 / direct sync": 2.0,
               "resnet: server sync / direct sync": 0.95,
               "mlp: server-x2 async64 / server-x2-core async64": 0.95,
               "resnet: server-x2 async64 / server-x2-core async64": 0.95}
    assert set(doc["ratios"]) == set(targets) | {
        "resnet: server sync / python-backend sync",
        "identity core-floor sync / mlp direct sync",
        "identity core-floor async64 / mlp direct sync"}
    for name, ratio in doc["ratios"].items():
        expected = (medians[(ratio.get("of_model", ratio["model"]), *ratio["of"])] /
                    medians[(ratio["model"], *ratio["over"])])
        assert math.isclose(ratio["value"], expected, rel_tol=1e-9), name
        assert ratio["target"] == targets.get(name)
        if ratio["target"] is not None:
            assert ratio["met"] == (ratio["value"] >= ratio["target"]), name


@pytest.mark.slow
@pytest.mark.timeout(FRAMEWORKS_TIMEOUT_S + 60)
def test_quick_frameworks_run_writes_every_figure_and_ratio(tmp_path):
    for module in ("onnx", "onnxruntime", "torch", "openvino"):
        pytest.importorskip(module)
    doc = _run_quick(FRAMEWORKS, tmp_path / "frameworks.json", FRAMEWORKS_TIMEOUT_S,
                     "--core-floor")
    assert doc["pinned"] is None and doc["rounds"] == 3

    frameworks = ("onnxruntime", "pytorch", "openvino")
    systems = [f"{f}-{kind}" for f in frameworks for kind in ("direct", "python", "server")]
    results = doc["results"]
    found = {(m, s): set(by_w) for m, by_s in results.items() for s, by_w in by_s.items()}
    assert found == {**{(m, s): {"sync"} for m in ("mlp", "resnet") for s in systems},
                     ("identity", "core-floor"): {"sync"}}
    for (model, system) in found:
        r = results[model][system]["sync"]
        assert r["min"] <= r["median"] <= r["max"], (model, system)
        assert len(r["runs"]) == 3 and all(_positive(v) for v in r["runs"])
        assert _positive(r["p50_us"]["median"]), (model, system)

    def median(model, system):  # inferences/s
        return results[model][system]["sync"]["median"]

    def p50(model, system):
        return results[model][system]["sync"]["p50_us"]["median"]

    assert set(doc["ratios"]) == {f"{m}: {f}-server sync / {f}-direct sync"
                                  for m in ("mlp", "resnet") for f in frameworks}
    for name, ratio in doc["ratios"].items():
        model, f = ratio["model"], ratio["framework"]
        expected = median(model, f"{f}-server") / median(model, f"{f}-direct")
        assert math.isclose(ratio["value"], expected, rel_tol=1e-9), name
        assert ratio["target"] == (0.95 if model == "resnet" else None), name
        if ratio["target"] is not None:
            assert ratio["met"] == (ratio["value"] >= ratio["target"]), name

    added = doc["added_us"]
    assert set(added) == set(frameworks)
    floor = p50("identity", "core-floor")
    for f, a in added.items():
        expected = p50("mlp", f"{f}-server") - p50("mlp", f"{f}-direct") - floor
        assert math.isclose(a["value"], expected, rel_tol=1e-9, abs_tol=1e-9), f
        python = p50("mlp", f"{f}-python") - p50("mlp", f"{f}-direct") - floor
        assert math.isclose(a["python_value"], python, rel_tol=1e-9, abs_tol=1e-9), f
        layer = p50("mlp", f"{f}-server") - p50("mlp", f"{f}-python")
        assert math.isclose(a["layer_us"], layer, rel_tol=1e-9, abs_tol=1e-9), f
        if f != "onnxruntime":
            assert a["met"] == (a["value"] <= added["onnxruntime"]["value"]), f


@pytest.mark.slow
@pytest.mark.timeout(SCALE_OUT_TIMEOUT_S + 60)
def test_quick_scale_out_run_writes_every_figure(tmp_path):
    pytest.importorskip("ray.serve")
    doc = _run_quick(SCALE_OUT, tmp_path / "scale_out.json", SCALE_OUT_TIMEOUT_S)
    results = doc["results"]
    systems = ("direct", "ray-1", "ray-2", "ray-1-haproxy", "ray-2-haproxy")
    assert set(results) == {*systems, "ratios"}
    for system in systems:
        for figure in ("p50_us", "sleep_ips"):
            r = results[system][figure]
            assert r["min"] <= r["median"] <= r["max"], (system, figure)
            assert len(r["runs"]) == 3 and all(_positive(v) for v in r["runs"])
    assert set(results["ratios"]) == {"proxy", "haproxy"}
    for ingress, suffix in (("proxy", ""), ("haproxy", "-haproxy")):
        one, two = results["ray-1" + suffix], results["ray-2" + suffix]
        added = [ray - direct for ray, direct in zip(one["p50_us"]["runs"],
                                                     results["direct"]["p50_us"]["runs"])]
        ratios = results["ratios"][ingress]
        assert ratios["added_p50_us"]["runs"] == added
        scaling = [b / a for b, a in zip(two["sleep_ips"]["runs"], one["sleep_ips"]["runs"])]
        assert ratios["two_over_one_replica"]["runs"] == scaling
        assert ratios["two_over_one_replica"]["target"] == 1.7


OPENAI_STREAM = os.path.join(REPO, "benchmarks", "openai_stream.py")


@pytest.mark.timeout(180)
def test_quick_openai_stream_run_writes_every_figure(tmp_path):
    pytest.importorskip("fastapi")
    doc = _run_quick(OPENAI_STREAM, tmp_path / "stream.json", 120)
    assert set(doc["systems"]) == {"async_infer", "generate_stream", "openai"}
    for figures in doc["systems"].values():
        assert figures["requests"] == doc["requests"] * doc["rounds"]
        for key in ("ttft_ms", "tokens_per_s"):
            assert all(_positive(figures[key][k]) for k in ("median", "min", "max")), figures


TRACING = os.path.join(REPO, "benchmarks", "tracing.py")


@pytest.mark.timeout(240)
def test_quick_tracing_run_writes_every_figure(tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    doc = _run_quick(TRACING, tmp_path / "tracing.json", 200)
    assert set(doc["results"]) == {"python-api", "python-api-otel", "serve-http",
                                   "serve-http-otel"}
    for figures in doc["results"].values():
        for workload in ("sync", "async64"):
            assert all(_positive(figures[workload][k]) for k in ("median", "min", "max"))
    assert set(doc["ratios"]) == {"python-api-otel", "serve-http-otel"}
    assert doc["sink"]["exports"] > 0 and doc["sink"]["bytes"] > 0  # the spans went out


def _perf_usable() -> bool:
    """Linux perf is installed and may sample this user's processes."""
    import shutil

    if shutil.which("perf") is None:
        return False
    try:
        with open("/proc/sys/kernel/perf_event_paranoid", encoding="ascii") as f:
            return int(f.read().strip()) <= 2 or os.geteuid() == 0
    except (OSError, ValueError):
        return False


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.skipif(not _perf_usable(), reason="Linux perf is missing or may not sample here")
def test_quick_hotpath_splits_each_request_by_layer(tmp_path):
    doc = _run_quick(HOTPATH, tmp_path / "hotpath.json", 180)
    results = doc["results"]
    assert set(results) == {"c-api", "python-api"}
    for system, r in results.items():
        assert _positive(r["ips"]) and _positive(r["p50_us"]), system
        assert math.isclose(sum(r["shares"].values()), 1.0, rel_tol=1e-6), system
        assert r["shares"].get("core", 0) > 0, system  # the identity backend ran in both
    assert "binding" not in results["c-api"]["shares"]  # no Python in the C API driver
    assert results["python-api"]["shares"].get("binding", 0) > 0
    assert results["python-api"]["shares"].get("interpreter", 0) > 0


def test_hotpath_groups_libraries_by_layer():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hotpath", HOTPATH)
    assert spec is not None and spec.loader is not None
    hotpath = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hotpath)
    cases = {"[kernel.kallsyms]": "kernel", "[vdso]": "kernel",
             "libc.so.6": "C runtime", "libstdc++.so.6.0.30": "C runtime",
             "ld-linux-x86-64.so.2": "C runtime",
             "libtritonserver-717102f0.so": "core", "libtriton_identity.so": "core",
             "libpython3.11.so.1.0": "interpreter",
             "_multiarray_umath.cpython-311-x86_64-linux-gnu.so": "interpreter",
             "/x/tritonserver/_c/triton_bindings.cpython-311-x86_64-linux-gnu.so": "binding",
             "c_api_bench": "driver", "libcrypto.so.3": "other"}
    for dso, group in cases.items():
        assert hotpath.group_of(dso) == group, dso


@pytest.mark.parametrize("options", [["--pin", "x"], ["--pin", "999999"], ["--pin", ""],
                                     ["--seconds", "0"], ["--seconds", "-1"],
                                     ["--seconds", "nan"]])
def test_hotpath_refuses_bad_options_before_running_anything(options, tmp_path):
    proc = subprocess.run([sys.executable, HOTPATH, *options, "--json", str(tmp_path / "h.json")],
                          cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "hotpath.py: error: --" in proc.stderr
    assert not (tmp_path / "h.json").exists()
