"""Run NVIDIA's python_backend example programs, unchanged, against
`python -m tritonserver serve`, in two columns in one run:

  stub       the models as their configs say (backend: "python"), on Triton's
             python backend stub
  inprocess  the same repository, served with `--python-backend inprocess`

Standalone (not a pytest module, not run in CI): the examples are read at run
time from a local git mirror of github.com/triton-inference-server/python_backend
(`git archive <ref> examples | tar -x`); see README.md beside this file.

    python tests/pb_examples_check/run_pb_examples.py [--only REGEX] [--list]
                                                      [--columns stub,inprocess]

Each row is one example as its README runs it: the model repository built as
the README's `mkdir`/`cp` lines build it, one server started on it, the
example's client program run unchanged from the extracted tree
(`python examples/<example>/<client>.py`), and the verdict the client gives:
exit status 0 and its "PASS: ..." line. The clients name localhost:8000
(HTTP), :8001 (gRPC) and :8002 (metrics), so every server takes those ports,
one server at a time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
# The QA check's server on fixed ports (and, through it, the example check's
# server, results, logs and the benchmarks' process helpers).
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "qa_check"))
import run_qa as qa  # noqa: E402  (puts tests/examples_check and benchmarks/ on sys.path)
import make_repo  # noqa: E402
import run_examples as ex  # noqa: E402
from tsbench.procs import tail  # noqa: E402

# A git clone (bare is fine) of github.com/triton-inference-server/python_backend.
PB_MIRROR = os.environ.get("TRITON_PYTHON_BACKEND_GIT", "")
DEFAULT_REF = "r24.10"          # the python backend of Triton 2.51
PORTS = qa.PORTS                # http, grpc, metrics: 8000, 8001, 8002
READY_TIMEOUT_S = 120
CLIENT_TIMEOUT_S = 120
STOP_GRACE_S = 20               # SIGINT, then SIGKILL after this long

COLUMNS = ("stub", "inprocess")
COLUMN_FLAGS = {"stub": [], "inprocess": ["--python-backend", "inprocess"]}


# --------------------------------------------------------------------------- #
# The rows: each example as its README builds and runs it
# --------------------------------------------------------------------------- #

@dataclass
class Model:
    name: str                   # models/<name>/
    model_py: str               # under examples/: copied to models/<name>/1/model.py
    config: Optional[str]       # under examples/: copied to models/<name>/config.pbtxt


@dataclass
class Row:
    name: str
    readme: str                 # where the steps below come from
    models: List[Model]
    client: str                 # under examples/
    passed: str                 # the line the client prints on success
    flags: List[str] = field(default_factory=list)  # server flags the README implies

    @property
    def key(self) -> str:
        return self.name


ADD_SUB = Model("add_sub", "add_sub/model.py", "add_sub/config.pbtxt")
PYTORCH = Model("pytorch", "pytorch/model.py", "pytorch/config.pbtxt")
SQUARE = Model("square_int32", "decoupled/square_model.py", "decoupled/square_config.pbtxt")
REPEAT = Model("repeat_int32", "decoupled/repeat_model.py", "decoupled/repeat_config.pbtxt")


def rows() -> List[Row]:
    return [
        # README.md (top level), "Quick Start" and "Building from Source" step 3.
        Row("add_sub", "README.md: Quick Start", [ADD_SUB], "add_sub/client.py",
            "PASS: add_sub"),
        # No config.pbtxt: the models' auto_complete_config gives one. The README
        # starts the executable with its default (auto-complete on, i.e.
        # --strict-model-config=false), which is serve's default as well; said here.
        Row("auto_complete", "examples/auto_complete/README.md",
            [Model("nobatch_auto_complete", "auto_complete/nobatch_model.py", None),
             Model("batch_auto_complete", "auto_complete/batch_model.py", None)],
            "auto_complete/client.py", "PASS: auto_complete",
            flags=["--strict-model-config=false"]),
        Row("bls_sync", "examples/bls/README.md: Synchronous BLS Requests",
            [ADD_SUB, Model("bls_sync", "bls/sync_model.py", "bls/sync_config.pbtxt"), PYTORCH],
            "bls/sync_client.py", "PASS: BLS Sync"),
        Row("bls_async", "examples/bls/README.md: Asynchronous BLS Requests",
            [ADD_SUB, Model("bls_async", "bls/async_model.py", "bls/async_config.pbtxt"),
             PYTORCH],
            "bls/async_client.py", "PASS: BLS Async"),
        Row("bls_decoupled_sync", "examples/bls_decoupled/README.md: Synchronous BLS Requests",
            [Model("bls_decoupled_sync", "bls_decoupled/sync_model.py",
                   "bls_decoupled/sync_config.pbtxt"), SQUARE],
            "bls_decoupled/sync_client.py", "PASS: BLS Decoupled Sync"),
        Row("bls_decoupled_async",
            "examples/bls_decoupled/README.md: Asynchronous BLS Requests",
            [Model("bls_decoupled_async", "bls_decoupled/async_model.py",
                   "bls_decoupled/async_config.pbtxt"), SQUARE],
            "bls_decoupled/async_client.py", "PASS: BLS Decoupled Async"),
        Row("custom_metrics", "examples/custom_metrics/README.md",
            [Model("custom_metrics", "custom_metrics/model.py", "custom_metrics/config.pbtxt")],
            "custom_metrics/client.py", "PASS: custom_metrics"),
        # One repository (both models) for both decoupled clients, as the README has it.
        Row("decoupled_repeat", "examples/decoupled/README.md", [REPEAT, SQUARE],
            "decoupled/repeat_client.py", "PASS: repeat_int32"),
        Row("decoupled_square", "examples/decoupled/README.md", [REPEAT, SQUARE],
            "decoupled/square_client.py", "PASS: square_int32"),
        # README.md (top level), "AddSubNet in PyTorch": the files of examples/pytorch,
        # laid out as the bls README lays them out (models/pytorch/1/model.py).
        Row("pytorch", "README.md: AddSubNet in PyTorch", [PYTORCH], "pytorch/client.py",
            "PASS: pytorch"),
    ]


def build_repository(row: Row, examples: str, dest: str) -> Optional[str]:
    """dest/models as the README's mkdir/cp lines make it; None, or what is missing."""
    models = os.path.join(dest, "models")
    shutil.rmtree(models, ignore_errors=True)
    for m in row.models:
        version = os.path.join(models, m.name, "1")
        os.makedirs(version, exist_ok=True)
        for src, dst in ((m.model_py, os.path.join(version, "model.py")),
                         (m.config, os.path.join(models, m.name, "config.pbtxt"))):
            if src is None:
                continue
            path = os.path.join(examples, src)
            if not os.path.isfile(path):
                return f"examples/{src} is not in the archive"
            shutil.copyfile(path, dst)
    if not os.path.isfile(os.path.join(examples, row.client)):
        return f"examples/{row.client} is not in the archive"
    return None


