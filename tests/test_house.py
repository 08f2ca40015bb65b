"""The house rules that keep the code readable (issue 19), checked on the source itself:

- a module imports only its own layer or lower ones (docs/architecture.md lists the layers);
- no module over 500 lines;
- no function over 60 lines, and no function defined inside another in the bounds (their searches
  are classes with named state, not closures);
- the same sizes for the C sources (dse/sim/*.c, *.h, scripts/*.c): no file over 500 lines, no
  function over 60 (a function: a top-level brace block whose header has a parenthesis and no `=`,
  found with strings, character literals, comments and preprocessor lines skipped).

Cyclomatic complexity (at most 15) is ruff's C901, configured in pyproject.toml and run by
scripts/lint in CI.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dse"
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


# ----- C --------------------------------------------------------------------------------------------
def c_sources() -> list[Path]:
    return sorted([*(PACKAGE / "sim").glob("*.[ch]"), *(ROOT / "scripts").glob("*.c")])


def c_code(text: str) -> str:
    """`text` with every comment, string, character literal and preprocessor line (with its
    continuations) blanked, newlines kept: what is left are the braces of the code."""
    out: list[str] = []
    i, n, line_start = 0, len(text), True
    while i < n:
        ch = text[i]
        if line_start and ch == "#":  # a directive, up to a line not ending in a backslash
            j = i
            while True:
                j = text.find("\n", j)
                j = n if j < 0 else j
                if not text[i:j].rstrip().endswith("\\") or j == n:
                    break
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if text.startswith("/*", i) or text.startswith("//", i):
            j = text.find("*/", i + 2) + 2 if text[i + 1] == "*" else text.find("\n", i)
            j = n if j < 2 or j > n else j
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            out.append(ch + " " * (j - i - 1) + ch)
            i = j + 1
        else:
            out.append(ch)
            i += 1
        if ch == "\n":
            line_start = True
        elif not ch.isspace():
            line_start = False
    return "".join(out)


def c_functions(text: str) -> list[tuple[str, int]]:
    """(name, lines) of each function: a top-level brace block whose header (the text since the last
    top-level `;` or `}`) has a parenthesis, no `=`, and does not start a struct, union, enum or typedef."""
    code = c_code(text)
    found, depth, head, open_at = [], 0, 0, 0
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                open_at = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                header = code[head:open_at].strip()
                words = header.split()
                if "(" in header and "=" not in header and words[0] not in ("struct", "union", "enum", "typedef"):
                    first = code.count("\n", 0, code.index(header, head))
                    name = header[: header.index("(")].split()[-1].lstrip("*")
                    found.append((name, code.count("\n", 0, i) - first + 1))
                head = i + 1
        elif ch == ";" and depth == 0:
            head = i + 1
    return found


def test_the_c_scan_finds_functions_and_only_them() -> None:
    sample = (
        "#define TAKE(q) \\\n    do { (q)++; } while (0)\n"
        "typedef struct { int a; } S;\n"
        "static const S x = {1};\n"
        "enum { A = 1 };\n"
        "/* f() { */\n"
        "static int *f(int a,\n           int b) {\n"
        '    const char *s = "}{";\n'
        "    char c = '{';  // }\n"
        "    if (a) { return 0; }\n"
        "    return 0;\n"
        "}\n"
        "int g(void) { return 1; }\n"
    )
    assert c_functions(sample) == [("f", 7), ("g", 1)]


@pytest.mark.parametrize("path", c_sources(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_c_file_and_function_sizes(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES
    long = [f"{name} ({n} lines)" for name, n in c_functions(text) if n > MAX_FUNCTION_LINES]
    assert long == []
