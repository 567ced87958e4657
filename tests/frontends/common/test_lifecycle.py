"""Frontend lifecycles: several frontends on one server, options checked,
ports in use, stopping a frontend with requests in flight, requests after
``server.stop()`` (503 / UNAVAILABLE, never a crash), and the import without
the serve extra. (mypy --strict over the frontends: tests/api/test_typing.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest

import tritonserver
from conftest import stop_within
from frontends import support
from frontends.conftest import start_test_server

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tritonserver.frontends import KServeGrpc, KServeHttp, Metrics  # noqa: E402
from tritonserver.frontends.grpc.protos import messages  # noqa: E402

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tritonserver.__file__)))


def infer_body(delay_us: int = 0) -> tuple[str, bytes]:
    if delay_us:
        return "/v2/models/sleep_us/infer", json.dumps({"inputs": [
            {"name": "DELAY_US", "datatype": "INT64", "shape": [1], "data": [delay_us]}]}).encode()
    return "/v2/models/identity_fp32/infer", json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1, 2]}]}).encode()


def test_several_frontends_on_one_server(endpoints):
    with KServeHttp(endpoints.server, KServeHttp.Options(port=0)) as second, \
            KServeGrpc(endpoints.server, KServeGrpc.Options(port=0)) as third:
        for port in (endpoints.http.port, second.port):
            path, body = infer_body()
            status, _, data = support.request(port, "POST", path, body)
            assert status == 200 and json.loads(data)["outputs"][0]["data"] == [1.0, 2.0]
        for url in (endpoints.grpc_url, third.url):
            c = grpcclient.InferenceServerClient(url)
            try:
                assert c.is_model_ready("identity_fp32")
            finally:
                c.close()
    assert not second.running and not third.running
    # Stopping twice is harmless; the module's frontends still serve.
    second.stop()
    status, _, _ = support.request(endpoints.http.port, "GET", "/v2/health/ready")
    assert status == 200


def test_options_are_checked(endpoints):
    server = endpoints.server
    bad = [
        lambda: KServeHttp(server, KServeHttp.Options(port=70000)),
        lambda: KServeHttp(server, KServeHttp.Options(port="8000")),  # type: ignore[arg-type]
        lambda: KServeHttp(server, KServeHttp.Options(address="")),
        lambda: KServeHttp(server, KServeHttp.Options(thread_count=0)),
        lambda: KServeHttp(server, KServeHttp.Options(max_input_size=0)),
        lambda: KServeHttp(server, KServeHttp.Options(header_forward_pattern="(")),
        lambda: KServeHttp(server, KServeGrpc.Options()),  # type: ignore[arg-type]
        lambda: KServeHttp("not a server", None),  # type: ignore[arg-type]
        lambda: KServeGrpc(server, KServeGrpc.Options(keepalive_time_ms=-1)),
        lambda: KServeGrpc(server, KServeGrpc.Options(use_mutual_auth=True)),
        lambda: KServeGrpc(server, KServeGrpc.Options(reuse_port="yes")),  # type: ignore
        lambda: Metrics(server, Metrics.Options(port=-1)),
    ]
    for make in bad:
        with pytest.raises(tritonserver.InvalidArgumentError):
            make()


def test_port_in_use_and_server_not_started(endpoints):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        for frontend in (KServeHttp(endpoints.server, KServeHttp.Options(port=port)),
                         KServeGrpc(endpoints.server, KServeGrpc.Options(port=port)),
                         Metrics(endpoints.server, Metrics.Options(port=port))):
            with pytest.raises(tritonserver.UnavailableError):
                frontend.start()
            assert not frontend.running
    idle = tritonserver.Server(model_repository=tritonserver.example_model_repository())
    with pytest.raises(tritonserver.InvalidArgumentError):
        KServeHttp(idle, KServeHttp.Options(port=0)).start()


def test_stopping_a_frontend_ends_requests_in_flight(endpoints):
    """Requests still running when a frontend stops end within the timeout,
    with a result or an error, never hanging."""
    frontend = KServeHttp(endpoints.server, KServeHttp.Options(port=0)).start()
    outcomes: list = []

    def slow_call(delay_us: int) -> None:
        path, body = infer_body(delay_us)
        try:
            status, _, data = support.request(frontend.port, "POST", path, body, timeout=30)
            outcomes.append(status)
        except (OSError, Exception) as e:  # the connection closed under it
            outcomes.append(type(e).__name__)

    threads = [threading.Thread(target=slow_call, args=(d,)) for d in (100_000, 20_000_000)]
    for t in threads:
        t.start()
    # The short request is answered while the long one (sent with it) is running.
    support.wait_until(lambda: 200 in outcomes, what="the short request's answer")
    time.sleep(0.2)
    start = time.monotonic()
    frontend.stop(timeout=1)
    elapsed = time.monotonic() - start
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    assert elapsed < 15, elapsed
    assert outcomes and 200 in outcomes  # the short one finished
    assert len(outcomes) == 2 and all(o == 200 or isinstance(o, str) or o >= 500
                                      for o in outcomes), outcomes
    # The long request was cancelled in the core, not left running.
    support.wait_until(
        lambda: endpoints.server.model("sleep_us").statistics()["model_stats"][0]
        ["inference_stats"]["fail"]["count"] + endpoints.server.model("sleep_us")
        .statistics()["model_stats"][0]["inference_stats"]["success"]["count"] >= 2,
        timeout=30, what="the long request to end")


def test_stopping_a_grpc_frontend_with_a_stream_open(endpoints):
    frontend = KServeGrpc(endpoints.server, KServeGrpc.Options(port=0)).start()
    m = messages()
    errors: list = []

    def stream() -> None:
        with grpc.insecure_channel(frontend.url) as channel:
            call = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer")
            request = m.ModelInferRequest(model_name="sleep_us")
            request.inputs.add(name="DELAY_US", datatype="INT64", shape=[1])
            request.raw_input_contents.append(np.array([20_000_000], np.int64).tobytes())

            def requests():
                yield request.SerializeToString()
                time.sleep(60)  # keeps the stream open

            try:
                for _ in call(requests(), timeout=60):
                    pass
            except grpc.RpcError as e:
                errors.append(e.code())

    t = threading.Thread(target=stream, daemon=True)
    t.start()
    time.sleep(1.0)
    start = time.monotonic()
    frontend.stop(timeout=1)
    t.join(30)
    assert not t.is_alive() and errors, errors
    assert time.monotonic() - start < 15


def test_requests_after_server_stop():
    """NVIDIA's frontend crashes here: ours answers 503 / UNAVAILABLE."""
    server = start_test_server(startup_models=["identity_fp32", "repeat_int32"])
    http = KServeHttp(server, KServeHttp.Options(port=0)).start()
    grpc_frontend = KServeGrpc(server, KServeGrpc.Options(port=0)).start()
    metrics = Metrics(server, Metrics.Options(port=0)).start()
    try:
        path, body = infer_body()
        assert support.request(http.port, "POST", path, body)[0] == 200
        stop_within(server)
        calls = [("POST", path, body), ("GET", "/v2", b""), ("GET", "/v2/health/live", b""),
                 ("GET", "/v2/models/identity_fp32", b""),
                 ("GET", "/v2/models/identity_fp32/config", b""),
                 ("GET", "/v2/models/stats", b""), ("POST", "/v2/repository/index", b""),
                 ("GET", "/v2/logging", b""),
                 ("POST", "/v2/models/repeat_int32/generate_stream", b'{"IN": [1]}')]
        for method, target, payload in calls:
            status, _, data = support.request(http.port, method, target, payload)
            assert status == 503, (target, status, data)
            assert "not running" in support.json_error(data)
        status, _, data = support.request(metrics.port, "GET", "/metrics")
        assert status == 503
        c = httpclient.InferenceServerClient(http.url)
        try:
            assert not c.is_server_live()
            inp = httpclient.InferInput("INPUT0", [1], "FP32")
            inp.set_data_from_numpy(np.zeros(1, np.float32))
            with pytest.raises(InferenceServerException) as e:
                c.infer("identity_fp32", [inp])
            assert e.value.status() == "503"
        finally:
            c.close()
        g = grpcclient.InferenceServerClient(grpc_frontend.url)
        try:
            assert not g.is_server_live() and not g.is_server_ready()
            inp = grpcclient.InferInput("INPUT0", [1], "FP32")
            inp.set_data_from_numpy(np.zeros(1, np.float32))
            for call in (lambda: g.infer("identity_fp32", [inp]), g.get_server_metadata,
                         lambda: g.get_model_config("identity_fp32"),
                         g.get_model_repository_index):
                with pytest.raises(InferenceServerException) as e:
                    call()
                assert str(e.value.status()) == "StatusCode.UNAVAILABLE", e.value

            async def stream() -> list:
                a = __import__("tritonclient.grpc.aio", fromlist=["x"])
                client = a.InferenceServerClient(grpc_frontend.url)
                try:
                    async def requests():
                        yield {"model_name": "identity_fp32", "inputs": [inp]}
                    return [err async for _, err in client.stream_infer(requests())]
                finally:
                    await client.close()

            stream_errors = asyncio.run(stream())
            assert len(stream_errors) == 1 and "not running" in str(stream_errors[0])
        finally:
            g.close()
    finally:
        for frontend in (http, grpc_frontend, metrics):
            frontend.stop(timeout=5)


def test_import_without_the_serve_extra():
    """``import tritonserver`` needs none of the extra; ``tritonserver.frontends``
    (and the serve command) say how to install it."""
    blocker = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('fastapi', 'httptools', 'grpc', 'grpc_tools'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n")
    code = blocker + (
        "import tritonserver\n"
        "try:\n"
        "    import tritonserver.frontends\n"
        "except ImportError as e:\n"
        "    print('ERROR:', e)\n"
        "from tritonserver.__main__ import main\n"
        "print('EXIT:', main(['serve', '--model-repository', '.']))\n")
    env = dict(os.environ, PYTHONPATH=PACKAGE_PARENT)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert 'pip install "tritonserver-embedded[serve]"' in done.stdout
    assert "EXIT: 1" in done.stdout
    assert 'pip install "tritonserver-embedded[serve]"' in done.stderr
