"""The C++ backend SDK, through test backends built with it (tests/backends):
hook call counts and threads, errors thrown in every hook, per-request
failures inside a batch, decoupled streams, and what Execute is shown."""

from __future__ import annotations

import collections
import json
import os
import shutil
import threading
import time

import numpy as np
import pytest

import tritonserver
from backends.build import build_project
from conftest import TESTS_DIR, start_server, stop_within, stats_when

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT


@pytest.fixture(scope="module")
def test_backends() -> str:
    """The folder of the built test backends (hooks/, sdk_check/)."""
    return os.path.join(build_project(os.path.join(TESTS_DIR, "backends")), "backends")


def write_model(repo, name: str, backend: str, *, instances: int = 1, max_batch_size: int = 0,
                extra: str = "", parameters: dict = None, dtype: str = "TYPE_FP32",
                inp: str = "INPUT0", out: str = "OUTPUT0", dims: str = "-1",
                host_policy: str = "") -> None:
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    params = "".join(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}\n'
                     for k, v in (parameters or {}).items())
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(f'backend: "{backend}"\nmax_batch_size: {max_batch_size}\n{extra}\n'
                f'input [ {{ name: "{inp}" data_type: {dtype} dims: [ {dims} ] }} ]\n'
                f'output [ {{ name: "{out}" data_type: {dtype} dims: [ {dims} ] }} ]\n'
                f'instance_group [ {{ kind: KIND_CPU, count: {instances} '
                f'host_policy: "{host_policy}" }} ]\n{params}')


def read_events(path: str) -> list[tuple[str, str, str]]:
    """(hook, subject, thread) per line of the hooks backend's log."""
    if not os.path.exists(path):
        return []
    events = []
    with open(path) as f:
        for line in f:
            words = line.split()
            events.append((words[0], " ".join(words[1:-1]), words[-1]))
    return events


def counts(events) -> collections.Counter:
    return collections.Counter((hook, _name(subject)) for hook, subject, _ in events
                               if hook != "execute")


def _name(subject: str) -> str:
    return subject.split(" requests=")[0].split(" core=")[0]


def core_instances(events, model: str) -> set:
    """The core instance handles the model's instances were initialized on."""
    return {subject.split(" core=")[1] for hook, subject, _ in events
            if hook == "instance_initialize" and _name(subject).startswith(model + "_")}


# --------------------------------------------------------------------------- #
# Hooks: how often, on which thread
# --------------------------------------------------------------------------- #


def test_hook_call_counts_and_threads(test_backends, tmp_path):
    repo = tmp_path / "repo"
    write_model(repo, "two", "hooks", instances=2)
    write_model(repo, "one", "hooks", instances=1)
    log = str(tmp_path / "hooks.log")
    s = start_server(model_repository=str(repo), backend_directory=test_backends,
                     model_control_mode=EXPLICIT, backend_configuration={"hooks": {"log": log}})
    try:
        s.load("two")
        s.load("one")
        assert counts(read_events(log)) == {
            ("initialize", "hooks"): 1,             # once per backend
            ("model_initialize", "two"): 1,         # once per load
            ("model_initialize", "one"): 1,
            ("instance_initialize", "two_0_0"): 1,  # once per instance: count 2 gives 2
            ("instance_initialize", "two_0_1"): 1,
            ("instance_initialize", "one_0_0"): 1,
        }
        # Concurrent requests on two instances: each instance executes on
        # its own thread, never the loading thread.
        x = np.arange(3, dtype=np.float32)
        iterators = [s.model("two").infer(inputs={"INPUT0": x + i}) for i in range(16)]
        for i, it in enumerate(iterators):
            np.testing.assert_array_equal(np.from_dlpack(next(it).outputs["OUTPUT0"]), x + i)
        del iterators
        events = read_events(log)
        load_thread = {t for h, _, t in events if h == "instance_initialize"}
        exec_threads = collections.defaultdict(set)
        for hook, subject, thread in events:
            if hook == "execute":
                exec_threads[subject.split()[0]].add(thread)
        assert set(exec_threads) <= {"two_0_0", "two_0_1"} and exec_threads
        assert all(len(threads) == 1 for threads in exec_threads.values())
        assert not set().union(*exec_threads.values()) & load_thread
        if len(exec_threads) == 2:
            assert exec_threads["two_0_0"] != exec_threads["two_0_1"]

        s.unload("two", wait_until_unloaded=True, timeout=30)
        c = counts(read_events(log))
        assert c[("instance_finalize", "two_0_0")] == c[("instance_finalize", "two_0_1")] == 1
        assert c[("model_finalize", "two")] == 1
        assert c[("finalize", "hooks")] == 0  # "one" still uses the backend
        s.load("two")  # a second load: model and instance hooks again
        c = counts(read_events(log))
        assert c[("model_initialize", "two")] == 2 and c[("instance_initialize", "two_0_1")] == 2
        assert c[("initialize", "hooks")] == 1
    finally:
        stop_within(s)
    c = counts(read_events(log))
    assert c[("finalize", "hooks")] == 1 and c[("initialize", "hooks")] == 1
    for (hook, subject), n in c.items():  # every initialize has its finalize
        if hook.endswith("initialize"):
            assert c[(hook.replace("initialize", "finalize"), subject)] == n, (hook, subject)


