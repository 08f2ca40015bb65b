"""Every case of the reliability report (issue 14), one by one: bad input is one line and exit 2 within
seconds, no user file is modified by a rejected run, damage dse can repair is repaired, and runs too
large for the work limit are refused before they start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dse
from dse.core.errors import InputError
from dse.explore.study.studies import load_studies
from dse.explore.study.workers import run_study, summary

ROOT = Path(__file__).resolve().parents[1]
SIZES = ROOT / "studies" / "sweeps" / "sizes.toml"
CHUNKS = ROOT / "studies" / "sweeps" / "chunk_sensitivity.toml"
BW = ROOT / "studies" / "bw_split_4d.toml"
T8 = "_".join(f"SW({2 + i % 3},{100 + 10 * i},500)" for i in range(8))
T9 = "_".join(f"SW({2 + i % 3},{100 + 10 * i},500)" for i in range(9))


def one_line(code, err, word):
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("dse: error: ") and "Traceback" not in err, err
    assert word in err, err


@pytest.mark.parametrize(
    "argv, word",
    [
        (["evaluate", "2D-SW_SW", "--size", "1e400"], "2^53"),
        (["evaluate", "2D-SW_SW", "--size", "1e309"], "2^53"),
        (["evaluate", "Ring(4,100,1e308)", "--size", "1GB"], "latency"),
        (["evaluate", "_".join(["Ring(2,1,1)"] * 600), "--size", "1MB"], "DSE_MAX_DIMENSIONS"),
        (["evaluate", "_".join(["Ring(2,1,1)"] * 2000), "--size", "1MB"], "DSE_MAX_DIMENSIONS"),
        (["evaluate", "Ring(1,100,10)", "--size", "1GB"], "no dimension with 2 or more NPUs"),
        (["evaluate", "Ring(4,100,10,links=2,links=3)", "--size", "1GB"], "given twice"),
        (["evaluate", "Ring(4,100,10,algo=ring,algorithm=ring)", "--size", "1GB"], "given twice"),
        (["evaluate", "Ring(\uff14,100,10)", "--size", "1GB"], "npus"),
        (["evaluate", "2D-SW_SW", "--size", "1.5B"], "whole number of bytes"),
        (["evaluate", "2D-SW_SW", "--size", "0.5"], "whole number of bytes"),
        (["evaluate", "2D-SW_SW", "--size", "100", "--chunks", "1000"], "one chunk per byte"),
        (["evaluate", "2D-SW_SW", "--size", "1GB", "--orders", "01"], "orders"),
        (["evaluate", "2D-SW_SW", "--size", "1GB", "--timeline"], "--timeline"),
        (
            ["evaluate", "Ring(1000000000,100,10,links=2)", "--size", "1GB", "--cost-model", "astra-sim-1"],
            "DSE_MAX_WORK",
        ),
        (["evaluate", "2D-SW_SW", "--size", "1TB", "--chunks", "10000000"], "DSE_MAX_WORK"),
        (["evaluate", T9, "--size", "1GB", "--scheduler", "lp_guided"], "lp_guided"),
        (["iterate", "resnet152", "-t", "2D-SW_SW", "--iterations", "1000000"], "DSE_MAX_WORK"),
        (["iterate", "transformer:layers=1e9", "-t", "2D-SW_SW"], "layers"),
        (["iterate", "resnet152:batch=1e400", "-t", "2D-SW_SW"], "batch"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_in_seconds(run_cli, argv, word):
    t0 = time.process_time()
    one_line(*run_cli(*argv)[::2], word)
    assert time.process_time() - t0 < 30  # a guard against hangs, not a speed test


@pytest.mark.parametrize("dims", [41, 600])
def test_past_2_40_npus_is_refused_when_the_dimension_limit_is_raised(run_cli, monkeypatch, dims):
    """The NPU count's own limit still holds with ``DSE_MAX_DIMENSIONS`` raised past it."""
    monkeypatch.setenv("DSE_MAX_DIMENSIONS", "10000")
    one_line(*run_cli("evaluate", "_".join(["Ring(2,1,1)"] * dims), "--size", "1MB")[::2], "2^40 NPUs")


def test_a_workload_with_huge_numbers_or_a_directory_is_one_line(run_cli, tmp_path):
    w = tmp_path / "w.txt"
    w.write_text("DATA\n1\nl0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1000000000000000000000000000000 5\n")
    one_line(*run_cli("iterate", str(w), "-t", "2D-SW_SW")[::2], "wg_bytes")
    w.write_text("DATA\n1\nl0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1e310 5\n")
    one_line(*run_cli("iterate", str(w), "-t", "2D-SW_SW")[::2], "wg_bytes")
    one_line(*run_cli("iterate", str(tmp_path), "-t", "2D-SW_SW")[::2], "is a directory")
    one_line(*run_cli("iterate", "", "-t", "2D-SW_SW")[::2], "empty path")


