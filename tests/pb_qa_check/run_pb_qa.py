"""Run Triton's python-backend QA (the server repository's qa/L0_backend_python),
unchanged, the way its test.sh and each subtest's test.sh run it, against
three servers from the same model repositories in the same run:

  exe              Triton's `tritonserver` executable of the installed core,
                   python models on Triton's python backend stub (started as
                   tests/examples_check and tests/qa_check start it)
  serve-stub       python -m tritonserver serve                (python models on the stub)
  serve-inprocess  python -m tritonserver serve --python-backend inprocess

Standalone (not a pytest module, not run in CI): the QA files are read at run
time from a local git mirror of github.com/triton-inference-server/server
(`git archive <ref> qa/L0_backend_python qa/python_models qa/common`), the
python_backend examples (which decoupled, bls and examples copy) from a mirror
of github.com/triton-inference-server/python_backend; see README.md here.

    python tests/pb_qa_check/run_pb_qa.py [--only REGEX] [--list] [--columns exe,serve-stub,serve-inprocess]

Each row is one test.sh step: the models it builds from qa/python_models (its
mkdir/cp/sed/echo lines), one server started with its flags (`run_server`:
ready on localhost:8000/v2/health/ready, or `run_server_nowait` + `wait` where
the step expects the server to exit), its client programs (pytest, unittest,
python scripts, curl calls) with their environment, and its verdict (exit
statuses, greps of the server log, /dev/shm page counts, a server that exits 0
on `kill; wait` under `set -e`). The scripts name localhost:8000/8001/8002, so
every server takes those ports, one at a time.
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
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
# tests/qa_check's servers on QA's ports (which import tests/examples_check's
# servers, installation, results and log helpers).
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "qa_check"))
import run_qa as qa  # noqa: E402
from run_qa import ex, make_repo  # noqa: E402
from tsbench.procs import tail  # noqa: E402

SERVER_REF = "e1db8a6"
QA_PATHS = ["qa/L0_backend_python", "qa/python_models", "qa/common"]
PB_MIRROR = os.environ.get("TRITON_PYTHON_BACKEND_GIT", "")
PORTS = qa.PORTS
COLUMNS = ("exe", "serve-stub", "serve-inprocess")
SHM_PREFIX = "triton_python_backend_shm_region_"   # the python backend's default
# Stand-ins put on the QA scripts' PYTHONPATH where the module is missing:
# triton_shm_monitor (built by Triton's QA from python_backend's shm_monitor).
FALLBACKS = {"triton_shm_monitor": os.path.join(HERE, "shm_monitor_fallback")}
READY_TIMEOUT_S = 120
EXIT_WAIT_S = 300          # run_server_nowait; wait $SERVER_PID
CLIENT_TIMEOUT_S = 1200

# What test.sh would run that this check does not, row by row (SKIP rows).
GPU = "GPU work (no GPU here)"


class Abort(Exception):
    """The step cannot go on (its server did not start, ...)."""


# --------------------------------------------------------------------------- #
# Servers
# --------------------------------------------------------------------------- #

class PBServer(qa.QAServer):
    """tests/qa_check's server on 8000-8002 (tests/examples_check's exe/serve
    commands), with a third column (serve --python-backend inprocess) and the
    step's environment (test.sh exports: MY_ENV, TRITON_DIR)."""

    def __init__(self, column: str, name: str, repository: str, flags: List[str],
                 install, logs: str, cwd: str, env: Dict[str, str]) -> None:
        super().__init__("exe" if column == "exe" else "serve", name, repository, flags,
                         install, logs, cwd)
        self.column = column
        self.extra_env = env
        self.log_path = os.path.join(logs, f"server-{column}-{name}.log")

    def _command(self) -> List[str]:
        common = [f"--model-repository={self.repository}",
                  f"--http-address={ex.HOST}", f"--http-port={self.http_port}",
                  f"--grpc-address={ex.HOST}", f"--grpc-port={self.grpc_port}",
                  f"--metrics-address={ex.HOST}", f"--metrics-port={self.metrics_port}"]
        # QA's leak probe (qa/common/shm_util.py) watches the regions named
        # triton_python_backend_shm_region*: Triton's default prefix, which
        # examples_check (two executables at once) and serve (one per process)
        # replace; one server runs at a time here, so every column gets it.
        prefix = f"--backend-config=python,shm-region-prefix-name={SHM_PREFIX}"
        if self.kind == "exe":
            # The 2.51 executable has no --allow-client-shm (client shm is always on).
            flags = [f for f in self.flags if not f.startswith("--allow-client-shm")]
            return self.install.command([*common, prefix, *flags])
        command = [sys.executable, "-m", "tritonserver", "serve", *common, prefix, *self.flags]
        if self.column == "serve-inprocess":
            command += ["--python-backend", "inprocess"]
        return command

    def start(self) -> None:
        self.http_port, self.grpc_port, self.metrics_port = PORTS
        busy = [p for p in PORTS if not qa._port_free(p)]
        if busy:
            self.error = f"port(s) {busy} in use: the QA scripts need 8000-8002"
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

    def kill_group(self) -> None:
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _children(pid: int) -> List[int]:
    """pgrep --parent PID, in pid order."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append(int(entry))
    return sorted(out)


def _descendants(pid: int) -> List[int]:
    todo, out = [pid], []
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is dead for kill -0's purpose only once reaped; count zombies as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def shm_pages() -> int:
    """get_shm_pages (common.sh): the entries of /dev/shm."""
    try:
        return len(os.listdir("/dev/shm"))
    except OSError:
        return 0


# --------------------------------------------------------------------------- #
# One step as test.sh runs it
# --------------------------------------------------------------------------- #

@dataclass
class Outcome:
    status: str = "PASS"         # PASS | FAIL | ERROR | SKIP
    reasons: List[str] = field(default_factory=list)
    passed: int = 0
    total: int = 0
    counted: bool = False
    output: str = ""
    server_log: str = ""
    seconds: float = 0.0

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    def cell(self) -> str:
        if self.status == "SKIP":
            return "SKIP"
        return self.status + (f" {self.passed}/{self.total}" if self.counted else "")


def parse_counts(text: str) -> Optional[Tuple[int, int]]:
    """(passed, run) from pytest's summary line or unittest's 'Ran N tests'."""
    lines = [ln for ln in text.splitlines()
             if re.match(r"^=+ .*\b(passed|failed|error|errors|deselected|skipped|no tests ran)\b"
                         r".* in [\d.]+s", ln)]
    if lines:
        words = dict((k, int(n)) for n, k in re.findall(
            r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)", lines[-1]))
        passed = words.get("passed", 0) + words.get("xpassed", 0)
        bad = words.get("failed", 0) + words.get("error", 0) + words.get("errors", 0)
        return passed, passed + bad + words.get("skipped", 0) + words.get("xfailed", 0)
    ran = re.findall(r"^Ran (\d+) tests? in", text, re.M)
    if ran:
        total = int(ran[-1])
        failed = re.findall(r"^FAILED \((.*)\)", text, re.M)
        bad = 0
        if failed:
            bad = sum(int(n) for k, n in re.findall(r"(failures|errors)=(\d+)", failed[-1]))
        return total - bad, total
    return None


class Step:
    """What one test.sh step does, for one column."""

    def __init__(self, run: "Run", column: str, row: "Row") -> None:
        self.run, self.column, self.row = run, column, row
        self.dir = os.path.join(run.qa, "L0_backend_python", row.subtest) if row.subtest \
            else os.path.join(run.qa, "L0_backend_python")
        self.models_src = os.path.join(run.qa, "python_models")
        self.out = Outcome()
        self.outputs: List[str] = []
        self.server: Optional[PBServer] = None
        self.servers = 0
        self.env: Dict[str, str] = {}

    # ---- building repositories (test.sh's mkdir/cp/sed/echo) ----------------
    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    def fresh(self, repo: str = "models") -> str:
        folder = self.path(repo)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        return folder

    def model(self, src: str, name: Optional[str] = None, repo: str = "models",
              files: Sequence[Tuple[str, str]] = (("model.py", "model.py"),),
              config: Optional[str] = "config.pbtxt",
              edit: Optional[Callable[[str], str]] = None) -> str:
        """mkdir -p repo/name/1; cp src/<file> repo/name/1/<as>; cp src/config repo/name/
        (src: a folder of qa/python_models, or a path); the config edited (sed/echo)."""
        source = src if os.path.isabs(src) else os.path.join(self.models_src, src)
        name = name or os.path.basename(src)
        folder = self.path(repo, name)
        os.makedirs(os.path.join(folder, "1"), exist_ok=True)
        for got, put in files:
            shutil.copyfile(os.path.join(source, got), os.path.join(folder, "1", put))
        if config is not None:
            with open(os.path.join(source, config)) as f:
                text = f.read()
            if edit is not None:
                text = edit(text)
            with open(os.path.join(folder, "config.pbtxt"), "w") as f:
                f.write(text)
        return folder

    def edit_config(self, folder: str, edit: Callable[[str], str]) -> None:
        path = os.path.join(folder, "config.pbtxt")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(edit(text))

    # ---- servers ---------------------------------------------------------------
    def start(self, flags: Sequence[str], repo: str = "models", expect: str = "ready",
              env: Optional[Dict[str, str]] = None, log: str = "") -> PBServer:
        """run_server (expect 'ready': Abort when not ready), run_server with
        the step expecting a failure (expect 'fail': returns the server, which
        did not become ready), or run_server_nowait (expect 'none')."""
        self.servers += 1
        name = ex.slug(f"{self.row.key}-{log or self.servers}")
        server = PBServer(self.column, name, os.path.join(self.dir, repo), list(flags),
                          self.run.install, self.run.logs, self.dir,
                          dict(self.run.server_env, **self.env, **(env or {})))
        if os.path.exists(server.log_path):
            os.remove(server.log_path)
        if log:
            # SERVER_LOG=./<log> in test.sh; some clients open that file by name
            link = os.path.join(self.dir, log)
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(server.log_path, link)
        self.server = server
        server.start()
        if server.error:
            raise Abort(f"server: {server.error}")
        if expect == "none":
            return server
        ready = server.wait_ready(time.monotonic() + READY_TIMEOUT_S)
        if expect == "ready" and not ready:
            self.abandon(server)
            raise Abort(f"server did not start ({server.error})")
        if expect == "fail" and not ready:
            # run_server: `kill $SERVER_PID || true` once not ready, and on
            self.abandon(server)
        return server

    def abandon(self, server: PBServer, grace: float = 10.0) -> None:
        """SIGTERM to a server that never became ready; what is left of its
        process group is killed after `grace` seconds."""
        p = server.process
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        server.kill_group()
        if p is not None and p.poll() is None:
            p.wait(10)
        server._wait_ports_free()

    def stop(self, server: PBServer, check_exit: bool = False) -> Optional[int]:
        """kill_server (SIGTERM, wait), or with check_exit `kill $SERVER_PID;
        wait $SERVER_PID` under set -e: a non-zero exit fails the step."""
        status = server.stop_as_qa() if server.process is not None else None
        server.kill_group()
        if check_exit and status != 0:
            self.fail(f"the server exited with status {status} on SIGTERM "
                      "(test.sh: kill; wait under set -e)")
        return status

    def wait_exit(self, server: PBServer) -> Optional[int]:
        """wait $SERVER_PID (run_server_nowait)."""
        try:
            return server.process.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.fail(f"the server was still running after {EXIT_WAIT_S} s (test.sh waits for "
                      "it to exit)")
            self.stop(server)
            return None

    def log_text(self, server: Optional[PBServer] = None) -> str:
        return (server or self.server).log_text() if (server or self.server) else ""

    def grep_c(self, needle: str, server: Optional[PBServer] = None) -> int:
        return sum(1 for ln in self.log_text(server).splitlines() if needle in ln)

    def expect_log(self, needle: str, server: Optional[PBServer] = None) -> None:
        if self.grep_c(needle, server) == 0:
            self.fail(f"server log has no {needle!r}")

    # ---- clients -----------------------------------------------------------------
    def client(self, argv: Sequence[str], env: Optional[Dict[str, str]] = None,
               cwd: Optional[str] = None, label: str = "", count: bool = True) -> Tuple[int, str]:
        cmd = [sys.executable if a == "python3" else a for a in argv]
        run_env = dict(self.run.client_env, **self.env, **(env or {}))
        if self.server is not None and self.server.process is not None:
            run_env["SERVER_PID"] = str(self.server.process.pid)
        began = time.monotonic()
        try:
            done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=run_env, cwd=cwd or self.dir,
                                  timeout=self.run.timeout, preexec_fn=ex.die_with_parent)
            rc, out = done.returncode, done.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:
            rc, out = -1, (e.stdout or b"").decode("utf-8", "replace") + \
                f"\n[timed out after {self.run.timeout:.0f} s]"
        took = time.monotonic() - began
        n = len(self.outputs) + 1
        ex.save_log(os.path.join(self.run.logs, ex.slug(
            f"{self.column}-{self.row.key}-client{n}") + ".log"), cmd, rc, out)
        self.outputs.append(f"$ {' '.join(argv)}   # exit {rc}, {took:.1f}s\n{out}")
        counts = parse_counts(out) if count else None
        if counts is not None:
            self.out.passed += counts[0]
            self.out.total += counts[1]
            self.out.counted = True
        if rc != 0:
            self.fail(f"{label or ' '.join(argv)}: exit status {rc}")
        return rc, out

    def pytest(self, *args: str, env: Optional[Dict[str, str]] = None) -> Tuple[int, str]:
        # Not --deselect: it drops every test whose id starts with the one named
        # (test_decoupled_bls would take test_decoupled_bls_stream along).
        names = [t.split("::")[-1] for t in self.row.deselect + self.row.env_deselect()]
        deselect = ["-k", " and ".join(f"(not {n} or {n}_)" for n in names)] if names else []
        return self.client(["python3", "-m", "pytest", "-p", "no:cacheprovider", *args,
                            *deselect], env=env, label="pytest " + " ".join(args))

    def http(self, method: str, path: str, body: Optional[bytes] = None) -> int:
        """curl -s -w %{http_code} -X METHOD localhost:8000PATH [-d BODY]"""
        request = urllib.request.Request(f"http://localhost:8000{path}", data=body,
                                         method=method)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=120) as r:
                code = r.status
        except urllib.error.HTTPError as e:
            code = e.code
        except OSError:
            code = 0
        self.outputs.append(f"$ curl -X {method} localhost:8000{path}"
                            + (f" -d '{body.decode()}'" if body else "") + f"  -> {code}")
        return code

    def fail(self, reason: str) -> None:
        self.out.status = "FAIL"
        self.out.reasons.append(reason)

    def shm_check(self, before: int) -> None:
        now = shm_pages()
        if now != before:
            self.fail(f"/dev/shm pages: {before} before the server, {now} after (test.sh: "
                      "'Shared memory pages where not cleaned properly')")


# --------------------------------------------------------------------------- #
# The rows: test.sh's steps
# --------------------------------------------------------------------------- #

@dataclass
class Row:
    key: str
    subtest: str                    # folder under qa/L0_backend_python ("" for the main test.sh)
    fn: Optional[Callable[[Step], None]] = None
    skip: str = ""
    deselect: List[str] = field(default_factory=list)   # GPU-only tests not run (pytest ids)
    note: str = ""
    # tests whose premise this machine does not meet: {pytest id: (predicate, why)}
    env_skips: Dict[str, Tuple[Callable[[], bool], str]] = field(default_factory=dict)

    def env_deselect(self) -> List[str]:
        return [t for t, (applies, _) in self.env_skips.items() if applies()]


def shm_larger_than_1g() -> bool:
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return False
    return st.f_blocks * st.f_frsize > 1024 ** 3 + 64 * 1024 ** 2


def set_name(name: str) -> Callable[[str], str]:
    return lambda c: re.sub(r"^name:.*", f'name: "{name}"', c, flags=re.M)


def chain(*edits: Callable[[str], str]) -> Callable[[str], str]:
    def run(c: str) -> str:
        for e in edits:
            c = e(c)
        return c
    return run


def sub(a: str, b: str) -> Callable[[str], str]:
    return lambda c: c.replace(a, b)


def set_mbs(value: str) -> Callable[[str], str]:
    return lambda c: re.sub(r"^max_batch_size:.*", value, c, flags=re.M)


def append(text: str) -> Callable[[str], str]:
    return lambda c: c + text + "\n"


BASE = ["--log-verbose=1"]       # BASE_SERVER_ARGS less --model-repository/--backend-directory
SHM5 = "--backend-config=python,shm-default-byte-size=5242880"


# ---- qa/L0_backend_python/test.sh ------------------------------------------------

def main_models(s: Step) -> None:
    s.fresh()
    s.model("identity_fp32")
    s.model("identity_bf16")
    fp32 = s.path("models", "identity_fp32")
    for name, edit in (
        ("identity_uint8", chain(set_name("identity_uint8"), sub("TYPE_FP32", "TYPE_UINT8"),
                                 set_mbs("max_batch_size: 8"),
                                 append("dynamic_batching { preferred_batch_size: [8], "
                                        "max_queue_delay_microseconds: 12000000 }"))),
        ("identity_uint8_nobatch", chain(set_name("identity_uint8_nobatch"),
                                         sub("TYPE_FP32", "TYPE_UINT8"), set_mbs(""))),
        ("identity_uint32", chain(set_name("identity_uint32"), sub("TYPE_FP32", "TYPE_UINT32"))),
        ("identity_bool", chain(set_name("identity_bool"), sub("TYPE_FP32", "TYPE_BOOL"))),
    ):
        shutil.copytree(fp32, s.path("models", name))
        s.edit_config(s.path("models", name), edit)
    shutil.copytree(fp32, s.path("models", "default_model_name"))
    os.rename(s.path("models", "default_model_name", "1", "model.py"),
              s.path("models", "default_model_name", "1", "mymodel.py"))
    s.edit_config(s.path("models", "default_model_name"),
                  chain(set_name("default_model_name"),
                        append('default_model_filename: "mymodel.py"')))
    s.model("pytorch_fp32_fp32", edit=set_name("pytorch_fp32_fp32"))
    s.model("delayed_model")
    s.model("init_args", edit=sub("TRITON_DIR_PATH", s.run.triton_dir))
    for name in ("optional", "non_contiguous", "string", "string_fixed", "dlpack_identity"):
        s.model(name)


def row_python_test(s: Step) -> None:
    main_models(s)
    before = shm_pages()
    server = s.start(BASE + ["--allow-client-shm=true", SHM5])
    s.pytest("--junitxml=L0_backend_python.report.xml", "python_test.py")
    s.stop(server)
    s.shm_check(before)


def row_non_graceful(s: Step) -> None:
    main_models(s)
    server = s.start(BASE + [SHM5])
    time.sleep(5)
    procs = _children(server.process.pid)
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()
    time.sleep(10)
    # `for triton_proc in $triton_procs` (an array named without [@]): its first element
    alive = [p for p in procs[:1] if _alive(p)]
    s.outputs.append(f"children of the server: {procs} "
                     f"({', '.join(_cmdline(p)[:80] for p in procs)}); alive 10 s after "
                     f"kill -9 of the server: {[p for p in procs if _alive(p)]}")
    if alive:
        s.fail(f"process {alive[0]} ({_cmdline(alive[0])[:120]}) outlived the server's kill -9 "
               "by 10 s (test.sh: 'Python backend non-graceful exit test failed')")
    server.kill_group()
    for p in procs:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    qa.QAServer._wait_ports_free()


def row_multi_file(s: Step) -> None:
    s.fresh()
    src = os.path.join(s.models_src, "multi_file")
    s.model(src, "multi_file", files=[(f, f) for f in os.listdir(src) if f.endswith(".py")],
            config=None)
    shutil.copyfile(os.path.join(s.models_src, "identity_fp32", "config.pbtxt"),
                    s.path("models", "multi_file", "config.pbtxt"))
    s.edit_config(s.path("models", "multi_file"), set_name("multi_file"))
    before = shm_pages()
    server = s.start(BASE + [SHM5])
    s.stop(server)
    s.shm_check(before)


def row_model_env(s: Step) -> None:
    s.fresh()
    s.model("model_env")
    s.env = {"MY_ENV": "MY_ENV"}
    before = shm_pages()
    server = s.start(BASE + [SHM5])
    s.stop(server)
    s.shm_check(before)


def row_shm_size(s: Step) -> None:
    s.fresh()
    s.model("identity_fp32")
    size = 1024 * 1024 * 4
    existing = set(os.listdir("/dev/shm"))
    server = s.start(BASE + [f"--backend-config=python,shm-default-byte-size={size}"])
    # test.sh: the triton_python_backend_shm* regions that were not there before
    new = sorted(set(os.listdir("/dev/shm")) - existing)
    regions = [n for n in new if n.startswith("triton_python_backend_shm")]
    sizes = {n: os.path.getsize(os.path.join("/dev/shm", n)) for n in regions}
    s.outputs.append(f"new shm regions: {sizes or 'none'}")
    for name, got in sizes.items():
        if got != size:
            s.fail(f"shm region {name} is {got} bytes ({size} expected)")
    s.stop(server)


def row_init_exit(s: Step) -> None:
    s.fresh()
    s.model("init_exit")
    before = shm_pages()
    server = s.start(BASE + [SHM5], expect="fail")
    if server.error is None:
        s.fail("unexpected success starting the server")
        s.stop(server)
    else:
        s.expect_log("Stub process 'init_exit_0_0' is not healthy.")
    s.shm_check(before)


def row_non_existent(mode: str) -> Callable[[Step], None]:
    def run(s: Step) -> None:
        s.fresh()
        os.makedirs(s.path("models", "non_existent_model", "1"))
        shutil.copyfile(os.path.join(s.models_src, "identity_fp32", "config.pbtxt"),
                        s.path("models", "non_existent_model", "config.pbtxt"))
        s.edit_config(s.path("models", "non_existent_model"), set_name("non_existent_model"))
        flags = BASE + (["--disable-auto-complete-config"] if mode == "auto_config_disabled"
                        else [])
        before = shm_pages()
        server = s.start(flags, expect="fail")
        if server.error is None:
            s.fail("unexpected success starting the server")
            s.stop(server)
        else:
            s.expect_log("Failed to preinitialize Python stub: Python model file not found in "
                         f"'{s.dir}/models/non_existent_model/1/model.py'")
            s.expect_log("failed to load 'non_existent_model'")
        s.shm_check(before)
    return run


# ---- bls/test.sh --------------------------------------------------------------------

def row_bls_init_error(s: Step) -> None:
    s.fresh()
    s.model("bls_init_error")
    server = s.start(BASE, expect="fail")
    if server.error is None:
        s.fail("unexpected success starting the server")
        s.stop(server)
    else:
        s.expect_log("BLS is only supported during the 'execute' function.")


def row_bls_finalize_error(s: Step) -> None:
    s.fresh()
    s.model("bls_finalize_error")
    server = s.start(BASE)
    s.stop(server)
    s.expect_log("BLS is only supported during the 'execute' function.")


def row_bls_parameters(s: Step) -> None:
    s.fresh("params_models")
    s.model("bls_parameters", repo="params_models")
    server = s.start(BASE, repo="params_models")
    s.client(["python3", "bls_parameters_test.py"])
    s.stop(server)


# ---- decoupled/test.sh ------------------------------------------------------------

def row_decoupled(s: Step) -> None:
    # models/ holds the subtest's own models (committed); test.sh adds these
    s.model("identity_fp32")
    s.model("execute_cancel", edit=append("model_transaction_policy { decoupled: True }"))
    s.model("response_sender_until_cancelled")
    pb = s.run.python_backend_examples()
    s.model(os.path.join(pb, "decoupled"), "square_int32",
            files=[("square_model.py", "model.py")], config="square_config.pbtxt")
    s.model("dlpack_add_sub")
    server = s.start(BASE, log="decoupled_server.log")
    s.pytest("--junitxml=decoupled.report.xml", "decoupled_test.py")
    s.stop(server)
    for msg in ("Specific Msg!", "Info Msg!", "Warning Msg!", "Error Msg!"):
        if s.grep_c(msg) < 1:
            s.fail(f"server log: no {msg!r} (test.sh: Msg Count Incorrect)")
    for msg in ("Finalize invoked", "Finalize complete..."):
        n = s.grep_c(msg)
        if n != 3:
            s.fail(f"server log: {n} lines with {msg!r} (test.sh wants 3)")


# ---- async_execute, custom_metrics, model_control, lifecycle --------------------------

def row_async_execute(s: Step) -> None:
    s.fresh()
    s.model("async_execute_decouple")
    s.model("async_execute_decouple_bls")
    server = s.start(BASE)
    s.pytest("--junitxml=concurrency_test.report.xml", "concurrency_test.py",
             env={"SERVER_LOG": server.log_path})
    s.stop(server, check_exit=True)


def row_custom_metrics(s: Step) -> None:
    s.fresh()
    s.model("custom_metrics")
    server = s.start(BASE)
    s.pytest("--junitxml=custom_metrics.report.xml", "../test_infer_shm_leak.py",
             env={"MODEL_NAME": "custom_metrics"})
    s.stop(server)


def row_model_control(s: Step) -> None:
    s.fresh()
    s.model("identity_fp32")
    os.makedirs(s.path("models", "simple_identity_fp32", "1"))
    shutil.copyfile(os.path.join(s.models_src, "simple_identity_fp32", "config.pbtxt"),
                    s.path("models", "simple_identity_fp32", "config.pbtxt"))
    server = s.start(["--model-control-mode=explicit"] + BASE)
    s.pytest("--junitxml=model_control.report.xml", "model_control_test.py")
    s.pytest("--junitxml=model_control.model_id_validation.report.xml",
             "model_control_test.py::ModelIDValidationTest")
    s.stop(server)


def row_lifecycle(s: Step) -> None:
    s.fresh()
    s.model("error_code")
    s.model("execute_cancel")
    s.model("execute_error", edit=chain(
        set_name("execute_error"), set_mbs("max_batch_size: 8"),
        append("dynamic_batching { preferred_batch_size: [8], "
               "max_queue_delay_microseconds: 12000000 }")))
    s.model("execute_grpc_error", edit=chain(
        set_name("execute_grpc_error"), set_mbs("max_batch_size: 8"),
        append("dynamic_batching { preferred_batch_size: [8], "
               "max_queue_delay_microseconds: 1200000 }")))
    s.model("decoupled_grpc_error")
    s.model("execute_return_error")
    s.model("wrong_model", edit=chain(set_name("wrong_model"), sub("TYPE_FP32", "TYPE_UINT32")))
    before = shm_pages()
    server = s.start(BASE, log="lifecycle_server.log")
    for i in range(5):   # "Run this multiple times to catch any intermittent segfault."
        s.pytest(f"--junitxml=lifecycle.iter{i}.report.xml", "lifecycle_test.py")
    s.stop(server)
    s.shm_check(before)


def row_lifecycle_init_error(s: Step) -> None:
    s.fresh()
    s.model("init_error")
    before = shm_pages()
    server = s.start(BASE, expect="none")
    s.wait_exit(server)
    s.shm_check(before)
    s.expect_log("name 'lorem_ipsum' is not defined")


def row_lifecycle_fini_error(s: Step) -> None:
    s.fresh()
    s.model("fini_error")
    before = shm_pages()
    server = s.start(BASE)
    s.stop(server)
    s.shm_check(before)
    s.expect_log("name 'undefined_variable' is not defined")


def row_lifecycle_auto_complete_error(s: Step) -> None:
    s.fresh()
    s.model("auto_complete_error", config=None)
    before = shm_pages()
    server = s.start(BASE + ["--strict-model-config=false"], expect="none")
    s.wait_exit(server)
    s.shm_check(before)
    s.expect_log("name 'undefined_variable' is not defined")


# ---- ensemble, response_sender, io ----------------------------------------------------

def row_ensemble(s: Step) -> None:
    s.fresh()
    os.makedirs(s.path("models", "ensemble", "1"))
    shutil.copyfile(os.path.join(s.models_src, "ensemble", "config.pbtxt"),
                    s.path("models", "ensemble", "config.pbtxt"))
    s.model("add_sub", "add_sub_1")
    s.model("add_sub", "add_sub_2")
    before = shm_pages()
    server = s.start(BASE)
    # test.sh's CPU-only branch (TEST_WINDOWS): the GPU ensemble needs a GPU and QA's
    # libtorch_float32_float32_float32 model
    s.client(["python3", "ensemble_test.py", "EnsembleTest.test_ensemble"])
    s.stop(server)
    s.shm_check(before)


def row_response_sender(s: Step) -> None:
    s.fresh()
    src = "response_sender"
    common = ("model_common.py", "model_common.py")
    dec = "model_transaction_policy { decoupled: True }"
    bat = "dynamic_batching { max_queue_delay_microseconds: 500000 }"
    for name, model, edits in (
            ("response_sender", "model.py", []),
            ("response_sender_decoupled", "model.py", [dec]),
            ("response_sender_async", "model_async.py", []),
            ("response_sender_decoupled_async", "model_async.py", [dec]),
            ("response_sender_batching", "model.py", [bat]),
            ("response_sender_decoupled_batching", "model.py", [dec, bat]),
            ("response_sender_async_batching", "model_async.py", [bat]),
            ("response_sender_decoupled_async_batching", "model_async.py", [dec, bat])):
        s.model(src, name, files=[common, (model, "model.py")],
                edit=chain(*(append(e) for e in edits)))
    server = s.start(BASE)
    s.pytest("--junitxml=concurrency_test.report.xml", "response_sender_test.py",
             env={"SERVER_LOG": server.log_path})
    s.stop(server)


def row_response_sender_complete_final(s: Step) -> None:
    s.fresh()
    s.model("response_sender_complete_final")
    server = s.start(BASE)
    s.pytest("--junitxml=concurrency_test.report.xml", "response_sender_complete_final_test.py",
             env={"SERVER_LOG": server.log_path})
    s.stop(server)


def row_io_ensemble(trial: str) -> Callable[[Step], None]:
    def run(s: Step) -> None:
        s.fresh()
        src = "dlpack_io_identity" if trial == "default" else "dlpack_io_identity_decoupled"
        for i in (1, 2, 3):
            s.model(src, f"dlpack_io_identity_{i}", edit=set_name(f"dlpack_io_identity_{i}"))
        os.makedirs(s.path("models", "ensemble_io", "1"))
        shutil.copyfile(os.path.join(s.models_src, "ensemble_io", "config.pbtxt"),
                        s.path("models", "ensemble_io", "config.pbtxt"))
        server = s.start(BASE, env={"TRIAL": trial})
        s.pytest(f"--junitxml=test_ensemble_io.{trial}.report.xml",
                 "./io_test.py::IOTest::test_ensemble_io", env={"TRIAL": trial})
        s.stop(server, check_exit=True)
    return run


def row_io_requested(s: Step) -> None:
    s.fresh()
    s.model("add_sub")
    s.model("dlpack_io_identity_decoupled")
    server = s.start(BASE)
    # test_requested_output_decoupled is GPU work (the row's note): not run.
    s.pytest("--junitxml=test_requested_output_default.report.xml",
             "./io_test.py::IOTest::test_requested_output_default")
    s.stop(server, check_exit=True)


def row_io_prior_crash(s: Step) -> None:
    s.fresh()
    s.model(s.path("requested_output_model"), "llm")
    server = s.start(BASE)
    s.pytest("--junitxml=test_requested_output_decoupled_prior_crash.report.xml",
             "./io_test.py::IOTest::test_requested_output_decoupled_prior_crash")
    s.stop(server, check_exit=True)


# ---- python_based_backends, argument_validation, logging, parameters --------------------

def row_python_based_backends(s: Step) -> None:
    repo = s.fresh()
    qa_models = s.models_src
    # ${BACKEND_DIR}/add_sub/model.py: a folder of backends with the installed ones
    # (exe: a copy of its backend folder's links) and the add_sub python-based backend
    backends = os.path.join(s.run.work, f"backends-{s.column}")
    shutil.rmtree(backends, ignore_errors=True)
    os.makedirs(backends)
    if s.column == "exe":
        for entry in os.listdir(s.run.install.backend_dir):
            if entry != "add_sub":
                os.symlink(os.path.realpath(os.path.join(s.run.install.backend_dir, entry)),
                           os.path.join(backends, entry))
    os.makedirs(os.path.join(backends, "add_sub"))
    shutil.copyfile(os.path.join(qa_models, "python_based_backends", "add_sub_backend",
                                 "model.py"), os.path.join(backends, "add_sub", "model.py"))
    for name, op in (("add", "add"), ("sub", "sub")):
        os.makedirs(os.path.join(repo, name, "1"))
        with open(os.path.join(repo, name, "1", "model.json"), "w") as f:
            f.write('{ "operation": "%s" }\n' % op)
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write('backend: "add_sub"\n')
    shutil.copytree(os.path.join(repo, "add", "1"), os.path.join(repo, "add", "2"))
    s.model("add_sub")
    shutil.copytree(os.path.join(repo, "add_sub", "1"), os.path.join(repo, "add_sub", "2"))
    shutil.copyfile(os.path.join(s.run.qa, "common", "gen_qa_pytorch_model.py"),
                    s.path("gen_qa_pytorch_model.py"))
    rc, _ = s.client(["python3", "./gen_qa_pytorch_model.py", "-m", repo], count=False)
    if rc != 0:
        raise Abort("gen_qa_pytorch_model.py failed")
    server = s.start([f"--backend-directory={backends}", "--model-control-mode=explicit"] + BASE)
    s.pytest("--junitxml=python_based_backends.report.xml", "./python_based_backends_test.py",
             "-v")
    s.stop(server)


def row_argument_validation(s: Step) -> None:
    server = s.start(BASE)     # the subtest's own models/ (committed)
    s.pytest("--junitxml=argument_validation.report.xml", "../test_infer_shm_leak.py",
             env={"MODEL_NAME": "argument_validation"})
    s.stop(server)


def row_logging(subtest: str) -> Callable[[Step], None]:
    expected = {"default": (4, 0), "verbose": (4, 3), "disabled": (1, 0)}[subtest]

    def run(s: Step) -> None:
        s.fresh()
        s.model("identity_fp32_logging")
        server = s.start([])       # SERVER_ARGS: no --log-verbose
        if subtest == "verbose":
            code = s.http("POST", "/v2/logging", b'{"log_verbose_level":1}')
            if code != 200:
                s.fail(f"POST /v2/logging log_verbose_level: HTTP {code}")
        elif subtest == "disabled":
            for param in ("log_info", "log_warning", "log_error"):
                code = s.http("POST", "/v2/logging", ('{"%s":false}' % param).encode())
                if code != 200:
                    s.fail(f"POST /v2/logging {param}: HTTP {code}")
        s.pytest(f"--junitxml=log_test.{subtest}.report.xml", "logging_test.py")
        s.stop(server)
        plain, verbose = expected
        for msg, want in (("Specific Msg!", plain), ("Info Msg!", plain), ("Warning Msg!", plain),
                          ("Error Msg!", plain), ("Verbose Msg!", verbose)):
            got = s.grep_c(msg)
            if got != want:
                s.fail(f"server log: {got} lines with {msg!r} (test.sh wants {want})")
    return run


def row_parameters(s: Step) -> None:
    s.fresh()
    for name in ("response_parameters", "response_parameters_decoupled",
                 "response_parameters_bls"):
        s.model(name)
    server = s.start(BASE)
    s.pytest("--junitxml=response_parameters_test.report.xml", "response_parameters_test.py")
    s.stop(server, check_exit=True)


# ---- examples/test.sh -------------------------------------------------------------------

# (row, models [(name, example file, config)], client, extra server flags); in test.sh's
# order, each server on the models of every example before it too (models/ grows).
EXAMPLES = [
    ("add_sub", [("add_sub", "add_sub/model.py", "add_sub/config.pbtxt")],
     ["examples/add_sub/client.py"], []),
    ("pytorch", [("pytorch", "pytorch/model.py", "pytorch/config.pbtxt")],
     ["examples/pytorch/client.py"], []),
    ("jax", [("jax", "jax/model.py", "jax/config.pbtxt")], ["examples/jax/client.py"], []),
    ("bls_sync", [("bls_sync", "bls/sync_model.py", "bls/sync_config.pbtxt")],
     ["examples/bls/sync_client.py"], []),
    ("repeat_int32", [("repeat_int32", "decoupled/repeat_model.py",
                       "decoupled/repeat_config.pbtxt")],
     ["examples/decoupled/repeat_client.py"], []),
    ("square_int32", [("square_int32", "decoupled/square_model.py",
                       "decoupled/square_config.pbtxt")],
     ["examples/decoupled/square_client.py"], []),
    ("bls_async", [("bls_async", "bls/async_model.py", "bls/async_config.pbtxt")],
     ["examples/bls/async_client.py"], []),
    ("auto_complete", [("nobatch_auto_complete", "auto_complete/nobatch_model.py", None),
                       ("batch_auto_complete", "auto_complete/batch_model.py", None)],
     ["examples/auto_complete/client.py"], ["--strict-model-config=false"]),
    ("bls_decoupled_sync", [("bls_decoupled_sync", "bls_decoupled/sync_model.py",
                             "bls_decoupled/sync_config.pbtxt")],
     ["examples/bls_decoupled/sync_client.py"], []),
    ("bls_decoupled_async", [("bls_decoupled_async", "bls_decoupled/async_model.py",
                              "bls_decoupled/async_config.pbtxt")],
     ["examples/bls_decoupled/async_client.py"], []),
    ("instance_kind", [("resnet50", "instance_kind/model.py", "instance_kind/config.pbtxt")],
     ["examples/instance_kind/client.py", "--label_file",
      "examples/instance_kind/resnet50_labels.txt"], []),
    ("custom_metrics", [("custom_metrics", "custom_metrics/model.py",
                         "custom_metrics/config.pbtxt")],
     ["examples/custom_metrics/client.py"], []),
]
EXAMPLE_SKIPS = {
    "jax": "JAX is not installed (test.sh pip-installs jax[cuda12])",
    "instance_kind": "torchvision is not installed and the example downloads ResNet50 from "
                     "torch.hub (no network)",
}


def row_example(which: str) -> Callable[[Step], None]:
    def run(s: Step) -> None:
        pb = s.path("python_backend")
        shutil.rmtree(pb, ignore_errors=True)
        shutil.copytree(os.path.dirname(s.run.python_backend_examples()), pb)
        flags = list(BASE)
        for name, models, client, extra in EXAMPLES:
            flags += extra     # SERVER_ARGS="$SERVER_ARGS --strict-model-config=false" sticks
            if name in EXAMPLE_SKIPS:
                continue       # not in models/ (see the SKIP rows)
            for model, code, config in models:
                folder = os.path.join(pb, "models", model)
                os.makedirs(os.path.join(folder, "1"), exist_ok=True)
                shutil.copyfile(os.path.join(pb, "examples", code),
                                os.path.join(folder, "1", "model.py"))
                if config:
                    shutil.copyfile(os.path.join(pb, "examples", config),
                                    os.path.join(folder, "config.pbtxt"))
            if name != which:
                continue
            s.dir = pb
            server = s.start(flags)
            rc, out = s.client(["python3", *client], count=False)
            if "PASS" not in out:
                s.fail("no PASS in the client's output (test.sh: grep PASS)")
            s.stop(server)
            return
    return run


# ---- request_rescheduling, model_readiness -----------------------------------------------

def row_request_rescheduling(s: Step) -> None:
    s.fresh()
    for name in ("bls_request_rescheduling", "request_rescheduling_addsub",
                 "iterative_sequence", "wrong_return_type"):
        s.model(name)
    server = s.start(["--model-control-mode=explicit", "--load-model=*"] + BASE)
    s.pytest("--junitxml=bls_request_rescheduling.report.xml", "../test_infer_shm_leak.py",
             env={"MODEL_NAME": "bls_request_rescheduling"})
    s.pytest("--junitxml=grpc_request_reschedule.report.xml", "./grpc_endpoint_test.py")
    s.stop(server)


def row_readiness_signal(sig: int) -> Callable[[Step], None]:
    def run(s: Step) -> None:
        s.fresh()
        s.model("identity_fp32")
        server = s.start(BASE)
        rc, _ = s.client(["python3", "-m", "unittest",
                          "test_model_readiness.TestModelReadiness.test_model_ready"])
        if rc != 0:
            s.stop(server)
            raise Abort("initial readiness check failed")
        # pgrep -f triton_python_backend_stub (of this server only: other stubs may run here)
        stubs = [p for p in _descendants(server.process.pid)
                 if "triton_python_backend_stub" in _cmdline(p)]
        if not stubs:
            s.fail("could not find the stub process (pgrep -f triton_python_backend_stub)")
        else:
            os.kill(stubs[0], sig)
            time.sleep(1)
            rc, _ = s.client(["python3", "-m", "unittest",
                              "test_model_readiness.TestModelReadiness.test_model_not_ready"])
            if rc == 0:
                n = s.grep_c("Model 'identity_fp32' version 1 is not ready: Stub process "
                             "'identity_fp32_0_0' is not healthy.")
                if n != 2:
                    s.fail(f"{n} 'is not ready: Stub process ... is not healthy.' lines in the "
                           "server log (test.sh wants 2)")
        s.stop(server)
    return run


def row_readiness_user(s: Step) -> None:
    s.fresh()
    s.model("identity_fp32")
    base = os.path.join(s.dir, "test_models")
    for name, value, delay in (
            ("is_ready_fn_returns_true", "true", "0.1"),
            ("is_ready_fn_returns_false", "false", "0.1"),
            ("is_ready_fn_raises_error", "exception", "0.1"),
            ("is_ready_fn_returns_non_boolean", "non_boolean", "0.1"),
            ("is_ready_fn_timeout", "true", "8"),
            ("is_ready_fn_coroutine_returns_true", "coroutine", "0.1")):
        code = ("readiness_coroutine_model.py" if name == "is_ready_fn_coroutine_returns_true"
                else "readiness_model.py")
        s.model(base, name, files=[(code, "model.py")], config=None)
        with open(s.path("models", "identity_fp32", "config.pbtxt")) as f:
            config = set_name(name)(f.read())
        config += ('parameters: {\n  key: "READINESS_FN_RETURN_VALUE"\n'
                   f'  value: {{ string_value: "{value}" }}\n}}\n'
                   'parameters: {\n  key: "READINESS_FN_DELAY_SECS"\n'
                   f'  value: {{ string_value: "{delay}" }}\n}}\n')
        with open(s.path("models", name, "config.pbtxt"), "w") as f:
            f.write(config)
    s.model(os.path.join(base, "is_ready_fn_returns_true_decoupled"))
    server = s.start(BASE + ["--strict-readiness=false"])
    s.client(["python3", "-m", "unittest", "test_model_readiness.TestUserDefinedModelReadinessFunction",
              "-v"])
    s.stop(server)


# ---- the table -----------------------------------------------------------------------------

def rows() -> List[Row]:
    r: List[Row] = []
    add = r.append
    # In the brief's order: python_test.py, bls, decoupled, async_execute, custom_metrics,
    # model_control, lifecycle, then the rest (test.sh's order).
    add(Row("python_test.py", "", row_python_test,
            deselect=["python_test.py::PythonTest::test_gpu_tensor_error",
                      "python_test.py::PythonTest::test_dlpack_tensor_error"],
            env_skips={"python_test.py::PythonTest::test_growth_error": (
                shm_larger_than_1g, "wants 1 GiB payloads to exhaust a 1 GiB /dev/shm (QA's "
                "container runs with --shm-size=1g); this /dev/shm is larger")},
            note="GPU tests deselected: test_gpu_tensor_error, test_dlpack_tensor_error "
                 "(CUDA shared memory)"))
    add(Row("main non_graceful_exit", "", row_non_graceful))
    add(Row("main kind_gpu add_sub_gpu", "", skip=GPU + ": a KIND_GPU model"))
    add(Row("main multi_file", "", row_multi_file))
    add(Row("main model_env", "", row_model_env))
    add(Row("main shm_default_byte_size", "", row_shm_size))
    add(Row("main init_exit", "", row_init_exit))
    add(Row("main non_existent_model", "", row_non_existent("default")))
    add(Row("main non_existent_model auto_config_disabled", "",
            row_non_existent("auto_config_disabled")))
    add(Row("bls cuda_memory_pool bls/bls_memory/bls_memory_async/bls_async", "bls",
            skip=GPU + ": --cuda-memory-pool-byte-size runs with CUDA tensors, QA's "
                 "qa_model_repository libtorch_gpu/libtorch_cpu and "
                 "onnx_nobatch_sequence_int32 models (not available)"))
    add(Row("bls bls_init_error", "bls", row_bls_init_error))
    add(Row("bls bls_finalize_error", "bls", row_bls_finalize_error))
    add(Row("bls bls_model_loading", "bls",
            skip="loads QA's qa_model_repository onnx_int32_int32_int32 (model.onnx, "
                 "not available) through the onnxruntime backend"))
    add(Row("bls bls_model_loading warmup", "bls", skip="as bls_model_loading"))
    add(Row("bls bls_parameters", "bls", row_bls_parameters))
    add(Row("decoupled", "decoupled", row_decoupled,
            deselect=["decoupled_test.py::DecoupledTest::test_decoupled_bls"],
            note="test_decoupled_bls deselected: decoupled_bls moves its inputs to cuda "
                 "(GPU work; on CPU the model's response thread dies and the test hangs)"))
    add(Row("async_execute", "async_execute", row_async_execute))
    add(Row("custom_metrics", "custom_metrics", row_custom_metrics))
    add(Row("model_control", "model_control", row_model_control))
    add(Row("lifecycle lifecycle_test.py x5", "lifecycle", row_lifecycle))
    add(Row("lifecycle init_error", "lifecycle", row_lifecycle_init_error))
    add(Row("lifecycle fini_error", "lifecycle", row_lifecycle_fini_error))
    add(Row("lifecycle auto_complete_error", "lifecycle", row_lifecycle_auto_complete_error))
    add(Row("ensemble", "ensemble", row_ensemble,
            note="test.sh's CPU-only branch: EnsembleTest.test_ensemble (test_ensemble_gpu: "
                 "GPU and QA's libtorch model)"))
    add(Row("response_sender", "response_sender", row_response_sender))
    add(Row("response_sender complete_final", "response_sender",
            row_response_sender_complete_final))
    add(Row("variants", "variants",
            skip="builds python_backend from source with cmake (no C++ builds here)"))
    # Every request of test_ensemble_io asks some of the three models for outputs in
    # GPU memory (GPU_OUTPUT): without a GPU each server answers with an error (the
    # default trial) or not at all (decoupled: the client waits forever).
    for trial in ("default", "decoupled"):
        add(Row(f"io test_ensemble_io {trial}", "io", row_io_ensemble(trial),
                skip=GPU + ": its requests ask for outputs in GPU memory (GPU_OUTPUT)"))
    add(Row("io test_empty_gpu_output", "io", skip=GPU + ": dlpack_empty_output puts its "
            "output on cuda:0"))
    add(Row("io test_variable_gpu_output", "io", skip=GPU + ": variable_gpu_output makes "
            "torch tensors on cuda"))
    add(Row("io test_requested_output", "io", row_io_requested,
            note="test_requested_output_decoupled not run: its GPU_OUTPUT input is random "
                 "booleans, and dlpack_io_identity_decoupled moves the output to cuda for each "
                 "True (GPU work; on CPU the model's response thread dies and the test hangs)"))
    add(Row("io test_requested_output_decoupled_prior_crash", "io", row_io_prior_crash))
    add(Row("python_based_backends", "python_based_backends", row_python_based_backends))
    add(Row("env", "env", skip="conda / conda-pack environments (EXECUTION_ENV_PATH): "
            "miniconda is downloaded by test.sh (no network)"))
    add(Row("argument_validation", "argument_validation", row_argument_validation))
    for sub_test in ("default", "verbose", "disabled"):
        add(Row(f"logging {sub_test}", "logging", row_logging(sub_test)))
    add(Row("parameters", "parameters", row_parameters))
    for name, *_ in EXAMPLES:
        add(Row(f"examples {name}", "examples", row_example(name),
                skip=EXAMPLE_SKIPS.get(name, "")))
    add(Row("request_rescheduling", "request_rescheduling", row_request_rescheduling))
    add(Row("model_readiness signal 11", "model_readiness", row_readiness_signal(11)))
    add(Row("model_readiness signal 9", "model_readiness", row_readiness_signal(9)))
    add(Row("model_readiness user_defined_is_ready", "model_readiness", row_readiness_user))
    return r


# --------------------------------------------------------------------------- #
# The run
# --------------------------------------------------------------------------- #

class Run:
    def __init__(self, args, work: str) -> None:
        self.work = work
        self.qa = os.path.join(work, "qa")
        self.logs = os.path.join(work, "logs")
        self.timeout = args.timeout
        self.install = None
        self.triton_dir = work       # models/init_args wants $TRITON_DIR/qa/L0_backend_python/models
        self.server_env = {"TRITON_DIR": work}
        self.client_env: Dict[str, str] = {}
        self._pb: Optional[str] = None
        self.pb_mirror, self.pb_ref = args.python_backend_mirror, args.python_backend_ref

    def python_backend_examples(self) -> str:
        """python_backend's examples/ (git clone ... -b $PYTHON_BACKEND_REPO_TAG)."""
        if self._pb is None:
            if not self.pb_mirror:
                raise Abort("needs python_backend's examples: --python-backend-mirror or "
                            "TRITON_PYTHON_BACKEND_GIT")
            dest = os.path.join(self.work, "python_backend")
            shutil.rmtree(dest, ignore_errors=True)
            make_repo.git_extract(self.pb_mirror, self.pb_ref, ["examples"], dest)
            self._pb = os.path.join(dest, "examples")
        return self._pb


