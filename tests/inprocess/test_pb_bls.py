"""python-backend model.py files in-process, on the server's
``python_backend="inprocess"`` option: BLS (exec, decoupled exec and cancel,
async_exec), model control from a model, ``async def execute`` with several
batches in flight on one instance, custom metrics on the server's metrics,
the per-model runtime choice and python-based backends. Real core, real
models; every model is a ``backend: "python"`` folder as Triton's python
backend takes it."""

from __future__ import annotations

import json
import os
import textwrap
import threading

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within

IO = """
input [{{ name: "{i}" data_type: {t} dims: [-1] }}]
output [{{ name: "{o}" data_type: {t} dims: [-1] }}]
"""


def python_model(repo, name: str, source: str, config: str = "",
                 io: tuple = ("X", "Y", "TYPE_FP32"),
                 backend: str = "python") -> None:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(textwrap.dedent(source))
    header = f'backend: "{backend}"\n' if backend else ""
    (folder / "config.pbtxt").write_text(
        header + IO.format(i=io[0], o=io[1], t=io[2]) + textwrap.dedent(config))


DOUBLE = """
import os
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            out.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", x * 2), pb_utils.Tensor("PID", np.array([os.getpid()]))],
                parameters={"doubled": True}))
        return out
"""
# The same without response parameters, which the 2.51 stub lacks.
PLAIN_DOUBLE = DOUBLE.replace(",\n                parameters={\"doubled\": True}", "")
DOUBLE_CONFIG = 'output [{ name: "PID" data_type: TYPE_INT64 dims: [1] }]\n'

REPEAT = """
import threading
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "N").as_numpy()[0])
            sender = r.get_response_sender()
            def run(sender=sender, n=n, r=r):
                for i in range(n):
                    if sender.is_cancelled():
                        break
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([i], np.int32))]))
                    threading.Event().wait(0.02)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            threading.Thread(target=run).start()
        return None
"""
REPEAT_CONFIG = "model_transaction_policy { decoupled: true }\n"

CALLER = """
import asyncio
import json
import numpy as np
import triton_python_backend_utils as pb_utils

def call(model, x, outputs=("Y",)):
    return pb_utils.InferenceRequest(model_name=model, requested_output_names=list(outputs),
                                     inputs=[pb_utils.Tensor("X", x)])

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            how = pb_utils.get_input_tensor_by_name(r, "HOW").as_numpy()[0].decode()
            result = {}
            if how == "sync":
                x = np.arange(4, dtype=np.float32)
                response = call("double", x, ("Y",)).exec()
                result["error"] = response.error().message() if response.has_error() else None
                y = pb_utils.get_output_tensor_by_name(response, "Y")
                result["y"] = y.as_numpy().tolist()
                result["names"] = [t.name() for t in response.output_tensors()]
                result["parameters"] = json.loads(response.parameters())
                result["shares_memory"] = bool(np.shares_memory(
                    y.as_numpy(), pb_utils.get_output_tensor_by_name(response, "Y").as_numpy()))
            elif how == "missing":
                response = call("no_such_model", np.ones(1, np.float32)).exec()
                result["error"] = response.error().message()
                result["code"] = response.error().code()
            elif how == "decoupled_without_flag":
                response = pb_utils.InferenceRequest(
                    model_name="repeat", requested_output_names=["I"],
                    inputs=[pb_utils.Tensor("N", np.array([2], np.int32))]).exec()
                result["error"] = response.error().message()
            elif how == "decoupled":
                responses = pb_utils.InferenceRequest(
                    model_name="repeat", requested_output_names=["I"],
                    inputs=[pb_utils.Tensor("N", np.array([3], np.int32))]).exec(decoupled=True)
                result["got"] = [[int(v) for v in t.as_numpy()] for resp in responses
                                 for t in resp.output_tensors()]
            elif how == "cancel":
                responses = pb_utils.InferenceRequest(
                    model_name="repeat", requested_output_names=["I"],
                    inputs=[pb_utils.Tensor("N", np.array([1000], np.int32))]).exec(decoupled=True)
                first = next(responses)
                responses.cancel()
                rest = list(responses)
                result["first"] = int(first.output_tensors()[0].as_numpy()[0])
                result["stopped_early"] = len(rest) < 999
                result["last_error"] = (rest[-1].error().code() if rest and rest[-1].has_error()
                                        else None)
            elif how == "control":
                result["before"] = pb_utils.is_model_ready("double")
                pb_utils.unload_model("double")
                result["after_unload"] = pb_utils.is_model_ready("double")
                pb_utils.load_model("double")
                result["after_load"] = pb_utils.is_model_ready("double", "1")
                try:
                    pb_utils.load_model("no_such_model")
                except pb_utils.TritonModelException as e:
                    result["load_error"] = str(e)
            elif how == "gpu":
                response = pb_utils.InferenceRequest(
                    model_name="double", requested_output_names=["Y"],
                    inputs=[pb_utils.Tensor("X", np.ones(1, np.float32))],
                    preferred_memory=pb_utils.PreferredMemory(
                        pb_utils.TRITONSERVER_MEMORY_GPU, 0)).exec()
                result["error"] = response.error().message()
            out.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", np.array([json.dumps(result).encode()], np.object_))]))
        return out
"""