# --------------------------------------------------------------------------- #
# The server: serve on 8000/8001/8002, stopped with SIGINT
# --------------------------------------------------------------------------- #

class ExampleServer(qa.QAServer):
    """run_qa's server on the fixed ports (refused while one is in use), with
    the command line of this check and stopped with SIGINT."""

    def _command(self) -> List[str]:
        http, grpc, metrics = PORTS
        return [sys.executable, "-m", "tritonserver", "serve",
                "--model-repository", self.repository,
                "--http-address", ex.HOST, "--http-port", str(http),
                "--grpc-address", ex.HOST, "--grpc-port", str(grpc),
                "--metrics-address", ex.HOST, "--metrics-port", str(metrics),
                *self.flags]

    def start(self) -> None:
        super().start()
        if self.error:  # run_qa's wording names its suites: say whose ports these are
            self.error = (f"port(s) {busy_ports() or 'of 8000-8002'} on {ex.HOST} in use by "
                          f"another process: the example clients need {PORTS[0]}/{PORTS[1]}/"
                          f"{PORTS[2]} free")

    def log_lines(self, count: int) -> List[str]:
        return tail(self.log_path, 200 * count + 4000).rstrip().splitlines()[-count:]

    def stop_with_sigint(self) -> str:
        """SIGINT to the server, SIGKILL (its group: the stubs) after
        STOP_GRACE_S; what happened, in words."""
        p = self.process
        if p is None:
            return "not started"
        if p.poll() is not None:
            how = f"had exited (status {p.returncode})"
        else:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(STOP_GRACE_S)
                how = f"stopped on SIGINT (status {p.returncode})"
            except subprocess.TimeoutExpired:
                how = f"killed: still running {STOP_GRACE_S} s after SIGINT"
        try:
            os.killpg(p.pid, signal.SIGKILL)  # whatever is left of its group
        except ProcessLookupError:
            pass
        if p.poll() is None:
            p.wait(10)
        self._wait_ports_free()
        return how


