"""The GPU check: our GPU tests, NVIDIA's test_api.py, NVIDIA's CUDA shared
memory client examples and the GPU benchmark, on a lent GPU machine that
cannot reach the internet (tests/README.md, "GPU check").

    python tests/gpu/device_check.py build      # here: the carry, and the command for the device
    python tests/gpu/device_check.py run        # there, from the repository root
    python tests/gpu/device_check.py rehearse   # here: build, then run as the device would (CPU)

build (with the interpreter of a development environment, which has the
package and its core installed) makes ONE ignored file,
build/gpu-carry/gpu-carry.tar.xz, holding everything the device lacks:

  site/       our package as a cp312 wheel (built with a Python 3.12 found at
              run time: --python, pyenv's 3.12, python3.12 on PATH) and the
              cp312 wheels of what `serve` with HTTP and gRPC,
              tritonclient[http,grpc] and pytest need, extracted (numpy is
              left out: the device has numpy 2)
  site-cuda/  cuda-bindings 13 and cuda-pathfinder (tritonclient's CUDA
              shared memory), put on the path only where the device's own
              `import cuda.bindings.runtime` fails
  core/       the installed Triton core, trimmed to what it loads: the
              library and its NEEDED closure (readelf), the local cache; no
              executable, no python-backend stubs, no libpython 3.13. Proved
              here before packing by a server run on it
  nvidia/     test_api.py and its models (triton-inference-server/core at
              r24.10, python/test) and simple_{http,grpc}_cudashm_client.py
              (triton-inference-server/client at r24.10), from local git
              clones (--core-mirror / TRITON_CORE_GIT, --client-mirror /
              TRITON_CLIENT_GIT); never committed
  bin/        benchmarks/native's c_api_bench, linked to the trimmed core

It checks that the carry and the working tree together stay under the
device tool's 64 MiB and prints the command and carry list to give it.

run (on the device; only the standard library until it has unpacked)
unpacks the carry into a fresh folder, puts site/ (and site-cuda/ if needed)
first on PYTHONPATH with the interpreter's own packages still visible
(numpy, CuPy, PyTorch), sets TRITONSERVER_CORE to the trimmed core and
TRITONSERVER_PYTHON_BACKEND=inprocess (Python models run in the server's
interpreter: the stub's numpy<2 environment cannot be made there and cannot
import CuPy), then, each step with its own time limit inside one budget:

  gpu-tests     python -m pytest tests/gpu tests/api/test_gpu_paths.py
  test_api.py   NVIDIA's test_api.py, unchanged, all of it
  cudashm-http, cudashm-grpc
                the two client programs against `python -m tritonserver serve
                --allow-client-shm=true --python-backend inprocess` on a
                repository with the python model `simple`
  benchmark     benchmarks/gpu.py with the carried c_api_bench

and prints one summary table (step, result, counts, seconds) and the GPU's
name. Logs, the summary and the benchmark's JSON go to $OUT (or --out).
Without a GPU the GPU-only steps say "needs a GPU" (the server of the
cudashm steps and the carried driver still run), and test_api.py's
test_stop, whose model asks for GPU 0, fails as expected.

rehearse builds (unless --no-build), lays out a copy of the working tree
and the carry in a fresh temporary folder as the device gets them, and runs
`run` there with Python 3.12 on this machine, numpy from the downloaded
wheels standing in for the device's own packages.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ElementTree
import zipfile
from dataclasses import asdict, dataclass
from typing import Callable, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
BENCHMARKS = os.path.join(REPO, "benchmarks")
sys.path.insert(0, os.path.join(TESTS, "examples_check"))  # make_repo, run_examples
sys.path.insert(0, os.path.join(TESTS, "reliability"))  # soak
sys.path.insert(0, BENCHMARKS)  # tsbench

import make_repo  # noqa: E402
from tsbench.procs import loopback_only  # noqa: E402

CARRY_DIR = os.path.join("build", "gpu-carry")  # relative to the repository: the carry list
CARRY_NAME = "gpu-carry.tar.xz"
STAGE = os.path.join(REPO, "build", "gpu-check")  # what build makes on the way (not carried)
TREE_LIMIT = 64 << 20  # the device tool's limit on tree + carry
NVIDIA_REF = "r24.10"  # Triton 2.51, the core this package embeds
CLIENT_PROGRAMS = ("simple_http_cudashm_client.py", "simple_grpc_cudashm_client.py")
TRITONCLIENT = "tritonclient[http,grpc]==2.73.0"  # the first with cuda-bindings 13 (getPtr)
CUDA_WHEELS = ("cuda-bindings>=13,<14", "cuda-pathfinder>=1")
NOT_CARRIED = ("numpy",)  # distributions the device has (and that tritonclient accepts)
DEVICE_COMMAND = "python3 tests/gpu/device_check.py run"
DEVICE_TIMEOUT_S = 420
DEFAULT_BUDGET_S = 300
LOG_CAP = 6 << 20  # bytes of one log kept in $OUT's logs.tar.xz (its end)

# The core's pieces a server run needs (locate.py's layout of a pip core).
LIBS = "nvidia_pytriton.libs"
PIP_ROOT = os.path.join("pytriton", "tritonserver")
MARKER = "tritonserver-core.json"


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def run_logged(args: Sequence[str], log: str, timeout: float, cwd: Optional[str] = None,
               env: Optional[dict] = None) -> tuple:
    """Run `args` with its output appended to `log`, its process group killed
    past `timeout`; returns (exit status or None when killed, seconds)."""
    t0 = time.monotonic()
    with open(log, "ab") as f:
        f.write(("\n$ " + " ".join(args) + "\n").encode())
        f.flush()
        process = subprocess.Popen(list(args), stdout=f, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                                   start_new_session=True)
        try:
            rc: Optional[int] = process.wait(max(timeout, 1))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            rc = None
            f.write(f"\n[killed after {timeout:.0f} s]\n".encode())
    return rc, time.monotonic() - t0


def checked(args: Sequence[str], log: str, timeout: float, what: str, **kw) -> None:
    rc, _ = run_logged(args, log, timeout, **kw)
    if rc != 0:
        raise SystemExit(f"device_check: {what} failed ({'timed out' if rc is None else rc}); "
                         f"see {log}\n{tail(log, 3000)}")


def tail(path: str, limit: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


# --------------------------------------------------------------------------- #
# build
# --------------------------------------------------------------------------- #

def python_version(python: str) -> tuple:
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60).stdout.split()
        return tuple(int(v) for v in out)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return ()


def find_python312(explicit: Optional[str]) -> str:
    """--python, else a pyenv 3.12 (pyenv root, $PYENV_ROOT, ~/.pyenv), else python3.12."""
    candidates = [explicit] if explicit else []
    if not explicit:
        roots = [os.environ.get("PYENV_ROOT", ""), os.path.expanduser("~/.pyenv")]
        if shutil.which("pyenv"):
            roots.insert(0, subprocess.run(["pyenv", "root"], capture_output=True,
                                           text=True).stdout.strip())
        for root in filter(None, roots):
            candidates += sorted(glob.glob(os.path.join(root, "versions", "3.12.*", "bin",
                                                        "python3.12")), reverse=True)
        candidates.append(shutil.which("python3.12") or "")
    for python in filter(None, candidates):
        if python_version(python) == (3, 12):
            return python
    raise SystemExit("device_check: no Python 3.12 found (the device runs 3.12: the wheels must "
                     "be cp312); name one with --python")


def build_wheel(python: str, logs: str) -> str:
    """Our package as a cp312 wheel (pip, with build isolation)."""
    out = os.path.join(STAGE, "ours")
    shutil.rmtree(out, ignore_errors=True)
    note(f"building the cp312 wheel with {python} ...")
    checked([python, "-m", "pip", "wheel", REPO, "--no-deps", "-w", out],
            os.path.join(logs, "wheel.log"), 3600, "building our wheel")
    wheels = glob.glob(os.path.join(out, "tritonserver_embedded-*-cp312-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"device_check: expected one cp312 wheel in {out}, found {wheels}")
    return wheels[0]


def needed(path: str) -> list:
    """The NEEDED entries of an ELF file's dynamic section (readelf -d)."""
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def trim_core(source: "object", dest: str) -> dict:
    """A copy of `source` (a CoreInstall of the pip layout) in `dest` with
    what the core loads: libtritonserver and its NEEDED closure within its
    folder, the caches and their closure, the marker. Returns what was kept
    and dropped."""
    libs_dir = source.libs_dir  # type: ignore[attr-defined]
    root = source.root  # type: ignore[attr-defined]
    if not root or os.path.basename(libs_dir) != LIBS:
        raise SystemExit(f"device_check: {libs_dir} is not a pip core ({LIBS} beside "
                         f"{PIP_ROOT}); only that layout is trimmed")
    caches = os.path.join(root, "caches")
    roots = [source.library]  # type: ignore[attr-defined]
    roots += sorted(glob.glob(os.path.join(caches, "**", "*.so"), recursive=True))
    kept = {os.path.basename(source.library)}  # type: ignore[attr-defined]
    todo = list(roots)
    while todo:
        for name in needed(todo.pop()):
            path = os.path.join(libs_dir, name)
            if name not in kept and os.path.isfile(path):
                kept.add(name)
                todo.append(path)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(os.path.join(dest, LIBS))
    for name in sorted(kept):
        shutil.copy2(os.path.join(libs_dir, name), os.path.join(dest, LIBS, name))
    if os.path.isdir(caches):
        shutil.copytree(caches, os.path.join(dest, PIP_ROOT, "caches"))
    else:
        os.makedirs(os.path.join(dest, PIP_ROOT))
    dropped = sorted(set(os.listdir(libs_dir)) - kept)
    dropped += [os.path.join(PIP_ROOT, n) for n in sorted(os.listdir(root)) if n != "caches"]
    marker: dict = {}
    try:
        with open(os.path.join(os.path.dirname(libs_dir), MARKER), encoding="utf-8") as f:
            marker = json.load(f)
    except (OSError, ValueError):
        pass
    marker["trimmed"] = {"by": "tests/gpu/device_check.py", "dropped": dropped}
    with open(os.path.join(dest, MARKER), "w", encoding="utf-8") as f:
        json.dump(marker, f, indent=1)
    # Every library kept finds its own NEEDED beside it or on the system.
    for name in sorted(kept):
        for dep in needed(os.path.join(dest, LIBS, name)):
            if os.path.isfile(os.path.join(libs_dir, dep)) and dep not in kept:
                raise SystemExit(f"device_check: {name} needs {dep}, which was dropped")
    return {"kept": sorted(kept), "dropped": dropped}


