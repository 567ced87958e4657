"""The Python thread states of the core's threads. A core thread that calls
back into Python (a response_queue's forwarder, a MemoryAllocator, a
request dropped there, a Python model) gets a thread state at its first
call and keeps it until it exits, instead of making and freeing one per
call. Made per call, the thread state's allocation ran through
tracemalloc's hook without the GIL, and tracemalloc.stop() on another
thread at that moment crashed the process (CPython issue gh-128679,
unfixed before 3.12.9 and 3.13.2): the reliability suite's own
tracemalloc checks hit it in CI.

Each case runs in a fresh interpreter: a crash there is a failure here."""

from __future__ import annotations

from conftest import copy_in_process, run_python

PRELUDE = """
import ctypes, queue, time, tracemalloc
import numpy as np
import tritonserver

def start(repository, **options):
    return tritonserver.Server(model_repository=repository, log_error=True, exit_timeout=10,
                               **options).start(wait_until_ready=True, timeout=60)

api = ctypes.pythonapi
api.PyInterpreterState_Get.restype = ctypes.c_void_p
api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
api.PyThreadState_Next.argtypes = [ctypes.c_void_p]
api.PyThreadState_Next.restype = ctypes.c_void_p

def thread_states():
    count, state = 0, api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
    while state:
        count += 1
        state = api.PyThreadState_Next(state)
    return count

class Allocator(tritonserver.MemoryAllocator):
    def allocate(self, size, memory_type, memory_type_id):
        array = np.empty(max(size, 1), np.uint8)
        return tritonserver.MemoryBuffer(array.ctypes.data, tritonserver.MemoryType.CPU, 0,
                                         array.nbytes, array)

VALUES = np.arange(5, dtype=np.int32)

def forwarded(model, count):
    for _ in range(count):
        for response in model.infer(inputs={"IN": VALUES}, response_queue=queue.SimpleQueue(),
                                    output_memory_allocator=Allocator()):
            pass
"""


def run_case(body: str) -> str:
    done = run_python(PRELUDE + body, timeout=180)
    assert done.returncode == 0, (
        f"the interpreter ended with {done.returncode}:\n{done.stdout[-2000:]}\n"
        f"{done.stderr[-4000:]}")
    return done.stdout


def test_tracemalloc_stopped_while_core_threads_call_back():
    """tracemalloc started and stopped around requests whose responses the
    core's thread forwards into a queue, with the GIL, one by one. Before
    the thread states were kept, this crashed at once, every time tried."""
    out = run_case("""
server = start(tritonserver.example_model_repository())
model = server.model("repeat_int32")
forwarded(model, 20)  # every thread that calls back has taken the GIL once
for _ in range(300):
    tracemalloc.start()
    iterators = [model.infer(inputs={"IN": VALUES}, response_queue=queue.SimpleQueue())
                 for _ in range(4)]
    tracemalloc.stop()
    for iterator in iterators:
        assert sum(1 for response in iterator if response.outputs) == len(VALUES)
server.stop()
print("survived")
""")
    assert "survived" in out


def test_core_threads_free_their_thread_states_when_they_exit():
    """The kept thread states go with their threads: five servers started,
    used and stopped leave as many thread states as there were before."""
    out = run_case("""
before = thread_states()
for cycle in range(5):
    server = start(tritonserver.example_model_repository())
    forwarded(server.model("repeat_int32"), 20)
    serving = thread_states()
    server.stop()
    del server
    deadline = time.monotonic() + 10
    while thread_states() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    print("cycle", cycle, "serving", serving, "after", thread_states())
    assert serving > before, "no core thread took the GIL"
    assert thread_states() == before, (before, thread_states())
print("freed")
""")
    assert "freed" in out


def test_a_python_model_threads_thread_states(tmp_path):
    """The same for a Python model (the inprocess backend) loaded and
    unloaded: its instance thread's state goes at each unload, and once the
    server stops, no thread state of the core's threads is left."""
    repository = copy_in_process(str(tmp_path), ["python_affine"])
    out = run_case(f"""
before = thread_states()
server = start({repository!r}, model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
for cycle in range(4):
    model = server.load("python_affine")
    x = np.arange(8, dtype=np.float32)
    for _ in range(10):
        response = next(model.infer(inputs={{"INPUT0": x}}))
        assert np.array_equal(np.from_dlpack(response.outputs["OUTPUT0"]), 2 * x + 1)
    del response
    loaded = thread_states()
    server.unload("python_affine", wait_until_unloaded=True)
    deadline = time.monotonic() + 10
    while thread_states() >= loaded and time.monotonic() < deadline:
        time.sleep(0.05)
    print("cycle", cycle, "loaded", loaded, "unloaded", thread_states())
    assert thread_states() < loaded, "the instance thread kept its thread state after the unload"
server.stop()
del server, model
deadline = time.monotonic() + 10
while thread_states() > before and time.monotonic() < deadline:
    time.sleep(0.05)
assert thread_states() == before, (before, thread_states())
print("freed")
""")
    assert "freed" in out