def busy_ports() -> List[int]:
    return [port for port in PORTS if not qa._port_free(port)]


# --------------------------------------------------------------------------- #
# Running and judging
# --------------------------------------------------------------------------- #

@dataclass
class Outcome:
    result: ex.Result
    server_log: List[str] = field(default_factory=list)
    stopped: str = ""


def judge(row: Row, rc: int, out: str) -> Optional[str]:
    if rc != 0:
        return f"exit status {rc}"
    if not any(line.strip() == row.passed for line in out.splitlines()):
        return f"exit status 0 but no '{row.passed}' line"
    return None


def run_client(row: Row, server: ExampleServer, work: str, env: dict, timeout: float,
               log_path: str) -> ex.Result:
    """The example's client, unchanged, as its README runs it (from the
    folder holding examples/)."""
    cmd = [sys.executable, os.path.join("examples", row.client)]
    rc, out, took = ex.run_program(cmd, env, work, timeout, log_path)
    if rc is None:
        return ex.Result("FAIL", f"client timed out after {timeout:.0f} s", out, took)
    reason = judge(row, rc, out)
    p = server.process
    if p is not None and p.poll() is not None:
        reason = (reason or "passed") + f"; the server exited (status {p.returncode}) meanwhile"
    return ex.Result("FAIL" if reason else "PASS", reason or "", out, took)


def run_cell(row: Row, column: str, repo: str, work: str, logs: str, env: dict,
             args: argparse.Namespace, index: int) -> Outcome:
    flags = [*COLUMN_FLAGS[column], *row.flags]
    server = ExampleServer(column, row.name, repo, flags, None, logs, work)
    server.start()
    if server.error:  # a port in use: nothing was started
        return Outcome(ex.Result("ERROR", f"server not started: {server.error}"))
    try:
        if not server.wait_ready(time.monotonic() + args.ready_timeout):
            if server.error.startswith("not ready"):
                server.error = f"not ready within {args.ready_timeout:.0f} s"
            last = [ln for ln in server.log_lines(5) if ln.strip()]
            why = f"server {server.error}" + (f": {last[-1].strip()[:300]}" if last else "")
            return Outcome(ex.Result("FAIL", why), server.log_lines(args.tail))
        log_path = os.path.join(logs, f"{index + 1:02d}-{column}-{ex.slug(row.name)}.log")
        result = run_client(row, server, work, env, args.timeout, log_path)
    finally:
        stopped = server.stop_with_sigint()
    return Outcome(result, server.log_lines(args.tail), stopped)


