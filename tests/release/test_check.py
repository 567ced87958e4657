"""The release check (release/check.py) for this test run's Python: the wheel
and the sdist built, repaired and tested as a release would be."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import failure_output

CHECK = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "release", "check.py")


def run_check(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, CHECK, *args], capture_output=True, text=True,
                          timeout=timeout)


def test_a_missing_python_is_named(tmp_path):
    missing = str(tmp_path / "python3.99")
    out = run_check("--python", missing, timeout=60)
    assert out.returncode == 2
    assert f"no Python at {missing!r}" in out.stderr


@pytest.mark.slow
@pytest.mark.timeout(2400)  # two C++ builds, four environments, one run of the tests
def test_release_check_passes_for_this_python(tmp_path):
    report_path = tmp_path / "report.json"
    out = run_check("--python", sys.executable, "--report", str(report_path), timeout=2300)
    # separate tails: the inner pytest's failure summary ends stdout, and pip's warnings on
    # stderr must not push it out of the message
    log = failure_output(out, stdout_tail=6000, stderr_tail=2000)
    assert out.returncode == 0, log
    report = json.loads(report_path.read_text())
    assert report["result"] == "passed", log
    assert report["wheel"]["name"] == report["wheel_from_sdist"]["name"]
    assert "-manylinux_" in report["wheel"]["name"]
    # installed with [serve,ray] beside tritonclient[all]: the versions each gets alone
    assert set(report["wheel"]["beside_client"]) == {"tritonclient", "ray"}
