"""A per-process backend folder assembled from symlinks.

The core is given one ``--backend-directory``; ours is a temporary folder with:

* ``<name>/`` for each backend library folder (``<name>/libtriton_<name>.so``)
  of the user's own backend folder (``Options.backend_directory``) and of the
  package's backends, linked entry by entry, plus ``libtritonserver.so`` ->
  the core library, so a backend with DT_NEEDED ``libtritonserver.so`` and
  RUNPATH ``$ORIGIN`` (what ``tritonserver_add_backend`` builds) binds to the
  already-loaded core (same inode). A folder of the user's wins over the
  package's backend of the same name, whatever it holds: a python-based
  backend (``<name>/model.py``) named as one of the package's backends is
  the user's (the core would prefer the package's library beside it);
* ``python/`` with the python backend's libraries (the files themselves:
  hard links to the package's, or, where the temporary directory is on
  another file system, to the one copy of each that this process's first
  folder holds), the core's as
  ``libtriton_python_stub.so`` (with ``triton_python_backend_utils.py`` and
  the stub for the running Python; when the package has its stub guard,
  that name is the guard, which checks what a 2026 python backend checks
  and opens the core's library as ``stub/libtriton_python.so``), the
  package's in-process one as
  ``libtriton_python_inprocess.so``, and ``libtriton_python.so``, the one
  of the two that runs ``backend: "python"`` models by default
  (``Options.python_backend``); a model's ``runtime`` picks the other;
  python-based backends (``<name>/model.py``) run on the same one. The
  in-process one only forwards to ``inprocess/libtriton_inprocess.so`` of
  this folder, so a copy of it never loads the inprocess library twice;
  each file is placed once, and its second name is a hard link to it;
* every other folder of the user's backend folder, then of the core's own
  ``backends/`` (container), linked whole, never shadowing the above. A
  ``python`` folder of either is used only when the core brings no python
  backend for this interpreter.

One folder per process and combination of inputs; it is made again when the
user's backend folder changed (a backend added or removed). The core reads it
whenever it loads a model, so it lives as long as the process may start or
run a server; then it is removed:

* at interpreter exit (atexit), by the process that made it;
* by :func:`release_backend_directories`, for a process that is ended without
  running atexit (a Ray Serve replica: Ray kills it once the replica's
  shutdown hook returned);
* otherwise (a process killed, or ended by ``os._exit``) by the next process
  that makes a folder: its name carries the owner's pid, and the owner holds
  an exclusive ``flock`` on it for as long as it (or a child it forked) runs.
  A folder is stale only when its lock is free *and* that pid is not running
  here, so a folder in use is never removed: not when the lock cannot be
  taken (the owner is alive, maybe in another pid namespace sharing the
  temporary directory), not when the file system has no ``flock``, and not
  when the pid is alive (reused, or an owner without the lock). A folder
  swept in the instant between its making and its locking (by a process
  that cannot see the owner's pid) is made again.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import stat
import tempfile
import threading
from typing import Dict, List, Optional, Tuple, cast

from .locate import PYTHON_BACKEND_LIB, PYTHON_BACKEND_UTILS, STUB_NAME, CoreInstall

# The python backend folder's two libraries, by the names a model's
# ``runtime`` gives to choose one.
STUB_RUNTIME = "libtriton_python_stub.so"
INPROCESS_RUNTIME = "libtriton_python_inprocess.so"
# The package's guard in front of the stub's library, in its backends folder.
GUARD_LIBRARY = ("stub_guard", "python_stub_guard", "libtriton_python_stub_guard.so")

PREFIX = "tritonserver-backends-"
# PREFIX, the owner's pid, "-", mkdtemp's random part. Folders of older
# versions (no pid, no lock) never match: they are left alone.
_NAME = re.compile(re.escape(PREFIX) + r"([0-9]+)-[a-z0-9_]+\Z")

_lock = threading.Lock()
_dirs: Dict[Tuple[str, Optional[str], Optional[str], Tuple[str, ...], bool], str] = {}
_owner_pid: Dict[str, int] = {}
_lock_fds: Dict[str, int] = {}  # folder -> descriptor holding its flock
_atexit_registered = False
_swept = False
# The copy a folder of this process holds of each file that could not be
# hard-linked into it (its real path -> the copy).
_placed: Dict[str, str] = {}


def _drop(path: str) -> None:
    """Remove one of this process's folders and let go of its lock (caller holds _lock)."""
    shutil.rmtree(path, ignore_errors=True)
    _owner_pid.pop(path, None)
    fd = _lock_fds.pop(path, None)
    if fd is not None:
        os.close(fd)
    for key in [k for k, p in _dirs.items() if p == path]:
        del _dirs[key]
    inside = os.path.join(path, "")
    for real in [r for r, copy in _placed.items() if copy.startswith(inside)]:
        del _placed[real]