ASYNC = """
import asyncio
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.in_flight = 0
        self.most = 0

    async def execute(self, requests):
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            x = pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()
            # Two BLS calls at once from one coroutine, then a wait that lets
            # the instance's next batches start.
            calls = [pb_utils.InferenceRequest(model_name="double", requested_output_names=["Y"],
                                               inputs=[pb_utils.Tensor("X", x)]).async_exec()
                     for _ in range(2)]
            responses = await asyncio.gather(*calls)
            total = sum(pb_utils.get_output_tensor_by_name(r, "Y").as_numpy() for r in responses)
            for _ in range(50):
                if self.most >= 3:
                    break
                await asyncio.sleep(0.02)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", total),
                                                pb_utils.Tensor("MOST", np.array([self.most]))])
                    for _ in requests]
        finally:
            self.in_flight -= 1
"""
ASYNC_CONFIG = ('output [{ name: "MOST" data_type: TYPE_INT64 dims: [1] }]\n'
                'instance_group [{ count: 1 kind: KIND_CPU }]\n')

# An async decoupled model and an async model that calls it and iterates
# its responses from its own coroutine (QA's async_execute_decouple_bls):
# the callee's coroutines need a loop the caller does not block.
ASYNC_REPEAT = """
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "N").as_numpy()[0])
            sender = r.get_response_sender()
            for i in range(n):
                await asyncio.sleep(0.05)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([i], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""
ASYNC_ITERATE = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        out = []
        for r in requests:
            n = pb_utils.get_input_tensor_by_name(r, "N").as_numpy()
            call = pb_utils.InferenceRequest(model_name="async_repeat", requested_output_names=["I"],
                                             inputs=[pb_utils.Tensor("N", n)])
            got = [int(t.as_numpy()[0]) for resp in await call.async_exec(decoupled=True)
                   for t in resp.output_tensors()]
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array(got, np.int32))]))
        return out
"""

METRICS = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.requests = pb_utils.MetricFamily(
            name="test_inprocess_requests_total", description="requests seen",
            kind=pb_utils.MetricFamily.COUNTER)
        self.depth = pb_utils.MetricFamily(
            name="test_inprocess_depth", description="a gauge", kind=pb_utils.MetricFamily.GAUGE)
        self.sizes = pb_utils.MetricFamily(
            name="test_inprocess_sizes", description="a histogram",
            kind=pb_utils.MetricFamily.HISTOGRAM)
        labels = {"model": args["model_name"]}
        self.counter = self.requests.Metric(labels=labels)
        self.gauge = self.depth.Metric(labels=labels)
        self.histogram = self.sizes.Metric(labels=labels, buckets=[1.0, 10.0])
        # A metric whose family object the model dropped: refused, as in the python backend.
        self.orphan = pb_utils.MetricFamily(
            name="test_inprocess_orphan", description="dropped",
            kind=pb_utils.MetricFamily.GAUGE).Metric(labels=labels)

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            self.counter.increment(1)
            self.gauge.set(float(x.size))
            self.histogram.observe(float(x.size))
            errors = []
            for call in (lambda: self.counter.set(3), lambda: self.counter.increment(-1),
                         lambda: self.histogram.value(), lambda: self.sizes.Metric(labels={}),
                         lambda: self.requests.Metric(labels={}, buckets=[1.0]),
                         lambda: self.orphan.set(1), lambda: self.orphan.value()):
                try:
                    call()
                    errors.append(None)
                except pb_utils.TritonModelException as e:
                    errors.append(str(e))
            value = np.array([self.counter.value(), self.gauge.value()], np.float32)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", value),
                                                   pb_utils.Tensor("ERRORS", np.array(
                                                       [str(e).encode() for e in errors],
                                                       np.object_))]))
        return out
