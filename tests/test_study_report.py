"""Study reports in the study's terms: objectives named by metric, bandwidths in GB/s, figures with
units and every objective, importances only over parameters that vary (dse.output.study_report, study_plots)."""

import csv
import math
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from dse.core.topology import parse_topology  # noqa: E402
from dse.explore.storage import load_study  # noqa: E402
from dse.explore.studies import load_studies  # noqa: E402
from dse.explore.study_workers import run_study  # noqa: E402
from dse.output.study_plots import history_data, importance_data, pareto_data  # noqa: E402
from dse.output.study_report import axis, complete_trials, objective_names, write_report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BW = ROOT / "studies" / "bw_split_4d.toml"
SHAPE = ROOT / "studies" / "shape_1024.toml"


@pytest.fixture(scope="module")
def shape_study(tmp_path_factory):
    """shape_1024 (time and cost, a cost constraint) with 24 complete trials."""
    url = str(tmp_path_factory.mktemp("shape") / "s.journal")
    run_study(load_studies(SHAPE)[0], trials=24, storage=url)
    return "shape_1024", url


@pytest.fixture(scope="module")
def bw_study(tmp_path_factory):
    """bw_split_4d.themis (a budget split: the space samples weights) with 12 complete trials."""
    url = str(tmp_path_factory.mktemp("bw") / "b.journal")
    run_study(load_studies(BW)[0], trials=12, storage=url)
    return "bw_split_4d.themis", url


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_objectives_are_named_by_their_metric(shape_study, tmp_path):
    name, url = shape_study
    assert load_study(name, url).metric_names == ["time_ns_themis_scf", "cost"]
    rep = write_report(name, url, tmp_path)
    rows = _csv(tmp_path / "trials.csv")
    assert list(rows[0])[:3] == ["trial", "time_ns_themis_scf", "cost"]
    assert not any(k.startswith("objective_") for k in rows[0])
    study = load_study(name, url)
    by_number = {t.number: t for t in study.trials}
    for r in rows:
        t = by_number[int(r["trial"])]
        assert (float(r["time_ns_themis_scf"]), float(r["cost"])) == pytest.approx(t.values)
    assert rep.names == ["time_ns_themis_scf", "cost"]
    assert {int(r["trial"]) for r in _csv(tmp_path / "pareto.csv")} == {t.number for t in study.best_trials}


def test_names_of_a_study_run_before_metric_names_come_from_its_labels():
    study = optuna.create_study(directions=["minimize", "minimize", "maximize"])
    study.set_user_attr("objectives", ["time[baseline+fifo]", "cost", "bw_utilization[themis+scf]"])
    assert objective_names(study) == ["time_ns_baseline_fifo", "cost", "bw_utilization_themis_scf"]
    assert objective_names(optuna.create_study()) == ["objective_0"]


@pytest.mark.parametrize(
    "name,label,scale",
    [
        ("time_ns_themis_scf", "time, themis+scf (ms)", 1e-6),
        ("time_ns_lp_guided_fifo", "time, lp_guided+fifo (ms)", 1e-6),
        ("bw_utilization_themis_scf", "BW utilization, themis+scf (%)", 100.0),
        ("gap_baseline_fifo", "gap to the bound, baseline+fifo (%)", 100.0),
        ("cost", "hardware cost ($)", 1.0),
        ("objective_0", "objective_0", 1.0),
    ],
)
def test_axes_carry_the_metric_unit(name, label, scale):
    assert axis(name).label == label and axis(name).scale == scale


def test_bandwidths_are_GBps_per_dimension_not_weights(bw_study, tmp_path):
    name, url = bw_study
    write_report(name, url, tmp_path)
    rows = _csv(tmp_path / "trials.csv")
    assert len(rows) == 12
    assert not any(k.startswith("param_bw_") for k in rows[0])  # the sampled weights are left out
    for r in rows:
        bws = [float(r[f"bw{i}_GBps"]) for i in range(4)]
        assert bws == [d.bandwidth for d in parse_topology(r["topology"]).dims]
        assert sum(bws) == pytest.approx(800, rel=1e-5) and min(bws) >= 25 - 1e-3  # budget 800, minimum 25


