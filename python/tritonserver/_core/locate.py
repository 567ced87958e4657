"""Finding a Triton Inference Server core (``libtritonserver``) on this machine.

Search order (first hit wins):

1. ``$TRITONSERVER_CORE``: the library file, a folder holding it, or an install
   root laid out like our install destination or like ``/opt/tritonserver``.
   When set, it must point at a core: a wrong value is an error, not a reason
   to silently pick another core.
2. A core installed from pip: first our own install destination
   (``<sys.prefix>/share/tritonserver/core``, filled by
   ``python -m tritonserver install-core``); in a virtual environment made
   with ``--system-site-packages``, the same place under the base Python's
   prefix (the environment it inherits packages from, this one included);
   then any ``nvidia_pytriton.libs`` folder in a ``sys.path`` entry
   (``pip install --no-deps nvidia-pytriton``).
3. NVIDIA's container: ``/opt/tritonserver/lib/libtritonserver.so``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Optional, Sequence, cast

from .errors import INSTALL_COMMAND, CoreNotFoundError

ENV_CORE = "TRITONSERVER_CORE"
CONTAINER_ROOT = "/opt/tritonserver"
PIP_LIBS_DIRNAME = "nvidia_pytriton.libs"
PIP_ROOT_RELPATH = os.path.join("pytriton", "tritonserver")
MARKER_NAME = "tritonserver-core.json"
STUB_NAME = "triton_python_backend_stub"
PYTHON_BACKEND_LIB = "libtriton_python.so"
PYTHON_BACKEND_UTILS = "triton_python_backend_utils.py"

# nvidia-pytriton release -> Triton core it ships.
PYTRITON_TO_TRITON = {"0.7.0": "2.51.0"}

_LIB_RE = re.compile(r"^libtritonserver(-[0-9A-Za-z]+)?\.so(\.[0-9]+)*$")


@dataclass(frozen=True)
class CoreInstall:
    """Where the pieces of one Triton core live (all absolute paths)."""

    library: str
    libs_dir: str
    root: Optional[str]
    python_backend_dir: Optional[str]
    stub_path: Optional[str]
    cache_dir: Optional[str]
    executable: Optional[str]
    source: str  # "env" | "pip" | "container"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_install_dir() -> str:
    """Our per-environment install destination for the core."""
    return os.path.join(sys.prefix, "share", "tritonserver", "core")


def inherited_install_dir(path: Optional[Sequence[str]] = None) -> Optional[str]:
    """The base Python's install destination, when this is a virtual
    environment that sees the base's site-packages (``--system-site-packages``):
    a package installed there, with its core, is this environment's too."""
    if sys.base_prefix == sys.prefix:
        return None
    base = os.path.abspath(sys.base_prefix) + os.sep
    for entry in (sys.path if path is None else path):
        if (isinstance(entry, str) and os.path.abspath(entry).startswith(base)
                and os.path.basename(entry.rstrip(os.sep)) in ("site-packages", "dist-packages")):
            return os.path.join(sys.base_prefix, "share", "tritonserver", "core")
    return None


# --------------------------------------------------------------------------- #
# Inspecting one candidate location
# --------------------------------------------------------------------------- #


