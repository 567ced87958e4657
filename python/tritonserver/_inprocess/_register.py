"""Server.register_model: serve a PythonModel under a name.

The model gets a generated folder (config.pbtxt and an empty version
folder ``1/``) in a temporary repository of the server's own, removed at
exit; its configuration names the class through the registry of
tritonserver._inprocess._loader. Then:

* before ``start()`` (any model control mode): the repository is added to
  the server's options (and, in EXPLICIT mode, the model to its startup
  models), so the model loads with the others;
* on a running server in EXPLICIT mode: the repository is registered with
  the core once, and the model is loaded (or reloaded) at once;
* on a running server in NONE or POLL mode the core loads no new model:
  UnsupportedError says to register before start or use EXPLICIT mode.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import threading
import weakref
from typing import TYPE_CHECKING, Any

from tritonserver._enums import ModelControlMode
from tritonserver._errors import InvalidArgumentError, UnsupportedError
from tritonserver._inprocess import _loader
from tritonserver._inprocess._config import model_config, to_pbtxt
from tritonserver._inprocess._model import PythonModel
from tritonserver._options import repositories_of
from tritonserver._registries import registries_of

if TYPE_CHECKING:
    from tritonserver._model import Model
    from tritonserver._server import Server

_lock = threading.Lock()
_repositories: "weakref.WeakKeyDictionary[Any, _Repository]" = weakref.WeakKeyDictionary()


class _Repository:
    """A server's repository of registered models (a temporary folder)."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix="tritonserver-pymodels-")
        self.registered_with_core = False
        # Removed with the server's last reference, or at exit.
        weakref.finalize(self, shutil.rmtree, self.path, True)

    def write(self, name: str, config: dict[str, Any]) -> None:
        folder = os.path.join(self.path, name)
        os.makedirs(os.path.join(folder, "1"), exist_ok=True)
        text = to_pbtxt(config)
        tmp = os.path.join(folder, ".config.pbtxt.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, os.path.join(folder, "config.pbtxt"))


def _repository_of(server: Any) -> _Repository:
    with _lock:
        repo = _repositories.get(server)
        if repo is None:
            repo = _repositories[server] = _Repository()
        return repo


def register_model(server: Server, name: str, model: Any, **settings: Any) -> Model:
    """See Server.register_model."""
    from tritonserver._model import Model

    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise InvalidArgumentError(f"model name {name!r}: give a non-empty name without '/'")
    if not (isinstance(model, PythonModel) or
            (isinstance(model, type) and issubclass(model, PythonModel))):
        raise InvalidArgumentError(
            f"register_model needs a tritonserver.PythonModel subclass (or instance), "
            f"not {model!r}")
    if isinstance(model, type) and model.execute is PythonModel.execute:
        raise InvalidArgumentError(f"{model.__name__} does not define execute(requests)")
    try:
        config = model_config(name, _loader.register(name, model), **settings)
    except TypeError as e:
        raise InvalidArgumentError(f"register_model: {e}") from None
    options = server.options
    mode = ModelControlMode(options.model_control_mode)
    started = registries_of(server).handle is not None
    if started and mode != ModelControlMode.EXPLICIT:
        raise UnsupportedError(
            f"register_model('{name}'): the server runs in {mode.name} model control mode, "
            "where the core loads no new model; register models before start(), or start "
            "the server with model_control_mode=ModelControlMode.EXPLICIT")
    repo = _repository_of(server)
    repo.write(name, config)
    if not started:
        repos = repositories_of(options)
        changes: dict[str, Any] = {}
        if repo.path not in repos:
            changes["model_repository"] = repos + [repo.path]
        if mode == ModelControlMode.EXPLICIT and name not in options.startup_models:
            changes["startup_models"] = list(options.startup_models) + [name]
        if changes:
            server.options = dataclasses.replace(options, **changes)
        return Model(server, name)
    if not repo.registered_with_core:
        server.register_model_repository(repo.path)
        repo.registered_with_core = True
    return server.load(name)