def _cleanup() -> None:
    pid = os.getpid()
    with _lock:
        for path, owner in list(_owner_pid.items()):
            if owner == pid:  # a forked child must not remove its parent's folder
                _drop(path)


def release_backend_directories() -> None:
    """Remove the backend folders this process made, now rather than at exit.

    Only for a process none of whose servers runs any more and that may end
    without running atexit (a Ray Serve replica at shutdown): a running
    server reads its folder whenever it loads a model. A server started
    afterwards gets a new folder.
    """
    _cleanup()


def _new_folder() -> str:
    """A new, empty folder of this process, locked when the file system has
    flock (caller holds _lock).

    The lock's descriptor is not inherited by programs the process executes
    (the python backend's stubs), only by children it forks."""
    for _ in range(10):
        path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue  # swept already, by a process that cannot see our pid
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a sweeper holds it only while it removes
        except OSError:  # no flock on this file system: then no sweeper can lock it either
            os.close(fd)
            return path
        if os.fstat(fd).st_nlink > 0:  # not removed before we had it
            _lock_fds[path] = fd
            return path
        os.close(fd)
    raise OSError(f"could not make a backend folder in {tempfile.gettempdir()}")


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: running, as another user
        return True
    return True


def _remove_if_stale(path: str, pid: int) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or _pid_running(pid):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held (the owner, or a child it forked, runs), or no flock here
            return False
        shutil.rmtree(path, ignore_errors=True)  # links only: never follows them
        return not os.path.lexists(path)
    finally:
        os.close(fd)


def sweep_stale_backend_directories(folder: Optional[str] = None) -> List[str]:
    """Remove the backend folders left in ``folder`` (default: the temporary
    directory) by this user's processes that ended without removing them
    (killed); the paths removed. A folder whose owner may still run is kept."""
    folder = folder or tempfile.gettempdir()
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    removed = []
    me = os.getpid()
    for name in names:
        match = _NAME.match(name)
        if match is None or int(match.group(1)) in (0, me):
            continue
        path = os.path.join(folder, name)
        if _remove_if_stale(path, int(match.group(1))):
            removed.append(path)
    return removed


def _link(src: str, dst: str) -> None:
    os.symlink(os.path.abspath(src), dst)


