"""Study reports in the study's terms: objectives named with their units (CSV columns by unit
suffix, figures and the terminal by name), bandwidths in GB/s, the cost limit drawn, importances
only over parameters that vary, studies run before read as they were (dse.output.study_report,
study_plots, dse.explore.study.units, dse study show|list|run)."""

import csv
import math
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from dse.core.topology import parse_topology  # noqa: E402
from dse.explore.study.storage import load_study, trial_record  # noqa: E402
from dse.explore.study.studies import load_studies  # noqa: E402
from dse.explore.study.units import shown  # noqa: E402
from dse.explore.study.workers import run_study  # noqa: E402
from dse.output.study_plots import history_data, importance_data, pareto_data  # noqa: E402
from dse.output.study_report import complete_trials, objective_names, write_report  # noqa: E402

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


def test_objectives_are_columns_named_with_their_unit(shape_study, tmp_path):
    name, url = shape_study
    # the journal keeps its ids and stored units: a study run before reads the same
    assert load_study(name, url).metric_names == ["time_ns_themis_scf", "cost"]
    rep = write_report(name, url, tmp_path)
    rows = _csv(tmp_path / "trials.csv")
    assert list(rows[0])[:3] == ["trial", "time_themis_scf_ns", "cost_usd"]
    assert not any(k.startswith("objective_") for k in rows[0])
    assert {"bw_utilization_pct", "gap_pct", "bound_ns"} <= set(rows[0]) and "bw_utilization" not in rows[0]
    study = load_study(name, url)
    by_number = {t.number: t for t in study.trials}
    for r in rows:
        t = by_number[int(r["trial"])]
        rec = trial_record(t)
        assert (float(r["time_themis_scf_ns"]), float(r["cost_usd"])) == pytest.approx(t.values)
        assert float(r["bw_utilization_pct"]) == pytest.approx(100 * rec["bw_utilization"])  # 0-100, not 0-1
        assert float(r["gap_pct"]) == pytest.approx(100 * (rec["time_themis_ns"] / rec["bound_ns"] - 1))
    assert rep.names == ["time_ns_themis_scf", "cost"]
    assert {int(r["trial"]) for r in _csv(tmp_path / "pareto.csv")} == {t.number for t in study.best_trials}


def test_names_of_a_study_run_before_metric_names_come_from_its_labels():
    study = optuna.create_study(directions=["minimize", "minimize", "maximize"])
    study.set_user_attr("objectives", ["time[baseline+fifo]", "cost", "bw_utilization[themis+scf]"])
    assert objective_names(study) == ["time_ns_baseline_fifo", "cost", "bw_utilization_themis_scf"]
    assert objective_names(optuna.create_study()) == ["objective_0"]


@pytest.mark.parametrize(
    "name,shown_as,column,scale,stored,text",
    [
        ("time_ns_themis_scf", "time (ms) with themis+scf", "time_themis_scf_ns", 1e-6, 2_512_345.0, "2.512"),
        ("time_ns_lp_guided_fifo", "time (ms) with lp_guided+fifo", "time_lp_guided_fifo_ns", 1e-6, 4.5e8, "450.0"),
        (
            "bw_utilization_themis_scf",
            "BW utilisation (%) with themis+scf",
            "bw_utilization_themis_scf_pct",
            100,
            0.5234,
            "52.34",
        ),
        ("gap_baseline_fifo", "gap (%) with baseline+fifo", "gap_baseline_fifo_pct", 100, 0.006, "0.6000"),
        ("cost", "cost ($)", "cost_usd", 1, 1_523_456.7, "1,523,457"),
        (
            "iteration_time_ns_themis_scf",
            "iteration time (ms) with themis+scf",
            "iteration_time_themis_scf_ns",
            1e-6,
            5.1e9,
            "5,100",
        ),
        # LIBRA's performance-per-cost objective: stored in ns x $, printed and plotted in ms x $
        (
            "iteration_time_x_cost_themis_scf",
            "time x cost (ms·$) with themis+scf",
            "iteration_time_x_cost_themis_scf_ms_usd",
            1e-6,
            7.22702e15,
            "7.227e+09",
        ),
        ("libra_iteration_time_ns", "LIBRA-model iteration time (ms)", "libra_iteration_time_ns", 1e-6, 3.2e6, "3.200"),
        ("objective_0", "objective_0", "objective_0", 1, 12.5, "12.50"),
    ],
)
def test_every_objective_is_named_with_its_unit(name, shown_as, column, scale, stored, text):
    s = shown(name)
    assert (s.name, s.column, s.unit.scale, s.text(stored)) == (shown_as, column, scale, text)
    assert s.value(stored) == pytest.approx(stored * scale)


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
    assert [p.name for p in panels] == ["time (ms) with themis+scf", "cost ($)"]
    assert [p.label for p in panels] == ["time (ms)", "cost ($)"]
    ordered = sorted(trials, key=lambda t: t.number)
    assert panels[0].trials == [t.number for t in ordered]
    assert panels[0].values == pytest.approx([t.values[0] / 1e6 for t in ordered])
    for k, p in enumerate(panels):  # the best so far: the running minimum over feasible trials
        best = math.nan
        for t, b in zip(ordered, p.best):
            if all(v <= 0 for v in t.constraints.values()):
                v = shown(["time_ns_themis_scf", "cost"][k]).value(t.values[k])
                best = v if math.isnan(best) else min(best, v)
            assert b == pytest.approx(best, nan_ok=True)