def test_count_two_is_one_core_instance_running_two_workers(test_backends, tmp_path):
    """instance_group count 2 on an SDK backend: the core creates one
    instance (one core handle, seen from the backend), the backend sees two
    Instances that run batches at once on two threads, and the config still
    says 2 (tritonserver._control.instances; docs/reliability.md)."""
    repo = tmp_path / "repo"
    write_model(repo, "two", "hooks", instances=2)
    log = str(tmp_path / "hooks.log")
    s = start_server(model_repository=str(repo), backend_directory=test_backends,
                     backend_configuration={"hooks": {"log": log}})
    try:
        events = read_events(log)
        assert len(core_instances(events, "two")) == 1
        assert counts(events)[("instance_initialize", "two_0_0")] == 1
        assert counts(events)[("instance_initialize", "two_0_1")] == 1
        config = s.model("two").config()
        assert [g["count"] for g in config["instance_group"]] == [2]
        assert "tritonserver.workers" not in config.get("parameters", {})
        # Batches on both Instances, each Instance on a thread of its own.
        x = np.arange(3, dtype=np.float32)
        for _ in range(20):
            iterators = [s.model("two").infer(inputs={"INPUT0": x + i}) for i in range(8)]
            for i, it in enumerate(iterators):
                np.testing.assert_array_equal(np.from_dlpack(next(it).outputs["OUTPUT0"]), x + i)
        threads = collections.defaultdict(set)
        for hook, subject, thread in read_events(log):
            if hook == "execute":
                threads[_name(subject)].add(thread)
        assert set(threads) <= {"two_0_0", "two_0_1"}
        assert all(len(t) == 1 for t in threads.values())
        if len(threads) == 2:
            assert threads["two_0_0"] != threads["two_0_1"]
        # A backend reports a batch's statistics after it sends its
        # responses (as Triton's backends do): the last batch's count may
        # land just after its responses were read.
        deadline = time.monotonic() + 10
        while True:
            stats = s.model("two").statistics()["model_stats"][0]
            if int(stats["inference_count"]) >= 160 or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert int(stats["inference_count"]) == 160
    finally:
        stop_within(s)
    c = counts(read_events(log))
    assert c[("instance_finalize", "two_0_0")] == c[("instance_finalize", "two_0_1")] == 1