def test_history_has_one_panel_per_objective_in_its_unit(shape_study):
    name, url = shape_study
    study = load_study(name, url)
    trials = complete_trials(study)
    panels = history_data(trials, ["time_ns_themis_scf", "cost"], ["minimize", "minimize"])
    assert [p.label for p in panels] == ["time, themis+scf (ms)", "hardware cost ($)"]
    ordered = sorted(trials, key=lambda t: t.number)
    assert panels[0].trials == [t.number for t in ordered]
    assert panels[0].values == pytest.approx([t.values[0] / 1e6 for t in ordered])
    for k, p in enumerate(panels):  # the best so far: the running minimum over feasible trials
        best = math.nan
        for t, b in zip(ordered, p.best):
            if all(v <= 0 for v in t.constraints.values()):
                v = t.values[k] * axis(p.name).scale
                best = v if math.isnan(best) else min(best, v)
            assert b == pytest.approx(best, nan_ok=True)


def test_pareto_panel_has_units_and_marks_the_front(shape_study):
    name, url = shape_study
    study = load_study(name, url)
    trials = complete_trials(study)
    front = {t.number for t in study.best_trials}
    (panel,) = pareto_data(trials, front, ["time_ns_themis_scf", "cost"])
    assert (panel.x_label, panel.y_label) == ("time, themis+scf (ms)", "hardware cost ($)")
    assert sum(panel.front) == len(front) and len(panel.x) == len(trials)
    assert sorted(panel.y) == pytest.approx(sorted(t.values[1] for t in trials))


def test_three_objectives_give_a_pareto_panel_per_pair():
    trials = [
        optuna.trial.create_trial(values=[2e6, 1000.0, 0.05]),
        optuna.trial.create_trial(values=[3e6, 500.0, 0.1]),
    ]
    panels = pareto_data(trials, set(), ["time_ns_themis_scf", "cost", "gap_themis_scf"])
    assert [(p.x_label, p.y_label) for p in panels] == [
        ("time, themis+scf (ms)", "hardware cost ($)"),
        ("time, themis+scf (ms)", "gap to the bound, themis+scf (%)"),
        ("hardware cost ($)", "gap to the bound, themis+scf (%)"),
    ]
    assert panels[1].x == pytest.approx([2.0, 3.0]) and panels[2].y == pytest.approx([5.0, 10.0])


def test_report_files_of_a_multi_objective_study(shape_study, tmp_path):
    name, url = shape_study
    rep = write_report(name, url, tmp_path)
    pngs = sorted(Path(f).name for f in rep.files if f.endswith(".png"))
    assert pngs == ["history.png", "importances.png", "pareto_front.png"] and rep.notes == []


def test_importances_leave_out_parameters_that_do_not_vary(bw_study):
    name, url = bw_study
    study = load_study(name, url)
    imp = importance_data(complete_trials(study), ["time_ns_themis_scf"], ["minimize"])
    # dims, shape, kinds, chunks, scheduler and queue have one value in this space; the weights
    # are counted as the GB/s they give each dimension
    assert sorted(imp.params) == ["bw0_GBps", "bw1_GBps", "bw2_GBps", "bw3_GBps"]
    assert sorted(imp.by_objective["time_ns_themis_scf"]) == sorted(imp.params)
    assert sum(imp.by_objective["time_ns_themis_scf"].values()) == pytest.approx(1.0)


def test_fewer_than_two_varying_parameters_mean_no_importances(tmp_path, run_cli):
    # one dimension: its weight varies but its bandwidth is the whole budget; only chunks varies
    (tmp_path / "s.toml").write_text(
        "[space]\nnpus = 64\nshapes = ['64']\nkinds = [['switch']]\nchunks = [16, 64]\n"
        "[space.bandwidth]\nbudget = 300\nstep = 0.5\n[space.latency]\ntiers = [700]\n"
    )
    (tmp_path / "st.toml").write_text(
        "[study]\nname = 'one'\nspace = 's.toml'\nsampler = 'brute_force'\n[[objectives]]\nmetric = 'time'\n"
    )
    url = str(tmp_path / "one.journal")
    assert run_study(load_studies(tmp_path / "st.toml")[0], trials=6, storage=url)["complete"] == 6
    code, out, err = run_cli("study", "report", "one", "--storage", url, "--out", str(tmp_path / "rep"))
    assert code == 0 and err == ""
    notes = [line for line in out.splitlines() if "importances" in line]
    assert len(notes) == 1 and "1 parameter" in notes[0] and "(chunks)" in notes[0]
    assert not (tmp_path / "rep" / "importances.png").exists() and (tmp_path / "rep" / "history.png").exists()
    assert {r["bw0_GBps"] for r in _csv(tmp_path / "rep" / "trials.csv")} == {"300.0"}
