"""Run NVIDIA's client example programs against Triton's own `tritonserver`
executable (of the installed core) and against `python -m tritonserver serve`,
on the same model repository in the same run, and judge them as Triton's QA
does (server repository qa/L0_http/test.sh and qa/L0_grpc/test.sh).

Standalone (not a pytest module): the programs come from a local mirror of
github.com/triton-inference-server/client and the run needs the core
installed; see README.md beside this file.

    python tests/examples_check/run_examples.py [--only REGEX] [--list]

Each row is one program run as QA runs it (its arguments, its expected output:
exit status, one "PASS" line where QA counts them, one VULTURE line for the
image programs, ...). Servers, one pair (executable, serve) per server
configuration QA uses:

  main           --model-repository=<gRPC repository: 8 models>
  compress       the same plus --grpc-infer-response-compression-level=high
  explicit-http  --model-control-mode=explicit on the L0_http repository (7 models)
  explicit-grpc  --model-control-mode=explicit on the L0_grpc repository (8 models)

Models are python-backend models (make_repo.py); densenet_onnx is a tiny
stand-in (not DenseNet, a python model as well: its top class is VULTURE for
any image), so the image rows test the protocol path of image
classification, not a network; they are counted apart. CUDA shared memory programs are not run (GPU).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_repo  # noqa: E402

# Free ports, a proxy-free environment and status probe, and log tails: the benchmarks'.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks"))
from tsbench.procs import loopback_only, tail  # noqa: E402
from tsbench.server_process import _free_ports, _get as _status  # noqa: E402

from tritonserver._cli.executable import ExecutableSetup  # noqa: E402

# A git clone (bare is fine) of github.com/triton-inference-server/client.
CLIENT_MIRROR = os.environ.get("TRITON_CLIENT_GIT", "")
EXAMPLES = "src/python/examples"
HOST = "127.0.0.1"
READY_TIMEOUT_S = 180
STOP_TIMEOUT_S = 30

SERVERS = ("exe", "serve")
TITLES = {"exe": "executable", "serve": "serve"}


# --------------------------------------------------------------------------- #
# Judging, as the QA scripts do
# --------------------------------------------------------------------------- #

def _count_lines(text: str, needle: str) -> int:
    """grep -c: lines that contain `needle`."""
    return sum(1 for line in text.splitlines() if needle in line)


def exit_zero(rc: int, out: str, log: str) -> Optional[str]:
    return None if rc == 0 else f"exit status {rc}"


def exit_zero_one_pass(rc: int, out: str, log: str) -> Optional[str]:
    if rc != 0:
        return f"exit status {rc}"
    n = _count_lines(out, "PASS")
    return None if n == 1 else f"{n} lines with PASS (QA wants 1)"


def image(check_pass: bool) -> Callable[[int, str, str], Optional[str]]:
    def judge(rc: int, out: str, log: str) -> Optional[str]:
        # QA: grep -c VULTURE == 1 (and, for the gRPC loop's sync run, one PASS line).
        if rc != 0:
            return f"exit status {rc}"
        n = _count_lines(out, "VULTURE")
        if n != 1:
            return f"{n} lines with VULTURE (QA wants 1)"
        if check_pass:
            return exit_zero_one_pass(rc, out, log)
        return None
    return judge


def base_path(rc: int, out: str, log: str) -> Optional[str]:
    if rc == 0:
        return "exit status 0 (QA wants a failure: no server under /base_path)"
    want = "POST /base_path/v2/models/simple/infer"
    return None if want in out else f"no '{want}' in the output"


def model_control(rc: int, out: str, log: str) -> Optional[str]:
    problem = exit_zero_one_pass(rc, out, log)
    if problem:
        return problem
    if "Invalid config override" not in log:
        return "server log has no 'Invalid config override' (QA greps the server log)"
    return None


def compressed(rc: int, out: str, log: str) -> Optional[str]:
    if rc != 0:
        return f"exit status {rc}"
    return None if "Compressed[deflate]" in out else "no 'Compressed[deflate]' in the output"


# --------------------------------------------------------------------------- #
# The rows: QA's program runs, in QA's order
# --------------------------------------------------------------------------- #

@dataclass
class Check:
    proto: str
    program: str
    args: List[str]                       # "{url}": this protocol's host:port
    judge: Callable[[int, str, str], Optional[str]]
    config: str = "main"
    needs: str = ""                      # "image" | "gpu"
    env: Dict[str, str] = field(default_factory=dict)
    note: str = ""

    @property
    def label(self) -> str:
        words, i = [], 0
        while i < len(self.args):
            if self.args[i:i + 2] == ["-u", "{url}"]:  # every row has it: not shown
                i += 2
                continue
            words.append(self.args[i].replace("{url}", "URL").replace("{image}", "vulture.jpeg"))
            i += 1
        text = " ".join([self.program] + words)
        return f"{text} [{self.note}]" if self.note else text

    @property
    def key(self) -> str:
        return f"{self.proto} {self.label}"


def checks() -> List[Check]:
    rows: List[Check] = []
    add = rows.append
    u = ["-u", "{url}"]
    img = ["-m", "densenet_onnx", "-s", "INCEPTION"]
    # ---- qa/L0_http/test.sh -------------------------------------------------
    add(Check("http", "simple_http_health_metadata.py", ["-v"] + u, exit_zero))
    for prog in ("simple_http_aio_infer_client.py", "simple_http_infer_client.py",
                 "simple_http_async_infer_client.py"):
        add(Check("http", prog, ["-v"] + u, exit_zero))
    add(Check("http", "image_client.py", img + ["-a", "-c", "1", "-b", "1"] + u + ["{image}"],
              image(False), needs="image"))
    add(Check("http", "image_client.py", img + ["-c", "1", "-b", "1"] + u + ["{image}"],
              image(False), needs="image"))
    for prog in ("simple_http_shm_string_client.py", "simple_http_shm_client.py"):
        add(Check("http", prog, ["-v"] + u, exit_zero))
    add(Check("http", "simple_http_cudashm_client.py", ["-v"] + u, exit_zero, needs="gpu"))
    for prog in ("simple_http_string_infer_client.py", "simple_http_sequence_sync_infer_client.py"):
        add(Check("http", prog, ["-v"] + u, exit_zero))
    add(Check("http", "reuse_infer_objects_client.py", ["-v"] + u, exit_zero))
    add(Check("http", "simple_http_infer_client.py", ["-u", "{url}/base_path", "-v"], base_path,
              note="base path"))
    add(Check("http", "simple_http_model_control.py", ["-v"] + u, model_control,
              config="explicit-http", note="explicit"))
    add(Check("http", "simple_http_sequence_sync_infer_client.py", ["-v", "-d"] + u, exit_zero))
    # ---- qa/L0_grpc/test.sh -------------------------------------------------
    add(Check("grpc", "simple_grpc_health_metadata.py", ["-v"] + u, exit_zero))
    loop = [
        "simple_grpc_aio_infer_client.py", "simple_grpc_aio_sequence_stream_infer_client.py",
        "simple_grpc_infer_client.py", "simple_grpc_async_infer_client.py",
        "simple_grpc_string_infer_client.py", "image_client.py",
        "simple_grpc_sequence_stream_infer_client.py", "simple_grpc_sequence_sync_infer_client.py",
        "simple_grpc_shm_string_client.py", "simple_grpc_shm_client.py",
        "simple_grpc_cudashm_client.py", "simple_grpc_keepalive_client.py",
        "simple_grpc_custom_args_client.py", "grpc_explicit_byte_content_client.py",
        "grpc_explicit_int_content_client.py", "grpc_explicit_int8_content_client.py",
        "grpc_client.py", "grpc_image_client.py",
    ]
    for prog in loop:
        if prog in ("image_client.py", "grpc_image_client.py"):
            extra = ["-i", "grpc"] if prog == "image_client.py" else []
            for mode, flags, check_pass in (("async", ["-a"], False),
                                            ("streaming", ["-a", "--streaming"], False),
                                            ("sync", [], True)):
                add(Check("grpc", prog, img + flags + ["-c", "1", "-b", "1"] + extra + u
                          + ["{image}"], image(check_pass), needs="image"))
        elif prog == "grpc_client.py":
            add(Check("grpc", prog, ["-v"] + u, exit_zero_one_pass, needs="image"))
        elif prog == "simple_grpc_cudashm_client.py":
            add(Check("grpc", prog, ["-v"] + u, exit_zero_one_pass, needs="gpu"))
        else:
            add(Check("grpc", prog, ["-v"] + u, exit_zero_one_pass))
    add(Check("grpc", "reuse_infer_objects_client.py", ["-v", "-i", "grpc"] + u, exit_zero))
    add(Check("grpc", "simple_grpc_infer_client.py", ["-v", "-C", "deflate"] + u, compressed,
              config="compress", env={"GRPC_TRACE": "compression,", "GRPC_VERBOSITY": "DEBUG"},
              note="response compression high"))
    add(Check("grpc", "simple_grpc_model_control.py", ["-v"] + u, model_control,
              config="explicit-grpc", note="explicit"))
    for prog in ("simple_grpc_sequence_stream_infer_client.py",
                 "simple_grpc_sequence_sync_infer_client.py"):
        add(Check("grpc", prog, ["-v", "-d"] + u, exit_zero))
    return rows


# --------------------------------------------------------------------------- #
# Servers
# --------------------------------------------------------------------------- #

def die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Installation(ExecutableSetup):
    """The installed core's executable, set up as `python -m tritonserver
    executable` sets it up (tritonserver._cli.executable), with the
    environment's proxies dropped."""

    def executable_env(self) -> dict:
        return self.environment(loopback_only(dict(os.environ)))


class Server:
    def __init__(self, kind: str, config: str, repository: str, flags: List[str],
                 install: Optional[Installation], logs: str, cwd: str) -> None:
        self.kind, self.config, self.repository, self.flags = kind, config, repository, flags
        self.install, self.cwd = install, cwd
        self.log_path = os.path.join(logs, f"server-{kind}-{config}.log")
        self.process: Optional[subprocess.Popen] = None
        self.http_port = self.grpc_port = self.metrics_port = 0
        self.error: Optional[str] = None

    def _command(self) -> List[str]:
        common = [f"--model-repository={self.repository}",
                  f"--http-address={HOST}", f"--http-port={self.http_port}",
                  f"--grpc-address={HOST}", f"--grpc-port={self.grpc_port}",
                  f"--metrics-address={HOST}", f"--metrics-port={self.metrics_port}"]
        if self.kind == "exe":
            assert self.install is not None
            return self.install.command([
                *common,
                # Two executables at once: their stubs' shared memory must not collide.
                f"--backend-config=python,shm-region-prefix-name="
                f"examples_check_{os.getpid()}_{self.config}_",
                *self.flags])
        # Client shared memory on, as qa/L0_http and qa/L0_grpc start Triton
        # (2.69 and later have it off by default; the 2.51 executable has no
        # such flag and always allows it).
        return [sys.executable, "-m", "tritonserver", "serve", *common,
                "--strict-model-config=false", "--allow-client-shm=true", *self.flags]

    def start(self) -> None:
        self.http_port, self.grpc_port, self.metrics_port = _free_ports(3)
        env = (self.install.executable_env() if self.kind == "exe"
               else loopback_only(dict(os.environ)))
        with open(self.log_path, "ab") as log:
            log.write(("$ " + " ".join(self._command()) + "\n").encode())
            log.flush()
            self.process = subprocess.Popen(
                self._command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=self.cwd, start_new_session=True, preexec_fn=die_with_parent)

    def wait_ready(self, deadline: float) -> bool:
        url = f"http://{HOST}:{self.http_port}/v2/health/ready"
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                rc = None if self.process is None else self.process.returncode
                self.error = f"exited with status {rc} before it was ready"
                return False
            if _status(url) == 200:
                return True
            time.sleep(0.25)
        self.error = f"not ready within {READY_TIMEOUT_S} s"
        return False

    def url(self, proto: str) -> str:
        return f"{HOST}:{self.http_port if proto == 'http' else self.grpc_port}"

    def log_text(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self) -> None:
        p = self.process
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)  # the group this server leads (its stubs)
        except ProcessLookupError:
            return
        try:
            p.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)


SERVER_CONFIGS = {
    "main": ("grpc", []),
    "compress": ("grpc", ["--grpc-infer-response-compression-level=high"]),
    "explicit-http": ("http-explicit", ["--model-control-mode=explicit"]),
    "explicit-grpc": ("grpc-explicit", ["--model-control-mode=explicit"]),
}


# --------------------------------------------------------------------------- #
# Running
# --------------------------------------------------------------------------- #

@dataclass
class Result:
    status: str                 # PASS | FAIL | SKIP | ERROR
    reason: str = ""
    output: str = ""
    seconds: float = 0.0


def extract_programs(mirror: str, ref: str, dest: str) -> List[str]:
    names = subprocess.run(["git", "-C", mirror, "ls-tree", "--name-only", ref, EXAMPLES + "/"],
                           check=True, capture_output=True, text=True).stdout.split()
    os.makedirs(dest, exist_ok=True)
    got = []
    for path in names:
        if not path.endswith(".py"):
            continue
        text = subprocess.run(["git", "-C", mirror, "show", f"{ref}:{path}"],
                              check=True, capture_output=True).stdout
        with open(os.path.join(dest, os.path.basename(path)), "wb") as f:
            f.write(text)
        got.append(os.path.basename(path))
    return got


def client_env(extra_pythonpath: Sequence[str]) -> dict:
    env = loopback_only(dict(os.environ))
    if extra_pythonpath:
        current = env.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join(list(extra_pythonpath) + ([current] if current else []))
    return env


def make_image(python: str, env: dict, path: str) -> Optional[str]:
    """A JPEG for the image programs (the stand-in classifies any image as
    VULTURE); None, or why not (PIL missing)."""
    code = ("import sys, numpy as np\nfrom PIL import Image\n"
            "y, x = np.mgrid[0:300, 0:400]\n"
            "rgb = np.stack([(x * 255 // 400), (y * 255 // 300), ((x + y) % 256)], -1)\n"
            "Image.fromarray(rgb.astype(np.uint8)).save(sys.argv[1], quality=90)\n")
    done = subprocess.run([python, "-c", code, path], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return "PIL is not importable for the client programs (--client-pythonpath): " + \
            (done.stderr.strip().splitlines() or ["?"])[-1]
    return None


def run_program(python: str, progs: str, check: Check, server: Server, env: dict, image_path: str,
                cwd: str, timeout: float, log_path: str) -> Result:
    args = [a.replace("{url}", server.url(check.proto)).replace("{image}", image_path)
            for a in check.args]
    cmd = [python, os.path.join(progs, check.program), *args]
    run_env = dict(env)
    run_env.update(check.env)
    began = time.monotonic()
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, env=run_env, cwd=cwd, timeout=timeout,
                              preexec_fn=die_with_parent)
        rc, out = done.returncode, done.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        took = time.monotonic() - began
        save_log(log_path, cmd, None, out)
        return Result("FAIL", f"timed out after {timeout:.0f} s", out, took)
    took = time.monotonic() - began
    save_log(log_path, cmd, rc, out)
    reason = check.judge(rc, out, server.log_text())
    if server.process is not None and server.process.poll() is not None:
        server.error = f"exited with status {server.process.returncode} during an earlier row"
        reason = (reason or "passed") + (f"; the server exited (status {server.process.returncode}) "
                                         f"during this run: {server.log_path}")
    return Result("FAIL" if reason else "PASS", reason or "", out, took)


def save_log(path: str, cmd: List[str], rc: Optional[int], out: str) -> None:
    with open(path, "w") as f:
        f.write("$ " + " ".join(cmd) + f"\n# exit status: {rc}\n" + out)


def run_program(cmd: List[str], env: dict, cwd: str, timeout: float,
                log_path: str) -> "tuple[Optional[int], str, float]":
    """(exit status, or None when it ran past `timeout`; its output; seconds)
    of a client program, its output saved to `log_path`."""
    began = time.monotonic()
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, env=env, cwd=cwd, timeout=timeout,
                              preexec_fn=die_with_parent)
        rc: Optional[int] = done.returncode
        out = done.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, out = None, (e.stdout or b"").decode("utf-8", "replace")
    save_log(log_path, cmd, rc, out)
    return rc, out, time.monotonic() - began


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:120]


def select_rows(rows: List[Any], only: Optional[str]) -> List[Any]:
    """The rows whose ``key`` matches the --only regex (all without one)."""
    if not only:
        return rows
    pattern = re.compile(only)
    return [row for row in rows if pattern.search(row.key)]


def chosen_servers(text: str, parser: argparse.ArgumentParser) -> List[str]:
    """--servers as a list (exe, serve), or the parser's error."""
    servers = [s for s in text.split(",") if s]
    if any(s not in SERVERS for s in servers):
        parser.error(f"--servers: one or more of {','.join(SERVERS)}")
    return servers


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=None, metavar="REGEX",
                   help="run only the rows whose '<protocol> <program> <args>' matches")
    p.add_argument("--list", action="store_true", help="list the rows and exit")
    p.add_argument("--servers", default="exe,serve", help="exe, serve or both (default)")
    p.add_argument("--client-mirror", default=CLIENT_MIRROR,
                   help="bare git mirror of triton-inference-server/client")
    p.add_argument("--client-ref", default="HEAD",
                   help="the programs at this commit or branch (default HEAD; r24.10 is "
                        "the client of Triton 2.51, whose grpc_client.py wants inception_graphdef)")
    p.add_argument("--server-mirror", default=make_repo.SERVER_MIRROR,
                   help="bare git mirror of triton-inference-server/server (densenet labels)")
    p.add_argument("--client-pythonpath", action="append", default=[], metavar="DIR",
                   help="folder to put on the programs' PYTHONPATH (e.g. one holding PIL)")
    p.add_argument("--no-images", action="store_true",
                   help="skip the image programs (and grpc_client.py: densenet_onnx)")
    p.add_argument("--workdir", default=None, help="folder for programs, repositories and logs "
                   "(default: a new /tmp/examples_check-*; kept)")
    p.add_argument("--timeout", type=float, default=180, help="seconds per program run")
    p.add_argument("--tail", type=int, default=40, help="output lines shown per failure")
    args = p.parse_args(argv)
    if not args.client_mirror or not args.server_mirror:
        p.error("name the git clones of Triton's client and server repositories: "
                "--client-mirror/--server-mirror, or TRITON_CLIENT_GIT/TRITON_SERVER_GIT")

    rows = select_rows(checks(), args.only)
    if args.list:
        for i, c in enumerate(rows, 1):
            print(f"{i:3d} {c.proto:4s} {c.config:13s} {c.label}")
        return 0
    if not rows:
        print("no row matches --only", file=sys.stderr)
        return 2
    servers = chosen_servers(args.servers, p)

    work = args.workdir or tempfile.mkdtemp(prefix="examples_check-", dir="/tmp")
    os.makedirs(work, exist_ok=True)
    progs, logs = os.path.join(work, "programs"), os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    print(f"work folder: {work}", flush=True)
    found = extract_programs(args.client_mirror, args.client_ref, progs)
    commit = subprocess.run(["git", "-C", args.client_mirror, "rev-parse", args.client_ref],
                            capture_output=True, text=True).stdout.strip()
    print(f"{len(found)} programs from {args.client_mirror} @ {args.client_ref} "
          f"({commit[:12]})", flush=True)

    # Repositories: the L0_grpc one (8 models), and for explicit model control
    # copies where densenet_onnx is at least a config (QA's model counts).
    repos = {}
    problem = None
    for key, http, placeholder in (("grpc", False, False), ("grpc-explicit", False, True),
                                   ("http-explicit", True, True)):
        if not any(SERVER_CONFIGS[c.config][0] == key for c in rows):
            continue
        folder = os.path.join(work, f"repo-{key}")
        shutil.rmtree(folder, ignore_errors=True)
        why = make_repo.build(folder, http=http, densenet=not args.no_images,
                              server_mirror=args.server_mirror, placeholder=placeholder)
        problem = problem or why
        repos[key] = folder

    python = sys.executable
    env = client_env(args.client_pythonpath)
    image_path = os.path.join(work, "vulture.jpeg")
    image_skip = problem
    if not image_skip and any(c.needs == "image" for c in rows):
        image_skip = make_image(python, env, image_path)
    if image_skip:
        print(f"image programs not run: {image_skip}", flush=True)

    install = None
    if "exe" in servers:
        install = Installation()
        print(f"executable: {install.core.executable}", flush=True)
    results: Dict[int, Dict[str, Result]] = {i: {} for i in range(len(rows))}
    for i, c in enumerate(rows):
        for s in servers:
            if c.needs == "gpu":
                results[i][s] = Result("SKIP", "CUDA shared memory: GPU work")
            elif c.needs == "image" and image_skip:
                results[i][s] = Result("SKIP", image_skip)

    configs = []
    for c in rows:
        if c.config not in configs:
            configs.append(c.config)
    for config in configs:
        todo = [i for i, c in enumerate(rows) if c.config == config
                and any(s not in results[i] for s in servers)]
        if not todo:
            continue
        repo_key, flags = SERVER_CONFIGS[config]
        started = []
        try:
            for s in servers:
                server = Server(s, config, repos[repo_key], flags, install, logs, work)
                server.start()
                started.append(server)
            deadline = time.monotonic() + READY_TIMEOUT_S
            for server in started:
                if server.wait_ready(deadline):
                    print(f"[{config}] {TITLES[server.kind]} ready: http {server.url('http')}, "
                          f"grpc {server.url('grpc')}", flush=True)
                else:
                    print(f"[{config}] {TITLES[server.kind]} did not start: {server.error}\n"
                          f"{tail(server.log_path, 3000)}", flush=True)
            for server in started:
                for i in todo:
                    c = rows[i]
                    if server.kind in results[i]:
                        continue
                    if server.error:
                        results[i][server.kind] = Result("ERROR", f"server: {server.error}")
                        continue
                    log_path = os.path.join(logs, f"{i + 1:02d}-{server.kind}-{slug(c.key)}.log")
                    r = run_program(python, progs, c, server, env, image_path, work,
                                    args.timeout, log_path)
                    results[i][server.kind] = r
                    print(f"  {i + 1:2d} {TITLES[server.kind]:10s} {r.status:5s} {r.seconds:6.1f}s "
                          f"{c.proto} {c.label}" + (f" -- {r.reason}" if r.reason else ""),
                          flush=True)
        finally:
            for server in started:
                server.stop()

    report(rows, results, servers, args.tail)
    print(f"\nlogs: {logs}")
    failed = any(r.status in ("FAIL", "ERROR") for res in results.values() for r in res.values())
    return 1 if failed else 0


def report(rows: List[Check], results: Dict[int, Dict[str, Result]], servers: List[str],
           tail: int) -> None:
    width = max(len(c.label) for c in rows) + 4
    head = f"\n{'#':>3} {'proto':5s} {'program':{width}s}" + "".join(f"{TITLES[s]:>12s}" for s in servers)
    print(head)
    print("-" * len(head.strip("\n")))
    for i, c in enumerate(rows):
        mark = " *" if c.needs == "image" else ""
        print(f"{i + 1:3d} {c.proto:5s} {c.label + mark:{width}s}"
              + "".join(f"{results[i][s].status:>12s}" for s in servers))
    print()
    groups = (("all rows", lambda c: True),
              ("without the image rows (*: densenet_onnx stand-in)", lambda c: c.needs != "image"),
              ("image rows only", lambda c: c.needs == "image"))
    for title, keep in groups:
        picked = [i for i, c in enumerate(rows) if keep(c)]
        if not picked:
            continue
        parts = []
        for s in servers:
            stats = {k: sum(1 for i in picked if results[i][s].status == k)
                     for k in ("PASS", "FAIL", "ERROR", "SKIP")}
            parts.append(f"{TITLES[s]} {stats['PASS']}/{len(picked)} passed"
                         + "".join(f", {stats[k]} {k.lower()}" for k in ("FAIL", "ERROR", "SKIP")
                                   if stats[k]))
        print(f"{title}: " + "; ".join(parts))

    for i, c in enumerate(rows):
        for s in servers:
            r = results[i][s]
            if r.status not in ("FAIL", "ERROR"):
                continue
            others = [f"{TITLES[o]} {results[i][o].status}" for o in servers if o != s]
            print(f"\n=== {i + 1}. {TITLES[s]}: {r.status} {c.proto} {c.label}"
                  + (f" ({', '.join(others)})" if others else "") + f"\n    why: {r.reason}")
            lines = r.output.rstrip().splitlines()
            for line in lines[-tail:]:
                print("    | " + line[:400])


if __name__ == "__main__":
    sys.exit(main())