def test_a_rewritten_model_that_fails_at_start_fails_the_start_and_says_why(test_backends,
                                                                             tmp_path):
    """A two-instance model the package loads itself after the core started
    (NONE mode): its failure fails start() as the core's own startup loads
    do, naming the model and the reason; with exit_on_error=False the server
    runs without it."""
    repo = tmp_path / "repo"
    write_model(repo, "broken", "hooks", instances=2, parameters={"fail_in": "model_initialize"})
    write_model(repo, "fine", "hooks")
    with pytest.raises(tritonserver.InternalError,
                       match=r"failed to load all models:\s+'broken': .*model_initialize failed"):
        tritonserver.Server(model_repository=str(repo), backend_directory=test_backends).start()
    s = tritonserver.Server(model_repository=str(repo), backend_directory=test_backends,
                            exit_on_error=False).start()  # never ready: "broken" failed
    try:
        assert s.model("fine").ready() and not s.model("broken").ready()
        assert "model_initialize failed" in s.models()[("broken", 1)].reason
    finally:
        stop_within(s)


@pytest.mark.parametrize("value,extra,message", [
    ("abc", "", "must be a whole number from 1 to 1024, not 'abc'"),
    ("0", "", "must be a whole number from 1 to 1024, not '0'"),
    ("2", "sequence_batching { }", "cannot run a sequence batching model on several workers"),
], ids=["not-a-number", "zero", "sequence-model"])
def test_a_bad_workers_parameter_fails_the_load_and_says_why(test_backends, tmp_path, value,
                                                             extra, message):
    """tritonserver.workers written by hand: refused with its reason, and the
    server goes on serving."""
    repo = tmp_path / "repo"
    write_model(repo, "bad", "hooks", parameters={"tritonserver.workers": value}, extra=extra)
    write_model(repo, "fine", "hooks")
    s = start_server(model_repository=str(repo), backend_directory=test_backends,
                     model_control_mode=EXPLICIT, startup_models=["fine"])
    try:
        with pytest.raises(tritonserver.InvalidArgumentError, match=message):
            s.load("bad")
        assert s.live() and s.model("fine").ready()
    finally:
        stop_within(s)


# --------------------------------------------------------------------------- #
# Errors thrown in hooks
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("hook", ["model_initialize", "instance_initialize"])
def test_error_in_model_or_instance_initialize_fails_the_load(test_backends, tmp_path, hook):
    repo = tmp_path / "repo"
    write_model(repo, "broken", "hooks", instances=2, parameters={"fail_in": hook})
    write_model(repo, "fine", "hooks")
    log = str(tmp_path / "hooks.log")
    s = start_server(model_repository=str(repo), backend_directory=test_backends,
                     model_control_mode=EXPLICIT, backend_configuration={"hooks": {"log": log}})
    try:
        with pytest.raises(tritonserver.InvalidArgumentError, match=f"hooks: {hook} failed on purpose"):
            s.load("broken")
        assert s.live()
        out = next(s.load("fine").infer(inputs={"INPUT0": np.ones(2, np.float32)}))
        assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [1.0, 1.0]
        del out
    finally:
        stop_within(s)
    c = counts(read_events(log))
    # A Finalize hook runs only after its Initialize hook succeeded.
    if hook == "model_initialize":
        assert c[("model_finalize", "broken")] == 0
        assert not any(h.startswith("instance") and s_.startswith("broken") for h, s_ in c)
    else:
        assert c[("model_finalize", "broken")] == 1
        assert not any(h == "instance_finalize" and s_.startswith("broken") for h, s_ in c)


def test_error_in_backend_initialize_fails_the_load(test_backends, tmp_path):
    # A second copy of the hooks library under another name, told to fail.
    mine = tmp_path / "backends"
    os.makedirs(mine / "broken_backend")
    shutil.copy(os.path.join(test_backends, "hooks", "libtriton_hooks.so"),
                mine / "broken_backend" / "libtriton_broken_backend.so")
    repo = tmp_path / "repo"
    write_model(repo, "uses_broken", "broken_backend")
    s = start_server(model_repository=str(repo), backend_directory=str(mine),
                     model_control_mode=EXPLICIT,
                     backend_configuration={"broken_backend": {"fail_in": "initialize"}})
    try:
        with pytest.raises(tritonserver.InvalidArgumentError,
                           match="hooks: initialize failed on purpose"):
            s.load("uses_broken")
        assert s.live()
    finally:
        stop_within(s)


