"""nox sessions.

``nox -s release_check`` runs the release check (release/check.py) for every
CPython 3.9 or newer found on this machine, one after the other (each builds
the C++), and prints a table of Python version by result. ``nox -s
release_check -- PYTHON...`` checks the Pythons given instead.

Found: the ``python3.N`` commands on PATH and, when pyenv is installed, each
version under ``pyenv root``; one interpreter per minor version, pyenv's
first. What the check refuses is left out (free-threaded builds, PyPy...).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from typing import Dict, List

import nox

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "release"))
import check  # noqa: E402

nox.options.sessions = ["release_check"]


def _candidates() -> List[str]:
    found = []
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
        if root:
            found += sorted(glob.glob(os.path.join(root, "versions", "*", "bin", "python3")))
    found += [p for p in (shutil.which(f"python3.{minor}") for minor in range(9, 30)) if p]
    return found


def found_cpythons() -> List[str]:
    """One CPython executable per minor version (3.9 or newer), oldest first."""
    by_minor: Dict[str, str] = {}
    for candidate in _candidates():
        try:
            info = check.probe_python(candidate)
        except check.UsageError:
            continue  # not one we build for (too old, free-threaded, PyPy, a failing pyenv shim...)
        minor = ".".join(info["version"].split(".")[:2])
        by_minor.setdefault(minor, info["executable"])
    return [by_minor[m] for m in sorted(by_minor, key=lambda v: tuple(map(int, v.split("."))))]


def _row(report: Dict) -> str:
    if report.get("result") != "passed":
        error = report.get("error", "see the log above").splitlines()[0]
        return f"| {report.get('version', report['python'])} | {report['result']}: {error} | | | |"
    minutes = report["seconds"] / 60
    return (f"| {report['version']} | passed | {report['wheel']['name']} "
            f"({report['wheel']['bytes'] / 1024:.0f} KiB) | "
            f"{report['sdist']['bytes'] / 1024:.0f} KiB | {minutes:.1f} |")


@nox.session(venv_backend="none")  # the check makes its own virtual environments
def release_check(session: nox.Session) -> None:
    pythons = list(session.posargs) or found_cpythons()
    if not pythons:
        session.error("no CPython 3.9 or newer found")
    session.log("checking: " + ", ".join(pythons))
    reports = []
    for n, python in enumerate(pythons):
        path = os.path.join(session.create_tmp(), f"release-check-{n}.json")
        session.run(sys.executable, "release/check.py", "--python", python, "--report", path,
                    success_codes=[0, 1, 2])
        with open(path, encoding="utf-8") as f:
            reports.append(json.load(f))
    table = ["| Python | result | wheel (repaired, from the tree) | sdist | minutes |",
             "|---|---|---|---|---|"] + [_row(r) for r in reports]
    print("\n".join(table))
    failed = [r.get("version", r["python"]) for r in reports if r["result"] != "passed"]
    if failed:
        session.error("the release check failed for " + ", ".join(failed))
