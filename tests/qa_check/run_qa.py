"""Run Triton's own QA suites, unchanged, against Triton's `tritonserver`
executable (of the installed core) and against `python -m tritonserver
serve`, from the same model repositories in the same run, the way the
server repository's qa/L0_*/test.sh run them:

  qa/L0_shared_memory/shared_memory_test.py   over HTTP and gRPC (22 tests each)
  qa/L0_parameters/parameters_test.py         (5 tests)
  qa/L0_http/http_input_size_limit_test.py    (9 tests)
  qa/L0_http/generate_endpoint_test.py        (18 tests)
  qa/L0_trace/opentelemetry_unittest.py       (19 tests) and test.sh's other
                                              OpenTelemetry steps (8; l0_trace.py)
  qa/L0_metrics' histogram steps              metrics_config_test.py (10 checks on two
                                              servers), histogram_metrics_test.py (2;
                                              l0_metrics.py)

Standalone (not a pytest module, not run in CI): the QA files are read from
a local mirror of github.com/triton-inference-server/server at run time, and
the run needs the core installed; see README.md beside this file.

    python tests/qa_check/run_qa.py [--only REGEX] [--list] [--servers exe,serve]

Each row is one test as its test.sh runs it: the same server flags, the
same environment (CLIENT_TYPE, BACKENDS, SERVER_PID), a fresh server where
test.sh starts one, and test.sh's pass criteria (exit status; test_results.txt
holding one passed test where test.sh calls check_test_results; a server
that shuts down gracefully where test.sh checks it). The suites name
localhost:8000 and :8001, so the servers take QA's ports, one at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
# The example programs' check: its servers, the installed core, the python models.
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples_check"))
import make_repo  # noqa: E402
import run_examples as ex  # noqa: E402  (puts benchmarks/ on sys.path)
from tsbench.procs import tail  # noqa: E402
import l0_metrics  # noqa: E402  (beside this file)
import l0_trace  # noqa: E402

PSUTIL_FALLBACK = os.path.join(HERE, "psutil_fallback")
PORTS = (8000, 8001, 8002)  # http, grpc, metrics: the suites name localhost:8000/8001
QA_PATHS = (
    "qa/common/test_util.py", "qa/common/infer_util.py", "qa/common/shm_util.py",
    "qa/L0_shared_memory/shared_memory_test.py",
    "qa/L0_parameters/parameters_test.py", "qa/L0_parameters/model_repository",
    "qa/L0_http/http_input_size_limit_test.py", "qa/L0_http/generate_endpoint_test.py",
    "qa/python_models/add_sub", "qa/python_models/execute_delayed_model",
    "qa/python_models/generate_models", *l0_trace.PATHS, *l0_metrics.PATHS,
)
# Stand-ins for what the QA scripts import and test.sh pip-installs, put on
# their PYTHONPATH only where the client's Python lacks the real module.
FALLBACKS = {"psutil": PSUTIL_FALLBACK, "sseclient": os.path.join(HERE, "sseclient_fallback")}
TITLES = ex.TITLES
SERVERS = ex.SERVERS

# What the suites hold that this check does not run, and why.
NOT_RUN = [
    "test_large_shm_register_offset with the onnx, libtorch, plan and openvino "
    "<backend>_int32_int32_int32 models: QA takes them from qa_model_repository (not "
    "available), and the pip core's executable has no backend for them; BACKENDS=python",
    "L0_shared_memory's CUDA shared memory suite (L0_cuda_shared_memory): GPU work",
    "L0_parameters' class_count_test.py and L0_http's other scripts (but the input size "
    "limits and generate_endpoint_test.py): not asked for here",
    "L0_http's --http-max-input-size=0 / -1024 start-up refusals: test.sh lines, not tests "
    "of http_input_size_limit_test.py",
    *l0_trace.NOT_RUN,
    *l0_metrics.NOT_RUN,
]


@dataclass
class Row:
    suite: str                  # L0_shared_memory | L0_parameters | L0_http | L0_http_generate
    test: str                   # what test.sh runs: Class.method (or module.Class.method)
    proto: str                  # the protocol the row is about ("" for both)
    repo: str                   # which repository (see build_repositories)
    flags: Dict[str, List[str]]  # server flags by kind (exe, serve)
    group: str                  # consecutive rows of a group share one server
    env: Dict[str, str] = field(default_factory=dict)
    results: Optional[int] = None  # check_test_results' count, where test.sh checks it
    graceful: bool = True       # test.sh fails a server that does not stop cleanly
    module: bool = False        # python -m unittest <test> (else python <script> <test>)
    script: str = ""
    cwd: str = ""               # the qa/ folder it runs in (default: the suite's)
    step: str = ""              # a step of test.sh itself (l0_trace.STEPS), not a test file
    server_env: Dict[str, str] = field(default_factory=dict)  # the server's environment
    ports: Tuple[int, ...] = ()  # more ports the row needs free (besides 8000-8002)

    @property
    def key(self) -> str:
        name = self.test.split(".")[-1]
        return f"{self.suite} {name}" + (f" [{self.proto}]" if self.proto else "")


def rows() -> List[Row]:
    out: List[Row] = []
    # ---- qa/L0_shared_memory/test.sh ----------------------------------------
    shm = "shared_memory_test.py"
    plain = {"exe": ["--log-verbose=1"], "serve": ["--log-verbose=1"]}
    # The 2.51 executable does not know --allow-client-shm (its shared memory is always on).
    allow = {"exe": ["--log-verbose=1"],
             "serve": ["--log-verbose=1", "--allow-client-shm=true"]}
    for proto in ("http", "grpc"):
        out.append(Row("L0_shared_memory", "SharedMemoryTest.test_client_shm_disabled_by_default",
                       proto, "shm", plain, f"shm-disabled-{proto}", {"CLIENT_TYPE": proto}, 1,
                       script=shm))
    for name in ("test_invalid_create_shm", "test_valid_create_set_register",
                 "test_unregister_before_register", "test_unregister_after_register",
                 "test_reregister_after_register", "test_unregister_after_inference",
                 "test_register_after_inference", "test_too_big_shm", "test_mixed_raw_shm",
                 "test_unregisterall", "test_infer_offset_out_of_bound",
                 "test_infer_byte_size_out_of_bound", "test_infer_integer_overflow",
                 "test_register_out_of_bound", "test_register_reserved_names",
                 "test_register_invalid_shm_key", "test_python_client_leak"):
        for proto in ("http", "grpc"):
            out.append(Row("L0_shared_memory", f"SharedMemoryTest.{name}", proto, "shm", allow,
                           f"shm-{name}-{proto}", {"CLIENT_TYPE": proto}, 1, script=shm))
    for case in ("test_unregister_shm_during_inference_single_req",
                 "test_unregister_shm_during_inference_multiple_req",
                 "test_unregister_shm_after_inference"):
        for proto in ("http", "grpc"):
            out.append(Row("L0_shared_memory", f"TestSharedMemoryUnregister.{case}_{proto}", proto,
                           "shm-delayed", allow, f"shm-{case}-{proto}", {"CLIENT_TYPE": proto},
                           1, script=shm))
    for proto in ("http", "grpc"):
        # No check_test_results here in test.sh, and BACKENDS=python (see NOT_RUN).
        out.append(Row("L0_shared_memory", "SharedMemoryTest.test_large_shm_register_offset",
                       proto, "shm-large", allow, f"shm-large-{proto}",
                       {"CLIENT_TYPE": proto, "BACKENDS": "python"}, None, script=shm))
    # ---- qa/L0_parameters/test.sh -------------------------------------------
    extra = {
        "test_params": [],
        "test_params_reserved_rejected": [],
        "test_headers": ["--grpc-header-forward-pattern", "MY_HEADER.*",
                         "--http-header-forward-pattern", "MY_HEADER.*"],
        "test_grpc_header_forward_pattern_case_sensitive":
            ["--grpc-header-forward-pattern", "(?-i)MY_HEADER.*"],
        "test_headers_reserved_rejected": ["--grpc-header-forward-pattern", ".*",
                                           "--http-header-forward-pattern", ".*"],
    }
    for name, flags in extra.items():
        both = ["--exit-timeout-secs=120", *flags]
        # test.sh does not check this suite's shutdown.
        out.append(Row("L0_parameters", f"parameters_test.InferenceParametersTest.{name}", "",
                       "params", {"exe": both, "serve": both}, f"params-{name}",
                       graceful=False, module=True))
    # ---- qa/L0_http/test.sh: HTTP input size limits --------------------------
    size = "http_input_size_limit_test.py"
    default = {"exe": [], "serve": []}
    for name in ("test_default_limit_raw_binary", "test_default_limit_json",
                 "test_large_string_in_json", "test_default_limit_compressed",
                 "test_json_dtype_size_expansion_exceeds_limit_error",
                 "test_no_leak_on_invalid_inference_header_length"):
        out.append(Row("L0_http", f"InferSizeLimitTest.{name}", "http", "size", default,
                       "size-default", graceful=False, script=size))
    increased = {"exe": [f"--http-max-input-size={2 ** 27}"],
                 "serve": [f"--http-max-input-size={2 ** 27}"]}
    for name in ("test_large_input_raw_binary", "test_large_input_json",
                 "test_large_input_compressed"):
        out.append(Row("L0_http", f"InferSizeLimitTest.{name}", "http", "size", increased,
                       "size-increased", graceful=False, script=size))
    # ---- qa/L0_http/test.sh: the generate extension ---------------------------
    # One server for the file (test.sh runs it whole, unittest's order: by name);
    # set -e around `kill; wait` makes a server that does not stop cleanly a failure.
    verbose = {"exe": ["--log-verbose=1"], "serve": ["--log-verbose=1"]}
    for name in ("test_0_dimension_output", "test_close_connection_during_streaming",
                 "test_complex_schema", "test_duplicate_inputs", "test_generate",
                 "test_generate_stream", "test_generate_stream_response_error",
                 "test_generate_with_all_inputs", "test_invalid_input_types",
                 "test_json_dtype_size_expansion_exceeds_limit_error", "test_many_response",
                 "test_missing_inputs", "test_one_response", "test_parameters",
                 "test_race_condition", "test_request_id", "test_streaming",
                 "test_zero_response"):
        out.append(Row("L0_http_generate", f"GenerateEndpointTest.{name}", "http", "generate",
                       verbose, "generate", results=1, cwd="L0_http",
                       script="generate_endpoint_test.py"))
    # ---- qa/L0_trace/test.sh: OpenTelemetry ------------------------------------
    # opentelemetry_unittest.py on one server (test.sh runs the file whole, 19
    # tests; each row is one of them, checked as check_test_results checks one).
    # Each test starts the collector (./otelcol) itself; both servers serve
    # SageMaker's routes, as test.sh's SERVER_ARGS ask.
    otel = {"exe": l0_trace.SAGEMAKER_FLAGS + l0_trace.UNITTEST_FLAGS,
            "serve": l0_trace.SAGEMAKER_FLAGS + l0_trace.UNITTEST_FLAGS}
    for name in l0_trace.UNITTESTS:
        out.append(Row("L0_trace_opentelemetry", f"OpenTelemetryTest.{name}", "", "trace", otel,
                       "otel-unittest", results=1, cwd="L0_trace",
                       script="opentelemetry_unittest.py", server_env=dict(l0_trace.SERVER_ENV),
                       ports=(l0_trace.OTLP_PORT, l0_trace.SAGEMAKER_PORT)))
    # test.sh's own OpenTelemetry steps, each on a server of its own (`set -e`
    # around `kill; wait`: a server that does not stop cleanly fails it).
    for name, flags in l0_trace.STEP_FLAGS.items():
        out.append(Row("L0_trace_opentelemetry", f"test.sh.{name}", "", "trace",
                       {"exe": list(flags), "serve": list(flags)}, f"otel-{name}",
                       cwd="L0_trace", step=name, ports=(l0_trace.OTLP_PORT,)))
    # ---- qa/L0_metrics/test.sh: the histogram steps (l0_metrics) ---------------
    for group, repo, flags, tests in l0_metrics.GROUPS:
        for script, test, env in tests:
            out.append(Row(f"{l0_metrics.SUITE} {group}", test, "", repo,
                           {"exe": list(flags), "serve": list(flags)}, group, env=dict(env),
                           results=1, cwd="L0_metrics", script=script))
    return out


# --------------------------------------------------------------------------- #
# The QA files and the model repositories
# --------------------------------------------------------------------------- #

def extract_qa(mirror: str, ref: str, dest: str) -> str:
    """QA's files at `ref` under dest/qa (unchanged); returns the commit."""
    return make_repo.git_extract(mirror, ref, list(QA_PATHS), dest)