def default_pb_ref(server_mirror: str, server_ref: str, pb_mirror: str) -> str:
    """python_backend main as of the server commit (PYTHON_BACKEND_REPO_TAG is the
    branch CI builds with the server; for a main commit, python_backend's main then)."""
    date = subprocess.run(["git", "-C", server_mirror, "log", "-1", "--format=%cI", server_ref],
                          capture_output=True, text=True).stdout.strip()
    got = subprocess.run(["git", "-C", pb_mirror, "rev-list", "-1", f"--before={date}", "main"],
                         capture_output=True, text=True).stdout.strip()
    return got or "main"


def run_row(run: Run, row: Row, column: str) -> Outcome:
    if row.skip:
        return Outcome("SKIP", [row.skip])
    step = Step(run, column, row)
    began = time.monotonic()
    try:
        row.fn(step)
    except Abort as e:
        step.out.status = "ERROR" if str(e).startswith("server: port") else "FAIL"
        step.out.reasons.append(str(e))
    except Exception as e:  # a bug here, not a test verdict
        step.out.status = "ERROR"
        step.out.reasons.append(f"{type(e).__name__}: {e}")
    finally:
        if step.server is not None and step.server.process is not None \
                and step.server.process.poll() is None:
            step.stop(step.server)
    step.out.seconds = time.monotonic() - began
    step.out.output = "\n".join(step.outputs)
    step.out.server_log = step.server.log_path if step.server else ""
    return step.out


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=None, metavar="REGEX", help="rows whose name matches")
    p.add_argument("--list", action="store_true", help="list the rows and exit")
    p.add_argument("--columns", default=",".join(COLUMNS),
                   help="one or more of exe,serve-stub,serve-inprocess (default: all three)")
    p.add_argument("--server-mirror", default=make_repo.SERVER_MIRROR,
                   help="git mirror of triton-inference-server/server (default: $TRITON_SERVER_GIT)")
    p.add_argument("--server-ref", default=SERVER_REF, help=f"QA files of this commit ({SERVER_REF})")
    p.add_argument("--python-backend-mirror", default=PB_MIRROR,
                   help="git mirror of triton-inference-server/python_backend "
                        "(default: $TRITON_PYTHON_BACKEND_GIT)")
    p.add_argument("--python-backend-ref", default=None,
                   help="its examples at this ref (default: its main as of the server commit)")
    p.add_argument("--workdir", default=None, help="default: a new /tmp/pb_qa_check-* (kept)")
    p.add_argument("--timeout", type=float, default=CLIENT_TIMEOUT_S, help="seconds per client run")
    p.add_argument("--tail", type=int, default=25, help="lines of output and server log per failure")
    args = p.parse_args(argv)

    table = ex.select_rows(rows(), args.only)
    if args.list:
        for i, r in enumerate(table, 1):
            print(f"{i:3d} {r.key}" + (f"   [SKIP: {r.skip}]" if r.skip else ""))
        return 0
    if not table:
        print("no row matches --only", file=sys.stderr)
        return 2
    columns = [c for c in args.columns.split(",") if c]
    if not columns or any(c not in COLUMNS for c in columns):
        p.error(f"--columns: one or more of {','.join(COLUMNS)}")
    if not args.server_mirror:
        p.error("name the git mirror of Triton's server repository: --server-mirror or "
                "TRITON_SERVER_GIT")
    if args.python_backend_mirror and not args.python_backend_ref:
        args.python_backend_ref = default_pb_ref(args.server_mirror, args.server_ref,
                                                 args.python_backend_mirror)

    work = os.path.realpath(args.workdir or tempfile.mkdtemp(prefix="pb_qa_check-", dir="/tmp"))
    run = Run(args, work)
    os.makedirs(run.logs, exist_ok=True)
    print(f"work folder: {work}", flush=True)
    shutil.rmtree(run.qa, ignore_errors=True)
    commit = make_repo.git_extract(args.server_mirror, args.server_ref, QA_PATHS, work)
    print(f"QA files from {args.server_mirror} @ {args.server_ref} ({commit[:12]})", flush=True)
    if args.python_backend_mirror:
        print(f"python_backend examples from {args.python_backend_mirror} @ "
              f"{args.python_backend_ref[:12]}", flush=True)
    missing = qa.missing_modules()
    own = [name for name in FALLBACKS
           if subprocess.run([sys.executable, "-c", f"import {name}"],
                             capture_output=True).returncode != 0]
    run.client_env = qa.client_env([FALLBACKS[name] for name in own], missing)
    for name in missing:
        print(f"{name} is not installed: the QA scripts get tests/qa_check/"
              f"{os.path.basename(qa.FALLBACKS[name])}", flush=True)
    for name in own:
        print(f"{name} is not installed: the QA scripts get tests/pb_qa_check/"
              f"{os.path.basename(FALLBACKS[name])}", flush=True)
    if "exe" in columns:
        run.install = ex.Installation()
        print(f"executable: {run.install.core.executable}", flush=True)
    busy = [port for port in PORTS if not qa._port_free(port)]
    if busy:
        print(f"WARNING: port(s) {busy} in use now; rows fail with ERROR while they are",
              flush=True)

    results: Dict[int, Dict[str, Outcome]] = {}
    for i, row in enumerate(table):
        results[i] = {}
        for column in columns:
            res = run_row(run, row, column)
            results[i][column] = res
            print(f"  {i + 1:2d} {column:15s} {res.cell():12s} {res.seconds:6.1f}s {row.key}"
                  + (f" -- {res.reason}" if res.reason and res.status != "SKIP" else ""),
                  flush=True)
    report(table, results, columns, args.tail)
    print(f"\nlogs: {run.logs}")
    failed = any(r.status in ("FAIL", "ERROR") for res in results.values() for r in res.values())
    return 1 if failed else 0


