"""Servers a stop gave up on, and the stub processes they leave.

Core 2.51 cannot free a server, nor can the process exit under it, while a
backend still runs its requests (its InferenceServer::Stop returns with
work in flight once the exit timeout expires), nor while the detached
thread that deletes an unloaded model still runs. Such a server is kept
(by this module, or by the binding when the core's own stop gave up); at
interpreter exit this module waits for it and frees it, and then ends the
python-backend stubs the process started, which would otherwise wait on
their dead parent forever. For: core 2.51 (unchanged in its later sources).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from typing import Callable, Optional

from tritonserver._c import triton_bindings as _bindings

_lock = threading.Lock()
_STUB_NAME = "triton_python_backend_stub"
_exit_wait_s: "float | None" = None  # set by the first stop that gave up
# Each frees one kept server once it is idle: called with a deadline
# (time.monotonic()), it returns whether it did.
_finishers: list[Callable[[float], bool]] = []


def finish_at_exit(timeout_s: float, finish: Optional[Callable[[float], bool]] = None) -> None:
    """After a stop that gave up (its exit timeout expired with work running).

    `finish` frees the server once its work is done (given a deadline, it
    returns whether it did); without it the binding kept the server. At
    interpreter exit (before Python is torn down, so callbacks can still
    run) wait up to the largest such timeout for the kept servers to
    become idle and free them, then terminate python-backend stubs of ours
    still running: a stub blocked on its (dead) parent never exits by
    itself."""
    global _exit_wait_s
    with _lock:
        if _exit_wait_s is None:
            atexit.register(_finish_at_exit)
        _exit_wait_s = max(_exit_wait_s or 0.0, float(timeout_s))
        if finish is not None:
            _finishers.append(finish)


def finish_kept_servers(timeout_s: float) -> int:
    """Waits up to `timeout_s` for the kept servers to become idle, frees
    those that did and returns how many are still busy (kept for good)."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    with _lock:
        finishers = _finishers[:]
        _finishers.clear()
    busy = sum(not finish(deadline) for finish in finishers)
    return busy + _bindings.Server.delete_idle_kept_servers(max(0.0, deadline - time.monotonic()))


def _finish_at_exit() -> None:
    busy = finish_kept_servers(_exit_wait_s or 0.0)
    if busy:
        print(f"tritonserver: {busy} stopped server(s) still had requests running "
              f"{_exit_wait_s:g} s after exit began; exiting without freeing them",
              file=sys.stderr, flush=True)
    _terminate_stub_children()


def _stub_children() -> list[int]:
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            if ppid != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if _STUB_NAME.encode() in f.read().split(b"\0", 1)[0]:
                    pids.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
    return pids


def _terminate_stub_children(grace_s: float = 2.0) -> None:
    import signal
    import time

    pids = _stub_children()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive_child(p)]
            time.sleep(0.05)
        if not pids:
            return


def _alive_child(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)  # reaps it if it exited
        return done == 0
    except ChildProcessError:
        return False
