"""A per-process backend folder assembled from symlinks.

The core is given one ``--backend-directory``; ours is a temporary folder with:

* ``<name>/`` for each backend library folder (``<name>/libtriton_<name>.so``)
  of the user's own backend folder (``Options.backend_directory``) and of the
  package's backends, linked entry by entry, plus ``libtritonserver.so`` ->
  the core library, so a backend with DT_NEEDED ``libtritonserver.so`` and
  RUNPATH ``$ORIGIN`` (what ``tritonserver_add_backend`` builds) binds to the
  already-loaded core (same inode). The user's backends win over the
  package's of the same name;
* ``python/`` with the core's ``libtriton_python.so``,
  ``triton_python_backend_utils.py`` and the stub for the running Python;
* every other folder of the user's backend folder, then of the core's own
  ``backends/`` (container), linked whole, never shadowing the above. A
  ``python`` folder of either is used only when the core brings no python
  backend for this interpreter.

One folder per process and combination of inputs; it is made again when the
user's backend folder changed (a backend added or removed).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from typing import Dict, List, Optional, Tuple

from .locate import PYTHON_BACKEND_LIB, PYTHON_BACKEND_UTILS, STUB_NAME, CoreInstall

_lock = threading.Lock()
_dirs: Dict[Tuple[str, Optional[str], Optional[str], Tuple[str, ...]], str] = {}
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


def _backend_library(folder: str, name: str) -> bool:
    return os.path.isfile(os.path.join(folder, f"libtriton_{name}.so"))


def _link_backend(src_dir: str, dst_dir: str, core: CoreInstall) -> None:
    """``dst_dir`` with every entry of ``src_dir`` and the core beside them."""
    os.mkdir(dst_dir)
    for entry in sorted(os.listdir(src_dir)):
        if entry != "libtritonserver.so":
            _link(os.path.join(src_dir, entry), os.path.join(dst_dir, entry))
    _link(core.library, os.path.join(dst_dir, "libtritonserver.so"))


def _subfolders(folder: Optional[str]) -> List[str]:
    if not folder or not os.path.isdir(folder):
        return []
    return [n for n in sorted(os.listdir(folder)) if os.path.isdir(os.path.join(folder, n))]


def _populate(tmp: str, core: CoreInstall, package_backends_dir: Optional[str],
              user_dir: Optional[str]) -> None:
    made = set()
    # Backend libraries: the user's, then the package's; each beside the core.
    for source in (user_dir, package_backends_dir):
        if not source:
            continue  # no subfolders
        for name in _subfolders(source):
            src_dir = os.path.join(source, name)
            if name in made or name == "python" or not _backend_library(src_dir, name):
                continue
            _link_backend(src_dir, os.path.join(tmp, name), core)
            made.add(name)

    if core.python_backend_dir and core.stub_path:
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

    # Everything else, linked whole: the user's other folders (python-based
    # backends, a python backend of its own), then the core's own backends
    # (NVIDIA container). Its python backend is only usable through the
    # branch above (stub for this Python).
    own = os.path.join(core.root, "backends") if core.root else None
    for source, skip_python in ((user_dir, False), (own, True)):
        if not source:
            continue  # no subfolders
        for name in _subfolders(source):
            if name in made or (skip_python and name == "python"):
                continue
            _link(os.path.join(source, name), os.path.join(tmp, name))
            made.add(name)


def _fingerprint(folder: Optional[str]) -> Tuple[str, ...]:
    """What of a user's backend folder the assembled folder depends on."""
    if not folder:
        return ()
    return tuple(f"{n}/" + "/".join(sorted(os.listdir(os.path.join(folder, n))))
                 for n in _subfolders(folder))


def backend_directory(core: CoreInstall, package_backends_dir: Optional[str],
                      user_dir: Optional[str] = None) -> str:
    """The backend folder to give the core.

    ``user_dir`` is a folder of the user's own backends (one subfolder each,
    as ``Options.backend_directory``); they are served with the package's.
    Made once per process and arguments, again when ``user_dir`` changed.
    """
    global _atexit_registered
    pkg = os.path.abspath(package_backends_dir) if package_backends_dir else None
    user = os.path.abspath(user_dir) if user_dir else None
    key = (os.path.realpath(core.library), pkg, user, _fingerprint(user))
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
            _populate(tmp, core, pkg, user)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            _owner_pid.pop(tmp, None)
            raise
        _dirs[key] = tmp
        return tmp