PROVE = r"""
import os, sys
import numpy as np
import tritonserver
from tritonserver._core import find_core

trimmed, original = sys.argv[1], sys.argv[2]
core = find_core()
assert core.libs_dir.startswith(trimmed), core
server = tritonserver.Server(model_repository=tritonserver.example_model_repository(),
                             log_error=True, exit_timeout=10)
server.start(wait_until_ready=True, timeout=120)
x = np.arange(16, dtype=np.float32)
y = np.from_dlpack(next(server.model("identity_fp32").infer(inputs={"INPUT0": x}))
                   .outputs["OUTPUT0"])
assert (y == x).all(), y
with open("/proc/self/maps") as f:
    maps = f.read()
loaded = sorted({line.split()[-1] for line in maps.splitlines()
                 if line.split()[-1].startswith((trimmed, original))})
server.stop()
assert loaded and all(p.startswith(trimmed) for p in loaded), loaded
print(f"a server ran identity_fp32 on the trimmed core ({len(loaded)} of its files mapped, "
      "none of the original's)")
"""


def prove_core(core_dir: str, original_libs: str, logs: str) -> None:
    """Start a server on the trimmed core with this interpreter's package."""
    env = dict(os.environ, TRITONSERVER_CORE=core_dir, TRITONSERVER_PYTHON_BACKEND="inprocess")
    log = os.path.join(logs, "prove-core.log")
    checked([sys.executable, "-c", PROVE, core_dir, original_libs], log, 300,
            "the server run on the trimmed core", env=env)
    note(tail(log, 300).strip().splitlines()[-1])


