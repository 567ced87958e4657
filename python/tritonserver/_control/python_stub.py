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

import json
import os
import re
from typing import Any

from tritonserver._control.config_text import config_file
from tritonserver._control.startup_models import models_loaded_at_start
from tritonserver._errors import UnsupportedError


def prepare(options: Any, core: Any) -> None:
    """Give the stubs their environment, or refuse the startup models that
    would run on them."""
    stub = _stub_environment(core)
    if stub.usable:
        stub.apply(os.environ)  # the stub is a child process: it inherits these
        return
    for name in models_loaded_at_start(options):
        if is_python_model(options, name):
            raise UnsupportedError(_python_refusal(name, stub.reason))


def check_model_loadable(core: Any, options: Any, name: str,
                         parameters: "dict[str, Any] | None" = None) -> None:
    """Refuse a python-backend model when its stub would corrupt tensors.

    ``parameters`` are those of the load call: a ``config`` there replaces
    the repository's, and ``file:`` entries are the model's files."""
    if core is None or not is_python_model(options, name, parameters):
        return
    stub = _stub_environment(core)
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


def is_python_model(options: Any, name: str, parameters: "dict[str, Any] | None" = None) -> bool:
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
        config = config_file(folder, getattr(options, "model_config_name", None))
        if os.path.isfile(config):
            with open(config, encoding="utf-8", errors="replace") as f:
                for field, value in _NAMED.findall(f.read()):
                    named.setdefault(field, value)
        if _runs_on_python_backend(named.get("backend"), named.get("platform"), has_model_py):
            return True
    return False