def test_backend_api_version_is_checked_at_initialize(test_backends, tmp_path):
    repo = tmp_path / "repo"
    write_model(repo, "m", "needs_newer_core")
    s = start_server(model_repository=str(repo), backend_directory=test_backends,
                     model_control_mode=EXPLICIT)
    try:
        with pytest.raises(tritonserver.TritonError) as info:  # a load failure
            s.load("m")
        message = str(info.value)
        assert "Unsupported" in message  # the code the backend gave
        assert "backend 'needs_newer_core' needs TRITONBACKEND API 1.999" in message
        assert "but the running core has API 1.19" in message
        assert s.live()
    finally:
        stop_within(s)


@pytest.mark.parametrize("hook", ["model_finalize", "instance_finalize"])
def test_error_in_finalize_is_logged_and_unload_completes(test_backends, tmp_path, hook):
    repo = tmp_path / "repo"
    write_model(repo, "m", "hooks", parameters={"fail_in": hook})
    log_file = str(tmp_path / "server.log")
    s = start_server(model_repository=str(repo), backend_directory=test_backends,
                     model_control_mode=EXPLICIT, log_file=log_file)
    try:
        s.load("m")
        s.unload("m", wait_until_unloaded=True, timeout=30)
        assert s.live() and not s.model("m").ready()
        deadline = time.monotonic() + 10
        while f"hooks: {hook} failed on purpose" not in open(log_file).read():
            assert time.monotonic() < deadline, open(log_file).read()
            time.sleep(0.05)
    finally:
        stop_within(s)


def test_error_in_execute_fails_the_requests(test_backends, tmp_path):
    repo = tmp_path / "repo"
    write_model(repo, "m", "hooks", parameters={"fail_in": "execute"})
    s = start_server(model_repository=str(repo), backend_directory=test_backends)
    try:
        for _ in range(2):  # the instance survives its failure
            with pytest.raises(tritonserver.InvalidArgumentError,
                               match="hooks: execute failed on purpose"):
                next(s.model("m").infer(inputs={"INPUT0": np.ones(2, np.float32)}))
        stats = stats_when(s.model("m"), lambda st: st["inference_stats"]["fail"]["count"] >= 2)
        assert stats["inference_stats"]["fail"]["count"] == 2
        assert stats["inference_stats"]["success"]["count"] == 0 and stats["execution_count"] == 0
    finally:
        stop_within(s)


# --------------------------------------------------------------------------- #
# Requests: per-request failures, decoupled streams, what Execute sees
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def sdk_server(test_backends, tmp_path_factory):
    repo = tmp_path_factory.mktemp("sdk_repo")
    common = dict(dtype="TYPE_INT64", inp="INPUT", out="OUTPUT", parameters={"greeting": "hi"})
    # Batches form only when 4 requests are queued (or after 2 s): the
    # requests sent together below always execute together.
    write_model(repo, "batched", "sdk_check", max_batch_size=8,
                extra="dynamic_batching { preferred_batch_size: [ 4 ] "
                      "max_queue_delay_microseconds: 2000000 }\n"
                      'output [ { name: "BATCH" data_type: TYPE_INT64 dims: [ 1 ] } ]', **common)
    write_model(repo, "single", "sdk_check", dims="-1, -1",
                extra='output [ { name: "BATCH" data_type: TYPE_INT64 dims: [ 1 ] } ]', **common)
    write_model(repo, "strings", "sdk_check", dtype="TYPE_STRING", inp="INPUT", out="OUTPUT")
    write_model(repo, "stream", "sdk_check", extra="model_transaction_policy { decoupled: true }",
                **common)
    write_model(repo, "pinned", "sdk_check", host_policy="one_cpu",
                extra='output [ { name: "BATCH" data_type: TYPE_INT64 dims: [ 1 ] } ]', **common)
    s = start_server(model_repository=str(repo), backend_directory=test_backends,
                     backend_configuration={"sdk_check": {"greeting": "hello"}},
                     host_policies={"one_cpu": {"cpu-cores": f"{PINNED_CPU}-{PINNED_CPU}"}})
    yield s
    stop_within(s)