def _copy(src: str, dst: str) -> None:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)


def _python_model_from(root: str, name: str, qa_model: str, config_edit=None) -> None:
    """A model from QA's python_models folder, as test.sh copies it (config
    in the model folder, model.py in version 1), its config edited as test.sh's sed does."""
    with open(os.path.join(qa_model, "config.pbtxt")) as f:
        config = f.read()
    if config_edit is not None:
        config = config_edit(config)
    folder = os.path.join(root, name)
    os.makedirs(os.path.join(folder, "1"), exist_ok=True)
    with open(os.path.join(folder, "config.pbtxt"), "w") as f:
        f.write(config)
    _copy(os.path.join(qa_model, "model.py"), os.path.join(folder, "1", "model.py"))


ZERO_1_FLOAT32 = '''name: "onnx_zero_1_float32"
backend: "python"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ -1 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ -1 ]
  }
]
'''


def build_repositories(qa: str, work: str) -> Dict[str, str]:
    """The repositories test.sh uses, with python-backend stand-ins where QA's
    models come from qa_model_repository or the docs' examples:

      shm          L0_shared_memory/models: `simple` (docs' INT32 add/sub [16],
                   max_batch_size 8) as make_repo's python model
      shm-delayed  QA's python_models/execute_delayed_model as `simple` (unchanged)
      shm-large    python_int32_int32_int32: QA's python_models/add_sub, FP32 -> INT32
                   and max_batch_size 8 appended, as test.sh does
      params       QA's L0_parameters/model_repository (unchanged; version folders made)
      generate     QA's python_models/generate_models (mock_llm, decoupled), unchanged:
                   test.sh serves that folder itself
      size         onnx_zero_1_float32 (identity FP32 [-1], max_batch_size 8, as QA's
                   gen_qa_identity_models makes it) as a python model, and the
                   docs' simple_identity (make_repo's)
    """
    repos = {key: os.path.join(work, f"repo-{key}")
             for key in ("shm", "shm-delayed", "shm-large", "params", "size", "generate")}
    for folder in repos.values():
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
    make_repo.python_model(repos["shm"], "simple",
                            make_repo.add_sub_config("simple", "TYPE_INT32"), make_repo.ADD_SUB)
    models = os.path.join(qa, "python_models")
    _python_model_from(repos["shm-delayed"], "simple",
                       os.path.join(models, "execute_delayed_model"))
    _python_model_from(repos["shm-large"], "python_int32_int32_int32",
                       os.path.join(models, "add_sub"),
                       lambda c: c.replace("TYPE_FP32", "TYPE_INT32") + "max_batch_size: 8\n")
    for key, folder in (("params", os.path.join(qa, "L0_parameters", "model_repository")),
                        ("generate", os.path.join(models, "generate_models"))):
        shutil.rmtree(repos[key])
        shutil.copytree(folder, repos[key])
    for name in ("identity", "ensemble"):
        os.makedirs(os.path.join(repos["params"], name, "1"), exist_ok=True)
    make_repo.python_model(repos["size"], "onnx_zero_1_float32", ZERO_1_FLOAT32,
                            make_repo.IDENTITY)
    make_repo.python_model(repos["size"], "simple_identity", make_repo.IDENTITY_CONFIG,
                            make_repo.IDENTITY)
    repos["trace"] = l0_trace.build_repository(qa, work)
    repos.update(l0_metrics.build_repositories(qa, work))
    return repos


