"""``python -m tritonserver serve`` as a subprocess on free ports: the
tritonserver executable's flags, tritonclient over HTTP and gRPC, metrics,
and a clean exit (0) on SIGTERM or SIGINT with requests in flight."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import tritonserver
from frontends import support
from frontends.serve_process import Serve

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402


def serve_flags(*extra: str) -> list[str]:
    return ["--model-repository", tritonserver.example_model_repository(),
            "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0",
            "--log-info", "false", "--exit-timeout-secs", "10", *extra]


def test_serve_answers_tritonclient_and_exits_cleanly_on_sigterm():
    serve = Serve(*serve_flags())
    try:
        serve.wait_ready()
        http_port = serve.ports["HTTPService"]
        grpc_port = serve.ports["GRPCInferenceService"]
        metrics_port = serve.ports["Metrics Service"]
        x = np.arange(8, dtype=np.float32)
        h = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
        g = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        try:
            assert h.is_server_ready() and g.is_server_ready()
            inp = httpclient.InferInput("INPUT0", [8], "FP32")
            inp.set_data_from_numpy(x)
            np.testing.assert_array_equal(h.infer("identity_fp32", [inp]).as_numpy("OUTPUT0"), x)
            inp = grpcclient.InferInput("INPUT0", [8], "FP32")
            inp.set_data_from_numpy(x)
            np.testing.assert_array_equal(g.infer("identity_fp32", [inp]).as_numpy("OUTPUT0"), x)
            assert {m["name"] for m in h.get_model_repository_index()} >= {"identity_fp32",
                                                                          "repeat_int32"}
        finally:
            h.close()
            g.close()
        status, _, body = support.request(metrics_port, "GET", "/metrics")
        assert status == 200 and b"nv_inference_count" in body
        # A request in flight when SIGTERM arrives is answered, then the process exits 0.
        answers: list = []

        def slow() -> None:
            body = json.dumps({"inputs": [{"name": "DELAY_US", "datatype": "INT64",
                                           "shape": [1], "data": [1_500_000]}]}).encode()
            answers.append(support.request(http_port, "POST", "/v2/models/sleep_us/infer",
                                           body, timeout=60))

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.5)
        start = time.monotonic()
        serve.process.send_signal(signal.SIGTERM)
        assert serve.wait() == 0, serve.output()
        assert time.monotonic() - start < 10 + 15
        t.join(30)
        assert answers and answers[0][0] == 200, answers
        assert json.loads(answers[0][2])["outputs"][0]["data"][0] >= 1_500_000
        assert "stopped in" in serve.output()
    finally:
        serve.end()


def test_serve_exits_0_on_sigterm_after_its_supervisor_stopped_reading():
    """A supervisor that reads serve's output until it is ready, then closes
    the pipe: every later line fails with EPIPE. Those lines are dropped;
    the stop stays clean (the signal handler's line raised BrokenPipeError
    into the main thread, and serve exited with status 1)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tritonserver", "serve", *serve_flags("--log-info", "true")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        assert process.stdout is not None
        seen = b""
        deadline = time.monotonic() + 120
        while b"tritonserver serve: ready" not in seen and time.monotonic() < deadline:
            chunk = process.stdout.read1(65536)
            if not chunk:
                break
            seen += chunk
        assert b"tritonserver serve: ready" in seen, seen[-3000:]
        process.stdout.close()  # nobody reads any more
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def test_serve_writes_whole_lines_when_unbuffered():
    """Under python -u (PYTHONUNBUFFERED), a print's text and its newline
    were two writes, and a line another thread wrote to the same stream fell
    between them. serve's streams write a line at a time (in-process models
    print while the core logs)."""
    code = textwrap.dedent("""
        import os, sys, threading
        from tritonserver._cli.serve import _whole_lines
        _whole_lines()
        def log():
            for _ in range(20000):
                os.write(1, b"a line of the core's log\\n")
        t = threading.Thread(target=log)
        t.start()
        for _ in range(20000):
            print("Finalize complete...")
        t.join()
    """)
    out = subprocess.run([sys.executable, "-u", "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines.count("Finalize complete...") == 20000
    assert lines.count("a line of the core's log") == 20000


def test_serve_explicit_mode_sigint_and_flags():
    serve = Serve(*serve_flags("--model-control-mode=explicit", "--load-model=identity_bytes",
                               "--allow-grpc=false", "--allow-metrics", "false",
                               "--strict-model-config=true",
                               "--http-restricted-api=model-repository:admin=yes"))
    try:
        serve.wait_ready()
        assert set(serve.ports) == {"HTTPService"}
        port = serve.ports["HTTPService"]
        status, _, _ = support.request(port, "GET", "/v2/models/identity_bytes/ready")
        assert status == 200
        status, _, _ = support.request(port, "GET", "/v2/models/identity_fp32/ready")
        assert status == 400  # not loaded in explicit mode
        status, _, _ = support.request(port, "POST", "/v2/repository/models/identity_fp32/load")
        assert status == 403
        status, _, _ = support.request(port, "POST", "/v2/repository/models/identity_fp32/load",
                                       headers={"admin": "yes"})
        assert status == 200
        status, _, _ = support.request(port, "GET", "/v2/models/identity_fp32/ready")
        assert status == 200
        serve.process.send_signal(signal.SIGINT)
        assert serve.wait() == 0, serve.output()
    finally:
        serve.end()


@pytest.mark.parametrize("flags, code, message", [
    (["--model-control-mode=bogus"], 2, "invalid choice"),
    (["--http-port", "70000"], 2, "port"),
    (["--no-such-flag"], 2, "unrecognized"),
    (["--load-model", "identity_fp32"], 2, "explicit"),
])
def test_serve_refuses_bad_flags(flags, code, message):
    serve = Serve(*serve_flags(*flags))
    try:
        assert serve.wait() == code, serve.output()
        assert message in serve.output()
    finally:
        serve.end()


def test_serve_fails_cleanly_on_a_port_in_use():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        serve = Serve(*serve_flags("--http-port", str(taken.getsockname()[1])))
        try:
            assert serve.wait() == 1, serve.output()
            assert "cannot listen" in serve.output()
        finally:
            serve.end()


def test_script_entry_point_help():
    script = shutil.which("tritonserver-py")
    if script is None:
        pytest.skip("the tritonserver-py script is not on PATH (package not installed)")
    done = subprocess.run([script, "serve", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0
    for flag in ("--model-repository", "--model-control-mode", "--load-model",
                 "--strict-model-config", "--backend-directory", "--http-port", "--grpc-port",
                 "--metrics-port", "--http-address", "--grpc-address", "--allow-http",
                 "--allow-grpc", "--allow-metrics", "--log-verbose", "--exit-timeout-secs"):
        assert flag in done.stdout, flag


def _imported_modules(path: str) -> set:
    import ast

    tree = ast.parse(open(path).read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_local_and_ray_runners_share_the_flags_module_not_each_other():
    import os

    package = os.path.dirname(tritonserver.__file__)
    local = _imported_modules(os.path.join(package, "_cli", "serve_local.py"))
    ray = _imported_modules(os.path.join(package, "ray", "_command.py"))
    assert not any(m.startswith("tritonserver.ray") for m in local), local
    assert "tritonserver._cli.serve_local" not in ray, ray
    assert "tritonserver._cli.serve_flags" in local and "tritonserver._cli.serve_flags" in ray


def test_serve_says_which_models_failed_when_live_but_not_ready(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(tritonserver.example_model_repository() + "/identity_fp32",
                    repo / "identity_fp32")
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "config.pbtxt").write_text('backend: "no_such_backend"\n')
    # A long metrics interval: the core's metrics thread, joined at exit,
    # would hold the process up to 10 s after the "stopped in" line.
    serve = Serve("--model-repository", str(repo), "--http-port", "0", "--grpc-port", "0",
                  "--metrics-port", "0", "--log-info", "false", "--exit-on-error=false",
                  "--metrics-interval-ms", "20000")
    try:
        serve.wait_ready()
        # The lines after the first of the message may still be on their way
        # (the core's own log names the reason too: wait for serve's line).
        support.wait_until(lambda: "failed to load:\n  'broken': " in serve.output(),
                           what="the failed model's reason")
        out = serve.output()
        assert "tritonserver serve: ready" not in out
        assert "tritonserver serve: live but not ready (/v2/health/ready answers 400): models " \
               "failed to load:\n  'broken': " in out
        assert "unable to find backend library for backend 'no_such_backend'" in out
        port = serve.ports["HTTPService"]
        assert support.request(port, "GET", "/v2/health/live")[0] == 200
        assert support.request(port, "GET", "/v2/health/ready")[0] == 400
        serve.process.send_signal(signal.SIGINT)
        stopped_at = None
        while serve.process.poll() is None and stopped_at is None:
            if any("tritonserver serve: stopped in" in line for line in serve.lines):
                stopped_at = time.monotonic()
            time.sleep(0.01)
        assert serve.wait() == 0, serve.output()
        # The figure printed is the end: no wait of the core's comes after it.
        assert stopped_at is None or time.monotonic() - stopped_at < 5, serve.output()
        assert "tritonserver serve: stopped in" in serve.output()
    finally:
        serve.end()
