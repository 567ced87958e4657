"""``TritonPythonModel.auto_complete_config`` for a python-backend model.py
run in-process: what the python backend does in a stub started for that
call alone, done in this interpreter.

The model's file is imported for the call under a module name of its own
(the python backend imports it in a process that then exits; the load that
follows imports it again), and dropped from ``sys.modules`` afterwards. A
file that cannot define the hook (no ``TritonPythonModel`` in it, or one
with no base class and no ``auto_complete_config`` in the file) is not
imported at all, so a model folder of a ``PythonModel`` is imported once per
load, as it always was. The loader (``_loader``) decides what the folder
holds the same way: a PythonModel subclass wins over TritonPythonModel.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import threading
from typing import Any, Callable, NoReturn, Optional

from tritonserver._errors import InvalidArgumentError
from tritonserver._inprocess import _loader, pb_utils
from tritonserver._inprocess._pb_types import ModelContext, running_for

HOOK = "auto_complete_config"
CLASS = "TritonPythonModel"
# Models load on several threads at once, and ast.parse is not safe to run in
# two threads together on CPython 3.11 (seen in CI: two models loading): its
# AST conversion keeps a recursion count in state every thread shares and may
# switch threads midway, and then raises "SystemError: AST constructor
# recursion depth mismatch" (python/cpython#106905 and the reports linked to
# it). The package's own parses take turns; one that another thread's parse
# (a traceback being formatted, for one) still disturbs is left to the import.
_PARSE_LOCK = threading.Lock()


def _model_file(version: int, repository_path: str, config: dict[str, Any],
                backend_file: Optional[str]) -> Optional[str]:
    """The model.py the loader will import, when the configuration names no
    class by parameter (those are PythonModel classes, never pb_utils ones)."""
    parameters = config.get("parameters") or {}
    for key in (_loader.PARAMETER, _loader.CLASS_PARAMETER):
        if (parameters.get(key) or {}).get("string_value"):
            return None
    path = _loader.model_file(version, repository_path,
                              config.get("default_model_filename") or "", backend_file)
    return path if os.path.isfile(path) else None


def _may_define_hook(source: str) -> bool:
    """False when the file's text shows its TritonPythonModel (if any) has no
    auto_complete_config: no TritonPythonModel at all, or only a class of that
    name without bases while the file never names the hook. Anything else
    (a base class, an imported class, a syntax error for the loader to report
    later) is decided by importing."""
    if CLASS not in source:
        return False
    if HOOK in source:
        return True
    try:
        with _PARSE_LOCK:
            tree = ast.parse(source)
    except SyntaxError:
        return False  # the load reports it, with the loader's message
    except SystemError:
        return True  # CPython's parser state was disturbed (below): importing decides
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS]
    if not classes:
        return True  # imported or assigned: only the class itself can tell
    return any(c.bases or c.keywords or c.decorator_list for c in classes)


def _hook_class(module: Any) -> Optional[type]:
    """The module's TritonPythonModel when the loader would run it (no
    PythonModel subclass of the module's own) and it has the hook."""
    if _loader.model_classes(module):
        return None
    found = getattr(module, CLASS, None)
    if not isinstance(found, type) or not hasattr(found, HOOK):
        return None
    return found


def complete(name: str, version: int, config: dict[str, Any], repository_path: str,
             backend_file: Optional[str], fail: Callable[[str, str, BaseException], NoReturn]) -> Optional[dict[str, Any]]:
    """The configuration ``TritonPythonModel.auto_complete_config`` returns
    for `config`, or None when the model has no such hook (or is not a
    python-backend model). What the file's import or the hook raises goes
    to ``fail(name, step, error)``, which raises the load's error."""
    path = _model_file(version, repository_path, config, backend_file)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError):
        return None  # the load reports it
    if not _may_define_hook(source):
        return None
    folder = os.path.dirname(path)
    module = None
    try:
        model_dir = os.path.join(repository_path, str(version))
        context = ModelContext(name, model_dir, bls=False)
        with running_for(context):
            try:
                module = _loader.import_file(path, folder)
            except Exception as e:
                fail(name, "loading its Python class", e)
        cls = _hook_class(module)
        if cls is None:
            return None
        with running_for(dataclasses.replace(context, module_name=module.__name__)):
            try:
                returned = getattr(cls, HOOK)(pb_utils.ModelConfig(json.dumps(config)))
            except Exception as e:
                fail(name, HOOK, e)
        if not isinstance(returned, pb_utils.ModelConfig):
            raise InvalidArgumentError(f"auto_complete_config function in model '{name}' must "
                                       "return a valid pb.ModelConfig object.")
        return returned.as_dict()
    finally:
        if module is not None:
            _loader.drop_module(module)
