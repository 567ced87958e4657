"""Memory safety of the binding: the reliability suite again, with the
binding and our backends built under AddressSanitizer (tests/reliability/
asan.sh, CMake preset "asan"), and no sanitizer report allowed. Part of the
default run (CI included): the build takes about 2 minutes on 2 cores and
the bounded suite about 3 more. TRITONSERVER_SKIP_ASAN=1 skips it.

valgrind is not run here (minutes per scenario): see docs/reliability.md
for tests/reliability/valgrind.sh."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from reliability.support import record

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.sanitizer
@pytest.mark.timeout(1800)
def test_reliability_suite_under_asan():
    if os.environ.get("TRITONSERVER_SKIP_ASAN", "") not in ("", "0"):
        pytest.skip("TRITONSERVER_SKIP_ASAN is set")
    if os.environ.get("TRITONSERVER_UNDER_ASAN"):
        pytest.skip("already running under ASan")
    for tool in ("cmake", "ninja", "gcc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    pytest.importorskip("pybind11", reason="building the binding needs pybind11 (test extra)")
    if not os.path.exists(subprocess.run(["gcc", "-print-file-name=libasan.so"],
                                         capture_output=True, text=True).stdout.strip()):
        pytest.skip("gcc has no AddressSanitizer runtime here")
    prefix = tempfile.mkdtemp(prefix="tritonserver-asan-")
    # PYTHON: this interpreter (servers started earlier put the python
    # backend stub's environment first on PATH).
    env = dict(os.environ, ASAN_PREFIX=prefix, TRITONSERVER_UNDER_ASAN="1", PYTHON=sys.executable)
    try:
        result = subprocess.run(
            [os.path.join(HERE, "asan.sh"), HERE, "-q", "-m", "not sanitizer and not stress",
             "-p", "no:randomly"],
            env=env, capture_output=True, text=True, timeout=1700)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
    log = result.stdout + result.stderr
    reports = re.search(r"asan: (\d+) sanitizer report", log)
    summary = re.search(r"(\d+) passed[^\n]*", log)
    assert reports is not None, log[-4000:]
    assert result.returncode == 0, log[-6000:]
    record("memory safety: reliability suite under ASan",
           f"{summary.group(0) if summary else '?'}; {reports.group(1)} sanitizer reports")
