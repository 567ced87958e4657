"""Python-backend models and the 2.51 stub's numpy.

The python backend's stub of core 2.51 (nvidia-pytriton 0.7.0) imports
numpy 2.x but hands the model zeros instead of its inputs: silent
corruption. The package gives the stub an environment of its own with
numpy<2 (tritonserver._core.stub_env); where it cannot, python-backend
models are refused before the core sees them, with a message that says how
to run the same model.py in this process. For: core 2.51 and every stub
built against numpy 1.x. A core whose stub reads numpy 2 correctly needs
none of this.
"""

from __future__ import annotations

import os
from typing import Any

from tritonserver._control import model_folder
from tritonserver._core.runtime_dirs import INPROCESS_RUNTIME, STUB_RUNTIME
from tritonserver._control.model_folder import ModelFiles
from tritonserver._control.startup_models import models_loaded_at_start
from tritonserver._errors import UnsupportedError


def prepare(options: Any, core: Any) -> None:
    """Give the stubs their environment, or refuse the startup models that
    would run on them."""
    stub = _stub_environment(core)
    if stub.usable:
        stub.apply(os.environ)  # the stub is a child process: it inherits these
        return
    repositories = model_folder.repositories(options)
    for name in models_loaded_at_start(options):
        if runs_on_stub(repositories.read(name), options.python_backend):
            raise UnsupportedError(_python_refusal(name, stub.reason))


def check_model_loadable(core: Any, model: ModelFiles, python_backend: str) -> None:
    """Refuse a python-backend model when its stub would corrupt tensors
    (`model`: as the load finds it, its parameters' ``config`` and
    ``file:`` entries included; `python_backend`: Options.python_backend)."""
    if core is None or not runs_on_stub(model, python_backend):
        return
    stub = _stub_environment(core)
    if not stub.usable:
        raise UnsupportedError(_python_refusal(model.name, stub.reason))


def runs_on_stub(model: ModelFiles, python_backend: str) -> bool:
    """Whether the core runs `model` (any of its folders) on the python
    backend's stub: its backend is python and its ``runtime`` names the
    stub's library, or none while the server's default is the stub
    (Options.python_backend)."""
    if "python" not in model.backends:
        return False
    runtime = (model.config or {}).get("runtime") or ""
    if runtime == STUB_RUNTIME:
        return True
    return runtime != INPROCESS_RUNTIME and python_backend != "inprocess"


def _stub_environment(core: Any) -> Any:
    from tritonserver._core import stub_environment

    return stub_environment(core)


def _python_refusal(name: str, reason: str) -> str:
    return (f"model '{name}' uses the python backend, which cannot run correctly here: "
            f"{reason.rstrip('.')}. The same model.py runs in this process instead: start the "
            "server with Options(python_backend=\"inprocess\") (serve: --python-backend "
            "inprocess), or give the model runtime: \"libtriton_python_inprocess.so\" in its "
            "config.pbtxt (docs/inprocess.md)")
