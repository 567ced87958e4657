#!/usr/bin/env python3
"""The benchmarks of tritonserver, in one run (see benchmarks/README.md).

    python benchmarks/run.py                  # full run: 5 runs x 2 s per figure
    python benchmarks/run.py --quick          # a smoke run, under a minute
    python benchmarks/run.py --pin --json out.json   # pinned to CPU 0, results to a file

Five workloads on the identity_fp32 model of the package's example
repository (sync, async64, large16MiB, large16MiB-shm, threads4) for our
Python API, a raw C API driver in C++ (benchmarks/native, the ceiling),
tritonclient HTTP and gRPC against the `tritonserver` executable of the same
core (Triton's C++ frontends) and against our frontends (`python -m
tritonserver serve`), echo servers (the libraries under our frontends with
no Triton, and with one in-process inference per request), HTTP with JSON
tensors, and MLServer (asked for by name), all on
127.0.0.1. Each system runs in its own process; every figure is the
min/median/max of several runs, given as a ratio to the C API's median of
the same run; our frontends are also given as a ratio to the C++
frontends' and to MLServer's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from tsbench import clientenv, machine, native, report  # noqa: E402
from tsbench.procs import BenchError, loopback_only, note, run_logged  # noqa: E402
from tsbench.echo_server import EchoServer  # noqa: E402
from tsbench.mlserver_server import MLServerServer  # noqa: E402
from tsbench.serve_server import ServeServer  # noqa: E402
from tsbench.server_exe import ExecutableServer  # noqa: E402

MODEL = "identity_fp32"
PYAPI_WORKER = os.path.join(HERE, "tsbench", "pyapi_worker.py")
FLOOR_WORKER = os.path.join(HERE, "tsbench", "floor_worker.py")
CLIENT_WORKER = os.path.join(HERE, "tsbench", "client_worker.py")
DEFAULT_VENV = os.path.join(HERE, ".venv-client")
DEFAULT_BUILD = os.path.join(HERE, "build")
README = os.path.join(HERE, "README.md")
LAST_RUN_DIR = os.path.join(HERE, "results")
KEEP_LOGS = 10

# mode -> loop settings
PROFILES = {
    "full": {"rounds": 5, "seconds": 2.0, "warmup_seconds": 0.3, "min_requests": 10,
             "max_seconds": 30.0},
    "quick": {"rounds": 3, "seconds": 0.25, "warmup_seconds": 0.05, "min_requests": 3,
              "max_seconds": 10.0},
}


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="3 short runs per figure: checks that every path works (< 60 s)")
    p.add_argument("--json", metavar="PATH", help="write the results document here")
    p.add_argument("--png", metavar="PATH",
                   help="write the chart here (default: beside --json, same name, .png)")
    p.add_argument("--update-readme", action="store_true",
                   help="write the table into benchmarks/README.md and the results to "
                        "benchmarks/results/last-run.{json,png}")
    p.add_argument("--pin", nargs="?", const="0", metavar="CPUS",
                   help="pin the whole run (workers, driver, server) to these CPUs "
                        "(default when given alone: 0), like taskset -c")
    p.add_argument("--rounds", type=int, help="runs per figure (full: 5, quick: 3)")
    p.add_argument("--seconds", type=float, help="length of one run (full: 2.0, quick: 0.25)")
    p.add_argument("--warmup-seconds", type=float, help="warm-up before each run")
    p.add_argument("--interleave", dest="interleave", action="store_true", default=None,
                   help="round-robin the systems for each run (default in full mode): "
                        "slow drifts of a shared machine hit every system alike")
    p.add_argument("--no-interleave", dest="interleave", action="store_false",
                   help="all runs of one system, then the next (default in quick mode)")
    p.add_argument("--systems", default=",".join(report.DEFAULT_SYSTEMS),
                   help="comma-separated subset of: " + ", ".join(report.SYSTEMS) +
                        " (default: all but MLServer's, whose venv takes minutes to make, and "
                        "python-floor, python-floor-1us and the python-api-batched experiment; "
                        "'all' for every one)")
    p.add_argument("--workloads", default=",".join(report.WORKLOADS),
                   help="comma-separated subset of: " + ", ".join(report.WORKLOADS))
    p.add_argument("--client-python", metavar="PYTHON",
                   help="an interpreter that already has tritonclient[http,grpc] "
                        "(default: the private venv, made on first use)")
    p.add_argument("--venv", default=DEFAULT_VENV,
                   help="the private venv of the tritonclient side (default: %(default)s)")
    p.add_argument("--build-dir", default=DEFAULT_BUILD,
                   help="CMake build folder of the C API driver, and logs "
                        "(default: %(default)s)")
    args = p.parse_args(argv)
    args.mode = "quick" if args.quick else "full"
    profile = PROFILES[args.mode]
    for key in ("rounds", "seconds", "warmup_seconds"):
        if getattr(args, key) is None:
            setattr(args, key, profile[key])
    args.min_requests = profile["min_requests"]
    args.max_seconds = max(profile["max_seconds"], args.seconds)
    if args.interleave is None:
        args.interleave = not args.quick
    args.systems = _subset(p, args.systems, report.SYSTEMS, "--systems")
    args.workloads = _subset(p, args.workloads, report.WORKLOADS, "--workloads")
    if args.rounds < 1 or args.seconds <= 0 or args.warmup_seconds < 0:
        p.error("need --rounds >= 1, --seconds > 0, --warmup-seconds >= 0")
    return args


def _subset(p: argparse.ArgumentParser, text: str, allowed: tuple, flag: str) -> list:
    chosen = [x.strip() for x in text.split(",") if x.strip()]
    if chosen == ["all"]:
        return list(allowed)
    unknown = [x for x in chosen if x not in allowed]
    if unknown or not chosen:
        p.error(f"{flag}: choose among {', '.join(allowed)}")
    return [x for x in allowed if x in chosen]  # canonical order


def _prune_logs(folder: str, keep: int) -> None:
    """Only the logs of the last `keep` runs stay."""
    try:
        runs = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    except OSError:
        return
    for name in runs[:-keep]:
        shutil.rmtree(os.path.join(folder, name), ignore_errors=True)


# The systems measured in this process's children without a network server.
LOCAL_SYSTEMS = ("c-api", "python-api", "python-api-batched") + report.FLOOR_SYSTEMS


def network_parts(system: str) -> tuple:
    """(server, protocol, JSON tensors?) of a network system's name: the
    server is "tritonclient" (the executable), "serve", "echo", "echo-core",
    "mlserver" or "mlserver-default"; "-json" ends an HTTP system with JSON
    tensors."""
    json_tensors = system.endswith("-json")
    name, protocol = (system[:-len("-json")] if json_tensors else system).rsplit("-", 1)
    return name, protocol, json_tensors


class Run:
    """One benchmark run: prepares what the chosen systems need, measures, reports."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.started = datetime.datetime.now(datetime.timezone.utc)
        stamp = self.started.strftime("%Y%m%d-%H%M%S")
        self.logs = os.path.join(os.path.abspath(args.build_dir), "logs", f"{stamp}-{os.getpid()}")
        os.makedirs(self.logs, exist_ok=True)
        _prune_logs(os.path.dirname(self.logs), KEEP_LOGS)
        self.setup_log = os.path.join(self.logs, "setup.log")
        self.rounds: dict = {s: [] for s in args.systems}
        self.extra: dict = {}
        self.server = None
        self.serve = None
        self.echo = None
        self.echo_core = None
        self.mlservers: dict = {}  # "mlserver" (parallel_workers 0), "mlserver-default"
        self.driver = None
        self.floor_dir = None
        self.client_python = None
        self.tritonclient_version = None

    def log(self, name: str) -> str:
        return os.path.join(self.logs, name + ".log")

    # ---- Preparation ------------------------------------------------------------

    def prepare(self) -> None:
        import tritonserver
        from tritonserver._core import backend_directory, core_version, find_core
        from tritonserver._runtime import package_backends_dir

        self.repository = tritonserver.example_model_repository()
        try:
            self.core = find_core()
        except Exception as e:  # says where it looked and how to install one
            raise BenchError(f"no Triton core: {e}") from None
        self.core_version = core_version(self.core)
        # Our backends beside a libtritonserver.so link to the core: what the
        # Python API builds for itself at Server.start(); removed at exit.
        self.backend_dir = backend_directory(self.core, package_backends_dir())
        note(f"core {self.core_version} at {self.core.library}")
        floors = set(report.FLOOR_SYSTEMS) & set(self.args.systems)
        if floors or "c-api" in self.args.systems:
            self.driver = native.build_driver(self.core.library, self.args.build_dir,
                                              self.args.venv, self.setup_log)
        if floors:
            self.floor_dir = native.floor_module_dir(self.driver)
        needed = {network_parts(s)[0] for s in self.args.systems if s not in LOCAL_SYSTEMS}
        if needed:
            self.client_python, self.tritonclient_version = clientenv.client_python(
                self.args.venv, self.args.client_python, self.setup_log)
        if "tritonclient" in needed:
            if not self.core.executable or not os.path.isfile(self.core.executable):
                raise BenchError("this core has no tritonserver executable "
                                 f"(core root: {self.core.root})")
            self.server = ExecutableServer(
                self.core.executable, self.core.libs_dir, self.repository,
                self.backend_dir, self.core.cache_dir, self.log("tritonserver-executable"))
            self.server.start()
        if "serve" in needed:
            self.serve = ServeServer(self.repository, self.log("tritonserver-serve"))
            self.serve.start()
        if "echo" in needed:
            self.echo = EchoServer(self.log("echo-server"))
            self.echo.start()
        if "echo-core" in needed:
            self.echo_core = EchoServer(self.log("echo-core-server"), self.repository)
            self.echo_core.start()
        # MLServer with its best setting (inference in the server process) and its default.
        for name, workers in (("mlserver", 0), ("mlserver-default", None)):
            if name in needed:
                self.mlservers[name] = MLServerServer(self.log(name), parallel_workers=workers)
                self.mlservers[name].start()

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.serve is not None:
            self.serve.stop()
            self.serve = None
        for server in (self.echo, self.echo_core):
            if server is not None:
                server.stop()
        self.echo = self.echo_core = None
        for server in self.mlservers.values():
            server.stop()
        self.mlservers = {}

    # ---- Measuring ----------------------------------------------------------------

    def loop_arguments(self, system: str, rounds: int) -> list:
        a = self.args
        workloads = report.system_workloads(system, a.workloads)
        return ["--workloads", ",".join(workloads), "--rounds", str(rounds),
                "--seconds", str(a.seconds), "--warmup-seconds", str(a.warmup_seconds),
                "--min-requests", str(a.min_requests), "--max-seconds", str(a.max_seconds)]

    def command(self, system: str, rounds: int) -> tuple:
        loop = self.loop_arguments(system, rounds)
        if system == "c-api":
            return native.driver_command(self.driver, self.core, self.repository,
                                         self.backend_dir, MODEL, loop)
        if system in ("python-api", "python-api-batched"):
            batched = ["--core-threads-batch"] if system == "python-api-batched" else []
            return [sys.executable, PYAPI_WORKER, "--model-repository", self.repository] + \
                batched + loop, dict(os.environ)
        if system in report.FLOOR_SYSTEMS:
            extra = ["--extra-us", "1"] if system == "python-floor-1us" else []
            return [sys.executable, FLOOR_WORKER, "--model-repository", self.repository,
                    "--module-dir", self.floor_dir] + extra + loop, dict(os.environ)
        target, protocol, json_tensors = self.network_target(system)
        url = target.http_url if protocol == "http" else target.grpc_url
        env = loopback_only({k: v for k, v in os.environ.items()
                             if k not in ("PYTHONPATH", "PYTHONHOME")})
        return [self.client_python, CLIENT_WORKER, "--protocol", protocol, "--url", url] + \
            (["--json-tensors"] if json_tensors else []) + loop, env

    def network_target(self, system: str) -> tuple:
        """(server, "http" or "grpc", JSON tensors?) of a network system."""
        name, protocol, json_tensors = network_parts(system)
        targets = {"tritonclient": self.server, "serve": self.serve, "echo": self.echo,
                   "echo-core": self.echo_core, **self.mlservers}
        return targets[name], protocol, json_tensors

    def measure(self, system: str, rounds: int) -> None:
        args, env = self.command(system, rounds)
        a = self.args
        timeout = rounds * len(a.workloads) * (2 * a.max_seconds + 15) + 120
        t0 = time.monotonic()
        out = run_logged(args, self.log(system), timeout, f"the {system} benchmark", env=env)
        lines = [line for line in out.splitlines() if line.strip()]
        try:
            document = json.loads(lines[-1])
            got = document["rounds"]
        except (IndexError, ValueError, KeyError, TypeError):
            raise BenchError(f"the {system} benchmark printed no results "
                             f"(log: {self.log(system)})") from None
        if len(got) != rounds:
            raise BenchError(f"the {system} benchmark returned {len(got)} rounds, not {rounds}")
        self.rounds[system].extend(got)
        for key, value in document.items():
            if key not in ("system", "rounds"):
                self.extra.setdefault(system, {})[key] = value
        for figures in got:
            note(f"  {system:18s} " + "  ".join(_brief(w, figures[w]) for w in a.workloads
                                                  if w in figures))
        note(f"  ({system}: {rounds} run(s) in {time.monotonic() - t0:.1f} s)")

    def measure_all(self) -> None:
        a = self.args
        groups = [1] * a.rounds if a.interleave else [a.rounds]
        for i, rounds in enumerate(groups):
            if a.interleave:
                note(f"round {i + 1} of {a.rounds}")
            for system in a.systems:
                self.measure(system, rounds)

    # ---- Reporting ----------------------------------------------------------------

    def document(self, pinned: list) -> dict:
        results, ratios, by_system = report.summarize(self.rounds)
        block = machine.machine_block(
            pinned_cpus=pinned, mode=self.args.mode, rounds=self.args.rounds,
            seconds=self.args.seconds, warmup_seconds=self.args.warmup_seconds,
            interleaved=self.args.interleave, core=self.core, core_version=self.core_version,
            tritonclient=self.tritonclient_version, started=self.started)
        block["duration_s"] = round(
            (datetime.datetime.now(datetime.timezone.utc) - self.started).total_seconds(), 1)
        return {"machine": block, "results": results, "ratios": ratios,
                "ratios_by_system": by_system,
                "frontend_ratios": report.frontend_ratios(results), "workers": self.extra,
                "settings": {"model": MODEL, "systems": self.args.systems,
                             "workloads": self.args.workloads,
                             "min_requests_per_run": self.args.min_requests,
                             "max_seconds_per_run": self.args.max_seconds}}


