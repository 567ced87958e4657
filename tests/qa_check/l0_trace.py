"""The OpenTelemetry parts of Triton's qa/L0_trace, for run_qa.py: the model
repository test.sh builds, the collector stand-in, and test.sh's own
OpenTelemetry steps (what it checks with curl, grep and the
opentelemetry_unittest module's send_bls_request), each a row.

test.sh downloads the OpenTelemetry Collector (otelcol 0.91.0), which cannot
be had here: ``install_collector`` puts a launcher named ``otelcol`` where
opentelemetry_unittest.py and these steps start it, which runs otelcol.py
beside this file (an OTLP/HTTP receiver on the OpenTelemetry protobufs, the
batch processor's batching and the file exporter's JSON lines, as
trace-config.yaml asks).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional

import make_repo  # tests/examples_check, on the path run_qa.py sets

HERE = os.path.dirname(os.path.abspath(__file__))
OTLP_PORT = 10000  # test.sh's OTLP_PORT (trace-config.yaml's receiver)
SAGEMAKER_PORT = 8080
# test.sh's model for the SageMaker invoke test: a fixed path of Triton's CI.
SAGEMAKER_MODEL_PATH = "/opt/ml/models/123456789abcdefghi/model"
PATHS = ("qa/L0_trace", "qa/python_models/bls_simple", "qa/python_models/identity_fp32")
CONTEXT = "00-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01"
QUEUE_FULL = "BatchSpanProcessor queue is full - dropping span."

# opentelemetry_unittest.py's tests, in unittest's order (by name).
UNITTESTS = (
    "test_custom_backend_tracing", "test_custom_backend_tracing_context_propagation",
    "test_grpc_trace_all_input_required_model_cancel", "test_grpc_trace_model_cancel_in_queue",
    "test_grpc_trace_simple_model", "test_grpc_trace_simple_model_context_propagation",
    "test_http_trace_bls_model", "test_http_trace_bls_model_context_propagation",
    "test_http_trace_ensemble_model", "test_http_trace_ensemble_model_context_propagation",
    "test_http_trace_simple_model", "test_http_trace_simple_model_context_propagation",
    "test_http_trace_triggered", "test_non_decoupled",
    "test_sagemaker_invocation_trace_simple_model_context_propagation",
    "test_sagemaker_invoke_trace_simple_model_context_propagation",
    "test_streaming_grpc_trace_simple_model",
    "test_streaming_grpc_trace_simple_model_context_propagation",
    "test_trace_context_exposed_to_pbe",
)

# The unittest's server (test.sh, "Check opentelemetry trace exporter sends proper info").
_OTEL = ["--trace-config=mode=opentelemetry",
         f"--trace-config=opentelemetry,url=localhost:{OTLP_PORT}/v1/traces"]
UNITTEST_FLAGS = [
    "--model-control-mode=explicit", "--load-model=simple",
    "--load-model=ensemble_add_sub_int32_int32_int32", "--load-model=repeat_int32",
    "--load-model=custom_identity_int32", "--load-model=input_all_required",
    "--load-model=dynamic_batch", "--load-model=bls_simple", "--trace-config=level=TIMESTAMPS",
    "--load-model=trace_context", "--trace-config=rate=1", "--trace-config=count=-1",
    "--trace-config=mode=opentelemetry",
    "--trace-config=opentelemetry,resource=test.key=test.value",
    "--trace-config=opentelemetry,resource=service.name=test_triton",
    f"--trace-config=opentelemetry,url=localhost:{OTLP_PORT}/v1/traces"]
# test.sh's SageMaker service (its two SageMaker tests), on both servers.
SAGEMAKER_FLAGS = ["--allow-sagemaker=true"]
SERVER_ENV = {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "simple"}


def _level(rate: str, count: str) -> List[str]:
    return ["--trace-config=level=TIMESTAMPS", f"--trace-config=rate={rate}",
            f"--trace-config=count={count}"]


# test.sh's other OpenTelemetry servers: step name -> its flags (the repository added).
STEP_FLAGS: Dict[str, List[str]] = {
    "rate_0_context_only": _level("0", "-1") + _OTEL,
    "count_1_then_context_only": _level("5", "1") + _OTEL,
    "bsp_max_queue_size": _level("1", "-1") + _OTEL + [
        "--trace-config", "opentelemetry,bsp_max_queue_size=1", "--log-verbose=1"],
    "bsp_schedule_delay": _level("1", "-1") + _OTEL + [
        "--trace-config", "opentelemetry,bsp_schedule_delay=0", "--log-verbose=1"],
    "bsp_max_export_batch_size": _level("1", "-1") + _OTEL + [
        "--trace-config", "opentelemetry,bsp_max_export_batch_size=1", "--log-verbose=1"],
    "pbe_context_none_mode_triton": _level("1", "-1") + ["--trace-config=mode=triton",
                                                        "--log-verbose=1"],
    "pbe_context_none_level_off": ["--trace-config=level=OFF", "--trace-config=rate=1",
                                   "--trace-config=count=-1",
                                   "--trace-config=mode=opentelemetry", "--log-verbose=1"],
    "otel_trace_stress": ["--model-control-mode=explicit", "--load-model=identity_fp32",
                          "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1",
                          "--trace-config", "mode=opentelemetry",
                          "--trace-config", "opentelemetry,resource=test.key=test.value",
                          "--trace-config", "opentelemetry,resource=service.name=test_triton",
                          "--trace-config", f"opentelemetry,url=localhost:{OTLP_PORT}/v1/traces"],
}

# ---- The model repository (test.sh's trace_models) ------------------------------------

ENSEMBLE = '''name: "ensemble_add_sub_int32_int32_int32"
platform: "ensemble"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
ensemble_scheduling {
  step [
    {
      model_name: "simple"
      model_version: -1
      input_map { key: "INPUT0" value: "INPUT0" }
      input_map { key: "INPUT1" value: "INPUT1" }
      output_map { key: "OUTPUT0" value: "OUTPUT0" }
      output_map { key: "OUTPUT1" value: "OUTPUT1" }
    }
  ]
}
'''

# The repeat backend's example model (IN, DELAY, WAIT -> OUT, IDX) with
# decoupled False, as test.sh's sed leaves it: a python stand-in (the repeat
# backend of this package is decoupled only).
REPEAT_CONFIG = '''name: "repeat_int32"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: False }
input [
  { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] },
  { name: "WAIT" data_type: TYPE_UINT32 dims: [ 1 ] }
]
output [
  { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
  { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }
]
instance_group [{ kind: KIND_CPU }]
'''
REPEAT = '''import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """The repeat backend, not decoupled: one response, IN's first value."""

    def execute(self, requests):
        responses = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
            if len(values) != 1:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                    "a repeat model that is not decoupled sends one response: IN needs one "
                    "value")))
                continue
            time.sleep(float(delays[0]) / 1000 if len(delays) else 0)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", values[:1].astype(np.int32)),
                pb_utils.Tensor("IDX", np.array([0], np.uint32))]))
        return responses
