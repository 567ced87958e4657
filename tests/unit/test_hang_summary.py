"""The one-line-per-thread summary that ends a hang report."""

from __future__ import annotations

from tritonserver._crash_report import summarize

# The shape gdb prints for `thread apply all bt` with frame arguments off.
BACKTRACES = """\
Thread 4 (Thread 0x7f00000a1000 (LWP 104) "loader"):
#0  __futex_abstimed_wait_common64 (private=..., cancel=...) at ./nptl/futex-internal.c:57
#1  __futex_abstimed_wait_common (futex_word=...) at ./nptl/futex-internal.c:87
#2  0x00007f0000001111 in __new_sem_wait_slow64 (sem=...) at ./nptl/sem_waitcommon.c:183
#3  0x00007f0000002222 in triton::backend::python::StubLauncher::Launch() () from /x/libtriton_python.so
#4  0x00007f0000003333 in triton::backend::python::ModelState::Create(...) () from /x/libtriton_python.so
#5  0x00007f0000004444 in start_thread (arg=...) at ./nptl/pthread_create.c:442
#6  0x00007f0000005555 in clone3 () at ../sysdeps/unix/sysv/linux/x86_64/clone3.S:81

Thread 3 (Thread 0x7f00000a2000 (LWP 103) "worker"):
#0  __futex_abstimed_wait_common64 (private=..., cancel=...) at ./nptl/futex-internal.c:57
#1  0x00007f0000006666 in ___pthread_cond_wait (cond=..., mutex=...) at ./nptl/pthread_cond_wait.c:618
#2  0x00007f0000007777 in pool_loop () from /x/libpool.so
#3  0x00007f0000004444 in start_thread (arg=...) at ./nptl/pthread_create.c:442

Thread 2 (Thread 0x7f00000a3000 (LWP 102) "worker"):
#0  __futex_abstimed_wait_common64 (private=..., cancel=...) at ./nptl/futex-internal.c:57
#1  0x00007f0000006666 in ___pthread_cond_wait (cond=..., mutex=...) at ./nptl/pthread_cond_wait.c:618
#2  0x00007f0000007777 in pool_loop () from /x/libpool.so
#3  0x00007f0000004444 in start_thread (arg=...) at ./nptl/pthread_create.c:442

Thread 5 (Thread 0x7f00000a5000 (LWP 105) "backend"):
#0  __futex_abstimed_wait_common64 (private=..., cancel=...) at ./nptl/futex-internal.c:57
#1  0x00007f000000c111 in take_gil (tstate=...) at Python/ceval_gil.c:331
#2  0x00007f000000c222 in PyEval_RestoreThread (tstate=...) at Python/ceval_gil.c:533
#3  0x00007f000000c333 in PyGILState_Ensure () at Python/pystate.c:1728
#4  0x00007f000000c444 in inprocess::InProcess::ModelInitialize(tb::Model&) () from /x/libin.so

Thread 1 (Thread 0x7f00000a4000 (LWP 101) "python"):
#0  0x00007f0000008888 in __GI___clock_nanosleep (clock_id=...) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48
#1  0x00007f0000009999 in pysleep (timeout=...) at ./Modules/timemodule.c:2159
#2  0x00007f000000aaaa in _PyEval_EvalFrameDefault (tstate=...) at Python/ceval.c:5376
#3  0x00007f000000bbbb in main ()
"""


def test_each_kind_of_thread_is_a_line_naming_whose_code_waits():
    lines = summarize(BACKTRACES).splitlines()  # a thread waiting for the GIL says so
    assert lines == [
        '  "loader" in __futex_abstimed_wait_common64'
        " < triton::backend::python::StubLauncher::Launch()"
        " < triton::backend::python::ModelState::Create(...)",
        '  2 x "worker" in __futex_abstimed_wait_common64 < pool_loop',
        '  "backend" in __futex_abstimed_wait_common64 < take_gil < PyEval_RestoreThread'
        " < PyGILState_Ensure < inprocess::InProcess::ModelInitialize(tb::Model&)",
        '  "python" in __GI___clock_nanosleep < pysleep',
    ]


def test_frames_are_capped_and_nothing_read_says_so():
    assert summarize(BACKTRACES, frames=1).splitlines()[0].endswith("StubLauncher::Launch()")
    assert summarize("gdb: ptrace: Operation not permitted.") == "(no threads read)\n"
