"""The package on the oldest and the newest CPython it supports (3.9 and
3.13), beside the one running the tests: built from this tree into a fresh
virtual environment, the core installed, then the tests of the binding's
own CPython types and of the core threads' Python thread states run there.
These are the parts written against CPython's C API directly, where one
version's API differs from another's (Python 3.9 refused a single class as
PyType_FromSpecWithBases' bases, and the package did not import there).

An interpreter is looked for as python3.X on PATH, then among pyenv's
versions; TRITONSERVER_TEST_PYTHONS (paths, separated by os.pathsep)
replaces the search. A version not found is skipped."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from typing import Optional

import pytest
from conftest import failure_output

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERSIONS = ("3.9", "3.13")
# What the tests below import, beside the package and numpy (numpy<2 where
# the python-backend stub needs it is not asked for: no python-backend model runs).
TEST_PACKAGES = ("pytest>=7", "pytest-timeout>=2", "hypothesis>=6")
BUILD_PACKAGES = ("scikit-build-core>=1.0", "pybind11>=2.13", "grpcio-tools>=1.60", "cmake>=3.21",
                  "ninja")
TESTS = ("tests/api/test_fast_path.py", "tests/reliability/test_thread_states.py")


def works(python: str, version: str) -> bool:
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.strip() == version


def find_python(version: str) -> Optional[str]:
    listed = os.environ.get("TRITONSERVER_TEST_PYTHONS")
    if listed is not None:
        candidates = [p for p in listed.split(os.pathsep) if p]
    else:
        candidates = [shutil.which(f"python{version}") or ""]
        root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
        candidates += sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin",
                                                    f"python{version}")), reverse=True)
    return next((p for p in candidates if p and works(p, version)), None)


def run(command: list, env: dict, timeout: float, step: str) -> None:
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout,
                         cwd=ROOT)
    assert out.returncode == 0, f"{step} failed ({out.returncode}):\n" + failure_output(
        out, stdout_tail=4000, stderr_tail=4000)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("version", VERSIONS)
def test_the_c_api_parts_on_another_python(version, tmp_path):
    if sys.version_info[:2] == tuple(int(n) for n in version.split(".")):
        pytest.skip(f"Python {version} runs the whole suite")
    python = find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    venv = str(tmp_path / "venv")
    run([python, "-m", "venv", venv], dict(os.environ), 120, "making the virtual environment")
    env = dict(os.environ, VIRTUAL_ENV=venv,
               PATH=os.path.join(venv, "bin") + os.pathsep + os.environ.get("PATH", ""))
    env.pop("PYTHONPATH", None)
    venv_python = os.path.join(venv, "bin", "python")
    run([venv_python, "-m", "pip", "install", "-q", "--upgrade", "pip"], env, 300, "upgrading pip")
    run([venv_python, "-m", "pip", "install", "-q", *BUILD_PACKAGES, *TEST_PACKAGES, "numpy"], env,
        600, "installing the build and test requirements")
    # No build isolation: the requirements above are the build's, already there.
    run([venv_python, "-m", "pip", "install", "-q", "--no-build-isolation", "."], env, 900,
        f"building and installing the package for Python {version}")
    run([venv_python, "-m", "tritonserver", "install-core"], env, 300, "installing the core")
    run([venv_python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], env, 600,
        f"the tests on Python {version}")
