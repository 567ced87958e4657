"""A per-process backend folder assembled from symlinks.

The core is given one ``--backend-directory``; ours is a temporary folder with:

* ``<name>/`` for each of the package's own backends (``libtriton_<name>.so``
  and whatever sits beside it) plus ``libtritonserver.so`` -> the core library,
  so a backend with DT_NEEDED ``libtritonserver.so`` and RUNPATH ``$ORIGIN``
  binds to the already-loaded core (same inode);
* ``python/`` with the core's ``libtriton_python.so``,
  ``triton_python_backend_utils.py`` and the stub for the running Python;
* every other backend folder of the core's own ``backends/`` (container),
  linked whole, never shadowing ours.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from typing import Dict, Optional, Tuple

from .locate import PYTHON_BACKEND_LIB, PYTHON_BACKEND_UTILS, STUB_NAME, CoreInstall

_lock = threading.Lock()
_dirs: Dict[Tuple[str, Optional[str]], str] = {}
_owner_pid: Dict[str, int] = {}
_atexit_registered = False


def _cleanup() -> None:
    pid = os.getpid()
    with _lock:
        for path, owner in list(_owner_pid.items()):
            if owner == pid:  # a forked child must not remove its parent's folder
                shutil.rmtree(path, ignore_errors=True)
                _owner_pid.pop(path, None)


def _link(src: str, dst: str) -> None:
    os.symlink(os.path.abspath(src), dst)


def _populate(tmp: str, core: CoreInstall, package_backends_dir: Optional[str]) -> None:
    made = set()
    if package_backends_dir and os.path.isdir(package_backends_dir):
        for name in sorted(os.listdir(package_backends_dir)):
            src_dir = os.path.join(package_backends_dir, name)
            if not os.path.isfile(os.path.join(src_dir, f"libtriton_{name}.so")):
                continue
            dst_dir = os.path.join(tmp, name)
            os.mkdir(dst_dir)
            for entry in sorted(os.listdir(src_dir)):
                if entry != "libtritonserver.so":
                    _link(os.path.join(src_dir, entry), os.path.join(dst_dir, entry))
            _link(core.library, os.path.join(dst_dir, "libtritonserver.so"))
            made.add(name)

    if "python" not in made and core.python_backend_dir and core.stub_path:
        pb = core.python_backend_dir
        lib = os.path.join(pb, PYTHON_BACKEND_LIB)
        utils = os.path.join(pb, PYTHON_BACKEND_UTILS)
        if os.path.isfile(lib) and os.path.isfile(utils) and os.path.isfile(core.stub_path):
            dst_dir = os.path.join(tmp, "python")
            os.mkdir(dst_dir)
            _link(lib, os.path.join(dst_dir, PYTHON_BACKEND_LIB))
            _link(utils, os.path.join(dst_dir, PYTHON_BACKEND_UTILS))
            _link(core.stub_path, os.path.join(dst_dir, STUB_NAME))
            made.add("python")

    # The core's own backends (NVIDIA container): linked whole, ours win. Its python
    # backend is only usable through the branch above (stub for this Python).
    own = os.path.join(core.root, "backends") if core.root else None
    if own and os.path.isdir(own):
        for name in sorted(os.listdir(own)):
            src = os.path.join(own, name)
            if name in made or name == "python" or not os.path.isdir(src):
                continue
            _link(src, os.path.join(tmp, name))
            made.add(name)


def backend_directory(core: CoreInstall, package_backends_dir: Optional[str]) -> str:
    """The backend folder to give the core (made once per process and arguments)."""
    global _atexit_registered
    pkg = os.path.abspath(package_backends_dir) if package_backends_dir else None
    key = (os.path.realpath(core.library), pkg)
    with _lock:
        existing = _dirs.get(key)
        if existing and os.path.isdir(existing) and _owner_pid.get(existing) == os.getpid():
            return existing
        tmp = tempfile.mkdtemp(prefix="tritonserver-backends-")
        if not _atexit_registered:
            atexit.register(_cleanup)
            _atexit_registered = True
        _owner_pid[tmp] = os.getpid()
        try:
            _populate(tmp, core, pkg)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            _owner_pid.pop(tmp, None)
            raise
        _dirs[key] = tmp
        return tmp