def download(python: str, requirements: Sequence[str], dest: str, wheelhouse: Optional[str],
             log: str) -> list:
    """cp312 wheels of `requirements` and their dependencies in `dest`."""
    shutil.rmtree(dest, ignore_errors=True)
    args = [python, "-m", "pip", "download", "--only-binary=:all:", "--dest", dest,
            *requirements]
    if wheelhouse:
        args += ["--no-index", "--find-links", wheelhouse]
    checked(args, log, 900, "downloading wheels")
    return sorted(glob.glob(os.path.join(dest, "*.whl")))


def distribution(wheel: str) -> str:
    return os.path.basename(wheel).split("-")[0].lower().replace("_", "-")


def extract_wheel(wheel: str, site: str) -> None:
    """A wheel unpacked as pip would install it into `site` (purelib and
    platlib of its .data folder moved up; scripts, headers and data left out)."""
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            target = os.path.join(site, *parts)
            if info.is_dir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)


def fetch_nvidia(core_mirror: str, client_mirror: str, dest: str) -> dict:
    """test_api.py with its models, and the two client programs, at NVIDIA_REF."""
    import run_examples  # the client programs as examples_check extracts them
    import soak  # test_api.py as the soak harness extracts it

    if soak.TEST_API_TAG != NVIDIA_REF:
        raise SystemExit(f"device_check: soak.py extracts test_api.py at {soak.TEST_API_TAG}")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(soak.extract_test_api(core_mirror, os.path.join(tmp, "core")),
                        os.path.join(dest, "test_api"))
        found = run_examples.extract_programs(client_mirror, NVIDIA_REF,
                                              os.path.join(tmp, "client"))
        missing = set(CLIENT_PROGRAMS) - set(found)
        if missing:
            raise SystemExit(f"device_check: {client_mirror} at {NVIDIA_REF} lacks {missing}")
        os.makedirs(os.path.join(dest, "examples"))
        for name in CLIENT_PROGRAMS:
            shutil.copy2(os.path.join(tmp, "client", name), os.path.join(dest, "examples", name))

    def commit(mirror: str) -> str:
        return subprocess.run(["git", "-C", mirror, "rev-parse", NVIDIA_REF], capture_output=True,
                              text=True, check=True).stdout.strip()

    return {"core": {"ref": NVIDIA_REF, "commit": commit(core_mirror),
                     "paths": "python/test"},
            "client": {"ref": NVIDIA_REF, "commit": commit(client_mirror),
                       "paths": [f"src/python/examples/{n}" for n in CLIENT_PROGRAMS]}}


