"""``python -m tritonserver``: its help names every command, and a core that
cannot be found is one line, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-m", "tritonserver", *args], capture_output=True,
                          text=True, env=environ, timeout=120)


def test_help_lists_every_command():
    out = _run("--help")
    assert out.returncode == 0, out.stderr
    for command in ("install-core", "core-info", "serve", "demo"):
        assert f"    {command}" in out.stdout, out.stdout


def test_demo_with_a_wrong_core_prints_one_line_and_fails():
    out = _run("demo", TRITONSERVER_CORE="/nonexistent/libtritonserver.so")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("tritonserver demo: $TRITONSERVER_CORE=")
    assert "python -m tritonserver install-core" in lines[0]


def test_serve_with_a_wrong_core_prints_one_line_and_fails(tmp_path):
    out = _run("serve", "--model-repository", str(tmp_path), "--http-port", "0",
               "--grpc-port", "0", "--metrics-port", "0",
               TRITONSERVER_CORE="/nonexistent/libtritonserver.so")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert "$TRITONSERVER_CORE='/nonexistent/libtritonserver.so' does not name a Triton core" \
        in out.stderr
