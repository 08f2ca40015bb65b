"""dse's outputs under faults (issue 33): special files where an output goes, short writes, full
disks (dse.testing.faults_files), and one regression test per item of the issue's output side.

The campaign's cases run here on a few seeds; a small tmpfs is never required (the short-write
cases here use RLIMIT_FSIZE only). Every command runs in a subprocess with a timeout, so a FIFO
opened by mistake fails a test instead of hanging it."""

from __future__ import annotations

import os
import random
import stat
from pathlib import Path

import pytest

from dse.core.errors import InputError, RunError
from dse.core.files import atomic_output, output_folder, write_atomic
from dse.testing import faults_files as ff


def one_error_line(code: int, err: str, want_code: int, word: str) -> None:
    lines = [ln for ln in err.splitlines() if not ln.startswith("dse: warning: ")]
    assert code == want_code and len(lines) == 1 and lines[0].startswith("dse: error: "), (code, err)
    assert word in err and "Traceback" not in err, err


@pytest.fixture
def box(tmp_path: Path) -> Path:
    ff.inputs(tmp_path)
    return tmp_path


def sweep_ref() -> bytes:
    return ff.reference("sweep")["o.csv"]


# ----------------------------------------------------------------------------- the campaign's cases
@pytest.mark.parametrize("seed", range(8))
def test_special_files_where_an_output_goes(seed: int, tmp_path: Path) -> None:
    assert ff.special_case(random.Random(seed), tmp_path) == []


@pytest.mark.parametrize("seed", range(6))
def test_short_writes_keep_every_file_and_resume(seed: int, tmp_path: Path) -> None:
    assert ff.short_write_case(random.Random(seed), tmp_path, tmpfs=False) == []


# ----------------------------------------------------------------------------- 1. every byte checked
def test_a_repair_under_a_file_size_limit_leaves_the_csv_whole(box: Path) -> None:
    """`ulimit -f`: the repair's new file cannot be written whole, so the damaged one stays as it
    was (it lost 39 of 64 rows before), no temporary file is left, "repaired" is not said."""
    lines = sweep_ref().splitlines(keepends=True)
    damaged = b"".join(lines[:6] + [lines[3]] + lines[6:])
    (box / "o.csv").write_bytes(damaged)
    code, _, err = ff.run_dse(["sweep", "in.toml", "--out", "o.csv"], box, fsize=1024)
    one_error_line(code, err, 1, "File too large; the previous file is kept")
    assert "repaired" not in err
    assert (box / "o.csv").read_bytes() == damaged and ff.temps(box) == []
    code, _, err = ff.run_dse(["sweep", "in.toml", "--out", "o.csv"], box)
    assert code == 0 and "repaired a repeated row" in err
    assert (box / "o.csv").read_bytes() == sweep_ref()


def test_a_failed_append_is_cut_back_and_the_sweep_resumes(box: Path) -> None:
    """Appends that fail part-way leave whole rows only (no half row to "repair" into a lost point)."""
    code, _, err = ff.run_dse(["sweep", "in.toml", "--out", "o.csv", "--batch", "2"], box, fsize=1500)
    one_error_line(code, err, 1, "the rows before are kept")
    data = (box / "o.csv").read_bytes()
    rows = data.splitlines()
    assert data.endswith(b"\n") and len(rows) > 2 and set(rows) <= set(sweep_ref().splitlines())
    code, _, err = ff.run_dse(["sweep", "in.toml", "--out", "o.csv"], box)
    assert code == 0 and err == ""
    assert (box / "o.csv").read_bytes() == sweep_ref()


def test_short_writes_are_looped_on_and_a_write_of_nothing_fails(tmp_path: Path, monkeypatch) -> None:
    """`write_atomic` writes every byte through short writes; a write that writes nothing (a full
    disk) is a `RunError`, and the previous file stays byte for byte, with no temporary file."""
    real = os.write
    calls = []

    def short(fd: int, data: bytes) -> int:
        calls.append(len(data))
        return real(fd, bytes(data[:3]))

    out = tmp_path / "o.txt"
    monkeypatch.setattr(os, "write", short)
    write_atomic(out, "0123456789" * 3)
    assert out.read_text() == "0123456789" * 3 and len(calls) == 10
    monkeypatch.setattr(os, "write", lambda fd, data: 0)
    with pytest.raises(RunError, match="the previous file is kept"):
        write_atomic(out, "new")
    monkeypatch.undo()
    assert out.read_text() == "0123456789" * 3 and ff.temps(tmp_path) == []


def test_a_failed_block_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "o.txt"
    out.write_text("old")
    os.chmod(out, 0o640)
    with pytest.raises(ZeroDivisionError), atomic_output(out) as tmp:
        tmp.write_text("half")
        1 / 0  # noqa: B018
    assert out.read_text() == "old" and ff.temps(tmp_path) == []
    write_atomic(out, "new")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640  # the replaced file's mode


# ----------------------------------------------------------------------------- 2. regular files only
def test_a_symlinked_sweep_out_is_followed_by_a_repair(box: Path) -> None:
    (box / "real").mkdir()
    lines = sweep_ref().splitlines(keepends=True)
    (box / "real" / "t.csv").write_bytes(b"".join(lines + lines[4:6]))
    os.symlink("real/t.csv", box / "o.csv")
    code, _, err = ff.run_dse(["sweep", "in.toml", "--out", "o.csv"], box)
    assert code == 0 and "repaired" in err
    assert os.readlink(box / "o.csv") == "real/t.csv" and (box / "real" / "t.csv").read_bytes() == sweep_ref()
    assert ff.temps(box) == []


