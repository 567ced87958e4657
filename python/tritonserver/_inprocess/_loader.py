"""Finding a model's Python class: a registered class, an import path, or
the ``model.py`` in the model's version folder.

The model configuration's ``python_model`` parameter says which:

* ``@<key>``: a class (or object) given to ``Server.register_model``;
* ``package.module:Name``: imported;
* absent: ``<model folder>/<version>/model.py`` (or the configuration's
  ``default_model_filename``), holding one PythonModel subclass, or a
  python-backend ``TritonPythonModel`` (then run through pb_utils).
  ``python_class`` names the class when the file defines several.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import os
import sys
import threading
import types
from typing import Any, Optional

from tritonserver._errors import InvalidArgumentError, NotFoundError, UnsupportedError
from tritonserver._inprocess._model import PythonModel

PARAMETER = "python_model"
CLASS_PARAMETER = "python_class"
# The python backend's packed environments (conda-pack archives or folders).
ENV_PARAMETER = "EXECUTION_ENV_PATH"

_lock = threading.Lock()
_import_lock = threading.RLock()
_registry: dict[str, Any] = {}
_keys = itertools.count(1)
_modules = itertools.count(1)


def register(name: str, model: Any) -> str:
    """Keep a class or object for a model; returns the parameter's value."""
    with _lock:
        key = f"{name}#{next(_keys)}"
        _registry[key] = model
    return "@" + key


def make(name: str, version: int, repository_path: str, parameters: dict[str, str],
         default_filename: str, backend_file: Optional[str] = None,
         python_backend: bool = False) -> PythonModel:
    """The model object for one load; ``backend_file``: the model.py of the
    python-based backend that serves it, instead of the model's own;
    ``python_backend``: the model is the python backend's (its errors then
    keep that backend's texts)."""
    target = parameters.get(PARAMETER, "")
    if target.startswith("@"):
        with _lock:
            found = _registry.get(target[1:])
        if found is None:
            raise NotFoundError(f"model '{name}': no registered Python model {target[1:]!r} "
                                "in this process")
    elif target:
        found = _import(name, target)
    else:
        found = _from_file(name, version, repository_path, parameters, default_filename,
                           backend_file, python_backend)
    return _instantiate(name, found)


def _import(name: str, target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise InvalidArgumentError(
            f"model '{name}': parameter {PARAMETER} must be 'package.module:Class', "
            f"not {target!r}")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise NotFoundError(f"model '{name}': module {module_name} has no {attr!r}") from None


def model_file(version: int, repository_path: str, default_filename: str,
               backend_file: Optional[str]) -> str:
    """The file that holds the model's class."""
    if backend_file:
        return backend_file
    return os.path.join(repository_path, str(version), default_filename or "model.py")


def _from_file(name: str, version: int, repository_path: str, parameters: dict[str, str],
               default_filename: str, backend_file: Optional[str],
               python_backend: bool) -> Any:
    path = model_file(version, repository_path, default_filename, backend_file)
    folder = os.path.dirname(path)
    if not os.path.isfile(path) and python_backend:
        # The python backend's text, which Triton's tests and users' log
        # searches read (no stub runs here: the file is imported in-process).
        raise NotFoundError(f"Failed to preinitialize Python stub: Python model file not "
                            f"found in '{path}'")
    if not os.path.isfile(path):
        raise NotFoundError(
            f"model '{name}': {path} does not exist; put the model's class there, or name it "
            f"with the configuration parameter {PARAMETER} ('package.module:Class')")
    module = import_file(path, folder)
    wanted = parameters.get(CLASS_PARAMETER)
    if wanted:
        try:
            return getattr(module, wanted)
        except AttributeError:
            raise NotFoundError(f"model '{name}': {path} defines no {wanted!r}") from None
    own = model_classes(module)
    if len(own) == 1:
        return own[0]
    if len(own) > 1:
        names = ", ".join(sorted(c.__name__ for c in own))
        raise InvalidArgumentError(f"model '{name}': {path} defines several models ({names}); "
                                   f"name one with the parameter {CLASS_PARAMETER}")
    legacy = getattr(module, "TritonPythonModel", None)
    if isinstance(legacy, type) and parameters.get(ENV_PARAMETER):
        raise UnsupportedError(
            f"model '{name}': its parameter {ENV_PARAMETER} names a packed Python "
            f"environment ({parameters[ENV_PARAMETER]}), which only a stub process can run; "
            "in this process the model runs on the server's interpreter and its packages: "
            f"install what the model needs there and remove {ENV_PARAMETER}, or run it on "
            "Triton's stub (runtime: \"libtriton_python_stub.so\" in its config.pbtxt, or "
            "the server option python_backend=\"stub\")")
    if isinstance(legacy, type):
        from tritonserver._inprocess._pb_model import PbUtilsModel

        return PbUtilsModel(legacy)
    raise NotFoundError(f"model '{name}': {path} defines no PythonModel subclass and no "
                        "TritonPythonModel")


def model_classes(module: Any) -> list[type]:
    """The PythonModel subclasses `module` defines itself (not imported)."""
    return [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, PythonModel)
            and v is not PythonModel and v.__module__ == module.__name__]