PINNED_CPU = max(os.sched_getaffinity(0))


def send_batch(model, requests: list[dict]) -> list:
    """Send all requests at once; each result is the response or the error."""
    iterators = [model.infer(**r) for r in requests]
    results = []
    for it in iterators:
        try:
            results.append(next(it))
        except tritonserver.TritonError as e:
            results.append(e)
    return results


def test_a_failing_request_fails_alone_in_its_batch(sdk_server):
    model = sdk_server.model("batched")
    before = model.statistics()["model_stats"][0]
    values = [[[1, 2]], [[-1, 5]], [[3, 4]], [[6, -7]]]
    results = send_batch(model, [{"inputs": {"INPUT": np.array(v, np.int64)}} for v in values])
    for v, r in zip(values, results):
        if min(v[0]) < 0:
            assert isinstance(r, tritonserver.InvalidArgumentError)
            assert f"sdk_check: negative value {min(v[0])}" in str(r)
        else:
            assert np.from_dlpack(r.outputs["OUTPUT"]).tolist() == v
            assert np.from_dlpack(r.outputs["BATCH"]).tolist() == [4]  # the failing ones ran alongside
    old = before["inference_stats"]
    after = stats_when(model, lambda st: st["inference_stats"]["fail"]["count"]
                       + st["inference_stats"]["success"]["count"]
                       >= old["fail"]["count"] + old["success"]["count"] + 4)
    assert after["execution_count"] - before["execution_count"] == 1
    stats = after["inference_stats"]
    assert stats["success"]["count"] - old["success"]["count"] == 2
    assert stats["fail"]["count"] - old["fail"]["count"] == 2


def test_an_exception_escaping_execute_fails_only_unanswered_requests(sdk_server):
    model = sdk_server.model("batched")
    requests = [{"inputs": {"INPUT": np.array([[i]], np.int64)}} for i in range(4)]
    requests[1]["parameters"] = {"execute_throws": "boom from Execute"}
    requests[2]["parameters"] = {"no_answer": True}
    results = send_batch(model, requests)
    assert np.from_dlpack(results[0].outputs["OUTPUT"]).tolist() == [[0]]
    assert np.from_dlpack(results[3].outputs["OUTPUT"]).tolist() == [[3]]
    # The exception's message reaches every request Execute left unanswered.
    for r in results[1:3]:
        assert isinstance(r, tritonserver.InternalError) and "boom from Execute" in str(r)


def test_an_unanswered_request_fails(sdk_server):
    with pytest.raises(tritonserver.InternalError, match="without sending a final response"):
        next(sdk_server.model("single").infer(inputs={"INPUT": np.array([[1]], np.int64)},
                                              parameters={"no_answer": True}))


def test_what_execute_sees(sdk_server):
    r = next(sdk_server.model("single").infer(
        inputs={"INPUT": np.arange(6, dtype=np.int64).reshape(2, 3)}, request_id="req-7",
        parameters={"scale": 3}))
    assert np.from_dlpack(r.outputs["OUTPUT"]).tolist() == [[0, 1, 2], [3, 4, 5]]
    shown = {k: v for k, v in r.parameters.items() if k not in ("cpus", "host_policy")}
    assert shown == {
        "dtype": "INT64", "shape": "[2, 3]", "buffers": 1, "memory_type": "CPU",
        "max_batch_size": 0, "config_dim0": -1, "greeting": "hi", "setting": "hello",
        "request_id": "req-7", "correlation_id": "0", "scale": 3,
    }


def test_correlation_id_string(sdk_server):
    r = next(sdk_server.model("single").infer(inputs={"INPUT": np.array([[1]], np.int64)},
                                              correlation_id="abc"))
    assert r.parameters["correlation_id"] == "s:abc"