def test_pareto_panel_has_units_and_marks_the_front(shape_study):
    name, url = shape_study
    study = load_study(name, url)
    trials = complete_trials(study)
    front = {t.number for t in study.best_trials}
    (panel,) = pareto_data(trials, front, ["time_ns_themis_scf", "cost"])
    assert (panel.x_label, panel.y_label) == ("time (ms) with themis+scf", "cost ($)")
    assert sum(panel.front) == len(front) and len(panel.x) == len(trials)
    assert sorted(panel.y) == pytest.approx(sorted(t.values[1] for t in trials))


def test_three_objectives_give_a_pareto_panel_per_pair():
    trials = [
        optuna.trial.create_trial(values=[2e6, 1000.0, 0.05]),
        optuna.trial.create_trial(values=[3e6, 500.0, 0.1]),
    ]
    panels = pareto_data(trials, set(), ["time_ns_themis_scf", "cost", "gap_themis_scf"])
    assert [(p.x_label, p.y_label) for p in panels] == [
        ("time (ms) with themis+scf", "cost ($)"),
        ("time (ms) with themis+scf", "gap (%) with themis+scf"),
        ("cost ($)", "gap (%) with themis+scf"),
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


def _figure_of(shape_study, kind):
    """The history or Pareto figure of the shape study (time and cost, cost at most $3M), drawn."""
    from dse.explore.study.units import constraint_limits
    from dse.output.study_plots import history_figure, pareto_figure

    name, url = shape_study
    study = load_study(name, url)
    trials = complete_trials(study)
    ids = objective_names(study)
    limits = constraint_limits(study._storage.get_study_system_attrs(study._study_id), trials, ids)
    assert limits == {"cost": 3.0e6}  # from the study's stored definition
    if kind == "history":
        fig = history_figure(history_data(trials, ids, ["minimize", "minimize"], limits))
    else:
        front = {t.number for t in study.best_trials}
        fig = pareto_figure(pareto_data(trials, front, ids, limits))
    fig.canvas.draw()
    return fig


def _ticks(axis):
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text()]


def test_history_panels_are_titled_with_the_objective_and_its_unit(shape_study):
    import matplotlib.pyplot as plt

    fig = _figure_of(shape_study, "history")
    try:
        time_ax, cost_ax = fig.axes[:2]
        assert time_ax.get_title() == "time (ms) with themis+scf, minimized" and time_ax.get_ylabel() == "time (ms)"
        assert cost_ax.get_title() == "cost ($), minimized" and cost_ax.get_ylabel() == "cost ($)"
        assert cost_ax.get_xlabel() == "trial"
        limit = [ln for ln in cost_ax.get_lines() if ln.get_label().startswith("cost limit")]
        assert len(limit) == 1 and limit[0].get_label() == "cost limit $3M" and set(limit[0].get_ydata()) == {3.0e6}
        assert not any(ln.get_label().startswith("cost limit") for ln in time_ax.get_lines())
        assert (
            all(t.startswith("$") for t in _ticks(cost_ax.yaxis)) and cost_ax.yaxis.get_offset_text().get_text() == ""
        )
        assert "time_ns" not in " ".join(ax.get_title() + ax.get_ylabel() for ax in fig.axes)
    finally:
        plt.close(fig)