def build_driver(core_library: str, dest: str, logs: str) -> None:
    """benchmarks/native's c_api_bench, linked to the trimmed core."""
    cmake = shutil.which("cmake")
    if not cmake:
        raise SystemExit("device_check: building c_api_bench needs cmake on PATH")
    build = os.path.join(STAGE, "native")
    shutil.rmtree(build, ignore_errors=True)
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    log = os.path.join(logs, "c_api_bench.log")
    checked([cmake, "-S", os.path.join(BENCHMARKS, "native"), "-B", build, *generator,
             "-DCMAKE_BUILD_TYPE=Release", f"-DTRITON_CORE_LIBRARY={core_library}",
             "-DCMAKE_DISABLE_FIND_PACKAGE_Python3=ON"], log, 300, "configuring c_api_bench")
    checked([cmake, "--build", build, "--target", "c_api_bench"], log, 600,
            "building c_api_bench")
    os.makedirs(dest, exist_ok=True)
    shutil.copy2(os.path.join(build, "c_api_bench"), os.path.join(dest, "c_api_bench"))


def tree_bytes() -> int:
    """What the device tool sends besides the carry: tracked files and
    untracked ones git does not ignore, as they are now."""
    names = []
    for extra in ([], ["--others", "--exclude-standard"]):
        names += subprocess.run(["git", "-C", REPO, "ls-files", "-z", *extra],
                                capture_output=True, text=True, check=True).stdout.split("\0")
    total = 0
    for name in filter(None, names):
        path = os.path.join(REPO, name)
        if os.path.isfile(path) and not os.path.islink(path):
            total += os.path.getsize(path)
    return total


def folder_bytes(folder: str) -> tuple:
    size = count = 0
    for base, _, files in os.walk(folder):
        for name in files:
            size += os.path.getsize(os.path.join(base, name))
            count += 1
    return size, count


def pack(payload: str, carry: str) -> None:
    """payload/'s entries at the top of one xz-compressed tar."""
    os.makedirs(os.path.dirname(carry), exist_ok=True)
    partial = carry + ".partial"
    with tarfile.open(partial, "w:xz", preset=6) as tar:
        for name in sorted(os.listdir(payload)):
            tar.add(os.path.join(payload, name), arcname=name)
    os.replace(partial, carry)


def git_state() -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", REPO, *args], capture_output=True,
                              text=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"),
            "changed": [line[3:] for line in git("status", "--porcelain").splitlines()]}


