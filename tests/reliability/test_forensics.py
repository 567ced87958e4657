"""The forensics a crash or a hang leaves (tritonserver._crash_report,
tests/forensics.py), on real processes: a server's process that dies of
SIGSEGV reports every thread's native frames, the core's among them, before
faulthandler's Python frames; a test blocked where pytest-timeout cannot end
it ends the run with its name and stacks instead of hanging it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from tritonserver import _crash_report

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

needs_gdb = pytest.mark.skipif(
    _crash_report.debugger() is None or _crash_report.under_sanitizer()
    or bool(os.environ.get("TRITONSERVER_UNDER_ASAN")),
    reason="gdb is not installed, or AddressSanitizer runs (it reports crashes itself, and "
           "gdb reads its processes too slowly)")


@needs_gdb
@pytest.mark.timeout(300)
def test_a_crash_reports_every_threads_native_frames(example_repo):
    code = textwrap.dedent(f"""
        import ctypes, faulthandler, sys
        faulthandler.enable()
        import tritonserver
        from tritonserver import _crash_report
        server = tritonserver.Server(model_repository={example_repo!r}).start(
            wait_until_ready=True)
        assert _crash_report.installed()
        _crash_report.set_context("a test that crashes on purpose")
        sys.stderr.write("the last line before the crash\\n")
        sys.stderr.flush()
        ctypes.string_at(0)
    """)
    env = dict(os.environ, **{_crash_report.ENVIRONMENT: "1"})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=240)
    err = done.stderr
    assert done.returncode == -11, err[-3000:]
    report = err.find("tritonserver: fatal signal 11 (SIGSEGV)")
    assert report >= 0, err[-3000:]
    assert "during a test that crashes on purpose" in err[report:report + 300]
    assert "native backtraces of every thread (gdb)" in err
    # The core's threads, which run no Python, are there with their frames.
    assert "libtritonserver" in err, err[report:report + 6000]
    assert err.count("\nThread ") >= 3
    assert "tritonserver: end of the native report" in err
    # faulthandler follows with the Python frames.
    assert err.find("Fatal Python error: Segmentation fault") > report


def test_without_the_request_nothing_is_installed():
    code = ("import tritonserver, os\n"
            "from tritonserver import _runtime, _crash_report\n"
            "_runtime.ensure_core_loaded()\n"
            "print(_crash_report.installed())\n")
    env = {k: v for k, v in os.environ.items() if k != _crash_report.ENVIRONMENT}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def test_a_bad_debugger_command_is_refused():
    from tritonserver._c import triton_bindings

    with pytest.raises(ValueError, match="absolute path"):
        triton_bindings.install_crash_report(["gdb"], 1.0, 2)
    with pytest.raises(ValueError, match="not open"):
        triton_bindings.install_crash_report(["/usr/bin/gdb"], 1.0, 987654)


@needs_gdb
@pytest.mark.timeout(300)
def test_a_hang_past_the_timeout_ends_the_run_with_its_stacks(tmp_path):
    """The main thread sleeps with SIGALRM blocked, so pytest-timeout's signal
    never reaches it: the way a test blocked in a native call looks. Its 300
    waiting threads make gdb's report far larger than a pipe holds (gdb holds
    the reporting process while it writes)."""
    (tmp_path / "test_blocked.py").write_text(textwrap.dedent("""
        import signal, sys, threading, time
        import pytest

        @pytest.mark.timeout(1)
        def test_blocked_outside_python():
            print("the server's last log line")
            sys.stderr.write("an error line of the server\\n")
            never = threading.Event()
            for _ in range(300):
                threading.Thread(target=never.wait, daemon=True).start()
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(600)
    """))
    env = dict(os.environ, TESTS_HANG_GRACE_S="3",
               PYTHONPATH=os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "forensics", "-p", "no:cacheprovider",
         "-q", str(tmp_path / "test_blocked.py")],
        capture_output=True, text=True, env=env, timeout=240, cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 70, out[-3000:]
    assert "HANG: test_blocked.py::test_blocked_outside_python" in out, out[-3000:]
    assert "an error line of the server" in out
    assert "the server's last log line" in out
    assert 'File "' + str(tmp_path / "test_blocked.py") + '"' in out  # Python frames
    assert "native stacks of every thread of this process" in out
    assert "clock_nanosleep" in out or "select" in out, out[-4000:]  # native frames
    assert "Thread 300 " in out, out[-4000:]  # every thread, the whole report
    # It ends with a summary that a log keeping only its last kilobytes still
    # shows: the test, its Python frames and every thread, alike ones counted.
    tail = out[out.rindex("HANG SUMMARY"):]
    assert "test_blocked_outside_python" in tail and "time.sleep(600)" in tail, tail
    assert "an error line of the server" in tail, tail
    assert re.search(r"^  3\d\d x \"[^\"]*\" in ", tail, re.M), tail
    assert re.search(r"^  3\d\d x Thread-\d+ \(wait\)\.\.\.: .*threading.py:\d+ wait$", tail, re.M), tail
    assert len(tail) < 4000, tail


def test_a_debugger_that_hangs_is_stopped(tmp_path):
    """The guard outside the process ends a debugger that does not finish
    (while the real one holds the process, the process cannot time it)."""
    fake = tmp_path / "gdb"
    fake.write_text("#!/bin/sh\necho attached\nexec sleep 600\n")
    fake.chmod(0o755)
    script = ("import os, sys, time; from tritonserver import _crash_report; "
              "t = time.monotonic(); out = _crash_report.native_backtraces(os.getpid(), timeout=2); "
              "print(out); print('took', time.monotonic() - t)")
    env = dict(os.environ, PATH=os.pathsep.join([str(tmp_path), os.environ["PATH"]]))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "attached" in done.stdout
    assert "did not finish within 2 s" in done.stdout, done.stdout
    assert float(done.stdout.split("took")[-1]) < 10
