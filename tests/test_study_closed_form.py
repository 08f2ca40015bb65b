"""A study under a closed-form cost model (nccl) names that model where a scheduler would be, in
every view (terminal, CSV, figures' names, dashboard), while the stored ids stay as they were, so
studies begun before read the same and resume (dse.explore.study.units: CLOSED_FORM_ATTR)."""

import csv
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from dse.core.topology import parse_topology  # noqa: E402
from dse.explore.study.dashboard_guard import StudyView  # noqa: E402
from dse.explore.study.storage import load_study, open_storage, trial_record  # noqa: E402
from dse.explore.study.studies import StudySpec, load_studies  # noqa: E402
from dse.explore.study.units import CLOSED_FORM_ATTR, as_shown, record_columns  # noqa: E402
from dse.explore.study.workers import run_study, summary  # noqa: E402
from dse.output.study_report import report_data, show_text, write_report  # noqa: E402
from dse.sim.evaluate import evaluate  # noqa: E402

SPACE = (
    '[space]\nnpus = 128\nshapes = ["8x16"]\nkinds = [["switch"], ["switch"]]\nchunks = [1]\n'
    "[space.bandwidth]\nbudget = 500.0\nminimum = 25.0\n[space.latency]\ntiers = [0, 0]\n"
)
COST = "[cost]\nlink = [2.0, 4.0]\nswitch_port = [9.0, 18.0]\nnic = [0, 31.6]\n"
MODEL = "nccl:HGX-H100"


def _attrs(study: object) -> dict:
    return study._storage.get_study_system_attrs(study._study_id)  # type: ignore[attr-defined]


def _study(tmp_path: Path, cost_model: str = "nccl", objectives: str = "") -> StudySpec:
    (tmp_path / "space.toml").write_text(SPACE)
    objectives = objectives or 'objectives = [{ metric = "time" }, { metric = "cost" }]\n'
    text = objectives + '[study]\nname = "gpu"\nspace = "space.toml"\nsampler = "random"\nseed = 0\ntrials = 5\n'
    text += f'[workload]\ncollective = "all_reduce"\nsize = "1GB"\ncost_model = "{cost_model}"\n'
    text += 'calibration = "HGX-H100"\n' * (cost_model == "nccl") + COST
    (tmp_path / "s.toml").write_text(text)
    return load_studies(tmp_path / "s.toml")[0]