"""
METRICS_CONFIG = 'output [{ name: "ERRORS" data_type: TYPE_STRING dims: [-1] }]\n'


@pytest.fixture(scope="module")
def bls_server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("pb_bls_repo")
    python_model(repo, "double", DOUBLE, DOUBLE_CONFIG)
    python_model(repo, "repeat", REPEAT, REPEAT_CONFIG, io=("N", "I", "TYPE_INT32"))
    python_model(repo, "caller", CALLER, "", io=("HOW", "OUT", "TYPE_STRING"))
    python_model(repo, "async_caller", ASYNC, ASYNC_CONFIG)
    python_model(repo, "metrics", METRICS, METRICS_CONFIG)
    python_model(repo, "async_repeat", ASYNC_REPEAT, REPEAT_CONFIG, io=("N", "I", "TYPE_INT32"))
    python_model(repo, "async_iterate", ASYNC_ITERATE, "", io=("N", "I", "TYPE_INT32"))
    server = start_server(model_repository=str(repo), python_backend="inprocess",
                          model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                          startup_models=["*"])
    try:
        yield server
    finally:
        stop_within(server)


def _ask(server, how: str) -> dict:
    response = next(server.model("caller").infer(inputs={"HOW": np.array([how.encode()],
                                                                           np.object_)}))
    return json.loads(response.outputs["OUT"].to_bytes_array()[0])


def test_a_python_backend_model_runs_in_this_process(bls_server):
    response = next(bls_server.model("double").infer(inputs={"X": np.ones(2, np.float32)}))
    assert int(np.from_dlpack(response.outputs["PID"])[0]) == os.getpid()
    assert response.parameters == {"doubled": True}


def test_bls_exec_returns_the_requested_outputs_and_parameters(bls_server):
    got = _ask(bls_server, "sync")
    assert got["error"] is None
    assert got["y"] == [0.0, 2.0, 4.0, 6.0]
    assert got["names"] == ["Y"]  # PID was not asked for
    assert got["parameters"] == {"doubled": True}
    assert got["shares_memory"]  # the output is the core's buffer, not copies of it


def test_bls_errors_are_error_responses_with_their_codes(bls_server):
    import triton_python_backend_utils as pb_utils

    got = _ask(bls_server, "missing")
    assert "no_such_model" in got["error"]
    assert got["code"] in (pb_utils.TritonError.NOT_FOUND, pb_utils.TritonError.INVALID_ARG)
    got = _ask(bls_server, "decoupled_without_flag")
    assert "decoupled=True" in got["error"]


def test_bls_to_a_decoupled_model_iterates_its_responses(bls_server):
    assert _ask(bls_server, "decoupled")["got"] == [[0], [1], [2]]


def test_bls_cancel_stops_the_called_model(bls_server):
    got = _ask(bls_server, "cancel")
    assert got["first"] == 0 and got["stopped_early"]


def test_model_control_from_a_model(bls_server):
    got = _ask(bls_server, "control")
    assert got["before"] and not got["after_unload"] and got["after_load"]
    assert "no_such_model" in got["load_error"]


def test_bls_outputs_in_gpu_memory_are_refused_with_what_to_do(bls_server):
    assert "TRITONSERVER_MEMORY_CPU" in _ask(bls_server, "gpu")["error"]


def test_async_execute_runs_several_batches_on_one_instance(bls_server):
    model = bls_server.model("async_caller")
    results: list = []

    def one(i: int) -> None:
        response = next(model.infer(inputs={"X": np.full(2, i, np.float32)}))
        results.append((i, np.from_dlpack(response.outputs["Y"]).tolist(),
                        int(np.from_dlpack(response.outputs["MOST"])[0])))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted((i, y) for i, y, _ in results) == [(i, [4.0 * i] * 2) for i in range(4)]
    # One instance, yet more than one execute was running at once.
    assert max(most for _, _, most in results) >= 2


def test_an_async_model_iterates_an_async_decoupled_models_responses(bls_server):
    # Each instance has its loop (as each stub its own): the caller's
    # waiting on its loop does not stop the callee's coroutines.
    response = next(bls_server.model("async_iterate").infer(inputs={"N": np.array([3], np.int32)}))
    assert np.from_dlpack(response.outputs["I"]).tolist() == [0, 1, 2]


def test_custom_metrics_appear_on_the_servers_metrics(bls_server):
    model = bls_server.model("metrics")
    for n in (3, 30):
        response = next(model.infer(inputs={"X": np.ones(n, np.float32)}))
    counter, gauge = np.from_dlpack(response.outputs["Y"]).tolist()
    assert (counter, gauge) == (2.0, 30.0)
    errors = response.outputs["ERRORS"].to_bytes_array().tolist()
    assert errors[0] != b"None"  # set() on a counter
    assert errors[1] != b"None"  # a counter never goes down
    assert errors[2] != b"None"  # a histogram has no single value
    assert b"buckets" in errors[3] and b"buckets" in errors[4]
    deleted = b"Invalid metric operation as the corresponding 'MetricFamily' has been deleted."
    assert errors[5] == errors[6] == deleted
    text = bls_server.metrics()
    assert 'test_inprocess_requests_total{model="metrics"} 2' in text
    assert 'test_inprocess_depth{model="metrics"} 30' in text
    assert 'test_inprocess_sizes_bucket{model="metrics",le="10"} 1' in text
    assert 'test_inprocess_sizes_count{model="metrics"} 2' in text
    assert "nv_inference_count" in text  # beside Triton's own


def test_the_option_is_checked():
    with pytest.raises(tritonserver.InvalidArgumentError, match="python_backend"):
        tritonserver.Server(model_repository="/nonexistent", python_backend="elsewhere").start()


def runtimes_repo(tmp_path, on_stub: bool = True) -> tuple:
    """A repository with a model on each python runtime: "on_stub" (the
    default's), "chosen" (in-process by its runtime) and "by_backend" (on a
    python-based backend of the backends folder); (repo, backends)."""
    repo, backends = tmp_path / "repo", tmp_path / "backends"
    if on_stub:
        python_model(repo, "on_stub", PLAIN_DOUBLE, DOUBLE_CONFIG)
    python_model(repo, "chosen", PLAIN_DOUBLE,
           DOUBLE_CONFIG + 'runtime: "libtriton_python_inprocess.so"\n')
    (backends / "doubling").mkdir(parents=True)
    (backends / "doubling" / "model.py").write_text(textwrap.dedent(PLAIN_DOUBLE))
    (repo / "by_backend" / "1").mkdir(parents=True)
    (repo / "by_backend" / "config.pbtxt").write_text(
        'backend: "doubling"\n' + IO.format(i="X", o="Y", t="TYPE_FP32") + DOUBLE_CONFIG)
    return repo, backends


def test_a_model_picks_its_runtime_and_python_based_backends_run_in_process(tmp_path):
    """The server's default is the stub; one model asks for in-process with
    runtime, and a python-based backend (<backends>/<name>/model.py) serves
    a model that names it."""
    repo, backends = runtimes_repo(tmp_path)
    from tritonserver._core import stub_environment
    from tritonserver._runtime import ensure_core_loaded

    stub_usable = stub_environment(ensure_core_loaded()).usable
    models = ["chosen", "by_backend"] + (["on_stub"] if stub_usable else [])
    server = start_server(model_repository=str(repo), backend_directory=str(backends),
                          python_backend="inprocess" if not stub_usable else "stub",
                          model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                          startup_models=models)
    try:
        pids = {}
        for name in models:
            response = next(server.model(name).infer(inputs={"X": np.ones(1, np.float32)}))
            pids[name] = int(np.from_dlpack(response.outputs["PID"])[0])
            assert np.from_dlpack(response.outputs["Y"]).tolist() == [2.0]
        assert pids["chosen"] == os.getpid()
        if stub_usable:
            assert pids["on_stub"] != os.getpid()
            # The python-based backend runs where the default python backend does.
            assert pids["by_backend"] != os.getpid()
        else:
            assert pids["by_backend"] == os.getpid()
    finally:
        stop_within(server)


def test_python_based_backend_in_process(tmp_path):
    repo, backends = tmp_path / "repo", tmp_path / "backends"
    (backends / "doubling").mkdir(parents=True)
    (backends / "doubling" / "model.py").write_text(textwrap.dedent(DOUBLE))
    for name in ("one", "two"):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(
            'backend: "doubling"\n' + IO.format(i="X", o="Y", t="TYPE_FP32") + DOUBLE_CONFIG)
    server = start_server(model_repository=str(repo), backend_directory=str(backends),
                          python_backend="inprocess")
    try:
        for name in ("one", "two"):
            response = next(server.model(name).infer(inputs={"X": np.ones(1, np.float32)}))
            assert int(np.from_dlpack(response.outputs["PID"])[0]) == os.getpid()
            assert server.model(name).config()["backend"] == "doubling"
    finally:
        stop_within(server)


def test_a_packed_environment_is_refused_in_process_with_what_to_do(tmp_path):
    repo = tmp_path / "repo"
    python_model(repo, "packed", PLAIN_DOUBLE, DOUBLE_CONFIG + textwrap.dedent("""
        parameters: { key: "EXECUTION_ENV_PATH" value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }
        """))
    server = start_server(model_repository=str(repo), python_backend="inprocess",
                          model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    try:
        with pytest.raises(tritonserver.TritonError) as caught:
            server.load("packed")
        message = str(caught.value)
        assert "EXECUTION_ENV_PATH" in message and "libtriton_python_stub.so" in message
        assert server.live()
    finally:
        stop_within(server)


ITERATIVE = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.steps = {}

    def execute(self, requests):
        for request in requests:
            key = request.correlation_id()
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            step = self.steps.get(key, 0)
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([step], np.int32))]))
            if step + 1 < n:
                self.steps[key] = step + 1
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
            else:
                self.steps.pop(key, None)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""
ITERATIVE_CONFIG = """
model_transaction_policy { decoupled: true }
sequence_batching { iterative_sequence: true }
"""


def test_an_iterative_sequence_reschedules_its_request(tmp_path):
    repo = tmp_path / "repo"
    python_model(repo, "iterative", ITERATIVE, ITERATIVE_CONFIG, io=("N", "I", "TYPE_INT32"))
    server = start_server(model_repository=str(repo), python_backend="inprocess")
    try:
        # As Triton's QA sends it (request_rescheduling): no sequence id, no flags.
        responses = server.model("iterative").infer(inputs={"N": np.array([4], np.int32)})
        got = [int(np.from_dlpack(r.outputs["I"])[0]) for r in responses if "I" in r.outputs]
        assert got == [0, 1, 2, 3]  # one request, run four times
    finally:
        stop_within(server)


COPIES = r"""
import os, sys
import numpy as np
import tritonserver