def test_bounds_on_many_dimensions_fall_back_and_say_so():
    b = dse.lower_bounds(T8, size="1GB", node_limit=100)
    assert b.status == "lp_only" and b.ideal_ns <= b.lp_ns == b.ilp_ns == b.pipeline_ns
    assert any("fluid LP" in n for n in b.notes)
    assert dse.evaluate(T8, size="1GB").time_ns >= b.bound_ns * (1 - 1e-9)
    b9 = dse.lower_bounds(T9, size="1GB", node_limit=100)
    assert b9.status == "ideal_only" and b9.pipeline_ns == b9.ideal_ns
    assert dse.evaluate(T9, size="1GB").time_ns >= b9.bound_ns


def test_compare_on_nine_dimensions_says_lp_guided_did_not_run(run_cli):
    code, out, err = run_cli("compare", T9, "--size", "1GB")
    assert code == 0 and err == ""
    assert "lp_guided not run" in out and "ideal_only" in out and "themis" in out


@pytest.mark.parametrize(
    "text",
    [
        '[sweep]\ntopology = "2D-SW_SW"\nsize = 1e400\n',
        '[sweep]\ntopology = "2D-SW_SW"\nsize = "1e400"\n',
        '[sweep]\ntopology = "2D-SW_SW"\nsize = "1GB"\nchunks = 100000000\n',
    ],
)
def test_sweep_refused_before_it_starts_leaves_no_csv(run_cli, tmp_path, text):
    f = tmp_path / "s.toml"
    f.write_text(text)
    code, _, err = run_cli("sweep", str(f), "--out", str(tmp_path / "r.csv"))
    one_line(code, err, "sweep")
    assert not (tmp_path / "r.csv").exists()


def test_rejected_sweep_never_touches_another_file(run_cli, tmp_path):
    other = tmp_path / "other.csv"
    assert run_cli("sweep", str(CHUNKS), "--out", str(other))[0] == 0
    before = other.read_bytes()
    for _ in range(3):
        one_line(*run_cli("sweep", str(SIZES), "--out", str(other))[::2], "not a point of this sweep")
    assert other.read_bytes() == before
    notes = tmp_path / "notes.txt"
    notes.write_text("one\ntwo\nthree\n")
    one_line(*run_cli("sweep", str(SIZES), "--out", str(notes))[::2], "not a sweep CSV")
    assert notes.read_text() == "one\ntwo\nthree\n"


def test_a_repeated_row_and_a_row_cut_in_the_middle_are_repaired(run_cli, tmp_path):
    ref = tmp_path / "ref.csv"
    run_cli("sweep", str(CHUNKS), "--out", str(ref))
    lines = ref.read_bytes().splitlines(keepends=True)
    damaged = tmp_path / "d.csv"
    damaged.write_bytes(b"".join(lines[:10] + [lines[9], lines[10][:30] + b"\n"] + lines[11:]))
    code, _, err = run_cli("sweep", str(CHUNKS), "--out", str(damaged))
    assert code == 0 and "repaired" in err and err.count("\n") == 1
    assert sorted(damaged.read_bytes().splitlines()) == sorted(ref.read_bytes().splitlines())


def test_two_sweeps_never_write_one_file_at_once(tmp_path):
    from dse.explore.sweep.csvfile import SweepFile

    with SweepFile(tmp_path / "r.csv", ("point", "x"), [("a",)]) as first:
        first.open()
        with pytest.raises(InputError, match="another dse sweep"):
            SweepFile(tmp_path / "r.csv", ("point", "x"), [("a",)]).open()


@pytest.mark.parametrize("damage", [b'{"op_code": 4, "wor', b"garbage\n", b"garbage", b"\n\n"])
def test_a_study_journal_with_a_damaged_end_is_repaired(run_cli, tmp_path, damage):
    url = str(tmp_path / "j.journal")
    spec = load_studies(BW)[0]
    run_study(spec, trials=4, storage=url)
    with open(url, "ab") as f:
        f.write(damage)
    code, _, err = run_cli("study", "run", str(BW), "--only", spec.name, "--trials", "6", "--storage", url)
    assert code == 0 and "removed a damaged end" in err and err.count("\n") == 1
    for argv in (
        ("study", "list", "--storage", url),
        ("study", "report", spec.name, "--storage", url, "--out", str(tmp_path / "r")),
    ):
        code, _, err = run_cli(*argv)
        assert code == 0 and err == ""
    assert summary(spec.name, url)["complete"] == 6


def test_a_journal_damaged_inside_is_refused_untouched(run_cli, tmp_path):
    url = tmp_path / "j.journal"
    spec = load_studies(BW)[0]
    run_study(spec, trials=3, storage=str(url))
    lines = url.read_bytes().split(b"\n")
    lines[3] = lines[3][:15]
    url.write_bytes(b"\n".join(lines))
    before = url.read_bytes()
    for argv in (
        ("study", "run", str(BW), "--only", spec.name, "--trials", "5", "--storage", str(url)),
        ("study", "list", "--storage", str(url)),
    ):
        one_line(*run_cli(*argv)[::2], "damaged inside")
    assert url.read_bytes() == before