def test_the_pareto_plot_draws_the_cost_limit_and_plain_dollar_ticks(shape_study):
    import matplotlib.pyplot as plt

    fig = _figure_of(shape_study, "pareto")
    try:
        (ax,) = [a for a in fig.axes if a.get_visible()]
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("time (ms) with themis+scf", "cost ($)")
        (limit,) = [ln for ln in ax.get_lines() if ln.get_label().startswith("cost limit")]
        assert set(limit.get_ydata()) == {3.0e6} and ln_style(limit) == "--"
        assert "cost limit $3M" in [t.get_text() for t in ax.get_legend().get_texts()]
        ticks = _ticks(ax.yaxis)
        assert ticks and all(t.startswith("$") and t[-1] in "Mk0123456789" for t in ticks), ticks
        assert ax.yaxis.get_offset_text().get_text() == "" and ax.xaxis.get_offset_text().get_text() == ""
        assert all(float(t) < 100 for t in _ticks(ax.xaxis))  # milliseconds, not ns
    finally:
        plt.close(fig)


def ln_style(line):
    return line.get_linestyle()


@pytest.mark.parametrize(
    "value,unit,large,text",
    [
        (1.5e6, "$", False, "$1.5M"),
        (2.5e5, "$", False, "$250k"),
        (750.0, "$", False, "$750"),
        (2.0e9, "$", True, "$2B"),
        (7.25e9, "ms·$", True, "7.25G"),
        (12_000.0, "ms", True, "12k"),
        (2.5, "ms", False, "2.5"),
        (0.0, "$", False, "$0"),
    ],
)
def test_tick_labels_are_plain_numbers_in_the_axis_unit(value, unit, large, text):
    from dse.output.study_plots import tick_text

    assert tick_text(value, unit, large) == text


def test_the_per_dollar_objective_is_printed_and_plotted_in_ms_dollars():
    """LIBRA's time x cost: stored in ns x $ (7.2e15 for a 5 s iteration on $1.4M), shown in ms x $."""
    import matplotlib.pyplot as plt

    from dse.output.study_plots import pareto_figure

    trials = [
        optuna.trial.create_trial(values=[5.0e9 * 1.4e6, 1.4e6]),
        optuna.trial.create_trial(values=[4.0e9 * 2.0e6, 2.0e6]),
    ]
    (panel,) = pareto_data(trials, {0, 1}, ["iteration_time_x_cost_themis_scf", "cost"])
    assert panel.x_label == "time x cost (ms·$) with themis+scf" and panel.x == pytest.approx([7.0e9, 8.0e9])
    fig = pareto_figure([panel])
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        assert all(t.endswith("G") for t in _ticks(ax.xaxis)) and ax.xaxis.get_offset_text().get_text() == ""
    finally:
        plt.close(fig)


def _old_study(url, *, with_constraint):
    """A study as dse wrote them before metric names and definitions were stored: objective labels in a
    user attribute, the record as separate user attributes, every choice a parameter."""
    from dse.explore.study.storage import open_storage

    study = optuna.create_study(study_name="old", storage=open_storage(url), directions=["minimize", "minimize"])
    study.set_user_attr("objectives", ["time[themis+scf]", "cost"])
    dist = optuna.distributions
    for k, (w0, t_ns, cost) in enumerate([(0.25, 3.0e6, 2.0e6), (0.75, 2.5e6, 3.5e6)]):
        bws = (200.0 * w0 / 1.0 + 100.0, 300.0 - 200.0 * w0)
        study.add_trial(
            optuna.trial.create_trial(
                params={"bw_2d_0": w0, "bw_2d_1": 1 - w0, "chunks": 64},
                distributions={
                    "bw_2d_0": dist.FloatDistribution(0, 1),
                    "bw_2d_1": dist.FloatDistribution(0, 1),
                    "chunks": dist.CategoricalDistribution([64]),
                },
                values=[t_ns, cost],
                user_attrs={
                    "topology": f"Ring(8,{bws[0]:g},20)_SW(8,{bws[1]:g},1700)",
                    "time_themis_ns": t_ns,
                    "bw_utilization": 0.5 + 0.1 * k,
                    "gap": 0.02,
                    "cost_usd": cost,
                },
                system_attrs={"constraints:cost": cost - 3.0e6} if with_constraint else {},
            )
        )
    return "old"