'''

# test.sh's echo lines, as config.pbtxt text.
DYNAMIC_BATCH = '''backend: "identity"
max_batch_size: 1
input [{ name: "INPUT0" 
 data_type: TYPE_FP32 
 dims: [ -1 ] }]
output [{ name: "OUTPUT0" 
 data_type: TYPE_FP32 
 dims: [ -1 ] }]
instance_group [{ count: 1 
 kind: KIND_CPU }]
dynamic_batching {
  preferred_batch_size: [ 1 ]
  default_queue_policy { timeout_action: REJECT 
 default_timeout_microseconds: 1000000 
 max_queue_size: 8 }
}
parameters [{ key: "execute_delay_ms" 
 value: { string_value: "8000" } }]
'''
CUSTOM_IDENTITY = '''name: "custom_identity_int32"
backend: "identity"
max_batch_size: 1024
input [{ name: "INPUT0" 
 data_type: TYPE_INT32 
 dims: [ -1 ] }]
output [{ name: "OUTPUT0" 
 data_type: TYPE_INT32 
 dims: [ -1 ] }]
instance_group [{ kind: KIND_CPU }]
parameters [{ key: "execute_delay_ms" 
 value: { string_value: "500" } }, { key: "enable_custom_tracing" 
 value: { string_value: "true" } }, { key: "nested_span_count" 
 value: { string_value: "6" } }, { key: "single_activity_frequency" 
 value: { string_value: "3" } }]
