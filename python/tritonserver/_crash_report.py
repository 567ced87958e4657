"""Where a process died, or hangs: native backtraces of every thread.

The core's threads run no Python, so Python's faulthandler names none of
them when one crashes or blocks. With a debugger on the machine (gdb), this
module attaches it to the process:

* ``enable()`` installs a fatal-signal handler (SIGSEGV, SIGBUS, SIGILL,
  SIGFPE, SIGABRT) that writes what the process was doing, the tails of its
  captured output and every thread's native backtrace, then hands the signal
  on to the handler before it (faulthandler's Python frames, or the
  default). ``python -m tritonserver serve`` and ``import tritonserver`` turn
  it on when ``TRITONSERVER_CRASH_REPORT=1`` is set; the test suite always.
* ``native_backtraces(pid)`` reads a live process's threads (a hang report).

Both are for diagnosis: a debugger stops the process while it reads it.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
from typing import Optional

from tritonserver._c import triton_bindings as _bindings

ENVIRONMENT = "TRITONSERVER_CRASH_REPORT"
_DEBUGGER_TIMEOUT = 120.0
_PR_SET_PTRACER = 0x59616D61
_PR_SET_PTRACER_ANY = -1


def debugger() -> Optional[str]:
    """The debugger's absolute path, or None where there is none."""
    found = shutil.which("gdb")
    return os.path.abspath(found) if found else None


# The debugger stops every thread of the process it reads, the one that
# waits for it included: a timeout kept by that thread cannot fire while the
# debugger hangs. A shell outside the process keeps it: it kills the
# debugger after $1 seconds and then continues the process ($2), which a
# debugger killed while attached may leave stopped.
_GUARD = ('limit=$1; target=$2; shift 2; timeout -s KILL "$limit" "$@"; status=$?; '
          '[ "$status" = 137 ] && echo "(gdb did not finish within $limit s; stopped)"; '
          'kill -CONT "$target" 2>/dev/null; exit $status')
# How much longer than the guard the process itself waits (its own clock
# stands still while the debugger holds it).
_GUARD_MARGIN_S = 15.0


def _gdb_command(gdb: str, pid: str, timeout: float) -> list[str]:
    command = [gdb, "-nx", "-batch", "-p", pid,
               "-ex", "set pagination off", "-ex", "set print thread-events off",
               "-ex", "set print frame-arguments none", "-ex", "info threads",
               "-ex", "thread apply all bt 48"]
    shell, guard = shutil.which("sh"), shutil.which("timeout")
    if shell is None or guard is None:
        return command
    return [os.path.abspath(shell), "-c", _GUARD, "tritonserver-crash-report",
            str(max(1, int(timeout))), pid] + command


def requested() -> bool:
    """Whether the environment asks for crash reports."""
    return os.environ.get(ENVIRONMENT, "").strip().lower() in ("1", "true", "yes", "on", "gdb")


def under_sanitizer() -> bool:
    """Whether AddressSanitizer (or ThreadSanitizer) runs in this process: it
    reports a crash itself, with every frame, and a debugger reads its
    shadow memory too slowly to report in time."""
    try:
        process = ctypes.CDLL(None)
    except OSError:
        return False
    return any(hasattr(process, name) for name in ("__asan_init", "__tsan_init"))


def enable(fd: Optional[int] = None, timeout: float = _DEBUGGER_TIMEOUT) -> bool:
    """Install the crash report for this process, written to ``fd``
    (standard error by default). False, and nothing installed, where there is
    no debugger, or under a sanitizer (which reports crashes itself).
    Calling it again only changes ``fd`` and ``timeout``."""
    gdb = debugger()
    if gdb is None or under_sanitizer():
        return False
    _bindings.install_crash_report(_gdb_command(gdb, "{pid}", timeout),
                                   timeout + _GUARD_MARGIN_S, 2 if fd is None else fd)
    return True


def enable_if_requested() -> bool:
    """``enable()`` when ``TRITONSERVER_CRASH_REPORT`` asks for it."""
    return enable() if requested() else False


def set_context(context: str) -> None:
    """What the process is doing now (a test's name): the crash report names it."""
    _bindings.set_crash_report_context(context)


def installed() -> bool:
    return bool(_bindings.crash_report_installed())


