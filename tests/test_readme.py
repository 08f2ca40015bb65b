"""The README, run as a newcomer would: every `$ dse ...` line and every `dse ...` line of its code
blocks runs exactly as printed, and where the README prints an output, dse prints exactly that.

Commands run in order, in process, in a scratch copy of the repository's inputs (studies/,
search_spaces/, workloads/), so a study run before its report is there for the report, and nothing
under the repository changes. Python blocks are executed. Benchmark lines (`$ .venv/bin/python
scripts/...`) print measurements, not fixed outputs: their scripts must exist.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


@dataclass(frozen=True)
class Command:
    """One command of the README, where it is, and the output printed under it (None: none shown)."""

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


def _shell_block(start: int, body: list[str]) -> list[Command]:
    cmds: list[Command] = []
    for k, text in enumerate(body):
        if text.startswith("$ "):
            cmd = text[2:].split("  #", 1)[0].strip()
            cmds.append(Command(start + k, tuple(shlex.split(cmd)), ()))
        elif cmds:
            last = cmds[-1]
            cmds[-1] = Command(last.line, last.argv, (*(last.output or ()), text.rstrip()))
    return cmds


def readme_commands() -> list[Command]:
    """Every command the README shows, in order: ``$`` lines of fenced blocks (with the output under
    them), the first two set-up commands, and the ``dse`` lines of indented blocks (no output)."""
    lines = README.read_text().splitlines()
    cmds: list[Command] = []
    for start, lang, body in _fenced_blocks(lines):
        if lang in ("", "console", "shell", "sh") and any(t.startswith("$ ") for t in body):
            cmds += _shell_block(start, body)
    for n, text in enumerate(lines, start=1):
        if text.startswith("    dse "):
            cmds.append(Command(n, tuple(shlex.split(text.strip())), None))
    return sorted(cmds, key=lambda c: c.line)


def python_blocks() -> list[tuple[int, str]]:
    return [
        (start, "\n".join(body))
        for start, lang, body in _fenced_blocks(README.read_text().splitlines())
        if lang == "python"
    ]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("readme")
    for d in ("studies", "search_spaces", "workloads"):
        shutil.copytree(REPO / d, ws / d, ignore=shutil.ignore_patterns("out"))
    return ws


def test_the_readme_starts_with_its_two_setup_commands() -> None:
    first = _fenced_blocks(README.read_text().splitlines())[0][2]
    assert [ln.split("#")[0].strip() for ln in first] == ["scripts/demo", "scripts/test"]
    assert all((REPO / c).is_file() and os.access(REPO / c, os.X_OK) for c in ("scripts/demo", "scripts/test"))


@pytest.mark.parametrize("cmd", readme_commands(), ids=lambda c: f"README:{c.line}")
def test_readme_command(
    cmd: Command, workspace: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    if cmd.argv[:1] == (".",) or cmd.argv[:1] == ("source",):
        assert (REPO / cmd.argv[1]).name == "activate"  # the venv's, created by scripts/setup
        return
    if cmd.argv[0].endswith("python") and len(cmd.argv) > 1 and cmd.argv[1].startswith("scripts/"):
        assert (REPO / cmd.argv[1]).is_file()  # a benchmark: measured, not a fixed output
        return
    assert cmd.argv[0] == "dse", f"README line {cmd.line}: a command that is not dse: {cmd.argv}"
    from dse.cli.main import main

    monkeypatch.chdir(workspace)
    argv, redirect = list(cmd.argv[1:]), None
    if ">" in argv:  # `dse ... > FILE`: stdout into a file, as a shell would
        argv, redirect = argv[: argv.index(">")], argv[argv.index(">") + 1]
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, f"README line {cmd.line}: {' '.join(cmd.argv)} exited {code}"
    if redirect:
        (workspace / redirect).write_text(out)
        out = ""
    if cmd.output:
        assert _steady(out.rstrip("\n").splitlines()) == _steady(cmd.output), f"README line {cmd.line}"


def _steady(lines: list[str] | tuple[str, ...]) -> list[str]:
    """Lines without trailing blanks, wall-clock solve times (``solver ... 0.124 s``) masked: the only
    part of a printed output that may differ between runs."""
    return [
        re.sub(r"\b\d+(\.\d+)? s\b", "<wall> s", ln.rstrip()) if ln.startswith("solver") else ln.rstrip()
        for ln in lines
    ]


@pytest.mark.parametrize(("line", "code"), python_blocks(), ids=lambda v: f"README:{v}" if isinstance(v, int) else "")
def test_readme_python_block(line: int, code: str, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workspace)
    exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "readme"})
