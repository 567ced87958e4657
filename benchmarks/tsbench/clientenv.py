"""The private virtual environment of the tritonclient side (and, where the
machine has none, of the build tools).

tritonclient[http,grpc] pins packages a user's environment may hold at other
versions (ml-dtypes<=0.5.4, greenlet<3.4, protobuf 6.x, grpcio>=1.81 in
2.73), so it is never installed into the interpreter that runs the
benchmark: it goes into its own venv (benchmarks/.venv-client by default),
made once with `python -m venv` and `pip install` from PyPI, and reused
while its marker still matches. The client workers run with that venv's
interpreter; they need nothing of the tritonserver package.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Optional

from .procs import BenchError, note, run_logged

CLIENT_REQUIREMENTS = ("tritonclient[http,grpc]>=2.51,<3",)
BUILD_TOOL_REQUIREMENTS = ("cmake>=3.18", "ninja")
CLIENT_IMPORT_CHECK = ("import numpy, tritonclient.http, tritonclient.http.aio, "
                       "tritonclient.grpc, tritonclient.grpc.aio")
MARKER = "tsbench-venv.json"
VENV_TIMEOUT_S = 300
PIP_TIMEOUT_S = 900


def _bin(venv: str, name: str) -> str:
    return os.path.join(venv, "bin", name)


@contextlib.contextmanager
def _locked(venv: str):
    """One run at a time creates or changes the venv."""
    os.makedirs(os.path.dirname(os.path.abspath(venv)), exist_ok=True)
    with open(os.path.abspath(venv) + ".lock", "w") as f:
        deadline = time.monotonic() + PIP_TIMEOUT_S + VENV_TIMEOUT_S
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise BenchError(f"{venv} stayed locked by another run") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _read_marker(venv: str) -> dict:
    try:
        with open(os.path.join(venv, MARKER), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _write_marker(venv: str, marker: dict) -> None:
    with open(os.path.join(venv, MARKER), "w", encoding="utf-8") as f:
        json.dump(marker, f, indent=1)


def _base_identity() -> dict:
    return {"base_python": os.path.realpath(sys.executable),
            "base_version": sys.version.split()[0]}


def _create(venv: str, log_path: str) -> None:
    if os.path.exists(venv):
        # Only ever remove a venv this module made (it has our marker).
        if os.listdir(venv) and not os.path.isfile(os.path.join(venv, MARKER)):
            raise BenchError(f"{venv} exists and was not made by benchmarks/run.py: give "
                             "another --venv, or --client-python for an interpreter that "
                             "already has tritonclient")
        shutil.rmtree(venv)
    note(f"creating the private venv {venv} ...")
    run_logged([sys.executable, "-m", "venv", venv], log_path, VENV_TIMEOUT_S,
               "creating the client venv")
    _write_marker(venv, {**_base_identity(), "installed": []})


def _pip_install(venv: str, requirements: tuple, log_path: str) -> None:
    note(f"installing {' '.join(requirements)} into {venv} (from PyPI) ...")
    run_logged([_bin(venv, "python"), "-m", "pip", "install", "--disable-pip-version-check",
                "--no-input", *requirements], log_path, PIP_TIMEOUT_S,
               f"pip install {' '.join(requirements)} into {venv}")


def _usable(venv: str) -> bool:
    marker = _read_marker(venv)
    return (os.path.isfile(_bin(venv, "python")) and
            all(marker.get(k) == v for k, v in _base_identity().items()))


def ensure_venv(venv: str, requirements: tuple, log_path: str) -> str:
    """The venv's interpreter, with `requirements` installed (once)."""
    venv = os.path.abspath(venv)
    with _locked(venv):
        if not _usable(venv):
            _create(venv, log_path)
        marker = _read_marker(venv)
        missing = tuple(r for r in requirements if r not in marker.get("installed", []))
        if missing:
            _pip_install(venv, missing, log_path)
            marker["installed"] = sorted(set(marker.get("installed", [])) | set(missing))
            _write_marker(venv, marker)
    return _bin(venv, "python")


def check_client_python(python: str, log_path: str) -> str:
    """tritonclient's version as seen by `python`; fails if it cannot import it."""
    out = run_logged([python, "-c", CLIENT_IMPORT_CHECK + "; from importlib import metadata; "
                      "print(metadata.version('tritonclient'))"],
                     log_path, 120, f"importing tritonclient with {python}")
    return out.strip().splitlines()[-1]


def client_python(venv: str, override: Optional[str], log_path: str) -> tuple:
    """(interpreter, tritonclient version) for the client workers."""
    python = override or ensure_venv(venv, CLIENT_REQUIREMENTS, log_path)
    return python, check_client_python(python, log_path)


def build_tool(name: str, venv: str, log_path: str) -> str:
    """`cmake` or `ninja`: from PATH, else installed into the private venv."""
    found = shutil.which(name)
    if found and _works(found):
        return found
    ensure_venv(venv, BUILD_TOOL_REQUIREMENTS, log_path)
    candidate = _bin(os.path.abspath(venv), name)
    if not os.path.isfile(candidate):
        raise BenchError(f"{name} was not found on PATH nor installed into {venv}")
    return candidate


def _works(tool: str) -> bool:
    try:
        return subprocess.run([tool, "--version"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