def test_two_commands_creating_one_fresh_sqlite_study_both_succeed(tmp_path):
    pytest.importorskip("sqlalchemy")
    cmd = [sys.executable, "-m", "dse", "study", "run", str(BW), "--only", "bw_split_4d.themis", "--trials", "3"]
    for k in range(4):
        url = f"sqlite:///{tmp_path / f'r{k}.db'}"
        procs = [
            subprocess.Popen(
                cmd + ["--storage", url], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        for p in procs:
            assert p.wait(120) == 0, p.stderr.read()
        assert summary("bw_split_4d.themis", url)["complete"] == 3


def test_a_killed_worker_does_not_fail_the_study(tmp_path):
    """Kill one of two workers: the parent exits 0 with one warning and the study is complete."""
    url = str(tmp_path / "k.journal")
    cmd = [
        sys.executable,
        "-m",
        "dse",
        "study",
        "run",
        str(BW),
        "--only",
        "bw_split_4d.themis",
        "--trials",
        "300",
        "--workers",
        "2",
        "--storage",
        url,
    ]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    from dse.testing.interrupts import child_pids

    kids: list[int] = []
    deadline = time.time() + 60
    while time.time() < deadline and p.poll() is None:
        kids = child_pids(p.pid)
        if len(kids) == 2 and Path(url).exists() and Path(url).stat().st_size > 20_000:
            break
        time.sleep(0.01)
    assert kids, "the workers did not start"
    os.kill(kids[0], 9)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert err.count("\n") == 1 and "workers ended early" in err and "Traceback" not in err
    s = summary("bw_split_4d.themis", url)
    assert s["complete"] == 300 and s["running"] == 0


@pytest.mark.parametrize("make", ["dir", "empty", "file-for-dir"])
def test_unusable_paths_are_one_line(run_cli, tmp_path, make):
    d = tmp_path / "adir"
    d.mkdir()
    f = tmp_path / "f.txt"
    f.write_text("x")
    bad = {"dir": str(d), "empty": "", "file-for-dir": str(f)}[make]
    cases = [
        ("sweep", str(CHUNKS), "--out", bad if make != "file-for-dir" else str(d)),
        ("study", "run", str(BW), "--trials", "1", "--storage", bad if make != "file-for-dir" else str(d)),
        ("study", "run", bad, "--trials", "1"),
        ("study", "report", "x", "--storage", str(d), "--out", bad),
        ("reproduce", "themis", "--quick", "--out", bad if make == "file-for-dir" else str(f)),
        ("plot", "sweep", str(f), "--x", "a", "--y", "b", "--out", bad if make != "file-for-dir" else str(d)),
    ]
    for argv in cases:
        code, _, err = run_cli(*argv)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    assert f.read_text() == "x" and list(d.iterdir()) == []


def test_non_utf8_toml_files_are_one_line(run_cli, tmp_path):
    b = tmp_path / "b.toml"
    b.write_bytes(b"\xff\xfe[sweep]\x00")
    one_line(*run_cli("sweep", str(b), "--out", str(tmp_path / "o.csv"))[::2], "UTF-8")
    one_line(*run_cli("study", "run", str(b))[::2], "UTF-8")
    s = tmp_path / "s.toml"
    s.write_text(BW.read_text().replace("../search_spaces/bw_split_4d.toml", "b.toml"))
    one_line(*run_cli("study", "run", str(s))[::2], "UTF-8")
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "out").exists()


def test_a_study_whose_workload_cannot_run_leaves_no_journal(run_cli, tmp_path):
    space = tmp_path / "space.toml"
    space.write_text((ROOT / "search_spaces" / "bw_split_4d.toml").read_text())
    for wl in ('size = "1e400"', 'size = "1GB"\ncost_model = "astra-sim-1"', 'size = "10"'):
        s = tmp_path / "s.toml"
        s.write_text(f'[study]\nname = "x"\nspace = "space.toml"\n[workload]\n{wl}\n[[objectives]]\nmetric = "time"\n')
        code, _, err = run_cli("study", "run", str(s))
        assert code == 2 and err.count("\n") == 1, err
        assert not (tmp_path / "out").exists()


def test_the_work_limit_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("DSE_MAX_WORK", "100")
    with pytest.raises(InputError, match="DSE_MAX_WORK"):
        dse.evaluate("2D-SW_SW", size="1GB", chunks=64)
    monkeypatch.setenv("DSE_MAX_WORK", "1e9")
    assert dse.evaluate("2D-SW_SW", size="1GB", chunks=64).time_ns > 0
    monkeypatch.setenv("DSE_MAX_WORK", "lots")
    with pytest.raises(InputError, match="DSE_MAX_WORK"):
        dse.evaluate("2D-SW_SW", size="1GB")


def test_two_workers_print_nothing_but_the_result(tmp_path):
    """Workers reading the journal while another appends see no damage (they read under its lock)."""
    url = str(tmp_path / "w.journal")
    cmd = [
        sys.executable,
        "-m",
        "dse",
        "study",
        "run",
        str(BW),
        "--only",
        "bw_split_4d.themis",
        "--trials",
        "150",
        "--workers",
        "2",
        "--storage",
        url,
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert summary("bw_split_4d.themis", url)["complete"] == 150