def native_backtraces(pid: int, timeout: float = _DEBUGGER_TIMEOUT) -> str:
    """Every thread's native backtrace of the live process ``pid``, as the
    debugger prints them, or a line saying why there are none."""
    gdb = debugger()
    if gdb is None:
        return "(no native backtraces: gdb is not installed)\n"
    own = pid == os.getpid()
    if own:  # a child may trace its parent only when the parent allows it (Yama)
        _set_ptracer(_PR_SET_PTRACER_ANY)
    # To a file, not a pipe: while gdb holds this process no thread of it
    # could drain a pipe, and gdb would block on a full one.
    with tempfile.TemporaryFile() as out:
        try:
            subprocess.run(_gdb_command(gdb, str(pid), timeout), stdin=subprocess.DEVNULL,
                           stdout=out, stderr=subprocess.STDOUT,
                           timeout=timeout + _GUARD_MARGIN_S, check=False)
            late = ""
        except subprocess.TimeoutExpired:
            late = f"(gdb did not finish within {timeout:.0f} s)\n"
        finally:
            if own:
                _set_ptracer(0)
        out.seek(0)
        return out.read().decode("utf-8", "replace") + late


def _set_ptracer(value: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PTRACER, ctypes.c_long(value), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def command_line(pid: int) -> str:
    """The command line of the live process ``pid`` (200 characters at most),
    or "gone"."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200]
    except OSError:
        return "gone"


def descendants(pid: int) -> list[int]:
    """The live processes below ``pid`` (its children, theirs...), read from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is not None and len(fields) > 1 and fields[1].isdigit():
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


# Frames that say nothing of where a thread waits: the C library's wait and
# thread plumbing, and the interpreter's own evaluation loop (the Python
# frames are in faulthandler's part of a report).
_NOISE_PREFIXES = ("__futex", "futex_", "__GI___futex", "do_futex_wait", "__new_sem_wait",
                   "__pthread_cond_wait", "___pthread_cond_wait", "__GI___pthread", "__GI___poll",
                   "__GI___clock_nanosleep", "__GI___nanosleep", "__libc_start", "start_thread",
                   "clone", "_start", "__lll_lock", "___pthread_mutex_lock", "__pthread_clockjoin",
                   "std::condition_variable", "std::__invoke", "std::thread::_", "std::__1::",
                   "_Py", "Py", "method_vectorcall", "cfunction_", "slot_tp_", "do_call_core",
                   "run_mod", "run_eval_code_obj", "pymain_", "builtin_", "partial_", "call_",
                   "object_vacall", "vectorcall_", "thread_run", "pythread_wrapper", "t_bootstrap",
                   "bounded_lock_grab", "lock_PyThread", "acquire_timed", "drop_gil")
_NOISE_NAMES = ("main", "??")
# Kept although they look like the interpreter's plumbing: a thread that
# waits for the GIL says so.
_TELLING_NAMES = ("take_gil", "PyGILState_Ensure", "PyEval_RestoreThread", "PyEval_AcquireThread")
_FRAME_NAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+?)(?: \(|$)")
_THREAD_HEAD = re.compile(r'^Thread \d+ \(Thread 0x[0-9a-f]+ \(LWP \d+\)(?: "([^"]*)")?\)')


def summarize(backtraces: str, frames: int = 7) -> str:
    """Debugger output (``native_backtraces``) cut to a line per kind of
    thread: its name, the call it waits in, and the nearest frames that say
    whose code it is, threads with the same line counted once. A hang's
    report ends with this, so a log that keeps only its tail still shows
    every thread."""
    threads: list[tuple[str, list[str]]] = []
    for line in backtraces.splitlines():
        head = _THREAD_HEAD.match(line)
        if head:
            threads.append((head.group(1) or "?", []))
            continue
        frame = _FRAME_NAME.match(line.strip())
        if frame and threads:
            threads[-1][1].append(frame.group(1))
    counts: dict[str, int] = {}
    for name, names in threads:
        if not names:
            continue
        telling = [f for f in names[1:] if f in _TELLING_NAMES or (
            f not in _NOISE_NAMES and not f.startswith(_NOISE_PREFIXES))][:frames]
        key = f'"{name}" in {names[0]}' + ("".join(f" < {f}" for f in telling))
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        return "(no threads read)\n"
    return "".join(f"  {n} x {key}\n" if n > 1 else f"  {key}\n" for key, n in counts.items())


def process_state(pid: int) -> str:
    """The state letter /proc gives ``pid`` (R, S, D, Z...), or "gone"."""
    fields = _stat_fields(pid)
    if fields is None:
        return "gone"
    return fields[0] if fields else "?"


def _stat_fields(pid: int) -> Optional[list[str]]:
    """The fields of /proc/<pid>/stat after the command name (state, parent
    pid...), or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()