def chosen_columns(text: str, parser: argparse.ArgumentParser) -> List[str]:
    columns = [c for c in text.split(",") if c]
    if not columns or any(c not in COLUMNS for c in columns):
        parser.error(f"--columns: one or more of {','.join(COLUMNS)}")
    return columns


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=None, metavar="REGEX", help="run only the rows matching")
    p.add_argument("--list", action="store_true", help="list the rows and exit")
    p.add_argument("--columns", default=",".join(COLUMNS),
                   help="stub, inprocess or both (default: stub,inprocess)")
    p.add_argument("--python-backend-mirror", default=PB_MIRROR,
                   help="git mirror of triton-inference-server/python_backend "
                        "(default: $TRITON_PYTHON_BACKEND_GIT)")
    p.add_argument("--ref", default=DEFAULT_REF,
                   help=f"the examples at this branch, tag or commit (default {DEFAULT_REF})")
    p.add_argument("--workdir", default=None, help="folder for the examples, repositories and "
                   "logs (default: a new /tmp/pb_examples_check-*; kept)")
    p.add_argument("--ready-timeout", type=float, default=READY_TIMEOUT_S,
                   help="seconds a server may take to be ready")
    p.add_argument("--timeout", type=float, default=CLIENT_TIMEOUT_S,
                   help="seconds per client program")
    p.add_argument("--tail", type=int, default=15,
                   help="lines of client output and of server log shown per failure")
    args = p.parse_args(argv)

    table = ex.select_rows(rows(), args.only)
    if args.list:
        for i, r in enumerate(table, 1):
            models = ", ".join(m.name for m in r.models)
            print(f"{i:3d} {r.name:20s} examples/{r.client:32s} models: {models}"
                  + (f"  flags: {' '.join(r.flags)}" if r.flags else ""))
        return 0
    if not table:
        print("no row matches --only", file=sys.stderr)
        return 2
    columns = chosen_columns(args.columns, p)
    if not args.python_backend_mirror:
        p.error("name the git clone of triton-inference-server/python_backend: "
                "--python-backend-mirror or TRITON_PYTHON_BACKEND_GIT")

    work = args.workdir or tempfile.mkdtemp(prefix="pb_examples_check-", dir="/tmp")
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    print(f"work folder: {work}", flush=True)
    shutil.rmtree(os.path.join(work, "examples"), ignore_errors=True)
    try:
        commit = make_repo.git_extract(args.python_backend_mirror, args.ref, ["examples"], work)
    except (OSError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", b"") or b""
        print(f"cannot extract examples/ of {args.python_backend_mirror} @ {args.ref}: {e}\n"
              f"{err.decode('utf-8', 'replace') if isinstance(err, bytes) else err}",
              file=sys.stderr)
        return 2
    examples = os.path.join(work, "examples")
    print(f"examples/ from {args.python_backend_mirror} @ {args.ref} ({commit[:12]})", flush=True)

    busy = busy_ports()
    if busy:
        print(f"ports {busy} on {ex.HOST} are in use by another process: the example "
              f"clients need {PORTS[0]}/{PORTS[1]}/{PORTS[2]} free; rows will fail "
              f"until they are", flush=True)

    env = ex.client_env([])
    results: Dict[int, Dict[str, Outcome]] = {i: {} for i in range(len(table))}
    for i, row in enumerate(table):
        folder = os.path.join(work, "rows", row.name)
        problem = build_repository(row, examples, folder)
        repo = os.path.join(folder, "models")
        for column in columns:
            if problem:
                outcome = Outcome(ex.Result("ERROR", problem))
            else:
                outcome = run_cell(row, column, repo, work, logs, env, args, i)
            results[i][column] = outcome
            r = outcome.result
            print(f"  {i + 1:2d} {column:9s} {r.status:5s} {r.seconds:6.1f}s {row.name}"
                  + (f" -- {r.reason}" if r.reason else "")
                  + (f" [server {outcome.stopped}]" if outcome.stopped else ""), flush=True)

    report(table, results, columns, args.tail)
    print(f"\nwork folder (examples, repositories under rows/, logs): {work}")
    failed = any(o.result.status in ("FAIL", "ERROR")
                 for res in results.values() for o in res.values())
    return 1 if failed else 0


def report(table: List[Row], results: Dict[int, Dict[str, Outcome]], columns: List[str],
           tail_lines: int) -> None:
    width = max(len(r.name) for r in table) + 2
    head = f"\n{'#':>3} {'row':{width}s}" + "".join(f"{c:>11s}" for c in columns)
    print(head)
    print("-" * len(head.strip("\n")))
    for i, r in enumerate(table):
        print(f"{i + 1:3d} {r.name:{width}s}"
              + "".join(f"{results[i][c].result.status:>11s}" for c in columns))
    print()
    for c in columns:
        stats = {k: sum(1 for i in results if results[i][c].result.status == k)
                 for k in ("PASS", "FAIL", "ERROR")}
        print(f"{c}: {stats['PASS']}/{len(table)} passed"
              + "".join(f", {stats[k]} {k.lower()}" for k in ("FAIL", "ERROR") if stats[k]))
    for i, r in enumerate(table):
        for c in columns:
            o = results[i][c]
            if o.result.status not in ("FAIL", "ERROR"):
                continue
            others = [f"{x} {results[i][x].result.status}" for x in columns if x != c]
            print(f"\n=== {i + 1}. {r.name} [{c}]: {o.result.status}"
                  + (f" ({', '.join(others)})" if others else "")
                  + f"\n    why: {o.result.reason}")
            out = o.result.output.rstrip().splitlines()[-tail_lines:]
            if out:
                print("    client output (last lines):")
                for line in out:
                    print("    | " + line[:400])
            if o.server_log:
                print("    server log (last lines):")
                for line in o.server_log:
                    print("    | " + line[:400])


if __name__ == "__main__":
    sys.exit(main())