def no_hard_links(src, dst, *args, **kwargs):  # a temporary folder on another file system
    raise OSError(18, "Invalid cross-device link")
os.link = no_hard_links

repo, backends = sys.argv[1], sys.argv[2]
for python_backend in ("inprocess", "stub", "inprocess", "stub"):
    server = tritonserver.Server(model_repository=repo, backend_directory=backends,
                                 python_backend=python_backend, log_error=True,
                                 exit_timeout=10).start(wait_until_ready=True, timeout=60)
    for name in ("chosen", "by_backend"):
        response = next(server.model(name).infer(inputs={"X": np.ones(1, np.float32)}))
        assert np.from_dlpack(response.outputs["Y"]).tolist() == [2.0]
    server.stop()

with open("/proc/self/maps") as maps:
    paths = {line.split(None, 5)[-1].strip() for line in maps}
paths = [p for p in paths if p.startswith("/") and os.path.isfile(p)]
real = next(p for p in paths if p.endswith("/libtriton_inprocess.so"))
with open(real, "rb") as f:
    code = f.read()
mapped = set()
for path in paths:
    if os.path.getsize(path) == len(code):
        with open(path, "rb") as f:
            if f.read() == code:
                st = os.stat(path)
                mapped.add((st.st_dev, st.st_ino))
