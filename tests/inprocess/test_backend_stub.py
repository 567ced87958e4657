"""The module the inprocess backend makes when it loads
(tritonserver._inprocess._backend) matches its stub (mypy stubtest, run in
a process whose server loaded an inprocess model)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import tritonserver

pytest.importorskip("mypy")

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tritonserver.__file__)))
ALLOWLIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stubtest_allowlist.txt")

PROGRAM = textwrap.dedent("""
    import sys
    import numpy as np
    import tritonserver
    from mypy import stubtest

    class Echo(tritonserver.PythonModel):
        def execute(self, requests):
            return [{"Y": r.inputs["X"]} for r in requests]

    server = tritonserver.Server()
    server.register_model("echo", Echo, inputs={"X": (np.float32, [-1])},
                          outputs={"Y": (np.float32, [-1])})
    with server:
        next(server.model("echo").infer(inputs={"X": np.ones(2, np.float32)}))
        assert "tritonserver._inprocess._backend" in sys.modules
        sys.exit(stubtest.test_stubs(stubtest.parse_options(
            ["tritonserver._inprocess._backend", "--allowlist", sys.argv[1]])))
""")


def test_backend_module_matches_its_stub():
    result = subprocess.run([sys.executable, "-c", PROGRAM, ALLOWLIST],
                            env=dict(os.environ, PYTHONPATH=PACKAGE_PARENT),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
