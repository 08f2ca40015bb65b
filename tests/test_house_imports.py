"""The house rules on how modules use each other (issue 38), checked on the source:

- no import circle between modules, lazy (function-level) imports counted: each module of a circle
  would need the other half-loaded;
- a name that starts with an underscore is used by its own file only: what a sibling imports has a
  public name (in a private module if it is internal to its package);
- every public function and class of `dse` says what it does in a docstring.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dse"


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, packages under their own name (`dse.sim` is dse/sim/__init__.py)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of `files` it imports anywhere in its source (lazy imports included;
    `from package import name` counts as an import of the submodule when `name` is one)."""
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    if full in files:
                        edges.add(full)
                    elif node.module in files:
                        edges.add(node.module)
        graph[name] = edges - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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


def test_the_circle_finder_finds_circles_and_only_them() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"} - {"e"}, "f": {"g"}, "g": {"f"}}
    assert sorted(circles(graph)) == [["a", "b", "c"], ["f", "g"]]


def test_no_import_circles() -> None:
    assert circles(import_graph(module_files())) == []


def test_no_private_name_is_imported_from_another_module() -> None:
    """`from dse.x import _name` is refused (a compiled extension module, `_engine`, is a module and
    keeps its name)."""
    files = module_files()
    wrong = []
    for path in files.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dse"):
                for a in node.names:
                    private = a.name.startswith("_") and not a.name.startswith("__")
                    if private and a.name != "_engine":
                        wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {a.name} from {node.module}")
    assert wrong == []


def test_every_public_function_and_class_has_a_docstring() -> None:
    """Module-level functions and classes, and the public methods of public classes."""
    missing = []
    for path in module_files().values():
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or node.name.startswith("_"):
                continue
            members = [node]
            if isinstance(node, ast.ClassDef):
                members += [m for m in node.body if isinstance(m, ast.FunctionDef) and not m.name.startswith("_")]
            missing += [
                f"{path.relative_to(ROOT)}:{m.lineno} {m.name}" for m in members if ast.get_docstring(m) is None
            ]
    assert missing == []
