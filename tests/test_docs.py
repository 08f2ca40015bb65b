"""The README and every guide in docs/, run as a newcomer would: every `$ dse ...` line and every
`dse ...` line of their code blocks runs exactly as printed, and where a page prints an output, dse
prints exactly that (wall-clock times masked); so do the scripts it runs (`$ .venv/bin/python
scripts/...`), but for benchmarks (`scripts/bench_*.py`), which print measurements, not fixed
outputs: those must exist.

Each page's commands run in order, in process (a script in a process of its own), in that page's
own scratch copy of the repository's inputs (studies/, search_spaces/, workloads/, and dse/ linked
in for its bundled data), so a study run before its report is there for the report, and nothing
under the repository changes. Python blocks are executed.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: The pages whose commands run: the README, then every guide.
PAGES = (README, *sorted((REPO / "docs").glob("*.md")))


@dataclass(frozen=True)
class Command:
    """One command of a page, where it is, and the output printed under it (None: none shown)."""

    page: str
    line: int
    argv: tuple[str, ...]
    output: tuple[str, ...] | None


def _fenced_blocks(lines: list[str]) -> list[tuple[int, str, list[str]]]:
    """(first line number, language, lines) of every ``` block."""
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append((i + 2, m.group(1), lines[i + 1 : j]))
            i = j
        i += 1
    return out


def _page_name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def _shell_block(page: str, start: int, body: list[str]) -> list[Command]:
    """The ``$`` lines of one fenced block, each with the lines under it up to the next ``$`` line."""
    cmds: list[Command] = []
    for k, text in enumerate(body):
        if text.startswith("$ "):
            cmd = text[2:].split("  #", 1)[0].strip()
            cmds.append(Command(page, start + k, tuple(shlex.split(cmd)), ()))
        elif cmds:
            last = cmds[-1]
            cmds[-1] = Command(page, last.line, last.argv, (*(last.output or ()), text.rstrip()))
    return cmds


def page_commands(page: Path) -> list[Command]:
    """Every command `page` shows, in order: ``$`` lines of fenced blocks (with the output under
    them) and the ``dse`` lines of indented blocks (no output)."""
    name, lines = _page_name(page), page.read_text().splitlines()
    cmds: list[Command] = []
    for start, lang, body in _fenced_blocks(lines):
        if lang in ("", "console", "shell", "sh") and any(t.startswith("$ ") for t in body):
            cmds += _shell_block(name, start, body)
    for n, text in enumerate(lines, start=1):
        if text.startswith("    dse "):
            cmds.append(Command(name, n, tuple(shlex.split(text.strip())), None))
    return sorted(cmds, key=lambda c: c.line)


def all_commands() -> list[Command]:
    """Every page's commands, page by page."""
    return [cmd for page in PAGES for cmd in page_commands(page)]


def python_blocks() -> list[tuple[str, int, str]]:
    """(page, first line, code) of every ``python`` block of every page."""
    return [
        (_page_name(page), start, "\n".join(body))
        for page in PAGES
        for start, lang, body in _fenced_blocks(page.read_text().splitlines())
        if lang == "python"
    ]


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A page's scratch folder, made on its first command: copies of the inputs, dse/ linked in."""
    made: dict[str, Path] = {}

    def workspace(page: str) -> Path:
        if page not in made:
            ws = tmp_path_factory.mktemp(page.replace("/", "_").replace(".", "_"))
            for d in ("studies", "search_spaces", "workloads"):
                shutil.copytree(REPO / d, ws / d, ignore=shutil.ignore_patterns("out"))
            os.symlink(REPO / "dse", ws / "dse")
            made[page] = ws
            FIRST_FILES[page] = _files(ws)
        return made[page]

    return workspace


#: Each page's workspace files before its first command (`workspaces`), for the last test below.
FIRST_FILES: dict[str, set[str]] = {}


def _files(folder: Path) -> set[str]:
    """Every file under `folder` (relative paths), not following the dse/ link."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.parts[-1] != "dse"}


def test_the_readme_is_a_short_front_door() -> None:
    """At most 250 lines, and every guide it links to exists (each feature one click away)."""
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\((docs/[\w.-]+\.md)\)", text)
    assert len(set(links)) >= 10 and all((REPO / link).is_file() for link in links)
    guides = {p.relative_to(REPO).as_posix() for p in PAGES[1:]}
    assert guides <= set(links)  # every guide is linked from the front door


def test_the_readme_starts_with_its_two_setup_commands() -> None:
    first = _fenced_blocks(README.read_text().splitlines())[0][2]
    assert [ln.split("#")[0].strip() for ln in first] == ["scripts/demo", "scripts/test"]
    assert all((REPO / c).is_file() and os.access(REPO / c, os.X_OK) for c in ("scripts/demo", "scripts/test"))


@pytest.mark.parametrize("cmd", all_commands(), ids=lambda c: f"{c.page}:{c.line}")
def test_page_command(
    cmd: Command, workspaces: Callable[[str], Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = workspaces(cmd.page)
    if cmd.argv[:1] == (".",) or cmd.argv[:1] == ("source",):
        assert (REPO / cmd.argv[1]).name == "activate"  # the venv's, created by scripts/setup
        return
    if cmd.argv[:2] == ("mkdir", "-p"):  # the git-ignored folder the examples write into
        for folder in cmd.argv[2:]:
            (workspace / folder).mkdir(parents=True, exist_ok=True)
        return
    if cmd.argv[0].endswith("python") and len(cmd.argv) > 1 and cmd.argv[1].startswith("scripts/"):
        _run_script(cmd, workspace)
        return
    assert cmd.argv[0] == "dse", f"{cmd.page}:{cmd.line}: a command that is not dse: {cmd.argv}"
    from dse.cli.main import main

    monkeypatch.chdir(workspace)
    argv, redirect = list(cmd.argv[1:]), None
    if ">" in argv:  # `dse ... > FILE`: stdout into a file, as a shell would
        argv, redirect = argv[: argv.index(">")], argv[argv.index(">") + 1]
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, f"{cmd.page}:{cmd.line}: {' '.join(cmd.argv)} exited {code}"
    if redirect:
        (workspace / redirect).write_text(out)
        out = ""
    _check_output(cmd, out)


def _check_output(cmd: Command, out: str) -> None:
    """Where the page shows an output under `cmd`, `out` is exactly that (`_steady`)."""
    if cmd.output:
        assert _steady(out.rstrip("\n").splitlines()) == _steady(cmd.output), f"{cmd.page}:{cmd.line}"


def _run_script(cmd: Command, workspace: Path) -> None:
    """A `$ .venv/bin/python scripts/...` line: the script exists; a benchmark (`bench_*`) prints
    measurements, not a fixed output, so it does not run here; any other script runs with this
    interpreter, in a process of its own, and prints exactly the output the page shows."""
    script = REPO / cmd.argv[1]
    assert script.is_file(), f"{cmd.page}:{cmd.line}: no {cmd.argv[1]}"
    if script.name.startswith("bench_"):
        return
    run = subprocess.run(
        [sys.executable, str(script), *cmd.argv[2:]], cwd=workspace, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, f"{cmd.page}:{cmd.line}: {' '.join(cmd.argv)} exited {run.returncode}: {run.stderr}"
    _check_output(cmd, run.stdout)


#: Options whose value is a file or folder a command writes.
OUTPUT_OPTIONS = ("-o", "--out", "--plot", "--csv", "--trace", ">")
#: Where the examples may write: git-ignored folders.
OUTPUT_FOLDERS = ("out/", "studies/out/")


@pytest.mark.parametrize("page", PAGES, ids=_page_name)
def test_examples_write_only_under_git_ignored_folders(page: Path) -> None:
    """Every output a page's commands name is under `out/` (or `studies/out/`), which .gitignore lists:
    running the examples from the repository leaves nothing untracked."""
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert all(folder in ignored for folder in OUTPUT_FOLDERS)
    stray = []
    for cmd in page_commands(page):
        for k, arg in enumerate(cmd.argv[:-1]):
            target = cmd.argv[k + 1]
            if arg in OUTPUT_OPTIONS and not target.startswith(OUTPUT_FOLDERS):
                stray.append(f"{cmd.page}:{cmd.line}: {arg} {target}")
    assert stray == []


def _steady(lines: list[str] | tuple[str, ...]) -> list[str]:
    """Lines without trailing blanks, wall-clock solve times (``solver ... 0.124 s``) masked: the only
    part of a printed output that may differ between runs."""
    return [
        re.sub(r"\b\d+(\.\d+)? s\b", "<wall> s", ln.rstrip()) if ln.startswith("solver") else ln.rstrip()
        for ln in lines
    ]


@pytest.mark.parametrize(
    ("page", "line", "code"), python_blocks(), ids=lambda v: str(v) if not isinstance(v, str) or "\n" not in v else ""
)
def test_page_python_block(
    page: str, line: int, code: str, workspaces: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspaces(page))
    exec(compile(code, f"{page}:{line}", "exec"), {"__name__": "docs"})


@pytest.mark.parametrize("page", PAGES, ids=_page_name)
def test_a_page_left_nothing_outside_the_ignored_folders(page: Path, workspaces: Callable[[str], Path]) -> None:
    """After every command and Python block of a page ran (the tests above), the only new files in its
    workspace are under `out/` or `studies/out/`: run from the repository, the examples leave nothing
    untracked."""
    name = _page_name(page)
    if name not in FIRST_FILES:
        pytest.skip(f"{name} runs nothing")
    new = _files(workspaces(name)) - FIRST_FILES[name]
    assert sorted(f for f in new if not f.startswith(OUTPUT_FOLDERS)) == []


@pytest.mark.parametrize("page", PAGES, ids=_page_name)
def test_every_module_a_page_names_exists(page: Path) -> None:
    """The `dse/...` paths and `dse.x.y` names a page cites exist (tests/test_architecture.py's checks),
    so a guide cannot point a reader at a module that moved."""
    from tests.test_architecture import cited_paths, dotted_name_exists

    text = page.read_text()
    assert sorted(p for p in cited_paths(text) if not (REPO / p).exists()) == []
    assert sorted(n for n in set(re.findall(r"`(dse(?:\.\w+)+)", text)) if not dotted_name_exists(n)) == []