# --------------------------------------------------------------------------- #
# Servers on QA's ports
# --------------------------------------------------------------------------- #

class QAServer(ex.Server):
    """examples_check's server, on QA's fixed ports, stopped as test.sh
    stops it (`kill $SERVER_PID; wait $SERVER_PID`: SIGTERM to the server alone)."""

    def _command(self) -> List[str]:
        # examples_check starts every serve with client shared memory on; here
        # the row's flags alone decide, as test.sh's do (test_client_shm_disabled_by_default).
        command = super()._command()
        if self.kind == "serve":
            command = [a for a in command if not a.startswith("--allow-client-shm")]
            command += [a for a in self.flags if a.startswith("--allow-client-shm")]
        return command

    extra_env: Dict[str, str] = {}
    extra_ports: Tuple[int, ...] = ()

    def start(self) -> None:
        self.http_port, self.grpc_port, self.metrics_port = PORTS
        busy = [p for p in PORTS + self.extra_ports if not _port_free(p)]
        if busy:
            self.error = (f"port(s) {busy} in use: QA's suites need 8000-8002"
                          + (f" and {list(self.extra_ports)}" if self.extra_ports else ""))
            return
        env = (self.install.executable_env() if self.kind == "exe"
               else ex.loopback_only(dict(os.environ)))
        env.update(self.extra_env)
        with open(self.log_path, "ab") as log:
            log.write(("$ " + " ".join(self._command()) + "\n").encode())
            log.flush()
            self.process = subprocess.Popen(
                self._command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=self.cwd, start_new_session=True, preexec_fn=ex.die_with_parent)

    def stop_as_qa(self) -> Optional[int]:
        """SIGTERM to the server, its exit status (None: it had to be killed)."""
        p = self.process
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(ex.STOP_TIMEOUT_S + 120)  # QA's --exit-timeout-secs=120 and more
            except subprocess.TimeoutExpired:
                pass
        status = p.poll()
        try:
            os.killpg(p.pid, signal.SIGKILL)  # what is left of its group (python stubs)
        except ProcessLookupError:
            pass
        if status is None:
            p.wait(10)
        self._wait_ports_free()
        return status

    @staticmethod
    def _wait_ports_free(limit: float = 30.0) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and not all(_port_free(p) for p in PORTS):
            time.sleep(0.2)


