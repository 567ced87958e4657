"""The package is typed: the package itself passes mypy --strict, typed code
written against the reference type-checks with mypy --strict, and wrong code
does not. (The stubs of the compiled modules: tests/binding.)"""

from __future__ import annotations

import os
import site
import subprocess
import sys

import pytest

import tritonserver

pytest.importorskip("mypy")

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tritonserver.__file__)))


def run(*args: str, cwd: str = HERE) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=PACKAGE_PARENT)
    if PACKAGE_PARENT not in site.getsitepackages():
        # A source tree (PYTHONPATH): mypy finds it only through MYPYPATH,
        # which must never name site-packages (installed: found anyway).
        env["MYPYPATH"] = PACKAGE_PARENT
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def mypy(path: str) -> subprocess.CompletedProcess:
    return run("mypy", "--strict", "--follow-imports=silent", "--no-incremental", path)


def test_the_package_passes_mypy_strict():
    # By package name, not by folder: a folder inside site-packages would be
    # read as a top-level module shadowing the installed libraries.
    result = run("mypy", "--strict", "--no-incremental", "-p", "tritonserver")
    assert result.returncode == 0, result.stdout + result.stderr


def test_typed_usage_checks_clean():
    result = mypy("typing_usage.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_wrong_usage_is_caught(tmp_path):
    (tmp_path / "wrong.py").write_text(
        "import tritonserver\n"
        "server = tritonserver.Server(model_repository='/m')\n"
        "live: str = server.live()\n"
        "kind = tritonserver.MemoryType.NOT_A_MEMORY_TYPE\n"
        "model: tritonserver.Model = server.model(3)\n"
        "async def stream(m: tritonserver.Model) -> None:\n"
        "    async for r in m.async_infer(inputs={}):\n"
        "        final: str = r.final\n")
    result = mypy(str(tmp_path / "wrong.py"))
    assert result.returncode == 1
    assert 'Incompatible types in assignment (expression has type "bool"' in result.stdout
    assert "NOT_A_MEMORY_TYPE" in result.stdout
    assert 'incompatible type "int"; expected "str"' in result.stdout
    # An async iterator's responses are InferenceResponses to a type checker.
    assert result.stdout.count('(expression has type "bool", variable has type "str")') == 2
