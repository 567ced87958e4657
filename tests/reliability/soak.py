"""Soak harness: hunts rare crashes, wrong exits, wrong answers and hangs at
teardown by running small scenarios again and again, each in a fresh
process, while busy-loop processes take the CPUs the server's threads want.

A script with a time budget, not a test module: pytest does not collect it
and the default test run does not start it (docs/reliability.md, "Soak
harness"). Run from the repository root::

    python tests/reliability/soak.py --list
    python tests/reliability/soak.py --minutes 30
    python tests/reliability/soak.py --minutes 5 --load 0 --only 'unload-in-flight'
    python tests/reliability/soak.py --core-mirror <bare clone of triton-inference-server/core>

Scenarios run round-robin until the budget is spent; each run is one child
process (this script with --child, or pytest for test-api) in a session of
its own, with TRITONSERVER_CRASH_REPORT=1: a child killed by a fatal signal
prints every thread's native backtrace (tritonserver._crash_report) before
faulthandler's Python frames. A child that outlives --run-timeout is hung:
its Python stacks (SIGUSR1, faulthandler) and the native stacks of it and
every process below it go into its log, then its process group is killed.

A child tells what went wrong by its exit status and one line:

* 0: every answer it got was right (requests that ended with an error the
  scenario allows, e.g. while its model unloads, are counted, not failed);
* 3 and ``WRONG: ...``: an answer that arrived was not the right one;
* 4 and ``SIGNAL: ...``: a process it started (``serve``) died of a signal;
* 6 and ``HANG: ...``: something it waited for did not come within its
  bound (stacks printed);
* 77 and ``SKIP: ...``: the scenario cannot run here;
* anything else: an error it did not expect (its traceback printed).

Outcomes are counted per scenario and printed as one table at the end
(also written to <out>/summary.json); every failing run's output is kept in
<out>/<scenario>.<run>.log and named in a line printed when it fails.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import faulthandler
import importlib
import importlib.util
import io
import json
import os
import pathlib
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, NamedTuple, Optional, Sequence

import numpy as np

if TYPE_CHECKING:
    import tritonserver

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS_DIR = os.path.dirname(HERE)

# The child's exit statuses (the module docstring says what each means).
EXIT_WRONG = 3
EXIT_SIGNAL = 4
EXIT_HANG = 6
EXIT_SKIP = 77

OUTCOMES = ("pass", "signal", "exit", "hang", "wrong")

# NVIDIA's test_api.py at the core version the package embeds, and the tests
# it fails on this CPU-only build (test_stop's model asks for GPU 0): they
# are deselected, so a run passes when pytest exits 0.
TEST_API_TAG = "r24.10"
TEST_API_KNOWN_FAILURES = ("test_api.py::ServerTests::test_stop",)

# Bounds inside a child; each below the default --run-timeout, so a child
# names what it waited for before the harness has to kill it.
UNLOAD_TIMEOUT_S = 60.0
JOIN_TIMEOUT_S = 60.0
STREAM_WAIT_S = 60.0
CLIENT_TIMEOUT_S = 60.0
SERVE_EXIT_TIMEOUT_S = 10
SERVE_EXIT_MARGIN_S = 20.0
# How long the harness spends reading a hung run's stacks (gdb, all its
# processes together) before it kills it.
HANG_REPORT_S = 240.0
# Lines of a failure shown under its line (the log keeps everything).
DETAIL_LINES = 8

TWO_CPU_INSTANCES = "instance_group [ { kind: KIND_CPU count: 2 } ]"

# A CPU-load process: a busy loop that ends once its parent, the harness, is
# gone (even killed with SIGKILL, when no finally clause runs).
BUSY_LOOP = """\
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(200000):
        pass
"""


# ---- The scenarios' registry --------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    body: Optional[Callable[["Run"], None]]  # None: test-api, a pytest run of its own
    needs: tuple[str, ...] = ()  # modules that must be importable
    refusal: Optional[Callable[[argparse.Namespace], Optional[str]]] = None  # why not here


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, needs: tuple[str, ...] = (),
             refusal: Optional[Callable[[argparse.Namespace], Optional[str]]] = None
             ) -> Callable[[Callable[["Run"], None]], Callable[["Run"], None]]:
    """Registers a child's body under `name`; its docstring's first line is
    the summary --list prints."""
    def register(body: Callable[["Run"], None]) -> Callable[["Run"], None]:
        summary = (body.__doc__ or "").strip().split("\n\n")[0]
        SCENARIOS[name] = Scenario(name, " ".join(summary.split()), body, needs, refusal)
        return body
    return register


def why_not(entry: Scenario, args: argparse.Namespace) -> Optional[str]:
    """Why `entry` cannot run here, or None. Looked up without importing the
    modules (this process stays small: it must outlive its children)."""
    for module in entry.needs:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"{module} is not importable"
    return entry.refusal(args) if entry.refusal is not None else None


def stub_refusal(args: argparse.Namespace) -> Optional[str]:
    """Why the python backend's stub cannot run here (None: it can)."""
    try:
        from tritonserver._core import find_core, stub_environment

        stub = stub_environment(find_core())
    except Exception as e:  # no core found: the reason is the error
        return f"no stub environment: {type(e).__name__}: {e}"
    return None if stub.usable else f"the python backend is refused here: {stub.reason}"


def test_api_refusal(args: argparse.Namespace) -> Optional[str]:
    if not args.test_api_dir:
        return "neither --test-api nor --core-mirror was given"
    return None


# ---- In the child: what a run saw ---------------------------------------------------------


class Wrong(Exception):
    """An answer that arrived was not the right one."""


class Hung(Exception):
    """Something the child waited for did not come within its bound."""


class Skip(Exception):
    """The scenario cannot run here."""


class ChildSignal(Exception):
    """A process the child started died of a signal."""


def is_timeout(error: BaseException) -> bool:
    """A client's timeout: a request that waited past its bound is a hang,
    not an error the scenario allows."""
    return isinstance(error, TimeoutError) or "timeout" in type(error).__name__.lower()