def _find_library_in(folder: str) -> Optional[str]:
    """The ``libtritonserver*.so`` file directly inside ``folder``, if any."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    hits = sorted(n for n in names if _LIB_RE.match(n) and os.path.isfile(os.path.join(folder, n)))
    if not hits:
        return None
    # Prefer the plain SONAME (container), then the shortest name.
    hits.sort(key=lambda n: (n != "libtritonserver.so", len(n), n))
    return os.path.join(folder, hits[0])


def _stub_matches_python(stub: str, version: "tuple[int, int]") -> bool:
    """Whether a stub binary (not in a per-version folder) was built for ``version``.

    The stub links ``libpython3.X.so``; look for that name in the binary. A stub
    naming no libpython at all (static build) is given the benefit of the doubt.
    """
    try:
        with open(stub, "rb") as f:
            data = f.read()
    except OSError:
        return False
    wanted = b"libpython%d.%d" % version
    if wanted in data:
        return True
    return re.search(rb"libpython3\.[0-9]+", data) is None


def _fill_from_root(root: Optional[str]) -> dict[str, Optional[str]]:
    """python backend, stub, caches and executable found under ``root``."""
    out: dict[str, Optional[str]] = dict(python_backend_dir=None, stub_path=None, cache_dir=None,
                                         executable=None)
    if not root:
        return out
    ver = sys.version_info[:2]
    pb = os.path.join(root, "backends", "python")
    if os.path.isfile(os.path.join(pb, PYTHON_BACKEND_LIB)) and os.path.isfile(
        os.path.join(pb, PYTHON_BACKEND_UTILS)
    ):
        out["python_backend_dir"] = pb
    # pip wheel layout: one stub per Python version.
    stub = os.path.join(root, "python_backend_stubs", "%d.%d" % ver, STUB_NAME)
    if os.path.isfile(stub) and os.access(stub, os.X_OK):
        out["stub_path"] = stub
    else:
        # container layout: a single stub beside libtriton_python.so.
        stub = os.path.join(pb, STUB_NAME)
        if os.path.isfile(stub) and os.access(stub, os.X_OK) and _stub_matches_python(stub, ver):
            out["stub_path"] = stub
    caches = os.path.join(root, "caches")
    if os.path.isdir(caches):
        out["cache_dir"] = caches
    exe = os.path.join(root, "bin", "tritonserver")
    if os.path.isfile(exe) and os.access(exe, os.X_OK):
        out["executable"] = exe
    return out


def _root_for_library(library: str) -> Optional[str]:
    """Guess the install root from where the library sits."""
    libs_dir = os.path.dirname(library)
    base = os.path.dirname(libs_dir)
    pip_root = os.path.join(base, PIP_ROOT_RELPATH)
    if os.path.basename(libs_dir).endswith(".libs") and os.path.isdir(pip_root):
        return pip_root
    if os.path.basename(libs_dir) == "lib" and (
        os.path.isdir(os.path.join(base, "backends")) or os.path.isdir(os.path.join(base, "bin"))
    ):
        return base
    return None


def core_from_library(library: str, source: str) -> CoreInstall:
    library = os.path.abspath(library)
    root = _root_for_library(library)
    return CoreInstall(
        library=library,
        libs_dir=os.path.dirname(library),
        root=root,
        source=source,
        **_fill_from_root(root),
    )


def inspect_path(path: str, source: str = "env") -> Optional[CoreInstall]:
    """Describe the core at ``path`` (file or folder, see module doc), or None."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.isfile(path):
        if _LIB_RE.match(os.path.basename(path)):
            return core_from_library(path, source)
        return None
    if not os.path.isdir(path):
        return None
    candidates = [
        path,  # a folder holding the library itself
        os.path.join(path, PIP_LIBS_DIRNAME),  # our install dest / a site-packages
        os.path.join(path, "lib"),  # a root like /opt/tritonserver
    ]
    # ``.../pytriton/tritonserver`` given directly: the libs are two levels up.
    if os.path.basename(path) == "tritonserver" and os.path.basename(os.path.dirname(path)) == "pytriton":
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(path)), PIP_LIBS_DIRNAME))
    for folder in candidates:
        lib = _find_library_in(folder)
        if lib:
            return core_from_library(lib, source)
    return None


# --------------------------------------------------------------------------- #
# The search
# --------------------------------------------------------------------------- #

_UNSET = object()


def _sys_path_dirs(entries: Iterable[str]) -> "list[str]":
    seen, out = set(), []
    for e in entries:
        if not e or not isinstance(e, str):
            continue  # "" is the cwd: not a place to pick up a core from
        p = os.path.abspath(e)
        if p not in seen and os.path.isdir(p):
            seen.add(p)
            out.append(p)
    return out