@pytest.mark.parametrize("kind", ["fifo", "chr", "link-loop"])
@pytest.mark.parametrize("name", [n for n in ff.COMMANDS if n != "optimal --plot"])
def test_every_output_refuses_a_special_file_before_any_work(name: str, kind: str, box: Path) -> None:
    out = ff.COMMANDS[name][1]
    if out.endswith("/"):  # a file of the folder: the first one the command writes
        (box / out).mkdir()
        place = box / out / ("summary.md" if name.startswith("reproduce") else "trials.csv")
    else:
        place = box / out
    ff.make_special(place, kind, random.Random(0))
    before = ff.snapshot(box)
    code, _, err = ff.run_dse(ff.argv_for(name, out), box)
    word = {"fifo": "is a FIFO", "chr": "character device", "link-loop": "cannot follow the symlink"}[kind]
    one_error_line(code, err, 2, word)
    assert ff.changes(before, ff.snapshot(box)) == []


def test_a_report_through_a_symlink_writes_the_target(box: Path) -> None:
    (box / "rep").mkdir()
    (box / "elsewhere").mkdir()
    (box / "elsewhere" / "t.csv").write_text("old\n")
    os.symlink("../elsewhere/t.csv", box / "rep" / "trials.csv")
    os.symlink(str(box / "elsewhere" / "new.png"), box / "rep" / "history.png")  # to a missing file
    code, _, err = ff.run_dse(ff.argv_for("study report", "rep/"), box)
    assert code == 0, err
    ref = ff.reference("study report")
    assert (box / "rep" / "trials.csv").is_symlink() and (box / "rep" / "history.png").is_symlink()
    assert (box / "elsewhere" / "t.csv").read_bytes() == ref["trials.csv"]
    assert (box / "elsewhere" / "new.png").read_bytes() == ref["history.png"]


# ----------------------------------------------------------------------------- 3. folders
@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "2D-SW_SW", "--size", "1MB", "--plot", "nosuch/x.png"],
        ["iterate", "in.txt", "-t", "2D-SW_SW", "--plot", "nosuch/x.png"],
        ["plot", "sweep", "in.csv", "--x", "chunks", "--y", "time_ns", "--mean", "--out", "nosuch/x.png"],
        ["plot", "timeline", "r.json", "--out", "nosuch/x.svg"],
        ["workload", "convert", "in.txt", "-o", "nosuch/x.toml"],
        ["workload", "export", "in.txt", "-o", "nosuch/x", "--npus", "1"],
    ],
)
def test_a_file_into_a_missing_folder_is_refused(argv: list[str], box: Path) -> None:
    before = ff.snapshot(box)
    code, _, err = ff.run_dse(argv, box)
    one_error_line(code, err, 2, "no folder 'nosuch'")
    assert ff.changes(before, ff.snapshot(box)) == [] and not (box / "nosuch").exists()


def test_a_rejected_reproduction_leaves_no_folder(box: Path, monkeypatch) -> None:
    monkeypatch.setenv("DSE_MAX_WORK", "100")  # every point is refused once the run has started
    code, _, err = ff.run_dse(["reproduce", "themis", "--quick", "--out", "new/deep"], box)
    one_error_line(code, err, 2, "DSE_MAX_WORK")
    assert not (box / "new").exists()
    code, _, err = ff.run_dse(["study", "report", "nope", "--storage", "s.journal", "--out", "rep"], box)
    one_error_line(code, err, 2, "no study 'nope'")
    assert not (box / "rep").exists()


def test_an_output_folder_is_removed_only_if_this_run_made_it_and_left_it_empty(tmp_path: Path) -> None:
    with pytest.raises(InputError), output_folder(tmp_path / "a" / "b", "out"):
        raise InputError("x", "refused")
    assert not (tmp_path / "a").exists()
    (tmp_path / "kept").mkdir()
    with pytest.raises(KeyboardInterrupt), output_folder(tmp_path / "kept" / "c", "out") as d:
        (d / "done.csv").write_text("row\n")
        raise KeyboardInterrupt
    assert (tmp_path / "kept" / "c" / "done.csv").exists()
    with pytest.raises(RunError), output_folder(tmp_path / "kept", "out"):
        raise RunError("failed")
    assert (tmp_path / "kept").is_dir()


def test_a_sweep_csv_that_gets_no_row_leaves_no_folder(tmp_path: Path) -> None:
    from dse.explore.sweep.csvfile import SweepFile

    with SweepFile(tmp_path / "a" / "b" / "r.csv", ("point", "x"), [("a",)]) as f:
        assert f.open() == frozenset() and (tmp_path / "a" / "b" / "r.csv").exists()
    assert not (tmp_path / "a").exists()
    with SweepFile(tmp_path / "a" / "r.csv", ("point", "x"), [("a",)]) as f:
        f.open()
        f.append([[0, "a"]])
    assert (tmp_path / "a" / "r.csv").read_text().startswith("point,x,crc\n0,a,")
