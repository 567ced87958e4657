"""Shared fixtures: real servers on real repositories, stopped with a bound.

Every test that needs a server gets one started on the package's example
repository (our C++ backends) plus tests/models (python-backend models).
Stopping is bounded: a server that does not stop within STOP_TIMEOUT fails
the test instead of hanging the run.
"""

from __future__ import annotations

import functools
import os
import re
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
UNIT_DIR = os.path.join(TESTS_DIR, "unit")


def pytest_collection_modifyitems(config, items):
    """The two tiers: tests under tests/unit are marked ``unit`` (they need
    no core), every other test ``integration``; ``-m unit`` or ``-m
    integration`` picks one, ``python -m pytest tests`` runs both."""
    for item in items:
        path = os.path.abspath(str(item.path))
        inside = os.path.commonpath([path, UNIT_DIR]) == UNIT_DIR
        item.add_marker(pytest.mark.unit if inside else pytest.mark.integration)
        if item.get_closest_marker("gpu") is not None and not _gpu_seen():
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU (none is visible)"))


@functools.lru_cache(maxsize=None)
def _gpu_seen() -> bool:
    """Whether the process sees a GPU: its device files, then the CUDA runtime's count."""
    from tritonserver import _gpu

    if not _gpu.present():
        return False
    from tritonserver import _cuda

    return _cuda.device_count() > 0


# Forensics for crashes and hangs (tests/forensics.py): its hooks, run by this conftest.
from forensics import pytest_runtest_protocol, pytest_sessionstart  # noqa: E402,F401


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


def failure_output(out: subprocess.CompletedProcess, stdout_tail: int, stderr_tail: int) -> str:
    """What a failed child process printed last; if an interpreter in it died,
    faulthandler's dump too, from its first line (the tails may hold only its
    end, where the crashing thread and test are not named)."""
    text = (f"stdout (tail):\n{out.stdout[-stdout_tail:]}\n"
            f"stderr (tail):\n{out.stderr[-stderr_tail:]}")
    # The native report (tritonserver._crash_report) comes first, then faulthandler's.
    crash = [at for at in (out.stderr.find("tritonserver: fatal signal"),
                           out.stderr.find("Fatal Python error")) if at >= 0]
    if crash:
        text += f"\nstderr from the crash on:\n{out.stderr[min(crash):min(crash) + 60000]}"
    return text


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


def write_model(repo, name: str, config: str, files: dict[str, str]) -> None:
    """A model folder under ``repo``: its config.pbtxt and version 1's files
    (name: source), each text dedented."""
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(textwrap.dedent(config))
    for filename, source in files.items():
        (repo / name / "1" / filename).write_text(textwrap.dedent(source))


def copy_in_process(dest: str, names: Optional[list] = None) -> str:
    """Copies of tests/models' python-backend models (all, or `names`) in
    `dest`, each config rewritten to backend: "inprocess": the same model.py
    run in this process, where no stub and no numpy<2 is needed."""
    for name in names if names is not None else sorted(os.listdir(TEST_MODELS)):
        target = os.path.join(dest, name)
        shutil.copytree(os.path.join(TEST_MODELS, name), target,
                        ignore=shutil.ignore_patterns("__pycache__"))
        config = os.path.join(target, "config.pbtxt")
        with open(config, encoding="utf-8") as f:
            text, count = re.subn(r'backend:\s*"python"', 'backend: "inprocess"', f.read())
        assert count == 1, f"{config} names the python backend once"
        with open(config, "w", encoding="utf-8") as f:
            f.write(text)
    return dest


@functools.lru_cache(maxsize=None)
def python_backend_refusal() -> Optional[str]:
    """Why the package refuses python-backend models here (None: it runs
    them): e.g. on Python 3.13, where the stub's numpy<2 has no wheels."""
    from tritonserver._core import find_core, stub_environment

    stub = stub_environment(find_core())
    return None if stub.usable else stub.reason


def skip_without_python_backend() -> None:
    reason = python_backend_refusal()
    if reason is not None:
        pytest.skip(f"the python backend is refused here: {reason}")


@pytest.fixture(scope="module")
def python_server():
    """A server on the python-backend test models."""
    skip_without_python_backend()
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
