"""The house rules that keep the code readable (issue 19), checked on the source itself:

- a module imports only its own layer or lower ones (docs/architecture.md lists the layers);
- no module over 500 lines;
- no function over 60 lines, and no function defined inside another in the bounds (their searches
  are classes with named state, not closures).

Cyclomatic complexity (at most 15) is ruff's C901, configured in pyproject.toml and run by
scripts/lint in CI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dse"
LAYERS = ("core", "costs", "schedulers", "sim", "bounds", "training", "explore", "output", "cli", "testing")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def layer_of(module: str) -> str | None:
    """The layer of a dotted module name inside dse (None: the package itself, or outside dse)."""
    parts = module.split(".")
    if parts[0] != "dse" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYERS else None


def imported(tree: ast.Module) -> list[tuple[int, str]]:
    """Every module an import statement names, anywhere in the file (lazy imports included)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names if node.module == "dse"]
    return out


def test_every_module_sits_in_a_layer() -> None:
    stray = [p.relative_to(PACKAGE).as_posix() for p in modules() if p.parent != PACKAGE]
    assert [m for m in stray if m.split("/")[0] not in LAYERS] == []
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]


def test_no_module_imports_a_layer_above_its_own() -> None:
    wrong = []
    for path in modules():
        rel = path.relative_to(PACKAGE)
        if len(rel.parts) < 2:
            continue
        own = LAYERS.index(rel.parts[0])
        for line, name in imported(ast.parse(path.read_text())):
            other = layer_of(name)
            if other is not None and LAYERS.index(other) > own:
                wrong.append(f"{rel}:{line} imports {name} ({other} is above {rel.parts[0]})")
    assert wrong == []


def test_no_relative_imports() -> None:
    """Absolute imports only: a module's layer is visible in every import line."""
    rel = [
        f"{p.relative_to(PACKAGE)}:{n.lineno}"
        for p in modules()
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.ImportFrom) and n.level
    ]
    assert rel == []


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_module_and_function_sizes(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


def test_no_closures_in_the_bounds() -> None:
    """The bound searches keep their state in classes, where a reader sees it named."""
    nested = []
    for path in sorted((PACKAGE / "bounds").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = [n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef) and n is not node]
                nested += [f"{path.name}:{node.name} defines {name}" for name in inner]
    assert nested == []