def _port_free(port: int) -> bool:
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((ex.HOST, port))
        except OSError:
            return False
    return True


# --------------------------------------------------------------------------- #
# Running and judging, as test.sh does
# --------------------------------------------------------------------------- #

def missing_modules() -> List[str]:
    """The FALLBACKS modules the client's Python cannot import."""
    return [name for name in FALLBACKS
            if subprocess.run([sys.executable, "-c", f"import {name}"],
                              capture_output=True).returncode != 0]


def client_env(extra: Sequence[str], missing: Sequence[str]) -> dict:
    """examples_check's client environment, plus the stand-ins for the
    modules the client's Python lacks."""
    return ex.client_env([*extra, *(FALLBACKS[name] for name in missing)])


def results_problem(path: str, expected: int) -> Optional[str]:
    """check_test_results (qa/common/util.sh): the file's last JSON line
    must count `expected` tests, no error, no failure."""
    try:
        with open(path) as f:
            lines = [ln for ln in f.read().splitlines()
                     if re.search(r"total.*errors.*failures", ln)]
        counts = json.loads(lines[-1])
    except (OSError, IndexError, ValueError):
        return "test_results.txt missing or unreadable"
    if counts.get("errors") or counts.get("failures") or counts.get("total") != expected:
        return (f"test_results.txt: {counts.get('total')} run, {counts.get('errors')} errors, "
                f"{counts.get('failures')} failures ({expected} expected, none failing)")
    return None


