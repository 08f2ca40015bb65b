"""docs/architecture.md checked against the code: every module, folder and dotted name it cites
exists, and every module and package of dse/ is on its map, so the page cannot go stale silently."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
SOURCES = (".py", ".c", ".h")


def page_text() -> str:
    return PAGE.read_text()


def source_files() -> list[Path]:
    """Every source file of dse/ but the packages' __init__.py (a package is cited by its folder)."""
    return sorted(
        p
        for p in (ROOT / "dse").rglob("*")
        if p.suffix in SOURCES and p.name != "__init__.py" or p.name == "__main__.py"
    )


def packages() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "dse").rglob("__init__.py"))


def cited_paths(text: str) -> set[str]:
    """Every `dse/...` file or folder path the text names (a folder with or without its slash; a
    pattern such as ``dse/testing/faults_*.py`` is not a path)."""
    found = re.findall(r"(?<![\w/])dse/[\w/.]*[\w/]\*?", text)
    return {m.rstrip("/.,;:") for m in found if not m.endswith("*")}


def test_every_path_the_page_names_exists() -> None:
    missing = sorted(p for p in cited_paths(page_text()) if not (ROOT / p).exists())
    assert missing == []


def test_every_module_and_package_is_on_the_map() -> None:
    cited = cited_paths(page_text())
    files = [p.relative_to(ROOT).as_posix() for p in source_files()]
    folders = [p.relative_to(ROOT).as_posix() for p in packages()]
    assert [f for f in files if f not in cited] == []
    assert [f for f in folders if f not in cited and f != "dse"] == []


def _names_of_package(package: Path) -> set[str]:
    """The names a package's __init__.py defines or imports (its public surface without importing it)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse((package / "__init__.py").read_text())):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if package == ROOT / "dse":  # the lazily imported public names
        table = re.search(r"_LAZY: dict\[str, str\] = \{(.*?)\n\}", (package / "__init__.py").read_text(), re.S)
        assert table is not None
        names |= set(re.findall(r'"(\w+)":', table.group(1)))
    return names


def dotted_name_exists(name: str) -> bool:
    """`dse.a.b.c`: its longest prefix that is a module or package exists, and the next part, if any,
    is a submodule or (for a package) a name its __init__.py defines; deeper parts are attributes."""
    parts = name.split(".")
    base = ROOT
    for k, part in enumerate(parts):
        folder, module = base / part, base / f"{part}.py"
        if (folder / "__init__.py").exists():
            base = folder
            continue
        if module.exists() or (base / f"{part}.c").exists():  # a module, or the C extension built from it
            return True
        if k == 0:
            return False
        return base.is_dir() and part in _names_of_package(base)
    return True


def test_every_dotted_name_the_page_cites_exists() -> None:
    cited = set(re.findall(r"`(dse(?:\.\w+)+)", page_text()))
    assert cited
    assert sorted(n for n in cited if not dotted_name_exists(n)) == []


def test_the_checks_catch_a_stale_page() -> None:
    assert not dotted_name_exists("dse.explore.study_trials")
    assert dotted_name_exists("dse.explore.study.trials")
    assert dotted_name_exists("dse.sim.compiled.CACHE")
    assert dotted_name_exists("dse.evaluate")
    assert cited_paths("see `dse/sim/_flow.c`, dse/costs/nccl/, dse/testing/faults_*.py and dse/core.") == {
        "dse/sim/_flow.c",
        "dse/costs/nccl",
        "dse/core",
    }