def report(table: List[Row], results: Dict[int, Dict[str, Outcome]], columns: List[str],
           tail_lines: int) -> None:
    width = max(len(r.key) for r in table) + 2
    head = f"\n{'#':>3} {'row':{width}s}" + "".join(f"{c:>17s}" for c in columns)
    print(head)
    print("-" * len(head.strip("\n")))
    for i, r in enumerate(table):
        print(f"{i + 1:3d} {r.key:{width}s}" + "".join(f"{results[i][c].cell():>17s}"
                                                        for c in columns))
    print()
    for c in columns:
        stats = {k: sum(1 for i in results if results[i][c].status == k)
                 for k in ("PASS", "FAIL", "ERROR", "SKIP")}
        tests = [results[i][c] for i in results if results[i][c].counted]
        print(f"{c}: {stats['PASS']}/{len(table)} rows passed"
              + "".join(f", {stats[k]} {k.lower()}" for k in ("FAIL", "ERROR", "SKIP") if stats[k])
              + f"; tests {sum(t.passed for t in tests)}/{sum(t.total for t in tests)} passed "
                f"in the rows that count them")
    skipped = [r for r in table if r.skip]
    notes = [r for r in table if r.note]
    if skipped or notes:
        print("\nnot run here:")
        for r in skipped:
            print(f"  - {r.key}: {r.skip}")
        for r in notes:
            print(f"  - {r.key}: {r.note}")
    for r in table:
        for test, (applies, why) in r.env_skips.items():
            if applies():
                print(f"  - {r.key}: {test} deselected: {why}")
    for i, r in enumerate(table):
        for c in columns:
            res = results[i][c]
            if res.status not in ("FAIL", "ERROR"):
                continue
            others = ", ".join(f"{o} {results[i][o].cell()}" for o in columns if o != c)
            print(f"\n=== {i + 1}. {c}: {res.status} {r.key}" + (f" ({others})" if others else "")
                  + f"\n    why: {res.reason}")
            for line in res.output.rstrip().splitlines()[-tail_lines:]:
                print("    | " + line[:400])
            if res.server_log:
                print(f"    server log {res.server_log}:")
                for line in tail(res.server_log, 6000).rstrip().splitlines()[-tail_lines:]:
                    print("    > " + line[:400])


if __name__ == "__main__":
    sys.exit(main())
