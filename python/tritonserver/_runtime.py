"""What a server needs from its environment: the core, our backends, the
python backend's stub interpreter. Used by Server.start()."""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
import threading
from typing import Any

from tritonserver import _gpu
from tritonserver._c import triton_bindings as _bindings
from tritonserver._enums import ModelControlMode
from tritonserver._errors import InvalidArgumentError, UnsupportedError

_lock = threading.Lock()
_core: Any = None


def package_backends_dir() -> str:
    """The folder holding this package's own backends (one subfolder each)."""
    from tritonserver._package_files import package_file

    return os.environ.get("TRITONSERVER_PACKAGE_BACKENDS") or package_file("backends")


def ensure_core_loaded() -> Any:
    """Find the core and bind to it, once per process; returns its CoreInstall."""
    global _core
    with _lock:
        if _core is None:
            from tritonserver._core import find_core, load_core

            core = find_core()  # raises CoreNotFoundError, saying where it looked
            load_core(core)
            _bindings.load_core(core.library)
            _core = core
        return _core


def prepare_options(options: Any, core: Any, server_index: int) -> None:
    """Fill the defaults that depend on the installation, on a private copy."""
    from tritonserver._core import backend_directory

    # The user's backend folder (Options.backend_directory) is served together
    # with the package's backends, each beside a link to the running core.
    user_dir = options.backend_directory
    if user_dir is not None and not os.path.isdir(user_dir):
        raise InvalidArgumentError(
            f"Options.backend_directory: {user_dir!r} is not a folder; give a folder "
            "holding one subfolder per backend (<name>/libtriton_<name>.so)")
    options.backend_directory = backend_directory(core, package_backends_dir(), user_dir)
    if options.cache_directory is None and core.cache_dir:
        options.cache_directory = core.cache_dir
    if not _gpu.present():
        # Without a GPU, NVML and the CUDA host allocator can only fail, and
        # the core says so on every start ("Failed to initialize NVML").
        options.gpu_metrics = False
        options.pinned_memory_pool_size = 0
    config = {name: dict(settings) for name, settings in options.backend_configuration.items()}
    # Python-backend stubs talk through shared memory regions named by this
    # prefix: unique per process and server, so two never collide.
    config.setdefault("python", {}).setdefault(
        "shm-region-prefix-name", f"tritonserver_{os.getpid()}_{server_index}_")
    options.backend_configuration = config
    stub = _stub_environment(core)
    if stub.usable:
        stub.apply(os.environ)  # the stub is a child process: it inherits these
    else:
        for name in models_loaded_at_start(options):
            if _is_python_model(options, name):
                raise UnsupportedError(_python_refusal(name, stub.reason))


def check_model_loadable(options: Any, name: str,
                         parameters: "dict[str, Any] | None" = None) -> None:
    """Refuse a python-backend model when its stub would corrupt tensors.

    ``parameters`` are those of the load call: a ``config`` there replaces
    the repository's, and ``file:`` entries are the model's files."""
    if _core is None or not _is_python_model(options, name, parameters):
        return
    stub = _stub_environment(_core)
    if not stub.usable:
        raise UnsupportedError(_python_refusal(name, stub.reason))


def _stub_environment(core: Any) -> Any:
    from tritonserver._core import stub_environment

    return stub_environment(core)


def _python_refusal(name: str, reason: str) -> str:
    return (f"model '{name}' uses the python backend, which cannot run correctly here: "
            f"{reason.rstrip('.')}. The same model.py runs in this process instead: change "
            "backend: \"python\" to backend: \"inprocess\" in its config.pbtxt (docs/inprocess.md)")


_NAMED = re.compile(r'^\s*(backend|platform)\s*:\s*"([^"]*)"', re.MULTILINE)


def _runs_on_python_backend(backend: Any, platform: Any, has_model_py: bool) -> bool:
    """The core's choice: the backend the config names; with none (and no
    platform), the python backend when the model has a model.py."""
    if backend or platform:
        return bool(backend == "python")
    return has_model_py


def _is_python_model(options: Any, name: str, parameters: "dict[str, Any] | None" = None) -> bool:
    parameters = parameters or {}
    config = parameters.get("config")
    if isinstance(config, str):  # the load call's config replaces the repository's
        try:
            settings = json.loads(config)
        except ValueError:
            return False  # the core refuses the load and says why
        if not isinstance(settings, dict):
            return False
        return _runs_on_python_backend(
            settings.get("backend"), settings.get("platform"),
            any(isinstance(k, str) and k.startswith("file:") and k.endswith("/model.py")
                for k in parameters))
    for repo in options._repositories():
        folder = os.path.join(repo, name)
        if not os.path.isdir(folder):
            continue
        has_model_py = any(os.path.isfile(os.path.join(folder, v, "model.py"))
                           for v in os.listdir(folder) if os.path.isdir(os.path.join(folder, v)))
        named: dict[str, str] = {}
        config = os.path.join(folder, "config.pbtxt")
        if os.path.isfile(config):
            with open(config, encoding="utf-8", errors="replace") as f:
                for field, value in _NAMED.findall(f.read()):
                    named.setdefault(field, value)
        if _runs_on_python_backend(named.get("backend"), named.get("platform"), has_model_py):
            return True
    return False


def models_loaded_at_start(options: Any) -> list[str]:
    """The models the options load at start (EXPLICIT: the startup models; NONE
    and POLL: every folder of the repositories)."""
    if options.model_control_mode == ModelControlMode.EXPLICIT and "*" not in options.startup_models:
        return list(options.startup_models)
    names: list[str] = []
    for repo in options._repositories():
        if os.path.isdir(repo):
            names.extend(n for n in sorted(os.listdir(repo)) if os.path.isdir(os.path.join(repo, n)))
    return names


_STUB_NAME = "triton_python_backend_stub"
_exit_wait_s: "float | None" = None  # set by the first stop that gave up


def finish_at_exit(timeout_s: float) -> None:
    """After a stop that gave up (its exit timeout expired with work running).

    The binding keeps that server: the core cannot free it, nor can the
    process exit under it, while a backend still runs its requests. At
    interpreter exit (before Python is torn down, so callbacks can still
    run) wait up to the largest such timeout for the core to release them
    and free the server, then terminate python-backend stubs of ours still
    running: a stub blocked on its (dead) parent never exits by itself."""
    global _exit_wait_s
    with _lock:
        if _exit_wait_s is None:
            atexit.register(_finish_kept_servers)
        _exit_wait_s = max(_exit_wait_s or 0.0, float(timeout_s))


def _finish_kept_servers() -> None:
    busy = _bindings.Server.delete_idle_kept_servers(_exit_wait_s or 0.0)
    if busy:
        print(f"tritonserver: {busy} stopped server(s) still had requests running "
              f"{_exit_wait_s:g} s after exit began; exiting without freeing them",
              file=sys.stderr, flush=True)
    _terminate_stub_children()


def _stub_children() -> list[int]:
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            if ppid != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if _STUB_NAME.encode() in f.read().split(b"\0", 1)[0]:
                    pids.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
    return pids


def _terminate_stub_children(grace_s: float = 2.0) -> None:
    import signal
    import time

    pids = _stub_children()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive_child(p)]
            time.sleep(0.05)
        if not pids:
            return


def _alive_child(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)  # reaps it if it exited
        return done == 0
    except ChildProcessError:
        return False