def run_step(row: Row, server: QAServer, qa: str, env: dict, log_path: str) -> ex.Result:
    """A step of qa/L0_trace/test.sh itself (l0_trace.STEPS), judged as
    test.sh judges it."""
    out: List[str] = []
    step = l0_trace.Step(os.path.join(qa, row.cwd), env, server.log_path, out)
    began = time.monotonic()
    try:
        reason = l0_trace.STEPS[row.step](step)
    except Exception as e:  # the step itself broke
        reason = f"{type(e).__name__}: {e}"
    text = "\n".join(out)
    with open(log_path, "w") as f:
        f.write(f"# test.sh step {row.step}\n{text}\n# {reason or 'passed'}\n")
    if server.process is not None and server.process.poll() is not None:
        server.error = f"exited with status {server.process.returncode} during {row.key}"
        reason = (reason or "passed") + (f"; the server exited (status "
                                         f"{server.process.returncode}) during this step")
    return ex.Result("FAIL" if reason else "PASS", reason or "", text,
                     time.monotonic() - began)


def run_row(row: Row, server: QAServer, qa: str, env: dict, timeout: float,
            log_path: str) -> ex.Result:
    if row.step:
        return run_step(row, server, qa, env, log_path)
    cwd = os.path.join(qa, row.cwd or row.suite)
    results_file = os.path.join(cwd, "test_results.txt")
    if os.path.exists(results_file):
        os.remove(results_file)
    cmd = ([sys.executable, "-m", "unittest", row.test] if row.module
           else [sys.executable, row.script, row.test])
    run_env = dict(env, **row.env)
    if server.process is not None:
        run_env["SERVER_PID"] = str(server.process.pid)
    rc, out, took = ex.run_program(cmd, run_env, cwd, timeout, log_path)
    if rc is None:
        return ex.Result("FAIL", f"timed out after {timeout:.0f} s", out, took)
    reason = None if rc == 0 else f"exit status {rc}"
    if reason is None and row.results is not None:
        reason = results_problem(results_file, row.results)
    if server.process is not None and server.process.poll() is not None:
        server.error = f"exited with status {server.process.returncode} during {row.key}"
        reason = (reason or "passed") + (f"; the server exited (status "
                                         f"{server.process.returncode}) during this test")
    return ex.Result("FAIL" if reason else "PASS", reason or "", out, took)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=None, metavar="REGEX",
                   help="run only the rows whose '<suite> <test> [<protocol>]' matches")
    p.add_argument("--list", action="store_true", help="list the rows and exit")
    p.add_argument("--servers", default="exe,serve", help="exe, serve or both (default)")
    p.add_argument("--server-mirror", default=make_repo.SERVER_MIRROR,
                   help="bare git mirror of triton-inference-server/server "
                        "(default: $TRITON_SERVER_GIT)")
    p.add_argument("--server-ref", default="HEAD", help="the QA files at this commit or branch")
    p.add_argument("--client-pythonpath", action="append", default=[], metavar="DIR",
                   help="folder to put on the QA scripts' PYTHONPATH")
    p.add_argument("--workdir", default=None, help="folder for QA files, repositories and logs "
                   "(default: a new /tmp/qa_check-*; kept)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per test")
    p.add_argument("--tail", type=int, default=30, help="output lines shown per failure")
    args = p.parse_args(argv)

    table = ex.select_rows(rows(), args.only)
    if args.list:
        for i, r in enumerate(table, 1):
            print(f"{i:3d} {r.key}")
        return 0
    if not table:
        print("no row matches --only", file=sys.stderr)
        return 2
    if not args.server_mirror:
        p.error("name the git clone of Triton's server repository: --server-mirror or "
                "TRITON_SERVER_GIT")
    servers = ex.chosen_servers(args.servers, p)

    work = args.workdir or tempfile.mkdtemp(prefix="qa_check-", dir="/tmp")
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    print(f"work folder: {work}", flush=True)
    commit = extract_qa(args.server_mirror, args.server_ref, work)
    qa = os.path.join(work, "qa")
    print(f"QA files from {args.server_mirror} @ {args.server_ref} ({commit[:12]})", flush=True)
    repos = build_repositories(qa, work)
    l0_trace.install_collector(qa)
    if any(r.suite == "L0_trace_opentelemetry" and not r.step for r in table):
        problem = l0_trace.sagemaker_model(repos["trace"])
        if problem:
            print(f"SageMaker tests: {problem}", flush=True)
    missing = missing_modules()
    env = client_env(args.client_pythonpath, missing)
    for name in missing:
        print(f"{name} is not installed: the QA scripts get tests/qa_check/"
              f"{os.path.basename(FALLBACKS[name])}", flush=True)
    install = ex.Installation() if "exe" in servers else None
    if install is not None:
        print(f"executable: {install.core.executable}", flush=True)

    results: Dict[int, Dict[str, ex.Result]] = {i: {} for i in range(len(table))}
    groups: List[List[int]] = []
    for i, r in enumerate(table):
        if groups and table[groups[-1][-1]].group == r.group:
            groups[-1].append(i)
        else:
            groups.append([i])
    for members in groups:
        first = table[members[0]]
        for kind in servers:
            server = QAServer(kind, first.group, repos[first.repo], first.flags[kind], install,
                              logs, work)
            server.extra_env = dict(first.server_env)
            server.extra_ports = first.ports
            server.start()
            if not server.error and not server.wait_ready(time.monotonic() + ex.READY_TIMEOUT_S):
                print(f"[{first.group}] {TITLES[kind]} did not start: {server.error}\n"
                      f"{tail(server.log_path, 2000)}", flush=True)
            try:
                for i in members:
                    r = table[i]
                    if server.error:
                        results[i][kind] = ex.Result("ERROR", f"server: {server.error}")
                    else:
                        log_path = os.path.join(logs, f"{i + 1:02d}-{kind}-{ex.slug(r.key)}.log")
                        results[i][kind] = run_row(r, server, qa, env, args.timeout, log_path)
            finally:
                status = server.stop_as_qa()
            last = results[members[-1]][kind]
            if first.graceful and server.process is not None and status != 0 \
                    and last.status == "PASS":
                last.status = "FAIL"
                last.reason = f"the server did not shut down gracefully (status {status})"
            for i in members:
                res = results[i][kind]
                print(f"  {i + 1:2d} {TITLES[kind]:10s} {res.status:5s} {res.seconds:6.1f}s "
                      f"{table[i].key}" + (f" -- {res.reason}" if res.reason else ""), flush=True)

    l0_trace.remove_sagemaker_model()
    report(table, results, servers, args.tail)
    print(f"\nlogs: {logs}")
    failed = any(r.status in ("FAIL", "ERROR") for res in results.values() for r in res.values())
    return 1 if failed else 0