def search_core(
    *,
    env_value: object = _UNSET,  # Optional[str]; _UNSET: read $TRITONSERVER_CORE
    install_dir: Optional[str] = None,
    inherited_dir: object = _UNSET,  # Optional[str]; _UNSET: inherited_install_dir()
    search_path: Optional[Sequence[str]] = None,
    container_root: Optional[str] = None,
) -> CoreInstall:
    """Uncached search; the keyword arguments replace the real locations (tests)."""
    if env_value is _UNSET:
        env_value = os.environ.get(ENV_CORE) or None
    install_dir = install_dir or default_install_dir()
    search_path = list(sys.path if search_path is None else search_path)
    if inherited_dir is _UNSET:
        inherited_dir = inherited_install_dir(search_path)
    container_root = container_root or CONTAINER_ROOT

    if env_value:
        core = inspect_path(cast(str, env_value), "env")
        if core is not None:
            return core
        raise CoreNotFoundError(
            f"${ENV_CORE}={env_value!r} does not name a Triton core: expected a "
            "libtritonserver*.so file, a folder holding one, or an install root holding "
            f"{PIP_LIBS_DIRNAME}/ or lib/. Fix or unset {ENV_CORE}; to install a core run: "
            f"{INSTALL_COMMAND}",
            [f"${ENV_CORE}={env_value}"],
        )

    looked = [f"${ENV_CORE} (not set)"]

    lib = _find_library_in(os.path.join(install_dir, PIP_LIBS_DIRNAME))
    looked.append(f"{os.path.join(install_dir, PIP_LIBS_DIRNAME)} (where '{INSTALL_COMMAND}' installs)")
    if lib:
        return core_from_library(lib, "pip")

    if inherited_dir and inherited_dir != install_dir:
        libs = os.path.join(cast(str, inherited_dir), PIP_LIBS_DIRNAME)
        looked.append(f"{libs} (the base Python's, whose packages this environment sees)")
        lib = _find_library_in(libs)
        if lib:
            return core_from_library(lib, "pip")

    for entry in _sys_path_dirs(search_path):
        libs = os.path.join(entry, PIP_LIBS_DIRNAME)
        looked.append(f"{libs} (sys.path)")
        lib = _find_library_in(libs)
        if lib:
            return core_from_library(lib, "pip")

    lib_dir = os.path.join(container_root, "lib")
    looked.append(f"{os.path.join(lib_dir, 'libtritonserver.so')} (NVIDIA container)")
    lib = os.path.join(lib_dir, "libtritonserver.so")
    if os.path.isfile(lib):
        return core_from_library(lib, "container")

    lines = "\n".join(f"  {i}. {p}" for i, p in enumerate(looked, 1))
    raise CoreNotFoundError(
        "No Triton Inference Server core (libtritonserver) was found. Looked in, in order:\n"
        f"{lines}\n"
        f"Install one into this environment with:\n  {INSTALL_COMMAND}\n"
        f"or point ${ENV_CORE} at an existing libtritonserver.so or its install root.",
        looked,
    )


_cache_lock = threading.Lock()
_cache: "dict[Optional[str], CoreInstall]" = {}


def find_core() -> CoreInstall:
    """The core to use in this process (cached; re-searched when the cached core vanished
    or ``$TRITONSERVER_CORE`` changed)."""
    key = os.environ.get(ENV_CORE) or None
    with _cache_lock:
        core = _cache.get(key)
        if core is not None and os.path.isfile(core.library):
            return core
        core = search_core(env_value=key)
        _cache.clear()
        _cache[key] = core
        return core


def clear_core_cache() -> None:
    with _cache_lock:
        _cache.clear()


# --------------------------------------------------------------------------- #
# Version
# --------------------------------------------------------------------------- #


def install_base(core: CoreInstall) -> str:
    """Folder that holds ``nvidia_pytriton.libs`` (pip layouts) or ``lib`` (container)."""
    return os.path.dirname(core.libs_dir)


def read_marker(base: str) -> Optional[dict[str, Any]]:
    """The marker JSON our installer writes at the install destination, or None."""
    try:
        with open(os.path.join(base, MARKER_NAME), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _dist_info_version(base: str) -> Optional[str]:
    try:
        names = os.listdir(base)
    except OSError:
        return None
    for name in sorted(names):
        if name.startswith("nvidia_pytriton-") and name.endswith(".dist-info"):
            try:
                with open(os.path.join(base, name, "METADATA"), encoding="utf-8") as f:
                    for line in f:
                        if line.startswith("Version:"):
                            return line.split(":", 1)[1].strip()
                        if not line.strip():
                            break
            except OSError:
                pass
    return None


def core_version(core: CoreInstall) -> Optional[str]:
    """Triton version of ``core`` (e.g. "2.51.0") when cheaply knowable, else None."""
    base = install_base(core)
    marker = read_marker(base)
    if marker and isinstance(marker.get("triton_version"), str):
        return cast(str, marker["triton_version"])
    pv = _dist_info_version(base)
    if pv is not None and pv in PYTRITON_TO_TRITON:
        return PYTRITON_TO_TRITON[pv]
    for folder in filter(None, (core.root, base)):
        try:
            with open(os.path.join(folder, "TRITON_VERSION"), encoding="utf-8") as f:
                v = f.read().strip()
            if v:
                return v
        except OSError:
            pass
    return None