def build(args: argparse.Namespace) -> str:
    """Everything the device lacks in one file; returns its path."""
    t0 = time.monotonic()
    core_mirror = args.core_mirror or os.environ.get("TRITON_CORE_GIT", "")
    client_mirror = args.client_mirror or os.environ.get("TRITON_CLIENT_GIT", "")
    if not core_mirror or not client_mirror:
        raise SystemExit("device_check: name git clones (bare is fine) of "
                         "github.com/triton-inference-server/core and .../client: "
                         "--core-mirror/--client-mirror or TRITON_CORE_GIT/TRITON_CLIENT_GIT")
    try:
        from tritonserver._core import find_core, inspect_path
    except ImportError:
        raise SystemExit("device_check: build runs with an interpreter that has the package and "
                         "its core installed (a development environment)") from None
    source = inspect_path(args.core) if args.core else find_core()
    if source is None:
        raise SystemExit(f"device_check: --core {args.core} names no Triton core")
    python = find_python312(args.python)
    logs = os.path.join(STAGE, "logs")
    payload = os.path.join(STAGE, "payload")
    shutil.rmtree(logs, ignore_errors=True)
    shutil.rmtree(payload, ignore_errors=True)
    os.makedirs(logs)
    os.makedirs(payload)

    note(f"trimming the core at {source.libs_dir} ...")
    trimmed = trim_core(source, os.path.join(payload, "core"))
    prove_core(os.path.join(payload, "core"), source.libs_dir, logs)

    wheel = build_wheel(python, logs)
    note("collecting the cp312 wheels ...")
    wheels = download(python, [f"{wheel}[serve]", TRITONCLIENT, "pytest", "pytest-timeout"],
                      os.path.join(STAGE, "wheels"), args.wheelhouse,
                      os.path.join(logs, "download.log"))
    cuda = download(python, CUDA_WHEELS, os.path.join(STAGE, "wheels-cuda"), args.wheelhouse,
                    os.path.join(logs, "download.log"))
    carried: dict = {}
    for folder, found in (("site", wheels), ("site-cuda", cuda)):
        carried[folder] = []
        for w in found:
            if distribution(w) not in NOT_CARRIED:
                extract_wheel(w, os.path.join(payload, folder))
                carried[folder].append(os.path.basename(w))

    note("fetching NVIDIA's test_api.py and client programs ...")
    sources = fetch_nvidia(core_mirror, client_mirror, os.path.join(payload, "nvidia"))
    note("building c_api_bench ...")
    library = os.path.join(payload, "core", LIBS, os.path.basename(source.library))
    build_driver(library, os.path.join(payload, "bin"), logs)

    manifest: dict = {"built": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "git": git_state(), "python": python_version(python), "wheels": carried,
                "core": {"library": os.path.basename(source.library), **trimmed},
                "nvidia": sources}
    with open(os.path.join(payload, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    raw, files = folder_bytes(payload)
    carry = os.path.join(REPO, CARRY_DIR, CARRY_NAME)
    note(f"packing {files:,} files ({mib(raw)}) into {carry} (xz, a few minutes) ...")
    for old in glob.glob(os.path.join(REPO, CARRY_DIR, "*")):
        os.remove(old)
    pack(payload, carry)

    size, tree = os.path.getsize(carry), tree_bytes()
    print(f"\ncarry: {os.path.join(CARRY_DIR, CARRY_NAME)}  {mib(size)} "
          f"({files:,} files, {mib(raw)} unpacked); working tree {mib(tree)}; "
          f"together {mib(size + tree)} of {mib(TREE_LIMIT)}")
    if size + tree > TREE_LIMIT:
        raise SystemExit("device_check: over the device tool's limit")
    print(f"built in {time.monotonic() - t0:.0f} s from {manifest['git']['commit'][:12]}"
          + (f" with {len(manifest['git']['changed'])} changed files"
             if manifest["git"]["changed"] else ""))
    print("\nthe device tool's run (the working tree must still be this one):")
    print(f"  command:   {DEVICE_COMMAND}")
    print(f"  carry:     {json.dumps([CARRY_DIR])}")
    print(f"  timeout_s: {DEVICE_TIMEOUT_S}")
    return carry


# --------------------------------------------------------------------------- #
# run
# --------------------------------------------------------------------------- #

@dataclass
class Step:
    name: str
    result: str = "not run"
    counts: str = ""
    seconds: float = 0.0
    ok: bool = False


class Runner:
    """The steps of `run` inside one time budget."""

    def __init__(self, args: argparse.Namespace, workdir: str):
        self.args = args
        self.workdir = workdir
        self.logs = os.path.join(workdir, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.deadline = time.monotonic() + args.budget
        self.steps: list = []
        self.gpus = 0
        self.env: dict = dict(os.environ)  # environment() sets the children's

    def left(self, cap: float) -> float:
        return min(cap, self.deadline - time.monotonic())

    def log(self, name: str) -> str:
        return os.path.join(self.logs, name + ".log")

    def step(self, name: str, cap: float, body: Callable[[Step, float], None]) -> Step:
        step = Step(name)
        self.steps.append(step)
        limit = self.left(cap)
        if limit < 10:
            step.result = "not run: out of time"
            return step
        note(f"--- {name} (at most {limit:.0f} s)")
        t0 = time.monotonic()
        try:
            body(step, limit)
        except Exception as e:  # noqa: BLE001 - reported in the table, the next step runs
            step.result, step.ok = "error", False
            step.counts = " ".join(f"{type(e).__name__}: {e}".split())[:240]
            with open(self.log(name), "a", encoding="utf-8") as f:
                f.write(f"\n{type(e).__name__}: {e}\n")
        step.seconds = time.monotonic() - t0
        note(f"    {step.result}  {step.counts}  ({step.seconds:.1f} s)")
        return step

    def python(self, args: Sequence[str], name: str, timeout: float,
               cwd: str = REPO) -> tuple:
        return run_logged([sys.executable, *args], self.log(name), timeout, cwd=cwd,
                          env=self.env)


def junit_counts(path: str) -> tuple:
    """(counts text, failing test ids) from pytest's JUnit XML."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return "no results", []
    suites = [root] if root.tag == "testsuite" else list(root)
    total = sum(int(s.get("tests", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    failing = []
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failing.append(f"{case.get('classname', '')}::{case.get('name', '')}")
    passed = total - skipped - len(failing)
    return f"{passed} passed, {len(failing)} failed, {skipped} skipped", failing


def pytest_step(runner: Runner, step: Step, limit: float, args: Sequence[str], cwd: str,
                expected: Sequence[str] = ()) -> None:
    xml = os.path.join(runner.logs, step.name.replace(".py", "") + ".xml")
    # Only pytest-timeout is loaded (the device's own pytest plugins are not
    # autoloaded: PYTEST_DISABLE_PLUGIN_AUTOLOAD, set by environment()).
    rc, _ = runner.python(["-m", "pytest", *args, "-p", "pytest_timeout", "-p",
                           "no:cacheprovider", "-q", "-rfEs", f"--junitxml={xml}"], step.name,
                          limit, cwd=cwd)
    step.counts, failing = junit_counts(xml)
    unexpected = [t for t in failing if not any(t.endswith(e) for e in expected)]
    if rc is None:
        step.result = "timed out"
    elif rc in (0, 1) and not unexpected:
        step.ok = True
        step.result = "pass" if not failing else "pass (expected failures)"
        if failing:
            step.counts += "; " + ", ".join(failing) + " failed as expected without a GPU"
    else:
        step.result = f"fail (pytest {rc})"
        if unexpected:
            step.counts += "; failed: " + ", ".join(unexpected)[:300]


PROBE = r"""
import importlib, json, sys
carried = sys.argv[1]
info = {"python": sys.version.split()[0]}
for name in ("numpy", "cupy", "torch", "cuda.bindings", "tritonclient", "pytest", "grpc"):
    try:
        module = importlib.import_module(name)
    except Exception as e:
        info[name] = "missing"
        continue
    where = "carried" if (getattr(module, "__file__", None) or "").startswith(carried) else "device"
    info[name] = f"{getattr(module, '__version__', '?')} ({where})"
import tritonserver
from tritonserver import _cuda, _gpu
from tritonserver._core import find_core, core_version
info["tritonserver"] = tritonserver.__file__
core = find_core()
info["core"] = f"{core_version(core)} at {core.libs_dir}"
info["gpus"] = _cuda.device_count()
info["device_files"] = _gpu.present()
print(json.dumps(info))
"""


def gpu_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else "nvidia-smi failed"
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "no nvidia-smi"


def unpack(runner: Runner, step: Step, limit: float) -> None:
    carry = runner.args.carry
    with tarfile.open(carry, "r:xz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(runner.workdir, filter="data")
        else:
            tar.extractall(runner.workdir)
    size, files = folder_bytes(runner.workdir)
    with open(os.path.join(runner.workdir, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    changed = manifest["git"]["changed"]
    step.ok, step.result = True, "pass"
    step.counts = (f"{mib(os.path.getsize(carry))} -> {mib(size)}, {files:,} files; built from "
                   f"{manifest['git']['commit'][:12]}"
                   + (f" + {len(changed)} changed files" if changed else ""))


def environment(runner: Runner, step: Step, limit: float) -> None:
    if sys.version_info[:2] != (3, 12):
        raise RuntimeError(f"the carried wheels are cp312; this is Python "
                           f"{sys.version.split()[0]}")
    site = os.path.join(runner.workdir, "site")
    path = [site] + ([runner.args.system_site] if runner.args.system_site else [])
    env = loopback_only(dict(os.environ))
    env.update(TRITONSERVER_CORE=os.path.join(runner.workdir, "core"),
               TRITONSERVER_PYTHON_BACKEND="inprocess", PYTHONUNBUFFERED="1",
               PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONPATH=os.pathsep.join(path))
    has_cuda = subprocess.run([sys.executable, "-c", "import cuda.bindings.runtime"], env=env,
                              capture_output=True, timeout=limit).returncode == 0
    if not has_cuda:
        path.insert(1, os.path.join(runner.workdir, "site-cuda"))
        env["PYTHONPATH"] = os.pathsep.join(path)
    runner.env = env
    # This process reads the same packages (soak.py's list of test_api.py's
    # known failures needs numpy).
    sys.path[:0] = path
    os.environ.clear()
    os.environ.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE, runner.workdir], env=env,
                         capture_output=True, text=True, timeout=limit)
    with open(runner.log("environment"), "a", encoding="utf-8") as f:
        f.write(f"PYTHONPATH={env['PYTHONPATH']}\n{out.stdout}\n{out.stderr}\n")
    if out.returncode != 0:
        raise RuntimeError("the package does not import: "
                           + (out.stderr.strip().splitlines() or ["?"])[-1])
    info = json.loads(out.stdout.strip().splitlines()[-1])
    runner.gpus = int(info["gpus"])
    step.ok, step.result = True, "pass"
    step.counts = (f"python {info['python']}, numpy {info['numpy']}, cupy {info['cupy']}, "
                   f"torch {info['torch']}, cuda-bindings {info['cuda.bindings']}, "
                   f"core {info['core'].split()[0]}, GPUs {runner.gpus}"
                   + ("" if info["device_files"] or not runner.gpus
                      else " (but no /dev/nvidia*: the package leaves its GPU paths off)"))


def gpu_tests(runner: Runner, step: Step, limit: float) -> None:
    # A test past a minute is stuck: its own limit leaves the rest their time.
    pytest_step(runner, step, limit, ["tests/gpu", "tests/api/test_gpu_paths.py",
                                      "-o", "timeout=60"], REPO)


def test_api(runner: Runner, step: Step, limit: float) -> None:
    from soak import TEST_API_KNOWN_FAILURES  # test_stop: its model asks for GPU 0

    expected = () if runner.gpus else [t.split("::", 1)[1] for t in TEST_API_KNOWN_FAILURES]
    pytest_step(runner, step, limit, ["test_api.py", "--timeout", "120"],
                os.path.join(runner.workdir, "nvidia", "test_api"), expected)


def cudashm(runner: Runner, limit: float) -> None:
    """The two client programs against serve (steps of their own)."""
    from tsbench.procs import BenchError
    from tsbench.serve_server import ServeServer
    from tsbench.server_process import _get as status

    repo = os.path.join(runner.workdir, "cudashm-repository")
    make_repo.python_model(repo, "simple", make_repo.add_sub_config("simple", "TYPE_INT32"),
                           make_repo.ADD_SUB)
    # serve's start is waited for through this model's readiness (ServeServer).
    shutil.copytree(os.path.join(REPO, "python", "tritonserver", "example_models",
                                 "identity_fp32"), os.path.join(repo, "identity_fp32"))
    server = ServeServer(repo, runner.log("serve"), python=sys.executable,
                         extra=["--python-backend=inprocess", "--log-info=true"])
    t0 = time.monotonic()
    ready, problem = False, ""
    try:
        server.start()
        ready = status(f"http://{server.http_url}/v2/models/simple/ready") == 200
        problem = "" if ready else "model simple is not ready"
    except (BenchError, OSError) as e:
        problem = "serve did not start: " + str(e).splitlines()[0]
    started = time.monotonic() - t0
    try:
        for name, url in zip(CLIENT_PROGRAMS, (server.http_url, server.grpc_url)):
            label = "cudashm-" + ("http" if "http" in name else "grpc")

            def body(step: Step, left: float, name: str = name, url: str = url) -> None:
                if not ready:
                    step.result, step.counts = "fail", problem
                    return
                if not runner.gpus:
                    step.ok, step.result = True, "needs a GPU"
                    step.counts = f"serve with model simple ready in {started:.1f} s"
                    return
                program = os.path.join(runner.workdir, "nvidia", "examples", name)
                rc, _ = runner.python([program, "-u", url], step.name, left)
                text = tail(runner.log(step.name), 20000)
                passes = [line for line in text.splitlines() if "PASS" in line]
                step.ok = rc == 0 and len(passes) == 1
                step.result = "pass" if step.ok else ("timed out" if rc is None
                                                      else f"fail (exit {rc})")
                step.counts = passes[0].strip() if passes else "no PASS line"

            runner.step(label, min(limit, 90), body)
    finally:
        server.stop()


DRIVER_CHECK = r"""
import sys
sys.path.insert(0, "benchmarks")
from tsbench.core_floor import CoreFloor
figures = CoreFloor(sys.argv[2], sys.argv[1]).measure(
    ("sync",), ["--rounds", "1", "--seconds", "0.2", "--warmup-seconds", "0.05",
                "--min-requests", "3", "--max-seconds", "30"])
print(f"c_api_bench ran sync on the trimmed core: {figures['sync']['n']} requests")
"""


def benchmark(runner: Runner, step: Step, limit: float) -> None:
    driver = os.path.join(runner.workdir, "bin", "c_api_bench")
    result = os.path.join(runner.logs, "gpu-bench.json")
    rc, _ = runner.python(["benchmarks/gpu.py", "--driver", driver, "--rounds", "3",
                           "--seconds", "1", "--json", result,
                           "--logs", os.path.join(runner.logs, "bench")], step.name, limit)
    text = tail(runner.log(step.name), 20000)
    if rc != 0:
        step.result = "timed out" if rc is None else f"fail (exit {rc})"
        return
    if "needs a GPU" in text:
        # The carried driver still has to run on the trimmed core.
        rc, _ = runner.python(["-c", DRIVER_CHECK, driver, runner.logs], step.name,
                              runner.left(60))
        step.ok = rc == 0
        step.result = "needs a GPU" if step.ok else "fail (c_api_bench)"
        step.counts = ([ln for ln in tail(runner.log(step.name), 2000).splitlines()
                        if "c_api_bench ran" in ln] or ["c_api_bench did not run"])[-1]
        return
    with open(result, encoding="utf-8") as f:
        document = json.load(f)
    (name, ratio), = document["ratios"].items()
    medians = {s: r["median"] for s, r in document["results"].items()}
    per_mb = document["bytes_per_inference"] / 1e6
    step.ok, step.result = True, "pass"
    step.counts = (f"{name} {ratio['value']:.2f} (target {ratio['target']}: "
                   f"{'met' if ratio['met'] else 'not met'}); "
                   + ", ".join(f"{s} {v:,.0f}/s {v * per_mb:,.0f} MB/s"
                               for s, v in medians.items()))


def summary(steps: list, gpu: str) -> str:
    rows = [("step", "result", "counts", "seconds")]
    rows += [(s.name, s.result, s.counts, f"{s.seconds:.1f}") for s in steps]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3].rjust(7)
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    failed = [s.name for s in steps if not s.ok]
    lines += ["", f"GPU: {gpu}",
              "device check: " + ("every step passed" if not failed
                                  else "failed: " + ", ".join(failed))]
    return "\n".join(lines)


def capped(path: str) -> bytes:
    with open(path, "rb") as f:
        size = os.path.getsize(path)
        if size <= LOG_CAP:
            return f.read()
        f.seek(size - LOG_CAP)
        return f"[the first {size - LOG_CAP:,} bytes left out]\n".encode() + f.read()


def deliver(runner: Runner, out: str, text: str) -> None:
    """At most a few files in $OUT (the device tool brings back 8): the
    summary, its JSON, the benchmark's JSON and every log in one tar.xz."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "summary.txt"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump({"steps": [asdict(s) for s in runner.steps], "gpu": gpu_name()}, f, indent=1)
    bench = os.path.join(runner.logs, "gpu-bench.json")
    if os.path.isfile(bench):
        shutil.copy2(bench, os.path.join(out, "gpu-bench.json"))
    with tarfile.open(os.path.join(out, "logs.tar.xz"), "w:xz") as tar:
        for base, _, files in os.walk(runner.logs):
            for name in sorted(files):
                path = os.path.join(base, name)
                data = capped(path)
                info = tarfile.TarInfo(os.path.relpath(path, runner.workdir))
                info.size, info.mtime = len(data), int(time.time())
                tar.addfile(info, io.BytesIO(data))


def run(args: argparse.Namespace) -> int:
    args.carry = os.path.abspath(args.carry)
    if not os.path.isfile(args.carry):
        raise SystemExit(f"device_check: no carry at {args.carry} (make it with build)")
    workdir = tempfile.mkdtemp(prefix="tritonserver-gpu-check-")
    runner = Runner(args, workdir)
    out = args.out or os.environ.get("OUT") or os.path.join(workdir, "out")
    try:
        if runner.step("unpack", 120, lambda s, t: unpack(runner, s, t)).ok and \
                runner.step("environment", 120, lambda s, t: environment(runner, s, t)).ok:
            runner.step("gpu-tests", 150, lambda s, t: gpu_tests(runner, s, t))
            runner.step("test_api.py", 120, lambda s, t: test_api(runner, s, t))
            cudashm(runner, runner.left(120))
            runner.step("benchmark", 100, lambda s, t: benchmark(runner, s, t))
        for s in runner.steps:  # what a failure printed last, before the table
            if not s.ok and os.path.isfile(runner.log(s.name)):
                print(f"\n--- {s.name}: the end of its log\n{tail(runner.log(s.name), 1500)}")
        text = summary(runner.steps, gpu_name())
        print("\n" + text, flush=True)
        deliver(runner, out, text)
        print(f"logs and summary: {out}")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if all(s.ok for s in runner.steps) else 1


# --------------------------------------------------------------------------- #
# rehearse
# --------------------------------------------------------------------------- #

def rehearse(args: argparse.Namespace) -> int:
    carry = os.path.join(REPO, CARRY_DIR, CARRY_NAME)
    if not args.no_build:
        carry = build(args)
    elif not os.path.isfile(carry):
        raise SystemExit(f"device_check: --no-build, but there is no {carry}")
    python = find_python312(args.python)
    with tempfile.TemporaryDirectory(prefix="tritonserver-gpu-rehearsal-") as tmp:
        # The working tree as the device tool sends it, and the carry in it.
        tree = os.path.join(tmp, "repo")
        names = []
        for extra in ([], ["--others", "--exclude-standard"]):
            names += subprocess.run(["git", "-C", REPO, "ls-files", "-z", *extra],
                                    capture_output=True, text=True,
                                    check=True).stdout.split("\0")
        for name in filter(None, names):
            if os.path.isfile(os.path.join(REPO, name)):
                os.makedirs(os.path.dirname(os.path.join(tree, name)), exist_ok=True)
                shutil.copy2(os.path.join(REPO, name), os.path.join(tree, name))
        os.makedirs(os.path.join(tree, CARRY_DIR))
        shutil.copy2(carry, os.path.join(tree, CARRY_DIR, CARRY_NAME))
        # What the device's interpreter has of its own: numpy (2.x).
        system_site = os.path.join(tmp, "system-site")
        numpy = sorted(glob.glob(os.path.join(STAGE, "wheels", "numpy-2*.whl")))
        if not numpy:
            raise SystemExit("device_check: no numpy 2 wheel in build/gpu-check/wheels "
                             "(run build first)")
        extract_wheel(numpy[-1], system_site)
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TRITONSERVER_CORE",
                            "TRITONSERVER_PYTHON_BACKEND", "PYTHONHOME")}
        out = os.path.join(tmp, "out")
        command = [python, "tests/gpu/device_check.py", "run", "--system-site", system_site,
                   "--out", out]
        note(f"rehearsal in {tree}: {' '.join(command)}")
        rc = subprocess.run(command, cwd=tree, env=env).returncode
        print(f"\nrehearsal: run exited {rc}; $OUT would hold: "
              + ", ".join(sorted(os.listdir(out)) if os.path.isdir(out) else []))
        if args.keep_out:
            shutil.copytree(out, args.keep_out, dirs_exist_ok=True)
    return rc


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    builders = []
    for name in ("build", "rehearse"):
        b = sub.add_parser(name)
        b.add_argument("--python", help="a Python 3.12 (default: pyenv's, else python3.12)")
        b.add_argument("--core", help="the Triton core to trim (default: the installed one)")
        b.add_argument("--core-mirror", help="git clone of triton-inference-server/core "
                                             "(default: $TRITON_CORE_GIT)")
        b.add_argument("--client-mirror", help="git clone of triton-inference-server/client "
                                               "(default: $TRITON_CLIENT_GIT)")
        b.add_argument("--wheelhouse", help="take every wheel from this folder, not the index")
        builders.append(b)
    builders[1].add_argument("--no-build", action="store_true", help="use the carry there is")
    builders[1].add_argument("--keep-out", metavar="DIR", help="copy what $OUT got here")
    r = sub.add_parser("run")
    r.add_argument("--carry", default=os.path.join(REPO, CARRY_DIR, CARRY_NAME))
    r.add_argument("--out", help="where the summary and logs go (default: $OUT)")
    r.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                   help="seconds for every step together")
    r.add_argument("--system-site", help="a folder of packages standing in for the device's own "
                                         "(the rehearsal's numpy)")
    r.add_argument("--keep", action="store_true", help="keep the unpacked folder")
    args = p.parse_args(argv)
    if args.command == "build":
        build(args)
        return 0
    if args.command == "rehearse":
        return rehearse(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