def _brief(workload: str, figures: dict) -> str:
    if workload.startswith("large16MiB"):
        return f"{workload} {figures['gbps']:.3g} GB/s"
    text = f"{workload} {figures['ips']:,.0f}/s"
    if workload == "sync":
        text += f" (p50 {figures['p50_us']:.1f} µs)"
    return text


def write_outputs(args: argparse.Namespace, document: dict) -> None:
    targets = []  # (json path, png path)
    if args.json:
        png = args.png or os.path.splitext(args.json)[0] + ".png"
        targets.append((args.json, png))
    elif args.png:
        targets.append((None, args.png))
    if args.update_readme:
        targets.append((os.path.join(LAST_RUN_DIR, "last-run.json"),
                        os.path.join(LAST_RUN_DIR, "last-run.png")))
    for json_path, png_path in targets:
        if json_path:
            os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
            with open(json_path, "w", encoding="utf-8") as f:
                json.dump(document, f, indent=1)
                f.write("\n")
            note(f"results: {json_path}")
        skipped = report.chart(document, png_path)
        note(f"chart skipped: {skipped}" if skipped else f"chart: {png_path}")
    if args.update_readme:
        png = os.path.join(LAST_RUN_DIR, "last-run.png")
        relative = os.path.relpath(png, HERE) if os.path.isfile(png) else None
        report.update_readme(README, document, relative)
        note(f"table written into {README}")


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # unwinds: the server is stopped


def main(argv: list) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    pinned = None
    if args.pin is not None:
        pinned = machine.parse_cpu_list(args.pin)
        machine.pin(pinned)  # before any child starts: they all inherit it
    run = Run(args)
    note(f"tritonserver benchmarks, {args.mode} mode: {args.rounds} run(s) x {args.seconds} s, "
         f"{'pinned to ' + args.pin if pinned else 'unpinned'}; logs in {run.logs}")
    try:
        run.prepare()
        run.measure_all()
    except BenchError as e:
        note(f"benchmark failed: {e}")
        return 1
    finally:
        run.close()
    document = run.document(pinned)
    print(f"\n{report.configuration_line(document)}\n")
    print(report.markdown_table(document))
    costs = report.cost_table(document)
    if costs:
        print(f"\nWhat each worker process spent per request (getrusage, all its threads):\n\n{costs}")
    print()
    write_outputs(args, document)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
