"""The Python environment that the python backend's stub process runs in.

Facts this is built on (Triton 2.51 stub):

* The stub embeds its own interpreter; ``PYTHONPATH`` is ignored. It finds its
  Python by searching ``PATH`` for ``python3`` (a venv is recognised through its
  ``pyvenv.cfg``) and needs ``libpython3.X.so`` from the interpreter's
  ``sysconfig`` LIBDIR on ``LD_LIBRARY_PATH``.
* Under numpy 2 the stub silently corrupts tensors (inputs arrive as zeros);
  numpy 1.26 is correct. So the stub must never see numpy 2.

At install time :func:`ensure_stub_env` makes ``<dest>/stub-env/py3.X``: a venv
of the running interpreter with ``numpy<2`` and a ``.pth`` file that appends the
user's site-packages (numpy resolves to 1.26 first, the user's other packages
stay importable from ``model.py``). At server start :func:`stub_environment`
decides which Python the stub gets. The stub environment is put on ``PATH``
through a folder that holds only a pass-through ``python3`` (:func:`lookup_dir`):
the stub takes the environment from the pyvenv.cfg above it, while the
process's own children that run ``python3`` get the one they would have got
without it.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from typing import Any, MutableMapping, Optional, Union

from . import locate
from .errors import INSTALL_COMMAND
from .locking import file_lock
from .locate import MARKER_NAME, PIP_LIBS_DIRNAME, CoreInstall, default_install_dir

STUB_ENV_DIRNAME = "stub-env"
READY_NAME = ".tritonserver-stub-env.json"
PTH_MODULE = "_tritonserver_user_site"
NUMPY_REQUIREMENT = "numpy<2"


def _say(quiet: bool, msg: str) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def stub_env_path(base: str, version: "tuple[int, int] | None" = None) -> str:
    major, minor = version or sys.version_info[:2]
    return os.path.join(base, STUB_ENV_DIRNAME, f"py{major}.{minor}")


def _install_base_of(core_root_or_dest: Union[str, os.PathLike[str], CoreInstall]) -> str:
    """The install destination for a dest folder, a core root inside it, or a CoreInstall."""
    if isinstance(core_root_or_dest, CoreInstall):
        return locate.install_base(core_root_or_dest)
    p = os.path.abspath(os.fspath(core_root_or_dest))
    if os.path.basename(p) == "tritonserver" and os.path.basename(os.path.dirname(p)) == "pytriton":
        return os.path.dirname(os.path.dirname(p))
    if os.path.basename(p) == PIP_LIBS_DIRNAME:
        return os.path.dirname(p)
    return p


def _venv_python(env: str) -> str:
    return os.path.join(env, "bin", "python3")


def _read_ready(env: str) -> Optional[dict[str, Any]]:
    try:
        with open(os.path.join(env, READY_NAME), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not os.path.exists(_venv_python(env)):
        return None
    return data


def _user_site_dirs() -> "list[str]":
    dirs = []
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # pragma: no cover - very old virtualenv's site.py
        pass
    if site.ENABLE_USER_SITE:
        user = site.getusersitepackages()
        if isinstance(user, str):
            dirs.append(user)
    out = []
    for d in dirs:
        d = os.path.abspath(d)
        if d not in out:
            out.append(d)
    return out


def _clean_env() -> "dict[str, str]":
    env = dict(os.environ)
    for k in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONNOUSERSITE",
              "PIP_USER", "PIP_TARGET", "PIP_PREFIX", "PIP_REQUIRE_VIRTUALENV"):
        env.pop(k, None)
    return env


def _run(cmd: "list[str]", **kw: Any) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=_clean_env(), **kw)


def ensure_stub_env(
    core_root_or_dest: Union[str, os.PathLike[str], CoreInstall],
    *,
    quiet: bool = True,
) -> Optional[str]:
    """Create (once) ``<dest>/stub-env/py3.X`` with numpy<2 for the running Python.

    Returns the venv folder, or None where numpy<2 has no wheel for this Python
    (3.13+) or it could not be installed; then no environment is left behind.
    """
    base = _install_base_of(core_root_or_dest)
    env = stub_env_path(base)
    if sys.version_info >= (3, 13):
        # numpy 1.x ships no wheels for 3.13+: no environment.
        shutil.rmtree(env, ignore_errors=True)
        _say(quiet, f"numpy<2 has no wheels for Python {sys.version_info[0]}.{sys.version_info[1]}: "
                    "no stub environment made; python backend models need Python 3.12 or older")
        return None
    if _read_ready(env) is not None:
        return env


    os.makedirs(os.path.dirname(env), exist_ok=True)
    with file_lock(os.path.join(os.path.dirname(env), ".lock")):
        if _read_ready(env) is not None:  # made by another process meanwhile
            return env
        shutil.rmtree(env, ignore_errors=True)
        _say(quiet, f"Creating the python backend stub environment in {env} (numpy<2)...")
        try:
            _create(env, quiet)
        except _StubEnvFailed as e:
            shutil.rmtree(env, ignore_errors=True)
            _say(quiet, f"warning: no stub environment: {e}")
            return None
    return env


class _StubEnvFailed(Exception):
    pass


def _create(env: str, quiet: bool) -> None:
    proc = _run([sys.executable, "-m", "venv", "--without-pip", env])
    if proc.returncode != 0:
        raise _StubEnvFailed(f"'python -m venv' failed:\n{proc.stdout[-2000:]}")
    py = _venv_python(env)
    proc = _run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    if proc.returncode != 0:
        raise _StubEnvFailed(f"new venv python does not run:\n{proc.stdout[-2000:]}")
    site_dir = proc.stdout.strip().splitlines()[-1]

    # The running interpreter's pip installs into the venv (same Python, same tags);
    # wheels only, so no compiler is ever needed.
    proc = _run([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                 "--only-binary=:all:", "--no-warn-script-location",
                 "--target", site_dir, NUMPY_REQUIREMENT])
    if proc.returncode != 0:
        raise _StubEnvFailed(f"pip could not install {NUMPY_REQUIREMENT!r}:\n{proc.stdout[-2000:]}")

    user_dirs = [d for d in _user_site_dirs() if os.path.abspath(d) != os.path.abspath(site_dir)]
    # A .pth line runs inside site.addpackage's scope, so keep the logic in a module.
    with open(os.path.join(site_dir, PTH_MODULE + ".py"), "w", encoding="utf-8") as f:
        f.write(
            '"""Added by tritonserver: the user\'s site-packages, after this environment\'s (numpy<2 first)."""\n'
            "import os\n"
            "import site\n\n"
            f"USER_SITE_DIRS = {user_dirs!r}\n\n"
            "for _p in USER_SITE_DIRS:\n"
            "    if os.path.isdir(_p):\n"
            "        site.addsitedir(_p)\n"
        )
    with open(os.path.join(site_dir, PTH_MODULE + ".pth"), "w", encoding="utf-8") as f:
        f.write(f"import {PTH_MODULE}\n")

    check = ("import json, sys, numpy; "
             "print(json.dumps({'numpy': numpy.__version__, 'path': sys.path}))")
    proc = _run([py, "-c", check])
    try:
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        seen = {}
    version = str(seen.get("numpy", ""))
    if proc.returncode != 0 or not version.startswith("1.") or "Error processing" in proc.stdout:
        raise _StubEnvFailed(f"numpy in the stub environment is {version!r}, not 1.x:\n{proc.stdout[-2000:]}")
    missing = [d for d in user_dirs if os.path.isdir(d) and d not in seen.get("path", [])]
    if missing:
        raise _StubEnvFailed(f"the stub environment does not see {missing}")

    ready = {
        "python": "%d.%d.%d" % sys.version_info[:3],
        "base_executable": getattr(sys, "_base_executable", sys.executable),
        "numpy_version": version,
        "user_site_dirs": user_dirs,
    }
    with open(os.path.join(env, READY_NAME), "w", encoding="utf-8") as f:
        json.dump(ready, f, indent=2)
        f.write("\n")
    _say(quiet, f"Stub environment ready: numpy {version}")