def _place(src: str, dst: str) -> None:
    """``dst``, the file ``src`` itself inside the folder (a hard link), not
    a symbolic link: the core refuses a backend library that a model's
    ``runtime`` names, or that a python-based backend runs on, when its
    real path leaves the backend's folder. A hard link is the same file, so
    the library is loaded once whichever name opens it (caller holds _lock).

    Where ``src`` is on another file system than the temporary directory
    (a tmpfs /tmp, as on CI machines and many desktops), the first folder
    gets a copy and later folders a hard link to it: a copy per folder
    would be a new library to the loader each time, and while any server
    runs, each server with a backend folder of its own would load one more
    instance of each for good."""
    real = os.path.realpath(src)
    try:
        os.link(real, dst)
        return
    except OSError:
        pass
    placed = _placed.get(real)
    if placed is not None and os.path.isfile(placed):
        try:
            os.link(placed, dst)
            return
        except OSError:  # no hard links in the temporary directory at all
            pass
    shutil.copy2(real, dst)
    _placed[real] = dst


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
              user_dir: Optional[str], python_in_process: bool) -> None:
    made = set()
    # The package's in-process runtime is its own, whatever the user's folder holds.
    users = set(_subfolders(user_dir)) - {"inprocess"}
    # Backend libraries: the user's, then the package's; each beside the core.
    for source in (user_dir, package_backends_dir):
        if not source:
            continue  # no subfolders
        for name in _subfolders(source):
            src_dir = os.path.join(source, name)
            if name in made or name == "python" or not _backend_library(src_dir, name):
                continue
            if source != user_dir and name in users:
                continue  # the user's folder of that name is linked whole below
            _link_backend(src_dir, os.path.join(tmp, name), core)
            made.add(name)

    stub_lib = None
    if core.python_backend_dir and core.stub_path:
        pb = core.python_backend_dir
        lib = os.path.join(pb, PYTHON_BACKEND_LIB)
        utils = os.path.join(pb, PYTHON_BACKEND_UTILS)
        if os.path.isfile(lib) and os.path.isfile(utils) and os.path.isfile(core.stub_path):
            stub_lib = lib
    # The stub's library behind the package's guard (the checks of a 2026
    # python backend, csrc/backends/stub_guard), which opens it as
    # stub/libtriton_python.so beside itself.
    guard_lib: Optional[str] = os.path.join(package_backends_dir or "", *GUARD_LIBRARY)
    if stub_lib is None or not os.path.isfile(cast(str, guard_lib)):
        guard_lib = None
    # The in-process slot forwards to inprocess/ of this folder: only with it.
    inprocess_lib: Optional[str] = os.path.join(
        package_backends_dir or "", "inprocess", "python_inprocess", INPROCESS_RUNTIME)
    if "inprocess" not in made or not os.path.isfile(cast(str, inprocess_lib)):
        inprocess_lib = None
    stub_slot = guard_lib or stub_lib
    default_lib, other = ((inprocess_lib, stub_slot) if python_in_process
                          else (stub_slot, inprocess_lib))
    if default_lib is not None:
        dst_dir = os.path.join(tmp, "python")
        os.mkdir(dst_dir)
        default = os.path.join(dst_dir, PYTHON_BACKEND_LIB)
        _place(default_lib, default)
        # The default's own name is the second name of the same file.
        _place(default, os.path.join(dst_dir, INPROCESS_RUNTIME if python_in_process
                                     else STUB_RUNTIME))
        if other is not None:
            _place(other, os.path.join(dst_dir, STUB_RUNTIME if python_in_process
                                       else INPROCESS_RUNTIME))
        if guard_lib is not None:
            os.mkdir(os.path.join(dst_dir, "stub"))
            _place(cast(str, stub_lib), os.path.join(dst_dir, "stub", PYTHON_BACKEND_LIB))
            _link(core.library, os.path.join(dst_dir, "stub", "libtritonserver.so"))
        if stub_lib is not None:
            _link(os.path.join(os.path.dirname(stub_lib), PYTHON_BACKEND_UTILS),
                  os.path.join(dst_dir, PYTHON_BACKEND_UTILS))
            _link(cast(str, core.stub_path), os.path.join(dst_dir, STUB_NAME))
        _link(core.library, os.path.join(dst_dir, "libtritonserver.so"))
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
                      user_dir: Optional[str] = None, python_in_process: bool = False) -> str:
    """The backend folder to give the core.

    ``user_dir`` is a folder of the user's own backends (one subfolder each,
    as ``Options.backend_directory``); they are served with the package's.
    ``python_in_process``: ``backend: "python"`` models run on the
    package's inprocess backend (else on the python backend's stub).
    Made once per process and arguments, again when ``user_dir`` changed.
    """
    global _atexit_registered, _swept
    pkg = os.path.abspath(package_backends_dir) if package_backends_dir else None
    user = os.path.abspath(user_dir) if user_dir else None
    key = (os.path.realpath(core.library), pkg, user, _fingerprint(user), python_in_process)
    with _lock:
        existing = _dirs.get(key)
        if existing and os.path.isdir(existing) and _owner_pid.get(existing) == os.getpid():
            return existing
        if not _swept:  # once per process: the folders of processes killed before
            _swept = True
            sweep_stale_backend_directories()
        tmp = _new_folder()
        if not _atexit_registered:
            atexit.register(_cleanup)
            _atexit_registered = True
        _owner_pid[tmp] = os.getpid()
        try:
            _populate(tmp, core, pkg, user, python_in_process)
        except BaseException:
            _drop(tmp)
            raise
        _dirs[key] = tmp
        return tmp
