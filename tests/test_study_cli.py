"""`dse study list|report` find studies where `run` put them; unknown names list what is there; a
study that already has the trials asked for says so and runs nothing."""

import shutil
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from dse.cli.main import build_parser  # noqa: E402
from dse.explore.study.storage import open_storage  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
JOURNAL = "studies/out/bw_split_4d.journal"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder laid out like the repository (studies/, search_spaces/), as the current folder."""
    (tmp_path / "studies").mkdir()
    shutil.copy(ROOT / "studies" / "bw_split_4d.toml", tmp_path / "studies")
    shutil.copytree(ROOT / "search_spaces", tmp_path / "search_spaces")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _one_line(code, out, err, *words):
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


def test_list_and_report_use_the_storage_run_wrote(project, run_cli):
    code, out, _ = run_cli("study", "run", "studies/bw_split_4d.toml", "--trials", "3")
    assert code == 0 and JOURNAL in out and (project / JOURNAL).is_file()
    code, out, _ = run_cli("study", "list")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["study", "complete", "failed", "objective", "best", "pareto", "storage"]
    assert {line.split()[0] for line in lines[2:]} == {"bw_split_4d.themis", "bw_split_4d.baseline"}
    assert all(line.endswith(JOURNAL) for line in lines[2:])
    code, out, err = run_cli("study", "report", "bw_split_4d.baseline", "--out", "rep")
    assert code == 0 and err == "" and out.startswith("bw_split_4d.baseline: 3 complete trials")
    assert (project / "rep" / "best.csv").is_file()


def test_an_unknown_study_lists_the_studies_there(project, run_cli):
    run_cli("study", "run", "studies/bw_split_4d.toml", "--trials", "2")
    # a name whose journal exists: the studies that journal holds
    _one_line(
        *run_cli("study", "report", "bw_split_4d.themiss", "--out", "rep"),
        JOURNAL,
        "bw_split_4d.themis",
        "bw_split_4d.baseline",
    )
    # a name with no journal: the studies every journal in studies/out holds
    _one_line(
        *run_cli("study", "report", "shape_1024", "--out", "rep"),
        "studies/out/shape_1024.journal",
        "bw_split_4d.themis, bw_split_4d.baseline",
    )
    # with --storage too
    _one_line(*run_cli("study", "report", "nope", "--storage", JOURNAL, "--out", "rep"), JOURNAL, "bw_split_4d.themis")
    assert not (project / "rep").exists()


def test_nothing_to_list_or_report_before_a_run(project, run_cli):
    _one_line(*run_cli("study", "list"), "studies/out")
    _one_line(*run_cli("study", "report", "bw_split_4d.themis", "--out", "rep"), "studies/out/bw_split_4d.journal")
    assert not (project / "studies" / "out").exists()


def test_help_states_the_default_storage():
    sub = build_parser()._subparsers._group_actions[0].choices["study"]._subparsers._group_actions[0].choices
    for command in ("report", "dashboard"):
        assert "studies/out/<NAME up to its first dot>.journal" in " ".join(sub[command].format_help().split())
    assert "every journal in studies/out/" in " ".join(sub["list"].format_help().split())


@pytest.mark.parametrize("workers", ["1", "2"])
def test_asking_for_fewer_trials_than_there_are_runs_nothing(tmp_path, run_cli, workers):
    url = str(tmp_path / "a.journal")
    name = "bw_split_4d.themis"
    run_cli(
        "study", "run", str(ROOT / "studies" / "bw_split_4d.toml"), "--only", name, "--trials", "6", "--storage", url
    )
    before = len(optuna.load_study(study_name=name, storage=open_storage(url)).trials)
    for asked in ("4", "6"):
        code, out, err = run_cli(
            "study",
            "run",
            str(ROOT / "studies" / "bw_split_4d.toml"),
            "--only",
            name,
            "--trials",
            asked,
            "--workers",
            workers,
            "--storage",
            url,
        )
        assert code == 0 and err == "" and len(out.splitlines()) == 1
        assert out.startswith(f"{name}: already 6 complete trials (asked for {asked}); nothing to run")
    assert len(optuna.load_study(study_name=name, storage=open_storage(url)).trials) == before


def test_show_names_the_objective_and_refuses_bad_input_in_one_line(project, run_cli):
    run_cli("study", "run", "studies/bw_split_4d.toml", "--trials", "2")
    code, out, err = run_cli("study", "show", "bw_split_4d.baseline", "--top", "1")
    lines = out.splitlines()
    assert code == 0 and err == "" and lines[0] == f"bw_split_4d.baseline: 2 complete trials on {JOURNAL}"
    assert lines[1] == "objectives: time (ms) with baseline+fifo (minimize)"
    assert lines[3].split("  ")[:2] == ["trial", "time (ms) with baseline+fifo"] and len(lines) == 6
    _one_line(*run_cli("study", "show", "bw_split_4d.baseline", "--top", "0"), "--top")
    _one_line(*run_cli("study", "show", "bw_split_4d.nope"), JOURNAL, "bw_split_4d.themis")