def test_a_study_under_nccl_shows_nccl_where_a_scheduler_would_be(tmp_path: Path) -> None:
    spec = _study(tmp_path)
    assert spec.cost_model == MODEL and spec.closed_form_model == "nccl"
    url = str(tmp_path / "gpu.journal")
    assert run_study(spec, storage=url, quiet=True)["complete"] == 5
    study = load_study("gpu", url)
    assert study.metric_names == ["time_ns_themis_scf", "cost"]  # stored as studies always were
    assert summary("gpu", url)["objectives"] == ["time (ms) with nccl", "cost ($)"]
    rep = write_report("gpu", url, tmp_path / "rep")
    assert rep.columns == ["time_nccl_ns", "cost_usd"]
    with open(tmp_path / "rep" / "trials.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5 and not [k for k in rows[0] if "themis" in k or "baseline" in k]
    schedule = {"param_chunks", "param_scheduler", "param_queue"}  # NCCL's time has no chunk schedule
    assert not schedule & set(rows[0]) and {"param_dims", "param_shape_2d"} <= set(rows[0])
    for row in rows:  # the one time per design is NCCL's, as `evaluate` gives it (on GB/s rounded to 1e-3)
        t = evaluate(parse_topology(row["topology"]), collective="all_reduce", size=10**9, cost_model=MODEL).time_ns
        assert float(row["time_nccl_ns"]) == pytest.approx(t, rel=1e-5)
    _, data = report_data("gpu", url)
    text = show_text(study, data, url, 5)
    assert "time (ms) with nccl" in text and "themis" not in text


def test_the_dashboard_names_the_model_and_the_journal_is_unchanged(tmp_path: Path) -> None:
    url = str(tmp_path / "gpu.journal")
    run_study(_study(tmp_path), storage=url, quiet=True)
    before = Path(url).read_bytes()
    study = load_study("gpu", url)
    view = StudyView(open_storage(url, must_exist=True), study._study_id)
    assert view.get_study_system_attrs(study._study_id)["study:metric_names"] == ["time (ms) with nccl", "cost ($)"]
    attrs = view.get_all_trials(study._study_id)[0].user_attrs
    assert "time nccl (ms)" in attrs and not [k for k in attrs if "themis" in k or "baseline" in k]
    assert Path(url).read_bytes() == before


def test_a_study_begun_before_reads_as_it_did_and_takes_the_model_when_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _study(tmp_path)
    url = str(tmp_path / "gpu.journal")
    with monkeypatch.context() as m:  # a study run before dse stored the model
        m.setattr(StudySpec, "closed_form_model", property(lambda self: ""))
        run_study(spec, trials=3, storage=url, quiet=True)
    study = load_study("gpu", url)
    assert CLOSED_FORM_ATTR not in _attrs(study)
    assert summary("gpu", url)["objectives"] == ["time (ms) with themis+scf", "cost ($)"]
    first = [(t.values, trial_record(t)) for t in study.trials]
    assert run_study(spec, storage=url, quiet=True)["complete"] == 5  # resumed: two more, none redone
    study = load_study("gpu", url)
    assert _attrs(study)[CLOSED_FORM_ATTR] == "nccl" and len(study.trials) == 5
    assert [(t.values, trial_record(t)) for t in study.trials[:3]] == first
    assert summary("gpu", url)["objectives"] == ["time (ms) with nccl", "cost ($)"]


def test_a_scheduled_study_keeps_its_scheduler(tmp_path: Path) -> None:
    url = str(tmp_path / "gpu.journal")
    spec = _study(tmp_path, cost_model="paper")
    assert spec.closed_form_model == ""
    run_study(spec, storage=url, quiet=True)
    assert CLOSED_FORM_ATTR not in _attrs(load_study("gpu", url))
    assert summary("gpu", url)["objectives"] == ["time (ms) with themis+scf", "cost ($)"]


def test_a_constraint_under_nccl_is_named_with_the_model(tmp_path: Path) -> None:
    objectives = 'objectives = [{ metric = "cost" }]\nconstraints = [{ metric = "time", max = 1e7 }]\n'
    url = str(tmp_path / "gpu.journal")
    run_study(_study(tmp_path, objectives=objectives), storage=url, quiet=True)
    study, data = report_data("gpu", url)
    assert "constraints: time (ms) with nccl <= 10.00" in show_text(study, data, url, 5)


def test_record_columns_merge_a_closed_form_models_times_and_keep_a_different_one() -> None:
    record = {"time_themis_ns": 5.0, "time_baseline_ns": 5.0, "bw_utilization": 0.5, "cost_usd": 1.0}
    assert record_columns(record, "nccl") == {"time_nccl_ns": 5.0, "bw_utilization_pct": 50.0, "cost_usd": 1.0}
    assert record_columns(record) == {
        "time_themis_ns": 5.0,
        "time_baseline_ns": 5.0,
        "bw_utilization_pct": 50.0,
        "cost_usd": 1.0,
    }
    ranks = {"iteration_themis_scf_ns": 7.0, "iteration_baseline_fifo_ns": 8.0, "exposed_comm_themis_scf_ns": 1.0}
    assert record_columns(ranks, "nccl") == {
        "iteration_nccl_ns": 7.0,
        "iteration_baseline_fifo_ns": 8.0,  # unlike the first: kept, not lost
        "exposed_comm_nccl_ns": 1.0,
    }
    assert as_shown("time_ns_themis_scf", "nccl").column == "time_nccl_ns"
    assert as_shown("cost", "nccl").name == "cost ($)"  # measured without a scheduler: as it was


@pytest.mark.parametrize("workload", ["Resnet50_DataParallel_fused", "gnmt_fp16_fused"])
def test_under_nccl_an_iteration_is_the_same_whatever_the_schedule(workload: str) -> None:
    """What a study under nccl relies on to measure a design once (`measure`, `measure_workload`)."""
    from dse.training.iteration import iterate

    topo = "SW(8,450,0,links=18)_SW(4,50,0,links=1)"
    times = {
        (s, q): iterate(workload, topo, scheduler=s, queue=q, cost_model=MODEL).time_ns
        for s, q in (("themis", "scf"), ("baseline", "fifo"), ("themis", "fifo"))
    }
    assert len(set(times.values())) == 1, times
    assert next(iter(times.values())) != iterate(workload, topo, cost_model="paper").time_ns
