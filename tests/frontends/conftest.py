"""Fixtures of the frontend tests: one in-process server per module (the
example models, tests/frontends/models and a model.py of tests/models run
in-process), served by HTTP, gRPC and metrics frontends on free ports of
127.0.0.1."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

import tritonserver
from conftest import copy_in_process, stop_within
from frontends import support

pytest.importorskip("tritonclient.http")
pytest.importorskip("tritonclient.grpc")

from tritonserver.frontends import KServeGrpc, KServeHttp, Metrics  # noqa: E402

EXAMPLES = ["accumulate_int64", "add_sub_fp32", "add_sub_int32", "identity_batched",
            "identity_bytes", "identity_fp32", "repeat_int32", "sleep_us"]
# python_echo_params (tests/models) answers with the parameters it saw; it runs
# in this process (backend "inprocess"), so the frontends need no python backend.
STARTUP = EXAMPLES + ["identity_mixed", "python_echo_params"]


@functools.lru_cache(maxsize=None)
def echo_repository() -> str:
    folder = tempfile.mkdtemp(prefix="tritonserver-frontends-")
    atexit.register(shutil.rmtree, folder, True)
    return copy_in_process(folder, ["python_echo_params"])


def start_test_server(**options: Any) -> tritonserver.Server:
    options.setdefault("model_repository",
                       [tritonserver.example_model_repository(), support.MODELS,
                        echo_repository()])
    options.setdefault("model_control_mode", tritonserver.ModelControlMode.EXPLICIT)
    options.setdefault("startup_models", list(STARTUP))
    options.setdefault("log_error", True)
    options.setdefault("exit_timeout", 10)
    return tritonserver.Server(**options).start(wait_until_ready=True, timeout=120)


@dataclass
class Endpoints:
    server: tritonserver.Server
    http: KServeHttp
    grpc: KServeGrpc
    metrics: Metrics

    @property
    def http_url(self) -> str:
        return self.http.url

    @property
    def grpc_url(self) -> str:
        return self.grpc.url


@pytest.fixture(scope="module")
def frontend_server() -> Iterator[tritonserver.Server]:
    server = start_test_server()
    yield server
    stop_within(server)


@pytest.fixture(scope="module")
def endpoints(frontend_server: tritonserver.Server) -> Iterator[Endpoints]:
    http = KServeHttp(frontend_server, KServeHttp.Options(port=0)).start()
    grpc = KServeGrpc(frontend_server, KServeGrpc.Options(port=0)).start()
    metrics = Metrics(frontend_server, Metrics.Options(port=0)).start()
    try:
        yield Endpoints(frontend_server, http, grpc, metrics)
    finally:
        for frontend in (http, grpc, metrics):
            frontend.stop(timeout=5)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    if not support.FIGURES:
        return
    terminalreporter.section("frontend figures")
    for case, figure in support.FIGURES:
        terminalreporter.write_line(f"{case}: {figure}")


__all__ = ["Endpoints", "start_test_server"]
