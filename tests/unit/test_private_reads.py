"""No module of the package reads another module's private attributes.

A private attribute is a name with one leading underscore (not a dunder, not
an enum-style ``_name_``). A read ``x._name`` is another module's when the
reading file does not define ``_name`` as a member (a method, a class-body
name, an attribute it assigns, a ``__slots__`` entry) while some other file
of the package does (its .py files, and the binding's stub
``_c/triton_bindings.pyi`` for what the binding defines). ``self._name`` and
``cls._name`` are a class's own (or its bases') and are not counted; names
no file of the package defines (``os._exit``, ``torch._C``) are not ours.
What modules share on purpose goes through module functions
(``tritonserver._server.tracing_of``, ``tritonserver._registries.registries_of``)
or names without the underscore.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "tritonserver"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and not name.endswith("_")


def members(tree: ast.AST) -> set[str]:
    """The attribute names a file defines as members of its classes or objects."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    found.add(item.name)
                targets = (item.targets if isinstance(item, ast.Assign)
                           else [item.target] if isinstance(item, ast.AnnAssign) else [])
                for target in targets:
                    if isinstance(target, ast.Name):
                        found.add(target.id)
                        if target.id == "__slots__" and isinstance(item.value, (ast.Tuple,
                                                                                 ast.List)):
                            found.update(e.value for e in item.value.elts
                                         if isinstance(e, ast.Constant) and
                                         isinstance(e.value, str))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            found.add(node.attr)
    return found


def definitions(tree: ast.AST) -> set[str]:
    """Every name a file defines: its members and its module-level names."""
    found = members(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
    return found


def private_reads(package: Path = PACKAGE) -> list[str]:
    """``file:line: expression`` for each read of another module's private attribute."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), str(path))
             for path in sorted(package.rglob("*.py"))}
    defined_by = {path: definitions(tree) for path, tree in trees.items()}
    for stub in package.rglob("*.pyi"):
        defined_by[stub] = definitions(ast.parse(stub.read_text(encoding="utf-8")))
    found = []
    for path, tree in trees.items():
        own = members(tree)
        elsewhere = set().union(*(names for other, names in defined_by.items() if other != path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)):
                continue
            if not _private(node.attr) or node.attr in own or node.attr not in elsewhere:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            found.append(f"{path.relative_to(package)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_reads_another_modules_private_attributes():
    reads = private_reads()
    assert reads == [], "\n".join(reads)


def test_the_count_sees_a_read_of_another_modules_private_attribute(tmp_path):
    (tmp_path / "owner.py").write_text("class Owner:\n    def __init__(self):\n"
                                       "        self._secret = 1\n        self._own = 2\n"
                                       "    def peek(self, other):\n"
                                       "        return self._own + other._secret\n")
    (tmp_path / "reader.py").write_text("import os\n_secret = None\n"
                                        "def read(owner):\n"
                                        "    os._exit  # not the package's\n"
                                        "    return owner._secret\n")
    assert private_reads(tmp_path) == ["reader.py:5: owner._secret"]


def test_every_attribute_the_binding_fast_path_reads_exists():
    # The binding reads these by the names tritonserver._submit.FAST_PATH_READS
    # gives (csrc/bindings/response_stream.cc): a name that no longer exists
    # would send every call down the Python path without an error.
    import tritonserver
    from tritonserver._registries import registries_of
    from tritonserver._submit import FAST_PATH_READS
    from tritonserver._trace import Tracing

    server = tritonserver.Server()  # never started: no core
    model = tritonserver.Model(server, "identity_fp32")
    registries = registries_of(server)
    owners = {"model_registries": model, "model_name": model, "model_version": model,
              "handle": registries, "made_tracing": registries, "tracing_active": Tracing(),
              "allocators_as_shipped": tritonserver.default_memory_allocators}
    assert owners.keys() == FAST_PATH_READS.keys()
    missing = [f"{role}: {type(owners[role]).__name__}.{name}"
               for role, name in FAST_PATH_READS.items() if not hasattr(owners[role], name)]
    assert missing == []


def test_a_model_of_something_that_is_not_a_server_is_refused_with_a_triton_error():
    import pytest

    import tritonserver

    from tritonserver._errors import InvalidArgumentTypeError

    with pytest.raises(InvalidArgumentTypeError, match="tritonserver.Server"):
        tritonserver.Model(object(), "identity_fp32")