print("inprocess libraries mapped:", len(mapped))
"""


CROSS_DEVICE = r"""
import errno, hashlib, os, shutil, sys
import numpy as np
import tritonserver

from tritonserver._core.runtime_dirs import PREFIX

# The package on another file system than the temporary directory (a tmpfs
# /tmp): no hard link from the package's files into the folders made there,
# hard links between those folders.
real_link = os.link
def cross_device(src, dst, *args, **kwargs):
    if PREFIX not in os.path.realpath(src):
        raise OSError(errno.EXDEV, "Invalid cross-device link")
    return real_link(src, dst, *args, **kwargs)
os.link = cross_device

repo, backends = sys.argv[1], sys.argv[2]
# A server that lives throughout keeps the core's backends (one per library
# path) loaded, as a long-lived server of an application does.
keeper = tritonserver.Server(model_repository=sys.argv[3], python_backend="inprocess",
                             log_error=True, exit_timeout=10).start(wait_until_ready=True,
                                                                   timeout=60)
for i in range(4):  # a backend folder of its own for each server
    own = f"{backends}_{i}"
    shutil.copytree(backends, own)
    server = tritonserver.Server(model_repository=repo, backend_directory=own,
                                 python_backend="stub", log_error=True,
                                 exit_timeout=10).start(wait_until_ready=True, timeout=60)
    for name in ("chosen", "by_backend", "on_stub"):
        response = next(server.model(name).infer(inputs={"X": np.ones(1, np.float32)}))
        assert np.from_dlpack(response.outputs["Y"]).tolist() == [2.0]
    server.stop()

