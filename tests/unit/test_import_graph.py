"""No import cycle in the package (python/tritonserver) nor in benchmarks/
(its scripts and their helper package tsbench, imported with benchmarks/ on
sys.path): a cycle makes what a module sees depend on which one was imported
first.

The graph is read from the source (ast): every import counts, those inside
functions too, except those in ``if TYPE_CHECKING:`` blocks (never run).
``from a import b`` counts as importing ``a.b`` alone when ``a.b`` is a
module, else ``a``; ``import a.b.c`` counts as importing the longest of
``a.b.c``, ``a.b``, ``a`` that is a module of the tree. Imports of modules
outside the tree are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable, Optional


REPO = Path(__file__).resolve().parents[2]


def modules_under(root: Path, top: Iterable[str]) -> dict[str, Path]:
    """{dotted name: file} of the .py files of ``root``'s entries ``top``
    (packages, with or without __init__.py, and single modules)."""
    found: dict[str, Path] = {}
    for name in top:
        entry = root / name
        files = [entry] if entry.is_file() else sorted(entry.rglob("*.py"))
        for path in files:
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, outside ``if TYPE_CHECKING:``
    bodies (their ``else:`` runs)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _known(name: str, modules: dict[str, Path]) -> Optional[str]:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """{module: the modules of ``modules`` it imports}."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: list[str] = []
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.extend(alias.name for alias in node.names)
                continue
            if node.level:
                base = package.split(".") if package else []
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}" if source else alias.name
                targets.append(sub if sub in modules else source)
        for target in targets:
            known = _known(target, modules) if target else None
            if known is not None and known != name:
                graph[name].add(known)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan,
    without recursion), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def describe(found: list[list[str]], graph: dict[str, set[str]]) -> str:
    return "\n".join(
        "cycle: " + ", ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in found)


# ---- the trees of this repository ------------------------------------------------------


def test_package_has_no_import_cycle():
    modules = modules_under(REPO / "python", ["tritonserver"])
    assert "tritonserver.frontends.httpbase.wire" in modules and "tritonserver" in modules
    graph = import_graph(modules)
    assert "tritonserver.frontends.dataplane.state" in graph["tritonserver.frontends.httpbase.wire"]
    found = cycles(graph)
    assert not found, describe(found, graph)


PROTOCOL_FOLDERS = ("http", "grpc", "openai")


def test_no_protocol_folder_imports_a_sibling_protocols_folder():
    # Each protocol's folder translates its wire to the dataplane; what two
    # of them share lives below them (frontends/httpbase, frontends/dataplane).
    modules = modules_under(REPO / "python", ["tritonserver"])
    graph = import_graph(modules)
    prefix = "tritonserver.frontends."
    crossing = []
    for module, targets in sorted(graph.items()):
        folder = module[len(prefix):].split(".")[0] if module.startswith(prefix) else None
        if folder not in PROTOCOL_FOLDERS:
            continue
        for target in sorted(targets):
            other = target[len(prefix):].split(".")[0] if target.startswith(prefix) else None
            if other in PROTOCOL_FOLDERS and other != folder:
                crossing.append(f"{module} -> {target}")
    assert "tritonserver.frontends.openai.app" in graph and crossing == [], "\n".join(crossing)


def benchmark_modules() -> dict[str, Path]:
    """benchmarks/ as sys.path sees it: tsbench a package, each script a
    top-level module (the client venvs and build folders left out)."""
    root = REPO / "benchmarks"
    scripts = sorted(p.name for p in root.glob("*.py"))
    return modules_under(root, ["tsbench"] + scripts)


def test_benchmarks_have_no_import_cycle():
    modules = benchmark_modules()
    assert "run" in modules and "tsbench.procs" in modules
    graph = import_graph(modules)
    found = cycles(graph)
    assert not found, describe(found, graph)


# ---- the graph builder, on trees made here ---------------------------------------------


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_builder_counts_function_imports_and_skips_type_checking(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "from pkg import a\n",
        "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                    "    from pkg import b\nelse:\n    import pkg.c\n",
        "pkg/b.py": "def f():\n    from . import a\n",
        "pkg/c.py": "import os\nimport typing\nif typing.TYPE_CHECKING:\n    import pkg.a\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/d.py": "from .. import c\nfrom ..c import name\nfrom . import nothing\n",
    })
    graph = import_graph(modules_under(tmp_path, ["pkg"]))
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.c"}, "pkg.b": {"pkg.a"}, "pkg.c": set(),
                     "pkg.sub": set(), "pkg.sub.d": {"pkg.c", "pkg.sub"}}
    assert cycles(graph) == []
    # `from pkg import a` is pkg.a alone: pkg.a importing pkg is then a cycle.
    write(tmp_path, {"pkg/c.py": "from pkg import sub\nimport pkg\n"})
    graph = import_graph(modules_under(tmp_path, ["pkg"]))
    assert graph["pkg.c"] == {"pkg.sub", "pkg"}
    assert cycles(graph) == [["pkg", "pkg.a", "pkg.c"]]


def test_builder_sees_a_script_shadowing_a_package(tmp_path):
    write(tmp_path, {"onnx.py": "from helpers import models\n",
                     "helpers/models.py": "import onnx\nfrom onnx import helper\n",
                     "run.py": "import helpers.models\n"})
    graph = import_graph(modules_under(tmp_path, ["helpers", "onnx.py", "run.py"]))
    assert graph == {"onnx": {"helpers.models"}, "helpers.models": {"onnx"},
                     "run": {"helpers.models"}}
    assert cycles(graph) == [["helpers.models", "onnx"]]
