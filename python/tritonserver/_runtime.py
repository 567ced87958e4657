"""What a server needs from its environment: the core, our backends, the
python backend's stub interpreter (tritonserver._control.python_stub).
Used by Server.start()."""

from __future__ import annotations

import os
import threading
from typing import Any

from tritonserver import _crash_report, _gpu, _stub_names
from tritonserver._c import triton_bindings as _bindings
from tritonserver._control import python_stub
from tritonserver._errors import InvalidArgumentError

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
            # TRITONSERVER_CRASH_REPORT=1: a crash of this process, from now
            # on in the core's threads too, names every thread's native frames.
            _crash_report.enable_if_requested()
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
    # Plugin backends (entry points, docs/plugins.md) get a library of their
    # name there: read from metadata now, their code imported when a model uses one.
    from tritonserver._framework._plugins import backends_dir

    options.backend_directory = backend_directory(core, backends_dir(package_backends_dir()),
                                                  user_dir, options.python_backend == "inprocess")
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
    prefix = config.setdefault("python", {}).setdefault(
        "shm-region-prefix-name", f"tritonserver_{os.getpid()}_{server_index}_")
    # It is on each stub's command line (a shell's, in the 2.51 python backend).
    _stub_names.check(str(prefix), _stub_names.SHM_REGION_NAME, prefix=True)
    options.backend_configuration = config
    python_stub.prepare(options, core)