def formatted(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


class Checker:
    """What a child's requests got, from every thread: answers checked,
    requests ended by an error the scenario allows, and what fails the run
    (a wrong answer, a wait past its bound, any other error)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.answers = 0
        self.ended = 0
        self.wrong: list[str] = []
        self.hung: list[str] = []
        self.unexpected: list[tuple[str, str]] = []  # (what, its traceback)

    def answer(self, right: bool, what: str) -> None:
        with self._lock:
            self.answers += 1
            if not right:
                self.wrong.append(what)

    def same(self, got: Any, want: Any, what: str, rtol: float = 0.0) -> None:
        """One answer: `got` equals `want` (within rtol when given)."""
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            right = False
        elif rtol:
            right = bool(np.allclose(got, want, rtol=rtol, atol=1e-4))
        else:
            right = bool(np.array_equal(got, want))
        self.answer(right, f"{what}: got {_short(got)}, want {_short(want)}")

    def error(self) -> None:
        """A request ended by an error the scenario allows."""
        with self._lock:
            self.ended += 1

    def hang(self, what: str) -> None:
        with self._lock:
            self.hung.append(what)

    def failed(self, error: BaseException, what: str) -> None:
        """An error the scenario does not allow (a client's timeout is a hang)."""
        if is_timeout(error):
            self.hang(f"{what}: {type(error).__name__}: {error}")
            return
        with self._lock:
            self.unexpected.append((f"{what}: {type(error).__name__}: {error}",
                                    formatted(error)))

    def verdict(self) -> None:
        """Raises what fails the run, worst first."""
        if self.wrong:
            raise Wrong(f"{len(self.wrong)} wrong answer(s); the first: {self.wrong[0]}")
        if self.hung:
            raise Hung(f"{len(self.hung)} wait(s) past the bound; the first: {self.hung[0]}")
        if self.unexpected:
            for what, trace in self.unexpected[:5]:
                print(f"{what}\n{trace}", file=sys.stderr, flush=True)
            raise RuntimeError(f"{len(self.unexpected)} unexpected error(s); the first: "
                               f"{self.unexpected[0][0]}")


def _short(value: np.ndarray) -> str:
    text = np.array2string(value.reshape(-1)[:8], threshold=8)
    return f"{text} (shape {value.shape})"


class Run:
    """A child's run: its folder, its random choices and its checker."""

    def __init__(self, name: str, workdir: str, seed: int):
        self.name = name
        self.workdir = workdir
        self.seed = seed
        self.rng = random.Random(seed)
        self.checker = Checker()
        self.stop = threading.Event()  # set: the traffic threads end

    def folder(self, name: str) -> str:
        path = os.path.join(self.workdir, name)
        os.makedirs(path, exist_ok=True)
        return path

    def server(self, registered: Optional[dict[str, tuple[Any, dict[str, Any]]]] = None,
               **options: Any) -> tritonserver.Server:
        """A started server: EXPLICIT model control, errors logged, a bounded
        exit timeout (the options given win); `registered`: PythonModels,
        name -> (model, register_model's settings)."""
        import tritonserver

        options.setdefault("model_control_mode", tritonserver.ModelControlMode.EXPLICIT)
        options.setdefault("log_error", True)
        options.setdefault("exit_timeout", 10)
        server = tritonserver.Server(**options)
        for name, (model, settings) in (registered or {}).items():
            server.register_model(name, model, **settings)
        return server.start(wait_until_ready=True, timeout=120)

    def pause(self, low: float, high: float) -> None:
        time.sleep(self.rng.uniform(low, high))


def tests_module(name: str) -> ModuleType:
    """A module of the test suite (tests/ is on sys.path in a child): the
    tests' own models and helpers, not copies of them."""
    return importlib.import_module(name)


def optional_module(name: str) -> ModuleType:
    """A third-party module the scenario needs; Skip when it is missing."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise Skip(f"{name} is not importable: {e}") from e


# ---- In the child: models and their checks ------------------------------------------------


def with_two_instances(config: str) -> str:
    """`config` with its instance groups replaced by two CPU instances: where
    core 2.51's teardown races live (docs/reliability.md)."""
    return re.sub(r"instance_group\s*\[[^\]]*\]", "", config) + f"\n{TWO_CPU_INSTANCES}\n"


def copy_example(repo: str, name: str) -> None:
    """One of the package's example models (our C++ SDK backends), with two
    CPU instances."""
    import tritonserver

    target = os.path.join(repo, name)
    shutil.copytree(os.path.join(tritonserver.example_model_repository(), name), target)
    rewrite_instances(target)


def rewrite_instances(model_folder: str) -> None:
    config = os.path.join(model_folder, "config.pbtxt")
    with open(config, encoding="utf-8") as f:
        text = f.read()
    with open(config, "w", encoding="utf-8") as f:
        f.write(with_two_instances(text))


def array(tensor: Any) -> np.ndarray:
    return np.from_dlpack(tensor)


def one_answer(model: tritonserver.Model, inputs: dict[str, Any], run: Run,
               what: str) -> Optional[dict[str, np.ndarray]]:
    """A request that answers once: its outputs, or None (counted wrong) when
    it answered other than once."""
    responses = list(model.infer(inputs=inputs))
    if len(responses) != 1:
        run.checker.answer(False, f"{what}: {len(responses)} responses, want 1")
        return None
    return {name: array(tensor) for name, tensor in responses[0].outputs.items()}


async def one_answer_async(model: tritonserver.Model, inputs: dict[str, Any], run: Run,
                           what: str) -> Optional[dict[str, np.ndarray]]:
    responses = [r async for r in model.async_infer(inputs=inputs)]
    if len(responses) != 1:
        run.checker.answer(False, f"{what}: {len(responses)} responses, want 1")
        return None
    return {name: array(tensor) for name, tensor in responses[0].outputs.items()}


class StreamCheck:
    """The answers of a decoupled request to repeat_int32 (or an echo of
    words): each response is the next expected value, in order; the final
    flag comes after all of them. Responses that arrived before an error
    are checked all the same."""

    def __init__(self, run: Run, expected: Sequence[Any], what: str):
        self.run = run
        self.expected = list(expected)
        self.what = what
        self.got = 0

    def piece(self, value: Any) -> bool:
        """One response's value; False (counted wrong) when it is not the next one."""
        if self.got >= len(self.expected) or value != self.expected[self.got]:
            want = self.expected[self.got] if self.got < len(self.expected) else "nothing"
            self.run.checker.answer(False, f"{self.what}: response {self.got} is {value!r}, "
                                           f"want {want!r}")
            return False
        self.got += 1
        return True

    def final(self) -> None:
        self.run.checker.answer(self.got == len(self.expected),
                                f"{self.what}: final after {self.got} of "
                                f"{len(self.expected)} responses")


class Probe(NamedTuple):
    """A model and one request's check (the request's index given)."""

    name: str
    check: Callable[[tritonserver.Model, int], None]


def identity_probe(run: Run, name: str, source: str = "INPUT0", target: str = "OUTPUT0",
                   scale: float = 1.0, offset: float = 0.0) -> Probe:
    """OUTPUT0 = scale * INPUT0 + offset (the identities, echoes, affine)."""
    def check(model: tritonserver.Model, i: int) -> None:
        x = np.arange(1 + i % 7, dtype=np.float32) + i
        out = one_answer(model, {source: x}, run, f"{name} #{i}")
        if out is not None:
            run.checker.same(out.get(target), scale * x + offset, f"{name} #{i}")
    return Probe(name, check)


def add_sub_probe(run: Run, name: str, inputs: tuple[str, str] = ("INPUT0", "INPUT1"),
                  outputs: tuple[str, str] = ("OUTPUT0", "OUTPUT1"), rows: bool = False,
                  rtol: float = 0.0) -> Probe:
    """The sum and difference of two inputs (FP32: [n], or [rows, 4] batched)."""
    def check(model: tritonserver.Model, i: int) -> None:
        shape = (1 + i % 3, 4) if rows else (1 + i % 5,)
        a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + i
        b = np.full(shape, 0.5, np.float32)
        out = one_answer(model, {inputs[0]: a, inputs[1]: b}, run, f"{name} #{i}")
        if out is not None:
            run.checker.same(out.get(outputs[0]), a + b, f"{name} #{i} {outputs[0]}", rtol)
            run.checker.same(out.get(outputs[1]), a - b, f"{name} #{i} {outputs[1]}", rtol)
    return Probe(name, check)


def repeat_values(i: int, rng: random.Random) -> np.ndarray:
    base = 1000 * (i % 1_000_000)  # within INT32
    return np.arange(base, base + rng.randint(1, 48), dtype=np.int32)


def repeat_probe(run: Run, name: str = "repeat_int32") -> Probe:
    """repeat_int32 (decoupled): one response per value of IN, in order."""
    def check(model: tritonserver.Model, i: int) -> None:
        values = repeat_values(i, run.rng)
        stream = StreamCheck(run, [[int(v)] for v in values], f"{name} #{i}")
        for response in model.infer(inputs={"IN": values}):
            if "OUT" in response.outputs and not stream.piece(
                    array(response.outputs["OUT"]).tolist()):
                return
            if response.final:
                stream.final()
    return Probe(name, check)


async def repeat_async(run: Run, model: tritonserver.Model, i: int) -> None:
    values = repeat_values(i, run.rng)
    stream = StreamCheck(run, [[int(v)] for v in values], f"{model.name} async #{i}")
    async for response in model.async_infer(inputs={"IN": values}):
        if "OUT" in response.outputs and not stream.piece(
                array(response.outputs["OUT"]).tolist()):
            return
        if response.final:
            stream.final()


def echo_model() -> Any:
    """The PythonModel of teardown_cycles.py (OUTPUT0 = INPUT0), with what
    register_model needs: two instances."""
    cycles = tests_module("reliability.teardown_cycles")
    return cycles.Echo, {"inputs": {"INPUT0": cycles.VEC}, "outputs": {"OUTPUT0": cycles.VEC},
                         "max_batch_size": 0, "instance_count": 2}


# ---- In the child: load, use, unload ------------------------------------------------------


def ensure_loaded(server: tritonserver.Server, name: str) -> None:
    """Load `name` unless it is ready (registered models load at start)."""
    import tritonserver

    try:
        if server.model(name).ready():
            return
    except tritonserver.TritonError:
        pass
    server.load(name)


def unload(server: tritonserver.Server, name: str) -> None:
    """Unload `name` and wait until the core has it unloaded (bounded)."""
    import tritonserver

    try:
        server.unload(name, wait_until_unloaded=True, timeout=UNLOAD_TIMEOUT_S)
    except tritonserver.UnavailableError as e:
        if "within" in str(e):
            raise Hung(str(e)) from e
        raise


def join_all(threads: Sequence[threading.Thread], what: str,
             timeout: float = JOIN_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    if alive:
        raise Hung(f"{what}: {', '.join(alive)} still running after {timeout:.0f} s")


def load_down(run: Run, server: tritonserver.Server, probes: Sequence[Probe],
              threads: int = 4, each: int = 4) -> None:
    """`threads` threads per model, each sending `each` requests one after
    another, every answer checked. No error is allowed: nothing unloads."""
    def one(probe: Probe, t: int) -> None:
        model = server.model(probe.name)
        for k in range(each):
            try:
                probe.check(model, t * each + k)
            except BaseException as e:  # counted; the run fails on it
                run.checker.failed(e, f"{probe.name} request {t * each + k}")
                return

    started = [threading.Thread(target=one, args=(p, t), name=f"{p.name}-{t}", daemon=True)
               for p in probes for t in range(threads)]
    for t in started:
        t.start()
    join_all(started, "requests of a load-down")


def cycles(run: Run, server: tritonserver.Server, probes: Sequence[Probe], count: int = 3,
           unload_order: Optional[Sequence[str]] = None) -> None:
    """`count` times: load every model, put it under concurrent requests,
    unload it and wait until it is gone; then stop the server."""
    for _ in range(count):
        for probe in probes:
            ensure_loaded(server, probe.name)
        load_down(run, server, probes)
        for name in unload_order or [p.name for p in probes]:
            unload(server, name)
    server.stop()


Allowed = Callable[[BaseException], bool]


def traffic(run: Run, loops: Sequence[tuple[str, Callable[[int], None]]],
            allowed: Allowed) -> list[threading.Thread]:
    """A thread per loop, calling it with 0, 1, 2... until run.stop is set;
    errors `allowed` are counted, others fail the run (and end that thread)."""
    def spin(what: str, loop: Callable[[int], None]) -> None:
        i = 0
        while not run.stop.is_set():
            try:
                loop(i)
            except BaseException as e:
                if not allowed(e):
                    run.checker.failed(e, f"{what} request {i}")
                    return
                run.checker.error()
                time.sleep(0.002)  # a model being unloaded refuses at once: leave the CPU
            i += 1

    threads = [threading.Thread(target=spin, args=(what, loop), name=what, daemon=True)
               for what, loop in loops]
    for t in threads:
        t.start()
    return threads


def async_traffic(run: Run, loops: Sequence[tuple[str, Callable[[int], Awaitable[None]]]],
                  allowed: Allowed, tasks_each: int = 4) -> threading.Thread:
    """An event loop on a thread of its own running `tasks_each` tasks per
    loop, as `traffic` does with threads."""
    async def spin(what: str, loop: Callable[[int], Awaitable[None]], task: int) -> None:
        i = 0
        while not run.stop.is_set():
            try:
                await loop(task * 100_000 + i)
            except BaseException as e:
                if not allowed(e):
                    run.checker.failed(e, f"{what} task {task} request {i}")
                    return
                run.checker.error()
                await asyncio.sleep(0.002)
            i += 1

    async def main() -> None:
        await asyncio.gather(*(spin(what, loop, task) for what, loop in loops
                               for task in range(tasks_each)))

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="asyncio", daemon=True)
    thread.start()
    return thread


def churn(run: Run, server: tritonserver.Server, names: Sequence[str], rounds: int = 8) -> None:
    """While traffic runs: unload a model (waiting until it is gone), then
    load it again, `rounds` times, at random moments."""
    for _ in range(rounds):
        run.pause(0.1, 0.5)
        name = run.rng.choice(list(names))
        unload(server, name)
        run.pause(0.0, 0.2)
        server.load(name)
    run.pause(0.1, 0.3)


def end_traffic(run: Run, threads: Sequence[threading.Thread]) -> None:
    run.stop.set()
    join_all(threads, "requests in flight")


def triton_errors(error: BaseException) -> bool:
    import tritonserver

    return isinstance(error, tritonserver.TritonError)


def in_flight_repository(run: Run, *extra: str) -> str:
    """identity_fp32 and repeat_int32 (C++, two instances each), and `extra`
    example models."""
    repo = run.folder("repo")
    for name in ("identity_fp32", "repeat_int32") + extra:
        copy_example(repo, name)
    return repo


# ---- Scenarios: load, infer, unload, for each backend kind --------------------------------


@scenario("load-unload-cpp")
def load_unload_cpp(run: Run) -> None:
    """The package's C++ SDK backends (example models identity_fp32,
    add_sub_fp32, repeat_int32), two CPU instances each: loaded, under
    concurrent requests, unloaded, 10 cycles."""
    repo = run.folder("repo")
    for name in ("identity_fp32", "add_sub_fp32", "repeat_int32"):
        copy_example(repo, name)
    server = run.server(model_repository=repo)
    cycles(run, server, [identity_probe(run, "identity_fp32"), add_sub_probe(run, "add_sub_fp32"),
                         repeat_probe(run)], count=10)


@scenario("load-unload-pythonmodel")
def load_unload_pythonmodel(run: Run) -> None:
    """A tritonserver.PythonModel (teardown_cycles.py's Echo, two instances),
    registered, then unloaded and loaded again, 10 cycles."""
    server = run.server(model_repository=run.folder("repo"), registered={"echo2": echo_model()})
    cycles(run, server, [identity_probe(run, "echo2")], count=10)


def python_backend_repository(run: Run) -> str:
    """teardown_cycles.py's python-backend echo (two instances) and
    tests/models/python_affine (2x + 1), made two instances."""
    cycles_module = tests_module("reliability.teardown_cycles")
    repo = run.folder("repo")
    cycles_module.write(repo, "pyback2", cycles_module.PYTHON_BACKEND, cycles_module.MODEL_PY)
    target = os.path.join(repo, "python_affine")
    shutil.copytree(os.path.join(TESTS_DIR, "models", "python_affine"), target,
                    ignore=shutil.ignore_patterns("__pycache__"))
    rewrite_instances(target)
    return repo


def load_unload_python_backend(run: Run, where: str, count: int) -> None:
    server = run.server(model_repository=python_backend_repository(run), python_backend=where)
    cycles(run, server, [identity_probe(run, "pyback2"),
                         identity_probe(run, "python_affine", scale=2.0, offset=1.0)], count)


@scenario("load-unload-stub", refusal=stub_refusal)
def load_unload_stub(run: Run) -> None:
    """python-backend model.py files on Triton's stub (python_backend="stub"),
    two instances each (two stub processes), 3 cycles."""
    load_unload_python_backend(run, "stub", count=3)


@scenario("load-unload-inprocess")
def load_unload_inprocess(run: Run) -> None:
    """The same model.py files run in this process (python_backend="inprocess"),
    two instances each, 10 cycles."""
    load_unload_python_backend(run, "inprocess", count=10)


@scenario("start-python-runtimes", refusal=stub_refusal)
def start_python_runtimes(run: Run) -> None:
    """inprocess/test_pb_bls.py's runtime test, the start that hung twice in
    CI: beside a server with an in-process python model that runs
    throughout, 8 servers one after another, each with a backend folder of
    its own, start three python models at once (on the stub, in-process by
    its runtime, on a python-based backend), answer once each, and stop."""
    pb_bls = tests_module("inprocess.test_pb_bls")
    kept = run.folder("kept")
    pb_bls.python_model(pathlib.Path(kept), "double", pb_bls.PLAIN_DOUBLE, pb_bls.DOUBLE_CONFIG)
    keeper = run.server(model_repository=kept, python_backend="inprocess",
                        startup_models=["double"])
    models = ["chosen", "by_backend", "on_stub"]
    for round_number in range(8):
        repo, backends = pb_bls.runtimes_repo(pathlib.Path(run.folder(f"round{round_number}")))
        server = run.server(model_repository=str(repo), backend_directory=str(backends),
                            python_backend="stub", startup_models=models)
        for name in models:
            response = next(server.model(name).infer(inputs={"X": np.ones(2, np.float32)}))
            run.checker.answer(np.from_dlpack(response.outputs["Y"]).tolist() == [2.0, 2.0],
                               f"round {round_number}: {name}")
        server.stop()
    keeper.stop()


def load_unload_framework(run: Run, key: str) -> None:
    """frameworks/conftest.py's add_sub model of framework `key`, batched by
    the dynamic batcher, two CPU instances."""
    framework = tests_module("frameworks.conftest").FRAMEWORKS[key]
    repo = run.folder("repo")
    framework.write(repo, "add_sub", framework.add_sub(),
                    with_two_instances(framework.batched_add_sub_config()))
    server = run.server(model_repository=repo)
    inputs, outputs = framework.add_sub_names
    cycles(run, server, [add_sub_probe(run, "add_sub", tuple(inputs), tuple(outputs), rows=True,
                                       rtol=1e-6)])


@scenario("load-unload-onnx", needs=("onnx", "onnxruntime"))
def load_unload_onnx(run: Run) -> None:
    """ONNX Runtime: add_sub built by frameworks/models_onnx.py, two CPU
    instances, 3 cycles."""
    load_unload_framework(run, "onnxruntime")


@scenario("load-unload-torch", needs=("torch",))
def load_unload_torch(run: Run) -> None:
    """TorchScript: add_sub scripted by frameworks/models_torch.py, two CPU
    instances, 3 cycles."""
    load_unload_framework(run, "pytorch")


@scenario("load-unload-openvino", needs=("onnx", "openvino"))
def load_unload_openvino(run: Run) -> None:
    """OpenVINO: add_sub converted by frameworks/models_openvino.py, two CPU
    instances, 3 cycles."""
    load_unload_framework(run, "openvino")


@scenario("load-unload-fil", needs=("tritonserver_fil", "xgboost", "treelite"))
def load_unload_fil(run: Run) -> None:
    """The FIL plugin (plugins/fil): an XGBoost regressor trained here, in
    plugins/test_fil.py's configuration (two CPU instances), 5 cycles."""
    fil = tests_module("plugins.test_fil")
    xgb = optional_module("xgboost")
    rng = np.random.default_rng(run.seed)
    x = rng.standard_normal((64, fil.FEATURES)).astype(np.float32)
    y = x @ rng.standard_normal(fil.FEATURES)
    booster = xgb.train({"objective": "reg:squarederror", "max_depth": 4}, xgb.DMatrix(x, y), 20)
    want = booster.predict(xgb.DMatrix(x))
    repo = run.folder("repo")
    fil.Repo(repo).add("fil_reg", fil.config("xgboost_json", 1, fil.REGRESSOR),
                       {"xgboost.json": fil.saved(booster)})

    def check(model: tritonserver.Model, i: int) -> None:
        rows = slice(i % 48, i % 48 + 16)
        out = one_answer(model, {"input__0": x[rows]}, run, f"fil_reg #{i}")
        if out is not None:  # FIL's tolerance (plugins/test_fil.py)
            got = out.get("output__0")
            run.checker.same(None if got is None else got.reshape(-1), want[rows],
                             f"fil_reg #{i}", rtol=1e-3)

    server = run.server(model_repository=repo)
    cycles(run, server, [Probe("fil_reg", check)], count=5)


@scenario("load-unload-ensemble", needs=("torch", "onnx", "onnxruntime"))
def load_unload_ensemble(run: Run) -> None:
    """frameworks/test_pytorch_ensemble.py's ensemble (TorchScript, ONNX and
    a PythonModel in one request), each step two CPU instances: the ensemble
    loaded (its steps with it), then it and its steps unloaded, 3 cycles."""
    ensemble = tests_module("frameworks.test_pytorch_ensemble")
    repo = run.folder("repo")
    ensemble.models.write(repo, "torch_add_sub", ensemble.models.script(ensemble.models.AddSub()),
                          with_two_instances(ensemble.TORCH_CONFIG))
    ensemble.onnx_models.write(repo, "onnx_scaled", ensemble.onnx_models.scaled(3.0),
                               with_two_instances(ensemble.ONNX_CONFIG))
    os.makedirs(os.path.join(repo, "python_negate", "1"))
    with open(os.path.join(repo, "python_negate", "1", "model.py"), "w") as f:
        f.write(textwrap.dedent(ensemble.PYTHON_MODEL))
    with open(os.path.join(repo, "python_negate", "config.pbtxt"), "w") as f:
        f.write(with_two_instances(ensemble.PYTHON_CONFIG))
    os.makedirs(os.path.join(repo, "pipeline", "1"))
    with open(os.path.join(repo, "pipeline", "config.pbtxt"), "w") as f:
        f.write(ensemble.ENSEMBLE_CONFIG)

    def check(model: tritonserver.Model, i: int) -> None:
        a = np.arange(4, dtype=np.float32).reshape(1, 4) + i
        b = np.full((1, 4), 0.25, np.float32)
        out = one_answer(model, {"A": a, "B": b}, run, f"pipeline #{i}")
        if out is not None:
            run.checker.same(out.get("RESULT"), -((a + b) * 3.0) + 0.5, f"pipeline #{i}", 1e-6)
            run.checker.same(out.get("DIFF"), a - b, f"pipeline #{i} DIFF", 1e-6)

    server = run.server(model_repository=repo)
    cycles(run, server, [Probe("pipeline", check)],
           unload_order=["pipeline", "torch_add_sub", "onnx_scaled", "python_negate"])


# ---- Scenarios: unloading with requests in flight -----------------------------------------


@scenario("unload-in-flight-api")
def unload_in_flight_api(run: Run) -> None:
    """The in-process API: threads calling model.infer and asyncio tasks
    calling model.async_infer (identity_fp32 and repeat_int32, C++, and a
    PythonModel, two instances each) while the models unload and load again;
    a request may fail while its model unloads, an answer must be right."""
    server = run.server(model_repository=in_flight_repository(run),
                        registered={"echo2": echo_model()})
    names = ["identity_fp32", "repeat_int32", "echo2"]
    for name in names:
        ensure_loaded(server, name)
    probes = {p.name: p for p in (identity_probe(run, "identity_fp32"), repeat_probe(run),
                                  identity_probe(run, "echo2"))}
    models = {name: server.model(name) for name in names}

    def sync_loop(name: str) -> tuple[str, Callable[[int], None]]:
        return name, lambda i: probes[name].check(models[name], i)

    async def identity_async(name: str, i: int) -> None:
        x = np.full(3, i % 1000, np.float32)
        out = await one_answer_async(models[name], {"INPUT0": x}, run, f"{name} async #{i}")
        if out is not None:
            run.checker.same(out.get("OUTPUT0"), x, f"{name} async #{i}")

    threads = traffic(run, [sync_loop(name) for name in names], triton_errors)
    threads.append(async_traffic(run, [
        ("identity_fp32 async", lambda i: identity_async("identity_fp32", i)),
        ("echo2 async", lambda i: identity_async("echo2", i)),
        ("repeat_int32 async", lambda i: repeat_async(run, models["repeat_int32"], i))],
        triton_errors, tasks_each=3))
    churn(run, server, names)
    end_traffic(run, threads)
    server.stop()


@scenario("unload-in-flight-http", needs=("tritonclient.http",))
def unload_in_flight_http(run: Run) -> None:
    """KServe HTTP (tritonserver.frontends.KServeHttp in the child, tritonclient.http
    in threads) while identity_fp32 (C++) and a PythonModel unload and load again."""
    from tritonserver.frontends import KServeHttp

    httpclient = optional_module("tritonclient.http")
    utils = optional_module("tritonclient.utils")
    server = run.server(model_repository=in_flight_repository(run),
                        registered={"echo2": echo_model()})
    names = ["identity_fp32", "echo2"]
    for name in names:
        ensure_loaded(server, name)
    frontend = KServeHttp(server, KServeHttp.Options(port=0))
    frontend.start()

    def loop(name: str, t: int) -> tuple[str, Callable[[int], None]]:
        client = httpclient.InferenceServerClient(frontend.url, connection_timeout=CLIENT_TIMEOUT_S,
                                                  network_timeout=CLIENT_TIMEOUT_S)

        def one(i: int) -> None:
            x = np.arange(1 + i % 9, dtype=np.float32) + i
            tensor = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            got = client.infer(name, [tensor]).as_numpy("OUTPUT0")
            run.checker.same(got, x, f"http {name} #{i}")
        return f"http {name} {t}", one

    allowed: Allowed = lambda e: isinstance(e, utils.InferenceServerException)  # noqa: E731
    threads = traffic(run, [loop(name, t) for name in names for t in range(2)], allowed)
    try:
        churn(run, server, names)
        end_traffic(run, threads)
    finally:
        frontend.stop(timeout=5)
    server.stop()


def grpc_stream_loop(run: Run, url: str, model_name: str, what: str) -> Callable[[int], None]:
    """A loop body for `traffic`: one gRPC stream (tritonclient.grpc), one
    repeat_int32 request at a time on it, every response checked in order
    until its final flag or an error. A stream broken by an error the
    scenario allows is started again by the next call."""
    grpcclient = optional_module("tritonclient.grpc")
    state: dict[str, Any] = {}

    def start() -> None:
        client = grpcclient.InferenceServerClient(url)
        results: queue.Queue[tuple[Any, Any]] = queue.Queue()
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        state.update(client=client, results=results)

    def close() -> None:
        client = state.pop("client", None)
        if client is not None:
            try:
                client.stop_stream()
            finally:
                client.close()

    def one(i: int) -> None:
        if "client" not in state:
            start()
        values = repeat_values(i, run.rng)
        request_id = f"{what}-{i}"
        stream = StreamCheck(run, [[int(v)] for v in values], f"{what} #{i}")
        tensor = grpcclient.InferInput("IN", [len(values)], "INT32")
        tensor.set_data_from_numpy(values)
        try:
            state["client"].async_stream_infer(model_name, [tensor], request_id=request_id,
                                               enable_empty_final_response=True)
            while True:
                try:
                    result, error = state["results"].get(timeout=STREAM_WAIT_S)
                except queue.Empty:
                    run.checker.hang(f"{what} #{i}: no response for {STREAM_WAIT_S:.0f} s")
                    run.stop.set()
                    return
                if error is not None:  # the stream's errors carry no request id:
                    raise error        # one request at a time, it is this one's
                response = result.get_response()
                if response.id != request_id:
                    continue  # the empty final response of a request an error ended
                if response.outputs and not stream.piece(result.as_numpy("OUT").tolist()):
                    return
                if response.parameters["triton_final_response"].bool_param:
                    stream.final()
                    return
        except BaseException:
            close()  # the next call starts a stream of its own
            raise
        finally:
            if run.stop.is_set():
                close()

    return one


@scenario("unload-in-flight-grpc", needs=("tritonclient.grpc",))
def unload_in_flight_grpc(run: Run) -> None:
    """KServe gRPC streams (tritonserver.frontends.KServeGrpc in the child,
    tritonclient.grpc start_stream/async_stream_infer on repeat_int32, C++
    decoupled, two instances) and unary calls to identity_fp32, while both
    unload and load again."""
    from tritonserver.frontends import KServeGrpc

    grpcclient = optional_module("tritonclient.grpc")
    utils = optional_module("tritonclient.utils")
    server = run.server(model_repository=in_flight_repository(run))
    names = ["identity_fp32", "repeat_int32"]
    for name in names:
        ensure_loaded(server, name)
    frontend = KServeGrpc(server, KServeGrpc.Options(port=0))
    frontend.start()
    allowed: Allowed = lambda e: isinstance(e, utils.InferenceServerException)  # noqa: E731
    unary = grpcclient.InferenceServerClient(frontend.url)

    def identity(i: int) -> None:
        x = np.arange(1 + i % 9, dtype=np.float32) + i
        tensor = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        got = unary.infer("identity_fp32", [tensor], client_timeout=CLIENT_TIMEOUT_S)
        run.checker.same(got.as_numpy("OUTPUT0"), x, f"grpc identity_fp32 #{i}")

    loops = [(f"stream {t}", grpc_stream_loop(run, frontend.url, "repeat_int32", f"stream{t}"))
             for t in range(3)]
    threads = traffic(run, loops + [("grpc identity_fp32", identity)], allowed)
    try:
        churn(run, server, names)
        end_traffic(run, threads)
    finally:
        unary.close()
        frontend.stop(timeout=5)
    server.stop()


@scenario("unload-in-flight-openai", needs=("openai",))
def unload_in_flight_openai(run: Run) -> None:
    """OpenAI streams (the openai client, stream=True) from the OpenAI
    frontend in the child, on frontends/openai/test_openai.py's Words
    (a decoupled PythonModel sending one word per response), while it
    unloads and loads again."""
    openai = optional_module("openai")
    words_model = tests_module("frontends.openai.test_openai")
    from tritonserver.frontends import OpenAI

    server = run.server(registered={"words": (words_model.Words, {
        "inputs": {"text_input": words_model.TEXT}, "outputs": {"text_output": words_model.TEXT},
        "decoupled": True})})
    frontend = OpenAI(server, OpenAI.Options(port=0))
    frontend.start()

    def loop(t: int) -> tuple[str, Callable[[int], None]]:
        client = openai.OpenAI(base_url=frontend.url, api_key="unused", max_retries=0,
                               timeout=CLIENT_TIMEOUT_S)

        def one(i: int) -> None:
            words = [f"s{t}-{i}-{k}" for k in range(run.rng.randint(1, 12))]
            stream = StreamCheck(run, [w + " " for w in words], f"openai stream {t} #{i}")
            finish = None
            for chunk in client.completions.create(model="words", prompt=" ".join(words),
                                                   stream=True, extra_body={"delay": 0.002}):
                for choice in chunk.choices:
                    if choice.text and not stream.piece(choice.text):
                        return
                    finish = choice.finish_reason or finish
            if stream.got == len(stream.expected) and finish == "stop":
                stream.final()
            else:  # Words stops early, and rightly, when its request is cancelled
                run.checker.error()
        return f"openai {t}", one

    allowed: Allowed = lambda e: isinstance(e, openai.APIError) and not is_timeout(e)  # noqa: E731
    threads = traffic(run, [loop(t) for t in range(3)], allowed)
    try:
        churn(run, server, ["words"])
        end_traffic(run, threads)
    finally:
        frontend.stop(timeout=5)
    server.stop()


# ---- Scenarios: stopping with requests in flight ------------------------------------------


@scenario("stop-in-flight")
def stop_in_flight(run: Run) -> None:
    """server.stop() while threads and asyncio tasks have requests in flight
    (identity_fp32, repeat_int32, sleep_us, a PythonModel); every request must
    end, answered right or with an error. 3 servers per run."""
    repo = in_flight_repository(run, "sleep_us")
    for server_number in range(3):
        run.stop.clear()
        server = run.server(model_repository=repo, registered={"echo2": echo_model()},
                            startup_models=["identity_fp32", "repeat_int32", "sleep_us"])
        models = {name: server.model(name)
                  for name in ("identity_fp32", "repeat_int32", "sleep_us", "echo2")}
        identity, echo, repeat = (identity_probe(run, "identity_fp32"),
                                  identity_probe(run, "echo2"), repeat_probe(run))

        def sleep(i: int) -> None:
            delay = np.array([run.rng.randint(1_000, 50_000)], np.int64)
            out = one_answer(models["sleep_us"], {"DELAY_US": delay}, run, f"sleep_us #{i}")
            if out is not None:
                run.checker.answer(int(out["WAITED_US"][0]) >= int(delay[0]),
                                   f"sleep_us #{i}: waited {out['WAITED_US']} of {delay}")

        threads = traffic(run, [
            ("identity_fp32", lambda i: identity.check(models["identity_fp32"], i)),
            ("echo2", lambda i: echo.check(models["echo2"], i)),
            ("repeat_int32", lambda i: repeat.check(models["repeat_int32"], i)),
            ("sleep_us", sleep)], triton_errors)
        threads.append(async_traffic(run, [
            ("repeat_int32 async", lambda i: repeat_async(run, models["repeat_int32"], i))],
            triton_errors, tasks_each=4))
        run.pause(0.2, 0.8)
        server.stop()
        end_traffic(run, threads)
        print(f"server {server_number}: stopped with requests in flight", flush=True)


@scenario("serve-sigterm", needs=("tritonclient.http", "tritonclient.grpc"))
def serve_sigterm(run: Run) -> None:
    """python -m tritonserver serve (frontends/serve_process.py) on 127.0.0.1,
    ports the system picks, under HTTP requests and a gRPC stream, sent
    SIGTERM while they are in flight: it must exit 0 within its exit timeout
    and a margin."""
    Serve = tests_module("frontends.serve_process").Serve
    httpclient = optional_module("tritonclient.http")
    utils = optional_module("tritonclient.utils")
    serve = Serve("--model-repository", in_flight_repository(run, "sleep_us"),
                  "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0",
                  "--log-info", "false", "--exit-timeout-secs", str(SERVE_EXIT_TIMEOUT_S))
    signalled = threading.Event()
    try:
        serve.wait_ready()
        http_url = f"127.0.0.1:{serve.ports['HTTPService']}"
        grpc_url = f"127.0.0.1:{serve.ports['GRPCInferenceService']}"

        def allowed(e: BaseException) -> bool:
            # Before SIGTERM nothing may fail; after it, a refused or cut
            # connection is how serving ends (a wrong answer never is).
            return signalled.is_set() or isinstance(e, utils.InferenceServerException)

        def http_loop(model: str) -> Callable[[int], None]:
            client = httpclient.InferenceServerClient(
                http_url, connection_timeout=CLIENT_TIMEOUT_S, network_timeout=CLIENT_TIMEOUT_S)

            def one(i: int) -> None:
                if model == "sleep_us":
                    delay = np.array([run.rng.randint(100_000, 400_000)], np.int64)
                    tensor = httpclient.InferInput("DELAY_US", [1], "INT64")
                    tensor.set_data_from_numpy(delay)
                    waited = client.infer(model, [tensor]).as_numpy("WAITED_US")
                    run.checker.answer(waited is not None and int(waited[0]) >= int(delay[0]),
                                       f"http sleep_us #{i}: waited {waited} of {delay}")
                    return
                x = np.arange(1 + i % 9, dtype=np.float32) + i
                tensor = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
                tensor.set_data_from_numpy(x)
                run.checker.same(client.infer(model, [tensor]).as_numpy("OUTPUT0"), x,
                                 f"http {model} #{i}")
            return one

        threads = traffic(run, [
            ("http identity_fp32", http_loop("identity_fp32")),
            ("http sleep_us", http_loop("sleep_us")),
            ("grpc stream", grpc_stream_loop(run, grpc_url, "repeat_int32", "stream"))],
            allowed)
        run.pause(0.3, 1.5)
        signalled.set()
        serve.process.send_signal(signal.SIGTERM)
        run.stop.set()
        limit = SERVE_EXIT_TIMEOUT_S + SERVE_EXIT_MARGIN_S
        try:
            code = serve.wait(limit)
        except subprocess.TimeoutExpired:
            from tritonserver import _crash_report

            stacks = "".join(f"native stacks of process {pid}:\n"
                             f"{_crash_report.native_backtraces(pid, timeout=60)}"
                             for pid in [serve.process.pid] +
                             _crash_report.descendants(serve.process.pid))
            print_serve_output(serve, stacks)
            raise Hung(f"serve did not exit within {limit:.0f} s of SIGTERM") from None
        if code < 0:
            print_serve_output(serve)
            raise ChildSignal(f"serve died of signal {-code} ({signal_name(-code)})")
        if code != 0:
            print_serve_output(serve)
            raise RuntimeError(f"serve exited with status {code} after SIGTERM, not 0")
        join_all(threads, "clients after serve's exit")
        print(serve.output(), flush=True)
    finally:
        serve.end()


def print_serve_output(serve: Any, stacks: str = "") -> None:
    """serve's whole output to this child's stdout (the kept log), its last
    lines to stderr (the harness shows them under the failure)."""
    print(f"---- serve's output ----\n{serve.output()}{stacks}", flush=True)
    tail = serve.output().splitlines()[-DETAIL_LINES:]
    print("serve's last lines:\n" + "\n".join("  " + line for line in tail), file=sys.stderr,
          flush=True)


@scenario("serve-sigterm-unread", needs=("tritonclient.http",))
def serve_sigterm_unread(run: Run) -> None:
    """python -m tritonserver serve under a supervisor that reads its output
    until it is ready, then closes the pipe (issue 53's third sighting: serve
    exited 1 after SIGTERM), with HTTP requests in flight and the model
    unloaded and loaded again meanwhile: it must exit 0 on SIGTERM."""
    httpclient = optional_module("tritonclient.http")
    utils = optional_module("tritonclient.utils")
    repo = in_flight_repository(run, "sleep_us")
    process = subprocess.Popen(
        [sys.executable, "-m", "tritonserver", "serve", "--model-repository", repo,
         "--model-control-mode", "explicit", "--load-model", "*", "--http-port", "0",
         "--grpc-port", "0", "--metrics-port", "0", "--log-verbose", "1",
         "--exit-timeout-secs", str(SERVE_EXIT_TIMEOUT_S)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    signalled = threading.Event()
    try:
        assert process.stdout is not None
        seen = b""
        deadline = time.monotonic() + 120
        while b"tritonserver serve: ready" not in seen and time.monotonic() < deadline:
            chunk = process.stdout.read1(65536)
            if not chunk:
                break
            seen += chunk
        text = seen.decode("utf-8", "replace")
        if "tritonserver serve: ready" not in text:
            print(text, flush=True)
            raise RuntimeError("serve did not become ready")
        started = re.search(r"Started HTTPService at \S+:(\d+)", text)
        assert started is not None, text
        port = int(started.group(1))
        process.stdout.close()  # the supervisor stops reading: every later line gets EPIPE

        def new_client() -> Any:  # one per thread: a tritonclient HTTP client is not shared
            return httpclient.InferenceServerClient(
                f"127.0.0.1:{port}", connection_timeout=CLIENT_TIMEOUT_S,
                network_timeout=CLIENT_TIMEOUT_S)

        client, controller = new_client(), new_client()

        def one(i: int) -> None:
            x = np.arange(1 + i % 9, dtype=np.float32) + i
            tensor = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            run.checker.same(client.infer("identity_fp32", [tensor]).as_numpy("OUTPUT0"), x,
                             f"http identity_fp32 #{i}")

        def control(i: int) -> None:  # verbose log lines that nobody reads
            controller.unload_model("repeat_int32")
            controller.load_model("repeat_int32")

        threads = traffic(run, [("http identity_fp32", one), ("model control", control)],
                          lambda e: signalled.is_set()
                          or isinstance(e, utils.InferenceServerException))
        run.pause(0.3, 1.5)
        signalled.set()
        process.send_signal(signal.SIGTERM)
        run.stop.set()
        limit = SERVE_EXIT_TIMEOUT_S + SERVE_EXIT_MARGIN_S
        try:
            code = process.wait(limit)
        except subprocess.TimeoutExpired:
            from tritonserver import _crash_report

            print("".join(f"native stacks of process {pid}:\n"
                          f"{_crash_report.native_backtraces(pid, timeout=60)}"
                          for pid in [process.pid] + _crash_report.descendants(process.pid)),
                  flush=True)
            raise Hung(f"serve did not exit within {limit:.0f} s of SIGTERM") from None
        if code < 0:
            raise ChildSignal(f"serve died of signal {-code} ({signal_name(-code)})")
        if code != 0:
            raise RuntimeError(f"serve exited with status {code} after SIGTERM, not 0 (its "
                               "output was not read: see its exit status only)")
        join_all(threads, "clients after serve's exit")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


# ---- Scenarios: lifecycle -----------------------------------------------------------------


@scenario("context-manager")
def context_manager(run: Run) -> None:
    """api/test_lifecycle.py's test_context_manager_starts_and_stops (a
    server as a context manager on the example models, one request, then
    refused once stopped), 50 times in one process."""
    import pytest
    import tritonserver

    lifecycle = tests_module("api.test_lifecycle")
    for round_number in range(50):
        try:
            lifecycle.test_context_manager_starts_and_stops(
                tritonserver.example_model_repository())
        except (AssertionError, pytest.fail.Exception) as e:
            raise Wrong(f"round {round_number}: {type(e).__name__}: {e}") from e
        run.checker.answer(True, "")


SCENARIOS["test-api"] = Scenario(
    "test-api",
    f"NVIDIA's test_api.py (triton-inference-server/core {TEST_API_TAG}, python/test), "
    f"unchanged, under pytest in a copy of its folder; its known failures on a CPU-only "
    f"machine ({', '.join(TEST_API_KNOWN_FAILURES)}) deselected",
    None, ("pytest",), test_api_refusal)


# ---- The child's entry --------------------------------------------------------------------


def child_main(name: str, workdir: str, seed: int) -> None:
    """Runs scenario `name` in this process and exits with its status."""
    faulthandler.enable()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the harness's hang report
    sys.path[:] = [TESTS_DIR] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]
    # tritonserver first: it turns grpc's fork handlers off before anything imports grpc.
    from tritonserver import _crash_report

    _crash_report.enable_if_requested()
    _crash_report.set_context(f"soak {name}")
    print(f"soak: {name} (seed {seed}, pid {os.getpid()})", flush=True)
    run = Run(name, workdir, seed)
    body = SCENARIOS[name].body
    assert body is not None
    try:
        body(run)
        run.checker.verdict()
    except Skip as e:
        print(f"SKIP: {e}", flush=True)
        sys.exit(EXIT_SKIP)
    except Wrong as e:
        say_failure("WRONG", e, run)
        sys.exit(EXIT_WRONG)
    except ChildSignal as e:
        say_failure("SIGNAL", e, run)
        sys.exit(EXIT_SIGNAL)
    except Hung as e:
        say_failure("HANG", e, run)
        print("soak: Python stacks of every thread:", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(all_threads=True)
        print("soak: native stacks of this process:\n"
              f"{_crash_report.native_backtraces(os.getpid(), timeout=90)}",
              file=sys.stderr, flush=True)
        os._exit(EXIT_HANG)  # a thread that hangs would hold a normal exit too
    except Exception as e:  # the status says "exit"; the line says why
        traceback.print_exc()
        first = str(e).splitlines()[0] if str(e) else ""
        print(f"ERROR: {type(e).__name__}: {first}", file=sys.stderr, flush=True)
        sys.exit(1)
    print(f"soak: {name}: {run.checker.answers} answers right, {run.checker.ended} requests "
          "ended by an allowed error", flush=True)


def say_failure(kind: str, error: BaseException, run: Run) -> None:
    checker = run.checker
    for what in checker.wrong[1:20] + checker.hung[1:20]:
        print(f"  also: {what}", file=sys.stderr)
    print(f"{kind}: {error}", file=sys.stderr, flush=True)


# ---- The harness: running one child --------------------------------------------------------


@dataclass
class Result:
    scenario: str
    run: int
    outcome: str  # one of OUTCOMES, or "skip"
    seconds: float
    detail: list[str] = field(default_factory=list)
    log: Optional[str] = None
    note: str = ""  # a pass's last line: what it checked (pytest's counts for test-api)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def child_environment() -> dict[str, str]:
    env = dict(os.environ, TRITONSERVER_CRASH_REPORT="1", PYTHONFAULTHANDLER="1",
               PYTHONUNBUFFERED="1")
    for key in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "grpc_proxy",
                "ALL_PROXY", "all_proxy"):
        env.pop(key, None)  # every client here talks to 127.0.0.1
    return env


def child_command(entry: Scenario, rundir: str, seed: int,
                  args: argparse.Namespace) -> tuple[list[str], str]:
    """The command line of one run and the folder it runs in."""
    if entry.body is not None:
        return ([sys.executable, os.path.abspath(__file__), "--child", entry.name,
                 "--workdir", rundir, "--seed", str(seed)], rundir)
    copy = os.path.join(rundir, "test")
    shutil.copytree(args.test_api_dir, copy, ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-m", "pytest", "test_api.py", "-p", "no:cacheprovider", "-q"]
    for nodeid in TEST_API_KNOWN_FAILURES:
        command += ["--deselect", nodeid]
    return command, copy


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """The run's process group (the child and whatever it started)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        pass


def hang_report(process: subprocess.Popen[bytes], python_stacks: bool) -> str:
    """The stacks of a hung run: Python's (the child's faulthandler, into its
    stderr), then the native stacks of the child and every process below it,
    within HANG_REPORT_S."""
    from tritonserver import _crash_report

    if python_stacks:
        try:
            process.send_signal(signal.SIGUSR1)
            time.sleep(2)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + HANG_REPORT_S
    parts = []
    for pid in [process.pid] + _crash_report.descendants(process.pid):
        left = deadline - time.monotonic()
        if left < 10:
            parts.append(f"==== process {pid} ({_crash_report.command_line(pid)}): no time left to read it\n")
            continue
        parts.append(f"==== native stacks of process {pid} ({_crash_report.command_line(pid)}) ====\n"
                     f"{_crash_report.native_backtraces(pid, timeout=min(120.0, left))}")
    return "".join(parts)


def run_once(entry: Scenario, number: int, args: argparse.Namespace, work_root: str,
             current: list[subprocess.Popen[bytes]]) -> Result:
    """One run of `entry` in a fresh process, classified; its log kept in
    args.out when it failed."""
    seed = random.SystemRandom().randrange(1 << 31)
    rundir = tempfile.mkdtemp(prefix=f"{entry.name}-{number}-", dir=work_root)
    stdout_path, stderr_path = os.path.join(rundir, "stdout"), os.path.join(rundir, "stderr")
    command, cwd = child_command(entry, rundir, seed, args)
    started = time.monotonic()
    stacks = ""
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        process = subprocess.Popen(command, cwd=cwd, env=child_environment(),
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                   start_new_session=True)
        current.append(process)
        try:
            code: Optional[int] = process.wait(args.run_timeout)
        except subprocess.TimeoutExpired:
            code = None
            stacks = hang_report(process, python_stacks=entry.body is not None)
        finally:
            kill_group(process)
            current.remove(process)
    seconds = time.monotonic() - started
    stdout, stderr = read_text(stdout_path), read_text(stderr_path)
    outcome, detail = classify(code, stdout, stderr, args.run_timeout)
    result = Result(entry.name, number, outcome, seconds, detail,
                    note=last_line(stdout).replace(f"soak: {entry.name}: ", ""))
    if outcome not in ("pass", "skip"):
        result.log = os.path.join(args.out, f"{entry.name}.{number}.log")
        with open(result.log, "w", encoding="utf-8") as f:
            f.write(f"scenario: {entry.name}\nrun: {number}\nseed: {seed}\n"
                    f"command: {' '.join(command)}\ncwd: {cwd}\n"
                    f"exit: {'none (killed as hung)' if code is None else code}\n"
                    f"outcome: {outcome}\nseconds: {seconds:.1f}\n"
                    f"---- stdout ----\n{stdout}\n---- stderr ----\n{stderr}\n")
            if stacks:
                f.write(f"---- stacks at the hang ----\n{stacks}\n")
    shutil.rmtree(rundir, ignore_errors=True)
    return result


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:160] if lines else ""


def read_text(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def classify(code: Optional[int], stdout: str, stderr: str,
             run_timeout: float) -> tuple[str, list[str]]:
    """A run's outcome and the lines that say why."""
    if code is None:
        return "hang", [f"still running after {run_timeout:.0f} s: killed"] + \
            python_frames(stderr)
    if code == 0:
        return "pass", []
    if code < 0:
        return "signal", [f"died of signal {-code} ({signal_name(-code)})"] + crash_lines(stderr)
    said = {kind: [line for line in stderr.splitlines() if line.startswith(kind + ": ")]
            for kind in ("WRONG", "SIGNAL", "HANG", "SKIP")}
    said["SKIP"] += [line for line in stdout.splitlines() if line.startswith("SKIP: ")]
    if code == EXIT_SKIP and said["SKIP"]:
        return "skip", [said["SKIP"][0][len("SKIP: "):]]
    if code == EXIT_WRONG and said["WRONG"]:
        return "wrong", said["WRONG"][:1] + also_lines(stderr)
    if code == EXIT_SIGNAL and said["SIGNAL"]:
        return "signal", said["SIGNAL"][:1] + crash_lines(stderr)
    if code == EXIT_HANG and said["HANG"]:
        return "hang", said["HANG"][:1] + last_lines(stderr, "serve's last lines:")
    # pytest's failed tests (test-api), the child's ERROR line, serve's last lines.
    failed = [line for line in stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    errors = [line for line in stderr.splitlines() if line.startswith("ERROR: ")][:1]
    detail = failed + errors + last_lines(stderr, "serve's last lines:")
    return "exit", [f"exit status {code}"] + (detail or error_tail(stderr))


def also_lines(stderr: str) -> list[str]:
    return [line.strip() for line in stderr.splitlines() if line.startswith("  also: ")][:3]


def last_lines(stderr: str, heading: str) -> list[str]:
    """The lines after `heading` in stderr (serve's last lines), if any."""
    lines = stderr.splitlines()
    for k in range(len(lines) - 1, -1, -1):
        if lines[k].startswith(heading):
            return lines[k:k + 1 + DETAIL_LINES]
    return []


def error_tail(stderr: str) -> list[str]:
    """The last lines of stderr (an exit the child did not explain)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[-4:]


def python_frames(stderr: str, frames: int = 4) -> list[str]:
    """The innermost Python frames of the thread that took the hang report's
    SIGUSR1 (the main thread: what it was blocked in)."""
    at = stderr.rfind("Current thread 0x")
    if at < 0:
        return []
    lines = stderr[at:].splitlines()
    return [lines[0]] + [line.strip() for line in lines[1:frames + 1] if line.strip()]


FATAL = re.compile(r"tritonserver: fatal signal \d+ \(\w+\) in thread (\d+)")


def crash_lines(stderr: str, frames: int = 6) -> list[str]:
    """The first frames of the crashing thread, from the native report
    (tritonserver._crash_report) if there is one, else from faulthandler's."""
    match = FATAL.search(stderr)
    if match is None:
        at = stderr.find("Fatal Python error")
        if at < 0:
            return []
        return [line.strip() for line in stderr[at:].splitlines()[:frames + 3] if line.strip()]
    lines = [match.group(0)]
    report = stderr[match.end():]
    end = report.find("tritonserver: end of the native report")
    report = report[:end] if end >= 0 else report
    header = re.search(rf"^Thread \d+ \(Thread 0x[0-9a-f]+ \(LWP {match.group(1)}\).*$", report,
                       re.MULTILINE)
    if header is None:
        return lines
    block = report[header.end():].split("\n\n")[0].strip().splitlines()
    handler = [k for k, line in enumerate(block) if "<signal handler called>" in line]
    start = handler[0] + 1 if handler else 0
    lines.append(header.group(0).strip())
    lines += [short_frame(line) for line in block[start:start + frames]]
    return lines


def short_frame(line: str) -> str:
    """A gdb frame without its address, arguments and library folder."""
    line = re.sub(r" 0x[0-9a-f]+ in ", " ", line.strip())
    line = re.sub(r" \((\w+=\.\.\.(, )?)*\)", "()", line)
    line = re.sub(r" from \S*/", " from ", line)
    line = re.sub(r" at \S*/", " at ", line)
    return line[:200]


# ---- The harness: load, budget, summary ---------------------------------------------------


class Load:
    """`count` busy-loop processes, ended by `stop()` (and by themselves when
    this process is gone)."""

    def __init__(self, count: int):
        self.processes = [subprocess.Popen(
            [sys.executable, "-c", BUSY_LOOP, str(os.getpid())], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            for _ in range(count)]

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.processes = []


class Tally:
    def __init__(self, names: Sequence[str]):
        self.counts = {name: dict.fromkeys(("runs",) + OUTCOMES, 0) for name in names}
        self.failures: list[Result] = []
        self.skipped: dict[str, str] = {}

    def add(self, result: Result) -> None:
        if result.outcome == "skip":
            self.skipped[result.scenario] = result.detail[0] if result.detail else "skipped"
            return
        counts = self.counts[result.scenario]
        counts["runs"] += 1
        counts[result.outcome] += 1
        if result.outcome != "pass":
            self.failures.append(result)

    def total(self) -> dict[str, int]:
        return {key: sum(c[key] for c in self.counts.values()) for key in ("runs",) + OUTCOMES}

    def table(self) -> str:
        heads = ("scenario", "runs", "pass", "signal", "exit", "hang", "wrong")
        rows = [[name] + [str(c[k]) for k in heads[1:]] for name, c in self.counts.items()
                if c["runs"]]
        total = self.total()
        rows.append(["total"] + [str(total[k]) for k in heads[1:]])
        widths = [max(len(r[i]) for r in rows + [list(heads)]) for i in range(len(heads))]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(cells, widths)))
        rule = "-" * len(line(heads))
        return "\n".join([line(heads), rule] + [line(r) for r in rows[:-1]] +
                         [rule, line(rows[-1])])


def extract_test_api(mirror: str, into: str) -> str:
    """python/test of NVIDIA's core at TEST_API_TAG, from a bare git mirror,
    into `into`; the folder holding test_api.py."""
    archive = subprocess.run(["git", "-C", mirror, "archive", "--format=tar", TEST_API_TAG,
                              "python/test"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             timeout=120, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"soak: git archive {TEST_API_TAG} python/test from {mirror} failed: "
                         f"{archive.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)  # Python before 3.9.17: our own mirror's archive
    return os.path.join(into, "python", "test")


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="soak.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Repeat scenarios, each in a fresh process, round-robin under CPU load "
                    "until the time budget is spent; count crashes (signals), wrong exits, "
                    "hangs and wrong answers.",
        epilog="test-api runs NVIDIA's test_api.py unchanged and deselects the tests it is "
               "known to fail on a CPU-only machine (" + ", ".join(TEST_API_KNOWN_FAILURES) +
               ": its model asks for GPU 0), so a run passes when pytest exits 0.\n"
               "Exit status: 0 when every run passed, 1 when one did not, 130 when interrupted.")
    parser.add_argument("--minutes", type=float, default=30.0,
                        help="time budget; the run in progress when it is spent finishes "
                             "(default 30)")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="busy-loop processes beside the runs (default: one per CPU, "
                             f"{os.cpu_count()} here; 0 for none)")
    parser.add_argument("--out", metavar="DIR",
                        help="where failing runs' logs and summary.json go (default: a new "
                             "temporary folder, printed)")
    parser.add_argument("--only", metavar="REGEX",
                        help="only the scenarios whose name matches (re.search)")
    parser.add_argument("--run-timeout", type=float, default=180.0, metavar="S",
                        help="a run still going after S seconds is hung: its stacks are kept, "
                             "it is killed (default 180)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--test-api", dest="test_api_dir", metavar="DIR",
                        help="a folder holding NVIDIA's test_api.py and test_api_models "
                             f"(core {TEST_API_TAG}, python/test)")
    source.add_argument("--core-mirror", metavar="PATH",
                        help="a git clone of triton-inference-server/core: test_api.py is "
                             f"extracted from its tag {TEST_API_TAG} into a temporary folder")
    parser.add_argument("--list", action="store_true",
                        help="list the scenarios and whether each can run here, then exit")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.test_api_dir and not os.path.isfile(os.path.join(args.test_api_dir, "test_api.py")):
        parser.error(f"--test-api {args.test_api_dir}: no test_api.py there")
    return args


def interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.child:
        child_main(args.child, args.workdir, args.seed)
        return 0
    work_root = tempfile.mkdtemp(prefix="tritonserver-soak-work-")
    try:
        if args.core_mirror and not args.list:
            args.test_api_dir = extract_test_api(args.core_mirror, work_root)
        return soak(args, work_root)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)


def soak(args: argparse.Namespace, work_root: str) -> int:
    chosen = [s for s in SCENARIOS.values() if not args.only or re.search(args.only, s.name)]
    if args.core_mirror and args.list:
        args.test_api_dir = args.test_api_dir or "(from --core-mirror)"
    refusals = {s.name: why_not(s, args) for s in chosen}
    if args.list:
        for s in chosen:
            state = f"skipped: {refusals[s.name]}" if refusals[s.name] else "runs"
            print(f"{s.name:26} {state}\n{textwrap.indent(textwrap.fill(s.summary, 88), '    ')}")
        return 0
    active = [s for s in chosen if refusals[s.name] is None]
    if not active:
        print("soak: no scenario can run here", file=sys.stderr)
        return 1
    args.out = os.path.abspath(args.out or tempfile.mkdtemp(prefix="tritonserver-soak-"))
    os.makedirs(args.out, exist_ok=True)
    print(f"soak: {args.minutes:g} minutes, {args.load} busy-loop processes, run timeout "
          f"{args.run_timeout:g} s; logs of failing runs in {args.out}", flush=True)
    for name, reason in refusals.items():
        if reason:
            print(f"soak: {name}: skipped: {reason}", flush=True)
    tally = Tally([s.name for s in chosen])
    for name, reason in refusals.items():
        if reason:
            tally.skipped[name] = reason
    began, started_at = time.monotonic(), datetime.datetime.now().isoformat(timespec="seconds")
    deadline = began + args.minutes * 60
    current: list[subprocess.Popen[bytes]] = []
    numbers = dict.fromkeys((s.name for s in active), 0)
    interrupted = False
    previous = {number: signal.signal(number, interrupt)
                for number in (signal.SIGTERM, signal.SIGHUP)}
    load = Load(args.load)
    try:
        turn = 0
        while active and time.monotonic() < deadline:
            entry = active[turn % len(active)]
            numbers[entry.name] += 1
            result = run_once(entry, numbers[entry.name], args, work_root, current)
            tally.add(result)
            report(result, time.monotonic() - began)
            if result.outcome == "skip":
                active.remove(entry)
            else:
                turn += 1
    except KeyboardInterrupt:
        interrupted = True
        print("\nsoak: interrupted; the run in progress was killed", flush=True)
    finally:
        for process in list(current):
            kill_group(process)
        load.stop()
        for number, handler in previous.items():
            signal.signal(number, handler)
    print("\n" + tally.table())
    for name, reason in tally.skipped.items():
        print(f"skipped: {name}: {reason}")
    summary = os.path.join(args.out, "summary.json")
    with open(summary, "w", encoding="utf-8") as f:
        json.dump({"started": started_at, "minutes": args.minutes, "load": args.load,
                   "run_timeout": args.run_timeout, "interrupted": interrupted,
                   "scenarios": {n: c for n, c in tally.counts.items() if c["runs"]},
                   "total": tally.total(), "skipped": tally.skipped,
                   "failures": [asdict(r) for r in tally.failures]}, f, indent=2)
    print(f"summary: {summary}", flush=True)
    if interrupted:
        return 130
    return 1 if tally.failures else 0


def report(result: Result, elapsed: float) -> None:
    """One line per run; a failure's line names its log, its detail below it."""
    clock = f"[{int(elapsed) // 60:3d}:{int(elapsed) % 60:02d}]"
    head = f"{clock} {result.scenario} #{result.run}: {result.outcome} ({result.seconds:.1f} s)"
    if result.outcome == "pass":
        print(f"{head}: {result.note}" if result.note else head, flush=True)
        return
    if result.outcome == "skip":
        print(f"{head}: {result.detail[0] if result.detail else ''}", flush=True)
        return
    print(f"FAIL {head}; log: {result.log}", flush=True)
    for line in result.detail[:DETAIL_LINES + 2]:
        print(f"       {line}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
