"""Build backend projects as a user would: CMake with the CMake package of the
tritonserver under test, found through ``python -m tritonserver --cmakedir``.

Each project is configured and built once per test session, into a temporary
folder removed at exit.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import tritonserver

_session_dir = tempfile.mkdtemp(prefix="tritonserver-test-backends-")
atexit.register(shutil.rmtree, _session_dir, True)


def _package_env() -> dict:
    """The environment of a child Python that imports the same tritonserver."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(tritonserver.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def cli(*args: str) -> str:
    """``python -m tritonserver ARGS`` of the package under test; its stdout."""
    out = subprocess.run([sys.executable, "-m", "tritonserver", *args], env=_package_env(),
                         cwd=_session_dir, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _run(cmd: list, what: str) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        pytest.fail(f"{what} failed ({' '.join(cmd)}):\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}")


@functools.lru_cache(maxsize=None)
def build_project(source_dir: str) -> str:
    """Configure and build the CMake project in ``source_dir``; returns its
    build folder (backends land in ``<build>/backends/<name>/``)."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed (pip install '.[test]' brings it)")
    build = os.path.join(_session_dir, os.path.basename(os.path.normpath(source_dir)))
    configure = [cmake, "-S", source_dir, "-B", build, f"-Dtritonserver_DIR={cli('--cmakedir')}"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    _run(configure, "configuring " + source_dir)
    _run([cmake, "--build", build, "--parallel", "2"], "building " + source_dir)
    return build