with open("/proc/self/maps") as maps:
    paths = {line.split(None, 5)[-1].strip() for line in maps}
keeper.stop()
files = {}
for path in paths:
    if os.path.basename(path).startswith("libtriton_python") and os.path.isfile(path):
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        st = os.stat(path)
        files.setdefault(digest, set()).add((st.st_dev, st.st_ino))
print("python backend libraries:", len(files), "loaded as", sorted(len(v) for v in files.values()))
"""


def test_a_package_on_another_file_system_loads_each_library_once(tmp_path):
    """A temporary directory on another file system than the package
    (CI's, and a tmpfs /tmp): the python/ folder of each server's backend
    folder holds the libraries themselves, and each is this process's one
    copy, hard-linked. With a copy per folder, each server with a backend
    folder of its own loaded one more instance of the python backend's
    library, of its guard and of the in-process forwarder, for good."""
    repo, backends = runtimes_repo(tmp_path)
    from tritonserver._core import stub_environment
    from tritonserver._runtime import ensure_core_loaded

    if not stub_environment(ensure_core_loaded()).usable:
        pytest.skip("no python-backend stub for this Python here")
    import subprocess
    import sys

    kept = tmp_path / "kept"
    python_model(kept, "double", PLAIN_DOUBLE, DOUBLE_CONFIG)
    done = subprocess.run([sys.executable, "-c", CROSS_DEVICE, str(repo), str(backends), str(kept)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    # The guard, the python backend's library and the forwarder: once each.
    assert "python backend libraries: 3 loaded as [1, 1, 1]" in done.stdout, done.stdout


def test_copied_libraries_still_load_the_inprocess_backend_once(tmp_path):
    """Where the backend folder cannot hard-link the package's files (a
    temporary directory on another file system), its python/ libraries are
    copies: servers one after another, on both defaults, with a model on
    the in-process runtime and a python-based backend, still share the one
    inprocess library (a second copy of it broke the process)."""
    repo, backends = runtimes_repo(tmp_path, on_stub=False)
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", COPIES, str(repo), str(backends)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "inprocess libraries mapped: 1" in done.stdout