def test_a_study_run_before_metric_names_reports_with_units(tmp_path, run_cli):
    from dse.explore.study.units import constraint_limits

    url = str(tmp_path / "old.journal")
    name = _old_study(url, with_constraint=True)
    rep = write_report(name, url, tmp_path / "rep")
    assert rep.names == ["time_ns_themis_scf", "cost"] and rep.multi
    rows = _csv(tmp_path / "rep" / "trials.csv")
    assert list(rows[0])[:3] == ["trial", "time_themis_scf_ns", "cost_usd"]
    assert [float(r["time_themis_scf_ns"]) for r in rows] == [3.0e6, 2.5e6]
    assert [float(r["bw_utilization_pct"]) for r in rows] == pytest.approx([50.0, 60.0])
    assert [float(r["bw0_GBps"]) for r in rows] == [150.0, 250.0] and "param_bw_2d_0" not in rows[0]
    assert [r["feasible"] for r in rows] == ["True", "False"]
    study = load_study(name, url)
    # no definition stored: the cost limit comes from a trial's cost and its constraint
    assert constraint_limits({}, complete_trials(study), rep.names) == {"cost": pytest.approx(3.0e6)}
    code, out, err = run_cli("study", "show", name, "--storage", url)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[1] == "objectives: time (ms) with themis+scf (minimize); cost ($) (minimize)"
    assert lines[2] == "constraints: cost ($) <= 3,000,000"
    assert lines[4].split("  ")[:3] == ["trial", "time (ms) with themis+scf", " cost ($)"]
    assert lines[6].split()[:3] == ["0", "3.000", "2,000,000"]


def test_the_terminal_names_every_objective_with_its_unit(bw_study, shape_study, run_cli):
    import json

    name, url = bw_study
    code, out, err = run_cli("study", "run", str(BW), "--only", name, "--trials", "12", "--storage", url)
    best = min(load_study(name, url).trials, key=lambda t: t.values[0])
    assert code == 0 and err == ""
    assert f"; best time (ms) with themis+scf = {best.values[0] / 1e6:.3f} (trial {best.number}): " in out
    code, out, _ = run_cli("study", "list", "--storage", url)
    head, _, *rows = out.splitlines()
    assert head.split() == ["study", "complete", "failed", "objective", "best", "pareto", "storage"]
    assert rows[0].split()[:8] == [name, "12", "0", "time", "(ms)", "with", "themis+scf", f"{best.values[0] / 1e6:.3f}"]
    listed = json.loads(run_cli("study", "list", "--storage", url, "--json")[1])[0]
    assert listed["objectives"] == ["time (ms) with themis+scf"] and listed["best"] == pytest.approx(
        best.values[0] / 1e6
    )
    assert listed["best_value"] == best.values[0] and listed["best_metric"] == "time_ns_themis_scf"
    code, out, _ = run_cli("study", "show", name, "--storage", url, "--top", "3")
    lines = out.splitlines()
    assert (
        lines[1] == "objectives: time (ms) with themis+scf (minimize)"
        and lines[2] == "best 3 of 12 trials (feasible first):"
    )
    assert lines[3].split("  ")[:2] == ["trial", "time (ms) with themis+scf"] and "bw3 (GB/s)" in lines[3]
    assert len(lines) == 8 and lines[5].split()[:2] == [str(best.number), f"{best.values[0] / 1e6:.3f}"]
    name, url = shape_study
    out = run_cli("study", "run", str(SHAPE), "--trials", "24", "--storage", url)[1]
    assert out.rstrip().endswith(
        "Pareto front of "
        + out.split("Pareto front of ")[1].split()[0]
        + " designs over time (ms) with themis+scf and cost ($)"
    )
    shown_json = json.loads(run_cli("study", "show", name, "--storage", url, "--json")[1])
    assert [o["name"] for o in shown_json["objectives"]] == ["time (ms) with themis+scf", "cost ($)"]
    assert [o["column"] for o in shown_json["objectives"]] == ["time_themis_scf_ns", "cost_usd"]