# --------------------------------------------------------------------------- #
# What the stub finds on PATH
# --------------------------------------------------------------------------- #

LOOKUP_DIRNAME = "stub-path"

# The stub never runs the python3 it finds: its embedded interpreter takes
# its prefix from the pyvenv.cfg beside that file's folder. The process's
# children do run it, and must get the python3 they would have got without
# this folder on PATH (their own virtual environment's, say), not the
# numpy<2 environment.
_PASS_THROUGH = """#!/bin/sh
# Made by tritonserver. This folder is first on PATH so that the python
# backend's stub, which looks up python3 on PATH without running it, takes
# the numpy<2 environment of the folder above (its pyvenv.cfg). Run, this
# script runs the python3 found on PATH after this folder. Shell builtins
# only: PATH may hold nothing else.
set -f
case $0 in */*) here=${0%/*} ;; *) here=. ;; esac
here=$(cd -- "$here" && pwd -P) || exit 127
rest=
IFS=:
for d in $PATH; do
    [ -n "$d" ] || continue
    [ "$(cd -- "$d" 2>/dev/null && pwd -P)" = "$here" ] && continue
    rest=${rest:+$rest:}$d
done
unset IFS
target=$(PATH=$rest command -v python3)
if [ -z "$target" ] || [ "$target" -ef "$here/python3" ]; then
    echo "python3: not found on PATH" >&2
    exit 127
fi
exec "$target" "$@"
"""