def report(table: List[Row], results: Dict[int, Dict[str, ex.Result]], servers: List[str],
           tail_lines: int) -> None:
    width = max(len(r.key) for r in table) + 2
    head = f"\n{'#':>3} {'test':{width}s}" + "".join(f"{TITLES[s]:>12s}" for s in servers)
    print(head)
    print("-" * len(head.strip("\n")))
    for i, r in enumerate(table):
        print(f"{i + 1:3d} {r.key:{width}s}" + "".join(f"{results[i][s].status:>12s}"
                                                        for s in servers))
    print()
    suites = []
    for r in table:
        if r.suite not in suites:
            suites.append(r.suite)
    for title, keep in [(s, (lambda r, s=s: r.suite == s)) for s in suites] + \
            [("all", lambda r: True)]:
        picked = [i for i, r in enumerate(table) if keep(r)]
        parts = []
        for s in servers:
            stats = {k: sum(1 for i in picked if results[i][s].status == k)
                     for k in ("PASS", "FAIL", "ERROR", "SKIP")}
            parts.append(f"{TITLES[s]} {stats['PASS']}/{len(picked)} passed"
                         + "".join(f", {stats[k]} {k.lower()}" for k in ("FAIL", "ERROR", "SKIP")
                                   if stats[k]))
        print(f"{title}: " + "; ".join(parts))
    print("\nnot run here:")
    for line in NOT_RUN:
        print(f"  - {line}")
    for i, r in enumerate(table):
        for s in servers:
            res = results[i][s]
            if res.status not in ("FAIL", "ERROR"):
                continue
            others = [f"{TITLES[o]} {results[i][o].status}" for o in servers if o != s]
            print(f"\n=== {i + 1}. {TITLES[s]}: {res.status} {r.key}"
                  + (f" ({', '.join(others)})" if others else "") + f"\n    why: {res.reason}")
            for line in res.output.rstrip().splitlines()[-tail_lines:]:
                print("    | " + line[:400])


if __name__ == "__main__":
    sys.exit(main())