'''


def build_repository(qa: str, work: str) -> str:
    """test.sh's trace_models, with python-backend stand-ins where it takes
    models from qa_model_repository or another repository:

      simple, global_simple   onnx_int32_int32_int32 -> the docs' simple (INT32
                              add/sub [16], max_batch_size 8) as make_repo's python model
      ensemble_add_sub_int32_int32_int32  QA's ensemble simple_onnx_int32_int32_int32
                              (one step over "simple"), written out
      repeat_int32            the repeat backend's example, decoupled False: REPEAT
      bls_simple, trace_context, input_all_required, identity_fp32: QA's, unchanged
      dynamic_batch, custom_identity_int32: test.sh's configs (the identity
                              backend, which this package ships)
    """
    root = os.path.join(work, "trace_models")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    simple = make_repo.add_sub_config("simple", "TYPE_INT32")
    make_repo.python_model(root, "simple", simple, make_repo.ADD_SUB)
    make_repo.python_model(root, "global_simple",
                           simple.replace('name: "simple"', 'name: "global_simple"'),
                           make_repo.ADD_SUB)
    _write(os.path.join(root, "ensemble_add_sub_int32_int32_int32", "config.pbtxt"), ENSEMBLE)
    os.makedirs(os.path.join(root, "ensemble_add_sub_int32_int32_int32", "1"))
    make_repo.python_model(root, "repeat_int32", REPEAT_CONFIG, REPEAT)
    l0 = os.path.join(qa, "L0_trace")
    shutil.copytree(os.path.join(l0, "models", "input_all_required"),
                    os.path.join(root, "input_all_required"))
    _copy(os.path.join(qa, "python_models", "bls_simple", "bls_simple.py"),
          os.path.join(root, "bls_simple", "1", "model.py"))
    _copy(os.path.join(l0, "trace_context.py"), os.path.join(root, "trace_context", "1",
                                                              "model.py"))
    for name in ("model.py", "config.pbtxt"):
        _copy(os.path.join(qa, "python_models", "identity_fp32", name),
              os.path.join(root, "identity_fp32", *(["1"] if name == "model.py" else []), name))
    for name, config in (("dynamic_batch", DYNAMIC_BATCH),
                         ("custom_identity_int32", CUSTOM_IDENTITY)):
        _write(os.path.join(root, name, "config.pbtxt"), config)
        os.makedirs(os.path.join(root, name, "1"))
    return root


def sagemaker_model(repository: str) -> Optional[str]:
    """test.sh's SageMaker model (a copy of simple at its fixed path); None,
    or why it could not be made."""
    try:
        shutil.rmtree(SAGEMAKER_MODEL_PATH, ignore_errors=True)
        shutil.copytree(os.path.join(repository, "simple"), SAGEMAKER_MODEL_PATH)
    except OSError as e:
        return f"cannot make {SAGEMAKER_MODEL_PATH}: {e}"
    return None


def remove_sagemaker_model() -> None:
    """The SageMaker model made for the run, and its folders left empty."""
    shutil.rmtree(SAGEMAKER_MODEL_PATH, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.removedirs(os.path.dirname(SAGEMAKER_MODEL_PATH))


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _copy(src: str, dst: str) -> None:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)


def install_collector(qa: str) -> str:
    """The ``otelcol`` launcher in qa/L0_trace, where test.sh untars the
    collector (its Python: this one's; otelcol.py beside this file)."""
    path = os.path.join(qa, "L0_trace", "otelcol")
    _write(path, f"#!/bin/sh\nexec '{sys.executable}' '{os.path.join(HERE, 'otelcol.py')}' "
                 '"$@"\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# ---- test.sh's steps ------------------------------------------------------------------

@dataclass
class Step:
    """What a step of test.sh works with: qa/L0_trace (its cwd), the client
    environment, the server's log, and where the step's output goes."""

    l0: str
    env: dict
    server_log: str
    out: List[str]
    collector: Optional[subprocess.Popen] = None

    @property
    def traces(self) -> str:
        return os.path.join(self.l0, "collected_traces.json")

    def say(self, text: str) -> None:
        self.out.append(text)

    def start_collector(self) -> None:
        """``$OTEL_COLLECTOR --config ./trace-config.yaml &`` (after ``rm
        collected_traces.json``)."""
        if os.path.exists(self.traces):
            os.remove(self.traces)
        log = open(os.path.join(self.l0, "trace_collector_exporter.log"), "ab")
        self.collector = subprocess.Popen(["./otelcol", "--config", "./trace-config.yaml"],
                                          cwd=self.l0, stdout=log, stderr=subprocess.STDOUT)
        time.sleep(1)  # listening (test.sh sends its first request later still)

    @contextlib.contextmanager
    def collecting(self) -> Iterator[None]:
        """The collector runs for the block (test.sh starts it before the
        step's requests and kills it after its checks)."""
        self.start_collector()
        try:
            yield
        finally:
            self.stop_collector()

    def stop_collector(self) -> None:
        if self.collector is not None:
            self.collector.send_signal(signal.SIGTERM)
            try:
                self.collector.wait(10)
            except subprocess.TimeoutExpired:
                self.collector.kill()
                self.collector.wait()
            self.collector = None

    def curl(self, path: str, body: Optional[bytes] = None) -> "tuple[int, str]":
        request = urllib.request.Request(f"http://localhost:8000{path}", data=body)
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def send_bls(self, context: bool = False) -> None:
        """test.sh's ``python -c 'import opentelemetry_unittest;
        opentelemetry_unittest.send_bls_request(...)'``."""
        headers = f', headers={{"traceparent": "{CONTEXT}"}}' if context else ""
        code = ("import opentelemetry_unittest; opentelemetry_unittest.send_bls_request("
                f'model_name="ensemble_add_sub_int32_int32_int32"{headers})')
        done = subprocess.run([sys.executable, "-c", code], cwd=self.l0, env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.say(done.stdout.decode("utf-8", "replace"))

    def file_text(self) -> str:
        try:
            with open(self.traces) as f:
                return f.read()
        except OSError:
            return ""

    def lines_with(self, text: str) -> int:
        """``grep -c text collected_traces.json``."""
        return sum(1 for line in self.file_text().splitlines() if text in line)


def check_settings(step: Step, rate: str, count: str) -> List[str]:
    """test.sh's greps of ``GET /v2/models/bls_simple/trace/setting`` (each
    a RET=1: the run goes on, the row fails)."""
    code, text = step.curl("/v2/models/bls_simple/trace/setting")
    step.say(f"trace setting ({code}): {text}")
    problems = [] if code == 200 else [f"trace setting status {code}"]
    expected = {'"trace_level":["TIMESTAMPS"]': 1, f'"trace_rate":"{rate}"': 1,
                f'"trace_count":"{count}"': 1, '"trace_mode":"opentelemetry"': 1,
                f'"url":"localhost:{OTLP_PORT}/v1/traces"': 1,
                '"bsp_max_export_batch_size":"512"': 1, '"bsp_schedule_delay":"5000"': 1,
                '"bsp_max_queue_size":"2048"': 1, '"trace_file":': 0, '"log_frequency":': 0}
    for needle, want in expected.items():
        got = 1 if needle in text else 0
        if got != want:
            problems.append(f"trace setting: {needle} {'missing' if want else 'present'}")
    return problems


def step_rate_0_context_only(step: Step) -> Optional[str]:
    """Rate 0: only requests with a propagated context are traced."""
    with step.collecting():
        problems = check_settings(step, "0", "-1")
        for _ in range(10):
            step.send_bls()
        if step.file_text():
            return "collected_traces.json should be empty, but it is not"
        step.send_bls(context=True)
        time.sleep(20)
        if not step.file_text():
            return "collected_traces.json should contain OTel trace, but it is not"
        return "; ".join(problems) or None


def step_count_1_then_context_only(step: Step) -> Optional[str]:
    """Count 1 at rate 5: one sampled trace, then only those with a context."""
    with step.collecting():
        problems = check_settings(step, "5", "1")
        for _ in range(20):
            step.send_bls()
        time.sleep(20)
        if not (step.file_text() and step.lines_with('"name":"InferRequest"') == 1
                and step.lines_with('"parentSpanId":""') == 1):
            return "collected_traces.json should contain only 1 trace"
        for _ in range(10):
            step.send_bls(context=True)
            step.send_bls()
            time.sleep(10)
        time.sleep(5)
        if not (step.file_text() and step.lines_with('"parentSpanId":""') == 1
                and step.lines_with('"parentSpanId":"b7ad6b7169242424"') == 10):
            no_parent = step.lines_with('"parentSpanId":""')
            continued = step.lines_with('"parentSpanId":"b7ad6b7169242424"')
            return ("collected_traces.json should contain 11 OTel trace, but it is not "
                    f"(lines with a root span: {no_parent}, with the client's parent: "
                    f"{continued})")
        return "; ".join(problems) or None


def step_bsp_max_queue_size(step: Step) -> Optional[str]:
    """A queue of 1 span: spans are dropped, with the batch span processor's warning."""
    with step.collecting():
        step.send_bls()
        time.sleep(20)
        with open(step.server_log, errors="replace") as f:
            if QUEUE_FULL not in f.read():
                return f"the server log does not contain the expected BSP warning ({QUEUE_FULL})"
        return None


def _scope_spans(step: Step) -> int:
    """``grep -o "scopeSpans" collected_traces.json | wc -l``."""
    return len(re.findall("scopeSpans", step.file_text()))


def step_bsp_schedule_delay(step: Step) -> Optional[str]:
    """Schedule delay 0: the trace's spans go in more than one batch."""
    with step.collecting():
        step.send_bls()
        time.sleep(10)
        found = _scope_spans(step)
        # test.sh: [[ `... | wc -l` > 1 ]], a comparison of strings
        if not (step.file_text() and str(found) > "1"):
            return f"unexpected number of span batches collected ({found} scopeSpans)"
        return None


def step_bsp_max_export_batch_size(step: Step) -> Optional[str]:
    """Batches of 1 span: the BLS trace's 6 spans in 6 batches."""
    with step.collecting():
        step.send_bls()
        time.sleep(10)
        found = _scope_spans(step)
        if not (step.file_text() and found == 6):
            return f"unexpected number of span batches collected ({found} scopeSpans, 6 expected)"
        return None


def _pbe_context_none(step: Step) -> Optional[str]:
    data = b'{"inputs":[{"name":"expect_none","datatype":"BOOL","shape":[1],"data":[true]}]}'
    code, text = step.curl("/v2/models/trace_context/infer", data)
    step.say(f"infer ({code}): {text}")
    return None if code == 200 else f"PBE trace context is not None (status {code}: {text})"


def step_otel_trace_stress(step: Step, seconds: float = 120.0) -> Optional[str]:
    """test.sh's run_stress_client: trace_stress_grpc_client.py again and
    again for 120 s (1000 requests of 1 ms timeout each); the server must live."""
    with step.collecting():
        deadline = time.monotonic() + seconds
        runs = 0
        while time.monotonic() < deadline:
            done = subprocess.run([sys.executable, "trace_stress_grpc_client.py"], cwd=step.l0,
                                  env=step.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=max(30.0, seconds))
            runs += 1
            tail = done.stdout.decode("utf-8", "replace").strip().splitlines()[-1:]
            step.say(f"run {runs}: {tail}")
            time.sleep(0.1)
        return None


STEPS: Dict[str, Callable[[Step], Optional[str]]] = {
    "rate_0_context_only": step_rate_0_context_only,
    "count_1_then_context_only": step_count_1_then_context_only,
    "bsp_max_queue_size": step_bsp_max_queue_size,
    "bsp_schedule_delay": step_bsp_schedule_delay,
    "bsp_max_export_batch_size": step_bsp_max_export_batch_size,
    "pbe_context_none_mode_triton": _pbe_context_none,
    "pbe_context_none_level_off": _pbe_context_none,
    "otel_trace_stress": step_otel_trace_stress,
}

NOT_RUN = [
    "qa/L0_trace's triton-mode parts (trace files, trace_endpoint_test.py, the triton-mode "
    "stress run): not OpenTelemetry; serve's triton mode has its tests in tests/",
    "the OpenTelemetry Collector binary test.sh downloads (otelcol 0.91.0): not available "
    "here; tests/qa_check/otelcol.py stands in for it (OTLP/HTTP receiver on the "
    "OpenTelemetry protobufs, the batch processor's batching, the file exporter's lines)",
]
