"""Loading the Triton core library into this process (RTLD_LOCAL).

Why not plain ``ctypes.CDLL``: the pip core's dependencies-of-dependencies
(``libnghttp2-*``, ``libssh-*``, ...) are found only through
``LD_LIBRARY_PATH``, which cannot change once the process runs. When dlopen
reports one missing, it is loaded by full path from the core's folder and the
load retried; glibc then satisfies later DT_NEEDED entries by SONAME from the
already-loaded copy.

Why not RTLD_GLOBAL: it would promote the core's whole dependency tree, so
``ssl``/``hashlib`` imported later would bind to the wheel's OpenSSL 3.0.2.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import threading
from typing import Dict, List, Optional, Set

from .errors import CoreLoadError
from .locate import CoreInstall

_MODE = os.RTLD_LOCAL | os.RTLD_NOW
_MAX_LOADS = 128
_MISSING_RE = re.compile(r"([^\s:]+): cannot open shared object file")

_lock = threading.RLock()
_cores: Dict[str, ctypes.CDLL] = {}  # realpath of a core library -> its handle
_keep: List[ctypes.CDLL] = []  # every handle we opened, alive for the process lifetime
_loaded_paths: Dict[str, ctypes.CDLL] = {}


def _missing_name(err: OSError) -> Optional[str]:
    m = _MISSING_RE.search(str(err))
    return os.path.basename(m.group(1)) if m else None


def _open(path: str, libs_dir: str, attempted: Set[str], budget: List[int]) -> ctypes.CDLL:
    """dlopen ``path`` RTLD_LOCAL, first loading from ``libs_dir`` whatever it lacks."""
    real = os.path.realpath(path)
    if real in _loaded_paths:
        return _loaded_paths[real]
    while True:
        budget[0] -= 1
        if budget[0] < 0:
            raise CoreLoadError(f"gave up loading {path}: more than {_MAX_LOADS} load attempts")
        try:
            handle = ctypes.CDLL(path, mode=_MODE)
        except OSError as e:
            missing = _missing_name(e)
            if missing is None or missing == os.path.basename(path):
                raise CoreLoadError(f"cannot load {path}: {e}") from e
            candidate = os.path.join(libs_dir, missing)
            if missing in attempted or not os.path.isfile(candidate):
                raise CoreLoadError(
                    f"cannot load {path}: it needs {missing}, found neither by the system loader "
                    f"nor in {libs_dir} ({e})"
                ) from e
            attempted.add(missing)
            _open(candidate, libs_dir, attempted, budget)
            continue
        _keep.append(handle)
        _loaded_paths[real] = handle
        return handle


def load_core(core: CoreInstall) -> None:
    """Load ``core.library`` (and libarchive for the python backend) RTLD_LOCAL.

    Idempotent and thread-safe; handles stay alive for the process lifetime.
    """
    key = os.path.realpath(core.library)
    with _lock:
        if key in _cores:
            return
        budget = [_MAX_LOADS]
        handle = _open(core.library, core.libs_dir, set(), budget)
        # libtriton_python.so needs libarchive; reached through a symlink its RPATH
        # misses it, so have it loaded already (glibc reuses it by SONAME).
        for lib in sorted(glob.glob(os.path.join(core.libs_dir, "libarchive-*.so*"))):
            _open(lib, core.libs_dir, set(), budget)
        _cores[key] = handle


def core_handle(core: CoreInstall) -> ctypes.CDLL:
    """The ctypes handle of the loaded core (loading it first if needed)."""
    load_core(core)
    with _lock:
        return _cores[os.path.realpath(core.library)]


def is_loaded(core: CoreInstall) -> bool:
    with _lock:
        return os.path.realpath(core.library) in _cores


def core_api_version(core: CoreInstall) -> "tuple[int, int]":
    """``TRITONSERVER_ApiVersion`` of ``core`` (loads it)."""
    lib = core_handle(core)
    fn = lib["TRITONSERVER_ApiVersion"]  # a fresh function object: no shared argtypes
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32)]
    major, minor = ctypes.c_uint32(0), ctypes.c_uint32(0)
    err = fn(ctypes.byref(major), ctypes.byref(minor))
    if err:
        raise CoreLoadError("TRITONSERVER_ApiVersion returned an error")
    return major.value, minor.value
