"""Shared fixtures: real servers on real repositories, stopped with a bound.

Every test that needs a server gets one started on the package's example
repository (our C++ backends) plus tests/models (python-backend models).
Stopping is bounded: a server that does not stop within STOP_TIMEOUT fails
the test instead of hanging the run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
from typing import Optional

import pytest

import tritonserver

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
TEST_MODELS = os.path.join(TESTS_DIR, "models")
BROKEN_MODELS = os.path.join(TESTS_DIR, "broken_models")
STOP_TIMEOUT = 60.0


def pytest_addoption(parser):
    parser.addoption("--soak", action="store_true", default=False,
                     help="run the reliability suite's long mode (tests/reliability; "
                          "also TRITONSERVER_SOAK=1)")


def stop_within(server: tritonserver.Server, timeout: float = STOP_TIMEOUT) -> None:
    """Stop `server` on a helper thread; fail if it takes longer than `timeout`."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            server.stop()
        except BaseException as e:  # reported below
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        pytest.fail(f"server.stop() did not return within {timeout} s")
    if errors:
        raise errors[0]


def stats_when(model: tritonserver.Model, done, timeout: float = 10.0) -> dict:
    """The model's statistics once done(stats) holds (bounded): a backend
    reports a request's statistics just after its final response is sent,
    so a read made the instant a response arrives may be a moment early."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        stats = model.statistics()["model_stats"][0]
        if done(stats) or time.monotonic() > deadline:
            return stats
        time.sleep(0.01)


def run_python(code: str, env: Optional[dict] = None,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """`code` (dedented) in a fresh interpreter of this Python; its output captured."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=timeout)


def start_server(**options) -> tritonserver.Server:
    options.setdefault("log_error", True)
    options.setdefault("exit_timeout", 10)
    return tritonserver.Server(**options).start(wait_until_ready=True, timeout=60)


@pytest.fixture(scope="session")
def example_repo() -> str:
    return tritonserver.example_model_repository()


@pytest.fixture(scope="module")
def server(example_repo):
    """A server on the example models (C++ backends only)."""
    s = start_server(model_repository=example_repo)
    yield s
    stop_within(s)


@pytest.fixture(scope="module")
def python_server():
    """A server on the python-backend test models."""
    s = start_server(model_repository=TEST_MODELS)
    yield s
    stop_within(s)


@pytest.fixture
def explicit_server(example_repo, tmp_path):
    """An EXPLICIT-mode server over a scratch copy of the broken models."""
    repo = tmp_path / "repo"
    shutil.copytree(BROKEN_MODELS, repo)
    shutil.copytree(os.path.join(example_repo, "identity_fp32"), repo / "identity_fp32")
    s = start_server(model_repository=str(repo),
                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    yield s
    stop_within(s)


@pytest.fixture(scope="module")
def explicit_empty(tmp_path_factory):
    """An EXPLICIT-mode server on an empty repository: tests register or load models."""
    repo = tmp_path_factory.mktemp("empty_repo")
    s = start_server(model_repository=str(repo),
                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    yield s
    stop_within(s)
