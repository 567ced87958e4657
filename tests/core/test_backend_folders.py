"""The backend folder each process assembles in the temporary directory
(``tritonserver._core.runtime_dirs``) is not left behind: a process that
starts and stops a server removes it at exit, and the folder of a process
that was killed is removed by the next process that makes one; never a
folder that a running process may still use."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import tritonserver

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tritonserver.__file__)))
PREFIX = "tritonserver-backends-"

# A folder made without a core: a CoreInstall naming nothing links nothing.
MAKE_FOLDER = """
from tritonserver._core.locate import CoreInstall
from tritonserver._core.runtime_dirs import backend_directory
core = CoreInstall(library="/nonexistent/libtritonserver.so", libs_dir="/nonexistent",
                   root=None, python_backend_dir=None, stub_path=None, cache_dir=None,
                   executable=None, source="env")
folder = backend_directory(core, None)
print(folder, flush=True)
"""


def _env(tmp: Path) -> dict[str, str]:
    return dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=PACKAGE_PARENT)


def _folders(tmp: Path) -> list[str]:
    return sorted(os.path.basename(p) for p in glob.glob(str(tmp / f"{PREFIX}*")))


def _run(tmp: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=_env(tmp),
                          capture_output=True, text=True, timeout=120)


def _start(tmp: Path, code: str) -> tuple[subprocess.Popen[str], str]:
    """A child that makes its folder, then runs ``code``; the folder's name."""
    child = subprocess.Popen([sys.executable, "-c", MAKE_FOLDER + textwrap.dedent(code)],
                             env=_env(tmp), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None
    return child, os.path.basename(child.stdout.readline().strip())


def test_a_server_started_and_stopped_leaves_no_folder(tmp_path: Path) -> None:
    done = _run(tmp_path, f"""
        import glob, os, tritonserver
        server = tritonserver.Server(
            model_repository=tritonserver.example_model_repository(),
            model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
            startup_models=["identity_fp32"]).start(wait_until_ready=True)
        print(len(glob.glob(os.path.join({str(tmp_path)!r}, "{PREFIX}*"))))
        server.stop()
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1"], "the server's folder is made in TMPDIR"
    assert _folders(tmp_path) == []


def test_a_killed_processs_folder_goes_with_the_next_but_no_folder_in_use(tmp_path: Path) -> None:
    # Running: holds its folder until stdin closes, then exits normally.
    running, running_name = _start(tmp_path, "import sys; sys.stdin.read()")
    # Gone, but a child it forked still runs (and so still holds the lock).
    forked, forked_name = _start(tmp_path, """
        import os, time
        child = os.fork()
        if child == 0:
            time.sleep(600)
            os._exit(0)
        print(child, flush=True)
        os._exit(0)
    """)
    assert forked.stdout is not None
    grandchild = int(forked.stdout.readline())
    assert forked.wait(60) == 0
    # Killed: its folder stays, its lock is gone and its pid runs no more
    # (started last: each process sweeps when it makes its folder).
    killed, killed_name = _start(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert killed.wait(60) == -signal.SIGKILL
    # Lock free but its pid runs (reused, or an owner on a file system
    # without flock); and a folder of an older version (no pid in the name).
    unlocked_name = f"{PREFIX}{os.getpid()}-abcd1234"
    legacy_name = f"{PREFIX}abcd1234"
    (tmp_path / unlocked_name).mkdir()
    (tmp_path / legacy_name).mkdir()
    try:
        assert killed_name in _folders(tmp_path)
        next_one = _run(tmp_path, MAKE_FOLDER)
        assert next_one.returncode == 0, next_one.stderr
        assert _folders(tmp_path) == sorted(
            [running_name, forked_name, unlocked_name, legacy_name])

        # The running one removes its own at exit; once the forked child
        # ends, the next process removes that folder too.
        assert running.stdin is not None
        running.stdin.close()
        assert running.wait(60) == 0
        os.kill(grandchild, signal.SIGKILL)
        _wait_gone(grandchild)
        next_one = _run(tmp_path, MAKE_FOLDER)
        assert next_one.returncode == 0, next_one.stderr
        assert _folders(tmp_path) == sorted([unlocked_name, legacy_name])
    finally:
        if running.poll() is None:
            running.kill()
            running.wait(30)
        try:
            os.kill(grandchild, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait_gone(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return  # a zombie holds no file
        except OSError:
            return
        time.sleep(0.05)


def test_a_folder_swept_between_its_making_and_its_lock_is_made_again(tmp_path: Path) -> None:
    # Possible only for a sweeper that cannot see the owner's pid (another
    # pid namespace sharing the temporary directory).
    done = _run(tmp_path, """
        import os, tempfile
        from tritonserver._core import runtime_dirs
        made = []
        real = tempfile.mkdtemp
        def mkdtemp(**kwargs):
            made.append(real(**kwargs))
            if len(made) == 1:
                os.rmdir(made[0])
            return made[-1]
        tempfile.mkdtemp = mkdtemp
        path = runtime_dirs._new_folder()
        print(len(made), path == made[1], os.path.isdir(path))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "True", "True"]
