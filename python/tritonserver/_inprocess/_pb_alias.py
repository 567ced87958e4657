"""``import model`` and ``sys.argv`` from inside a python-backend model.

Each stub process imports its model file under the file's own name
(``model``), so a model may import itself: Triton's QA models run their
test cases with ``unittest.main("model")``. In this process several models
share the name, so their files are imported under names of their own
(tritonserver._inprocess._loader.import_file) and ``sys.modules["model"]``
is an alias: inside a model's hooks (the thread or asyncio task that runs
them, see _pb_types.running_for) its attributes are those of that model's
module; anywhere else they are those of a module of that name on sys.path,
if there is one, so a program's own ``model`` module still imports.

Likewise a stub's ``sys.argv`` is ``[""]`` (an embedded interpreter's),
which ``unittest.main("model")`` parses; in this process it is the
program's. Inside a model's hooks ``sys.argv`` reads as ``[""]``;
everywhere else it is the program's list, unchanged.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import Any, Optional

from tritonserver._inprocess._pb_types import current_model

_lock = threading.Lock()
_importing = threading.local()  # this thread imports a program's own module of the name


class _ModelAlias(types.ModuleType):
    """The module ``import <stem>`` gives: the running model's own file."""

    def __init__(self, name: str):
        super().__init__(name, "The python model file of the model whose hook is running.")
        self._outside: Optional[Any] = None  # the module of this name on sys.path

    def _target(self) -> Optional[Any]:
        context = current_model()
        if context is not None and context.module_name:
            module = sys.modules.get(context.module_name)
            if module is not None and context.module_name.rpartition(".")[2] == self.__name__:
                return module
        return self._elsewhere()

    def _elsewhere(self) -> Optional[Any]:
        """The module of this name on sys.path, imported the first time it
        is found there (outside any model's hooks); looked for again while
        there is none (the program may put one on sys.path later).

        No lock is held while it is looked for and imported: that runs
        arbitrary code, and a collection during it can run a finalizer that
        asks this module again (a lock held here deadlocked that thread on
        itself). Two threads may both import it; the first one kept wins.
        Asked again on the thread that imports it (by that import's own
        code, or a finalizer it triggers), it is not there yet."""
        if self._outside is not None:
            return self._outside
        if getattr(_importing, "active", False):
            return None
        spec = importlib.machinery.PathFinder.find_spec(self.__name__)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        _importing.active = True
        try:
            spec.loader.exec_module(module)
        finally:
            _importing.active = False
        with _lock:  # nothing but the swap under it
            if self._outside is None:
                self._outside = module
            return self._outside

    def __getattr__(self, name: str) -> Any:
        target = self._target()
        if target is None:
            raise AttributeError(
                f"module {self.__name__!r} stands for the python model file of the model "
                "whose hook runs on this thread, and none runs here")
        return getattr(target, name)

    def __dir__(self) -> list[str]:
        target = self._target()
        return dir(target) if target is not None else []


def install(stem: str) -> None:
    """Let the models' hooks ``import <stem>`` (their file's name): an alias
    in sys.modules unless a module of that name is imported already (then
    that one stays what the name imports)."""
    if not stem.isidentifier() or stem in sys.modules:
        return
    sys.modules.setdefault(stem, _ModelAlias(stem))  # one step under the GIL


class _Argv(list):  # type: ignore[type-arg]
    """sys.argv: the program's list, read as ``[""]`` inside a model's hooks."""

    def _view(self) -> list[str]:
        context = current_model()
        if context is not None and context.module_name:
            return [""]
        return list.__iter__(self)  # type: ignore[return-value]

    def __getitem__(self, index: Any) -> Any:
        return list(self._view())[index]

    def __iter__(self) -> Any:
        return iter(list(self._view()))

    def __len__(self) -> int:
        return len(list(self._view()))

    def __bool__(self) -> bool:
        return len(self) > 0

    def __repr__(self) -> str:
        return repr(list(self._view()))


def install_argv() -> None:
    """sys.argv as _Argv (same contents), once."""
    current = sys.argv
    if isinstance(current, _Argv):
        return
    wrapped = _Argv(current)  # made before the lock: nothing is allocated under it
    with _lock:
        if sys.argv is current:
            sys.argv = wrapped
