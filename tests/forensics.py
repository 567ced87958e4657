"""What the test run shows when a test crashes or hangs its process.

* A crash (SIGSEGV, SIGABRT...): ``tritonserver._crash_report`` prints the
  running test's name, the tail of its captured output (the server's log)
  and every thread's native backtrace (gdb), then faulthandler adds the
  Python frames. Child processes the tests start get the same through
  ``TRITONSERVER_CRASH_REPORT=1``.
* A hang that pytest-timeout cannot end: its signal method runs only when
  the main thread returns to Python, so a test blocked in a native call
  (a core stop, a join) would hold the run until CI's own limit. The
  watchdog here gives each test twice its timeout plus a minute, then
  prints the test's name, its captured output, every thread's Python and
  native stacks (this process and the processes below it) and ends the
  run with status 70, so CI shows why instead of running out of time.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
import traceback
from typing import Any, Optional

import pytest

from tritonserver import _crash_report

HANG_EXIT_STATUS = 70
# How long past twice its timeout a test may run before the watchdog ends
# the run (TESTS_HANG_GRACE_S changes it, for the watchdog's own test).
_GRACE_S = float(os.environ.get("TESTS_HANG_GRACE_S", "60"))
_watchdog: Optional["Watchdog"] = None


def pytest_sessionstart(session: Any) -> None:
    """A crash of this process names the test and every thread's native
    frames, child processes that import the package do the same, and a test
    blocked past its timeout ends the run with its stacks. Reports go to a
    copy of the real standard error, which a test's capture does not
    swallow."""
    global _watchdog
    report_fd = os.dup(2)
    os.environ[_crash_report.ENVIRONMENT] = "1"
    _crash_report.enable(fd=report_fd)
    _watchdog = Watchdog(report_fd, session.config)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
    if _watchdog is not None:
        _watchdog.begin(item.nodeid, timeout_of(item))
    try:
        yield
    finally:
        if _watchdog is not None:
            _watchdog.end()


class Watchdog:
    """One per test session: ``begin``/``end`` around each test."""

    def __init__(self, report_fd: int, config: Any):
        self._fd = report_fd
        self._config = config
        self._lock = threading.Lock()
        self._test: Optional[str] = None
        self._deadline = 0.0
        self._limit = 0.0
        self._started = 0.0
        self._wake = threading.Event()
        threading.Thread(target=self._watch, name="tests-hang-watchdog", daemon=True).start()

    def begin(self, nodeid: str, timeout: float) -> None:
        _crash_report.set_context(nodeid)
        with self._lock:
            self._test = nodeid if timeout > 0 else None
            self._started = time.monotonic()
            self._limit = 2 * timeout + _GRACE_S
            self._deadline = self._started + self._limit

    def end(self) -> None:
        _crash_report.set_context("")
        with self._lock:
            self._test = None

    def _watch(self) -> None:
        while not self._wake.wait(5.0):
            with self._lock:
                test, deadline, limit = self._test, self._deadline, self._limit
            if test is not None and time.monotonic() > deadline:
                self._report(test, limit)
                os._exit(HANG_EXIT_STATUS)

    def _say(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(self._fd, data):]

    def _report(self, test: str, limit: float) -> None:
        self._say(f"\n\ntests: HANG: {test} has run for more than {limit:.0f} s, past its "
                  "timeout, which did not fire (the main thread is blocked outside Python). "
                  "What it was doing follows; then the run ends "
                  f"(status {HANG_EXIT_STATUS}).\n")
        err = ""
        try:
            capture = self._config.pluginmanager.getplugin("capturemanager")
            out, err = capture.read_global_capture()
            self._say(f"tests: the test's captured stdout (tail):\n{out[-6000:]}\n"
                      f"tests: the test's captured stderr, the server's log (tail):\n"
                      f"{err[-12000:]}\n")
        except Exception as e:  # the capture may be off (-s) or busy
            self._say(f"tests: no captured output ({type(e).__name__}: {e})\n")
        # The main thread first: faulthandler lists the newest 100 threads only.
        ident = threading.main_thread().ident
        main = sys._current_frames().get(ident) if ident is not None else None
        main_stack = traceback.format_stack(main) if main is not None else []
        if main_stack:
            self._say("tests: Python stack of the main thread (most recent call last):\n"
                      + "".join(main_stack))
        self._say("tests: Python stacks of every thread:\n")
        faulthandler.dump_traceback(file=self._fd, all_threads=True)
        self._say("tests: native stacks of every thread of this process:\n")
        own = _crash_report.native_backtraces(os.getpid())
        self._say(own)
        children = []
        for child in _crash_report.descendants(os.getpid()):
            line = _crash_report.command_line(child)
            state = _crash_report.process_state(child)
            self._say(f"tests: native stacks of child process {child} [{state}] ({line}):\n")
            stacks = _crash_report.native_backtraces(child)
            self._say(stacks)
            children.append((child, state, line, stacks))
        self._say(summary(test, limit, main_stack, own, children, err))


def summary(test: str, limit: float, main_stack: list[str], own: str,
            children: list[tuple[int, str, str, str]], log: str = "") -> str:
    """The end of a hang report: the last lines of the server's log and
    every thread of every process in a line or two, so that a log that
    keeps only its last few kilobytes (a CI page) still shows who waits
    where."""
    last = log.splitlines()[-12:]
    parts = [f"\ntests: HANG SUMMARY: {test}, blocked past {limit:.0f} s\n",
             "tests: the last lines of its captured stderr (the server's log):\n",
             "".join(f"  {line[:300]}\n" for line in last) or "  (none)\n",
             "tests: main thread, Python (innermost last):\n",
             "".join(main_stack[-8:]),
             f"tests: threads of this process ({os.getpid()}), native, "
             "[count x] \"name\" in <call> < <callers>:\n",
             _crash_report.summarize(own),
             "tests: Python threads of this process, innermost frames last:\n",
             python_threads()]
    for child, state, line, stacks in children:
        parts.append(f"tests: child {child} [{state}] {line[:160]}:\n")
        parts.append(_crash_report.summarize(stacks))
    parts.append(f"tests: end of the hang report; the run ends (status {HANG_EXIT_STATUS}).\n")
    return "".join(parts)


def python_threads(frames: int = 3) -> str:
    """A line per place where Python threads (other than the main one and
    this) are: their innermost frames (file:line function), how many wait
    there and the first one's name."""
    names = {t.ident: t.name for t in threading.enumerate()}
    skip = {threading.main_thread().ident, threading.get_ident()}
    places: dict[str, list[str]] = {}
    for ident, frame in sys._current_frames().items():
        if ident not in skip:
            where = " > ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                               for f in traceback.extract_stack(frame)[-frames:])
            places.setdefault(where, []).append(str(names.get(ident, ident)))
    if not places:
        return "  (none)\n"
    return "".join(f"  {len(n)} x {n[0]}...: {where}\n" if len(n) > 1 else f"  {n[0]}: {where}\n"
                   for where, n in places.items())


def timeout_of(item: Any) -> float:
    """The pytest-timeout limit that applies to ``item`` (0: none): its
    marker, else ``--timeout``, else the ini file's."""
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
        if value is not None:
            return float(value)
    for value in (item.config.getoption("timeout", None), item.config.getini("timeout")):
        if value not in (None, ""):
            try:
                return float(value)
            except (TypeError, ValueError):
                pass
    return 0.0