def import_file(path: str, folder: str) -> Any:
    """`path` imported as a module of a name of its own, inside a package
    of a name of its own whose folder is `folder` (in sys.modules: the
    caller may drop both with drop_module), as the python backend imports
    ``<version>.model``: the file may import the modules beside it
    relatively (``from . import helper``) or, with `folder` on sys.path
    while it runs, absolutely."""
    from tritonserver._inprocess import _pb_alias, pb_utils

    # A python-backend model.py imports this name; ours answers it.
    sys.modules["triton_python_backend_utils"] = pb_utils
    stem = os.path.splitext(os.path.basename(path))[0]
    _pb_alias.install(stem)  # the model's hooks may `import model`
    _pb_alias.install_argv()  # and read a stub's sys.argv
    package_name = f"_tritonserver_inprocess_model_{next(_modules)}"
    package = types.ModuleType(package_name)
    package.__path__ = [folder]
    package.__package__ = package_name
    module_name = f"{package_name}.{stem}" if stem.isidentifier() else f"{package_name}._model"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise InvalidArgumentError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[package_name] = package
    sys.modules[module_name] = module
    # One file at a time: sys.path and sys.modules are the process's, and
    # two models loading at once (each with its own `helper`) would
    # otherwise find each other's helpers.
    with _import_lock:
        before = set(sys.modules)
        sys.path.insert(0, folder)  # its own helper modules, while it loads
        try:
            spec.loader.exec_module(module)
        except BaseException:
            drop_module(module)
            raise
        finally:
            try:
                sys.path.remove(folder)
            except ValueError:
                pass
            _forget_helpers(folder, set(sys.modules) - before)
    return module


def _forget_helpers(folder: str, names: set[str]) -> None:
    """The modules of `folder` that a model file imported absolutely
    (``import helper``) leave sys.modules once it is loaded: the model keeps
    them, and another model's ``helper`` (each stub has its own
    interpreter) is then its own, not this one."""
    inside = os.path.join(os.path.abspath(folder), "")
    for name in names:
        path = getattr(sys.modules.get(name), "__file__", None) or ""
        if os.path.abspath(path).startswith(inside):
            sys.modules.pop(name, None)


def drop_module(module: Any) -> None:
    """Forget a module import_file made, its package and what the package
    imported."""
    package = module.__name__.rpartition(".")[0]
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        sys.modules.pop(name, None)


def _instantiate(name: str, found: Any) -> PythonModel:
    if isinstance(found, PythonModel):
        return found
    if isinstance(found, type) and issubclass(found, PythonModel):
        if found.execute is PythonModel.execute:
            raise InvalidArgumentError(f"model '{name}': {found.__name__} does not define "
                                       "execute(requests)")
        return found()
    raise InvalidArgumentError(f"model '{name}': {found!r} is not a tritonserver.PythonModel "
                               "subclass or instance")