def test_bytes_tensors(sdk_server):
    values = np.array(["a", "h\u00e9llo", ""], dtype=object)
    out = next(sdk_server.model("strings").infer(inputs={"INPUT": values})).outputs["OUTPUT"]
    assert out.to_string_array().tolist() == ["a!", "h\u00e9llo!", "!"]


def test_decoupled_stream(sdk_server):
    responses = list(sdk_server.model("stream").infer(inputs={"INPUT": np.array([4, 5, 6], np.int64)}))
    assert [np.from_dlpack(r.outputs["OUTPUT"]).tolist() for r in responses if r.outputs] == [[4], [5], [6]]
    assert responses[-1].final and not any(r.final for r in responses[:-1])


def test_decoupled_failure_mid_stream(sdk_server):
    got = []
    with pytest.raises(tritonserver.InvalidArgumentError, match="negative value -1"):
        for r in sdk_server.model("stream").infer(inputs={"INPUT": np.array([7, 8, -1, 9], np.int64)}):
            got.append(np.from_dlpack(r.outputs["OUTPUT"]).tolist())
    assert got == [[7], [8]]  # what was sent before the failure arrives first


def test_concurrent_decoupled_streams(sdk_server):
    results = {}

    def run(i):
        values = np.arange(i, i + 20, dtype=np.int64)
        results[i] = [int(np.from_dlpack(r.outputs["OUTPUT"])[0])
                      for r in sdk_server.model("stream").infer(inputs={"INPUT": values}) if r.outputs]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {i: list(range(i, i + 20)) for i in range(8)}


def test_host_policies_reach_the_core(sdk_server):
    # An instance whose config names a host policy is given that policy's
    # settings, and the core pins its execution thread to the policy's CPUs.
    out = next(sdk_server.model("pinned").infer(inputs={"INPUT": np.array([1], np.int64)}))
    assert json.loads(out.parameters["host_policy"]) == {"one_cpu": {"cpu-cores": f"{PINNED_CPU}-{PINNED_CPU}"}}
    assert out.parameters["cpus"] == str(PINNED_CPU)
    # An instance without a policy runs on the default "cpu" policy, unpinned.
    free = next(sdk_server.model("single").infer(inputs={"INPUT": np.array([[1]], np.int64)}))
    assert list(json.loads(free.parameters["host_policy"])) == ["cpu"]


def test_an_unknown_host_policy_setting_is_refused_by_the_core(tmp_path):
    with pytest.raises(tritonserver.UnsupportedError,
                       match=r"Options.host_policies: .*'bogus'.*'numa-node', 'cpu-cores'"):
        tritonserver.Server(model_repository=str(tmp_path),
                            host_policies={"p": {"bogus": "1"}}).start()


class Echo(tritonserver.PythonModel):
    def execute(self, requests):
        return [{"Y": r.inputs["X"]} for r in requests]


def test_an_empty_batch_is_refused_by_every_backend(example_repo, tmp_path):
    """A batch of 0 items reaches a backend without its batch dimension (the
    core reads batch size 0 as "not batched"); the SDK refuses it for every
    backend, C++ (identity) and Python (inprocess) alike."""
    repo = tmp_path / "repo"
    shutil.copytree(os.path.join(example_repo, "identity_batched"), repo / "identity_batched")
    s = start_server(model_repository=str(repo), model_control_mode=EXPLICIT,
                     startup_models=["identity_batched"])
    try:
        python_model = s.register_model("echo_batched", Echo, inputs={"X": ("FP32", [-1])},
                                        outputs={"Y": ("FP32", [-1])}, max_batch_size=4)
        for model, name in [(s.model("identity_batched"), "INPUT0"), (python_model, "X")]:
            with pytest.raises(tritonserver.InvalidArgumentError, match="batch is empty"):
                list(model.infer(inputs={name: np.zeros((0, 0), np.float32)}))
            for shape in [(1, 0), (2, 3)]:  # empty items are fine; so is an ordinary batch
                out = next(model.infer(inputs={name: np.ones(shape, np.float32)}))
                assert list(next(iter(out.outputs.values())).shape) == list(shape)
        assert s.live()
    finally:
        stop_within(s)