def lookup_dir(env: str) -> str:
    """The folder to put first on PATH for the stub of ``env``: one holding
    only a ``python3`` that passes through to the next python3 on PATH
    (made here when missing); ``env``'s bin folder where it cannot be made."""
    folder = os.path.join(env, LOOKUP_DIRNAME)
    script = os.path.join(folder, "python3")
    try:
        with open(script, encoding="utf-8") as f:
            if f.read() == _PASS_THROUGH:
                return folder
    except OSError:
        pass
    try:
        os.makedirs(folder, exist_ok=True)
        partial = f"{script}.{os.getpid()}.tmp"
        with open(partial, "w", encoding="utf-8") as f:
            f.write(_PASS_THROUGH)
        os.chmod(partial, 0o755)
        os.replace(partial, script)
    except OSError:
        return os.path.join(env, "bin")
    return folder


# --------------------------------------------------------------------------- #
# Choosing the stub's Python at server start
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class StubEnv:
    """Which Python the python backend stub will run, and how to make it find it."""

    usable: bool
    kind: Optional[str] = None  # "interpreter" | "stub-env"
    python: Optional[str] = None  # the python3 the stub will find first on PATH
    numpy_version: Optional[str] = None  # numpy the stub will import
    path_prepend: Optional[str] = None  # folder to put first on PATH
    ld_library_path_append: Optional[str] = None  # libpython's folder
    reason: Optional[str] = None  # why not usable, and what to do

    def changes(self, environ: "MutableMapping[str, str] | None" = None) -> "dict[str, str]":
        """The variables :meth:`apply` would set, with their new values."""
        environ = os.environ if environ is None else environ
        out: "dict[str, str]" = {}
        if not self.usable:
            return out
        if self.path_prepend:
            cur = environ.get("PATH")
            parts = (cur if cur is not None else os.defpath).split(os.pathsep)
            rest = [p for p in parts if p and os.path.normpath(p) != os.path.normpath(self.path_prepend)]
            new = os.pathsep.join([self.path_prepend] + rest)
            if new != cur:
                out["PATH"] = new
        if self.ld_library_path_append:
            cur = environ.get("LD_LIBRARY_PATH", "")
            parts = [p for p in cur.split(os.pathsep) if p]
            if os.path.normpath(self.ld_library_path_append) not in [os.path.normpath(p) for p in parts]:
                out["LD_LIBRARY_PATH"] = os.pathsep.join(parts + [self.ld_library_path_append])
        return out

    def apply(self, environ: "MutableMapping[str, str] | None" = None) -> None:
        """Set PATH / LD_LIBRARY_PATH in ``environ`` (default ``os.environ``); idempotent."""
        environ = os.environ if environ is None else environ
        for k, v in self.changes(environ).items():
            environ[k] = v


