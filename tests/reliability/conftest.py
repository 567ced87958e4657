"""Fixtures of the reliability suite. Every test is marked `reliability`;
the bounded mode runs in CI, `pytest --soak` (or TRITONSERVER_SOAK=1) the
long one. Each test records its figure; the figures are printed together at
the end of the run, so they reach the CI log without -s."""

from __future__ import annotations

import os

import pytest

from reliability import support

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.fspath).startswith(HERE + os.sep):
            item.add_marker(pytest.mark.reliability)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not support.FIGURES:
        return
    mode = "soak" if support.soak_mode(config) else "bounded"
    terminalreporter.section(f"reliability figures ({mode} mode)")
    for case, figure in support.FIGURES:
        terminalreporter.write_line(f"{case}: {figure}")


@pytest.fixture(scope="session")
def soak(pytestconfig) -> bool:
    return support.soak_mode(pytestconfig)


@pytest.fixture(scope="session")
def fault_backends() -> str:
    """The folder of the fault-injecting test backends (faulty/, silent/),
    built once per session with the package's CMake config."""
    from backends.build import build_project

    return os.path.join(build_project(os.path.join(HERE, "fault_backends")), "backends")