def _dist_version(name: str) -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _major(version: str) -> int:
    head = version.split(".", 1)[0]
    digits = "".join(c for c in head if c.isdigit())
    return int(digits) if digits else 0


def _libpython_dir() -> "tuple[Optional[str], bool]":
    """(LIBDIR to append to LD_LIBRARY_PATH or None, whether libpython3.X.so is findable at all)."""
    major, minor = sys.version_info[:2]
    soname = f"libpython{major}.{minor}.so.1.0"
    names = {soname, sysconfig.get_config_var("INSTSONAME") or soname, f"libpython{major}.{minor}.so"}
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir and any(os.path.isfile(os.path.join(libdir, n)) for n in names if n.endswith((".so", ".so.1.0"))):
        return libdir, True
    return None, ctypes.util.find_library(f"python{major}.{minor}") is not None


def _find_stub_env(core: CoreInstall) -> Optional[str]:
    candidates = []
    base = locate.install_base(core)
    if os.path.isfile(os.path.join(base, MARKER_NAME)):
        candidates.append(stub_env_path(base))
    candidates.append(stub_env_path(default_install_dir()))
    for env in candidates:
        if _read_ready(env) is not None:
            return env
    return None


def stub_environment(core: CoreInstall) -> StubEnv:
    """Decide which Python the python backend stub should use for ``core``."""
    ver = "%d.%d" % sys.version_info[:2]
    if not core.stub_path:
        where = core.root or core.libs_dir
        return StubEnv(False, reason=(
            f"the Triton core at {where} has no python backend stub for Python {ver}; python "
            "backend models cannot run with this interpreter (the pip core ships stubs for 3.8 to 3.13)"))
    if not core.python_backend_dir:
        return StubEnv(False, reason=f"the Triton core at {core.root or core.libs_dir} has no python backend")

    libdir, libpython_found = _libpython_dir()
    if not libpython_found:
        return StubEnv(False, reason=(
            f"the python backend stub needs libpython{ver}.so.1.0 but this Python "
            f"({sys.executable}) was built without a shared libpython; use a Python built with "
            "--enable-shared (python.org, distro, pyenv with PYTHON_CONFIGURE_OPTS=--enable-shared, conda)"))

    user_numpy = _dist_version("numpy")
    if user_numpy is not None and _major(user_numpy) < 2:
        exe = sys.executable
        bindir = os.path.dirname(exe) if exe else ""
        py3 = os.path.join(bindir, "python3")
        if exe and os.path.exists(py3) and os.path.realpath(py3) == os.path.realpath(exe):
            return StubEnv(True, kind="interpreter", python=py3, numpy_version=user_numpy,
                           path_prepend=bindir, ld_library_path_append=libdir)
        user_reason = (f"this interpreter ({exe}) has no 'python3' beside it, so the stub "
                       "(which looks up python3 on PATH) cannot be pointed at it")
    elif user_numpy is None:
        user_reason = "numpy is not installed in this environment"
    else:
        user_reason = (f"this environment has numpy {user_numpy}; the Triton 2.51 python backend stub "
                       "silently corrupts tensors under numpy 2")

    env = _find_stub_env(core)
    if env is not None:
        ready = _read_ready(env) or {}
        return StubEnv(True, kind="stub-env", python=_venv_python(env),
                       numpy_version=ready.get("numpy_version"),
                       path_prepend=lookup_dir(env), ld_library_path_append=libdir)

    if sys.version_info >= (3, 13):
        todo = "use Python 3.12 or older with numpy<2 (numpy<2 has no wheels for Python 3.13+)"
    else:
        todo = (f"run '{INSTALL_COMMAND}' (it makes a separate numpy<2 environment for the stub), "
                "or use numpy<2 in this environment")
    return StubEnv(False, reason=f"python backend models are disabled: {user_reason}. To enable them, {todo}.")
