"""Reports of dse studies: CSV files of the trials and of the best (or the Pareto front), and figures.

The report speaks the study's terms rather than Optuna's:

- each objective is a column named by its metric (`dse.explore.objectives.metric_name`): ``time_ns_themis_scf``,
  ``bw_utilization_themis_scf``, ``gap_themis_scf``, ``cost``; the same names are the study's
  Optuna metric names, so optuna-dashboard shows them too;
- the bandwidth of dimension i (from the innermost) is ``bw<i>_GBps``, read from the trial's
  topology: a budget-split space samples weights, which say nothing on their own, so the sampled
  ``bw_*`` parameters are left out;
- the figures (`dse.output.study_plots`) have one history panel per objective and Pareto axes in ms, % or $,
  and importances only over the parameters that vary.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.files import atomic_output, check_output_dir, check_outputs_in, output_folder
from dse.core.topology import parse_topology
from dse.explore.objectives import METRIC_PREFIX, metric_name
from dse.explore.storage import load_study, trial_params, trial_record

_AXES = {  # metric name prefix -> (axis title, factor from the stored value, unit)
    "time_ns": ("time", 1e-6, "ms"),
    "bw_utilization": ("BW utilization", 100.0, "%"),
    "gap": ("gap to the bound", 100.0, "%"),
    "cost": ("hardware cost", 1.0, "$"),
    "iteration_time_ns": ("iteration time", 1e-6, "ms"),
    "libra_iteration_time_ns": ("LIBRA's iteration time", 1e-6, "ms"),
    "iteration_time_x_cost": ("iteration time x cost", 1e-9, "s x $"),
}
_OLD_LABEL = re.compile(r"^(\w+)\[(\w+)\+(\w+)\]$")  # Objective.label: time[themis+scf]
BW_PARAM = re.compile(r"^bw_\d+d_\d+$")  # the space's sampled bandwidth parameters (weights or GB/s)


def objective_names(study: Any) -> list[str]:
    """The study's objective names: its Optuna metric names, else derived from the labels that
    studies run before metric names were set keep in their user attributes, else objective_<i>."""
    n = len(study.directions)
    names = study.metric_names
    if names and len(names) == n:
        return list(names)
    labels = study.user_attrs.get("objectives") or []
    out = []
    for i in range(n):
        label = str(labels[i]) if i < len(labels) else ""
        m = _OLD_LABEL.match(label)
        if label == "cost" or (m and m.group(1) in METRIC_PREFIX):
            out.append(metric_name(*m.groups()) if m else "cost")
        else:
            out.append(f"objective_{i}")
    return out


@dataclass(frozen=True)
class Axis:
    """How a metric is shown: an axis label with its unit, and the factor from the stored value."""

    label: str
    scale: float


def axis(name: str) -> Axis:
    """The axis of metric `name`: ``time_ns_themis_scf`` -> "time, themis+scf (ms)" and 1e-6."""
    for prefix, (title, scale, unit) in _AXES.items():
        if name == prefix or name.startswith(prefix + "_"):
            rest = name[len(prefix) + 1 :]
            how = "+".join(rest.rsplit("_", 1)) if rest else ""
            return Axis(f"{title}{', ' + how if how else ''} ({unit})", scale)
    return Axis(name, 1.0)


def bandwidths(trial: Any) -> list[float]:
    """Per-dimension bandwidth (GB/s per NPU, innermost first) of a trial's topology."""
    notation = trial_record(trial).get("topology")
    if not notation:
        return []
    try:
        return [d.bandwidth for d in parse_topology(str(notation)).dims]
    except InputError:  # not a topology dse wrote: no bandwidth columns rather than no report
        return []


def feasible(trial: Any) -> bool:
    """Whether a trial meets every constraint (a constraint value <= 0 is met)."""
    return all(v <= 0 for v in trial.constraints.values())


def trial_row(trial: Any, names: list[str]) -> dict[str, Any]:
    """One CSV row: the trial number, its objectives by name, its record and bandwidths in GB/s, the
    design's choices (sampled or fixed by the space; bandwidth parameters left out) and whether it
    is feasible. Trials of either layout (`dse.explore.storage`) give the same row."""
    r: dict[str, Any] = {"trial": trial.number}
    r.update(zip(names, trial.values))
    attrs = trial_record(trial)
    if "topology" in attrs:
        r["topology"] = attrs.pop("topology")
    r.update({f"bw{i}_GBps": bw for i, bw in enumerate(bandwidths(trial))})
    r.update(attrs)
    r.update({f"param_{k}": v for k, v in trial_params(trial).items() if not BW_PARAM.match(k)})
    r["feasible"] = feasible(trial)
    return r


@dataclass(frozen=True)
class Report:
    """A study's report: its rows (every complete trial), the best or the Pareto front, whether it
    has several objectives, the files written, notes for the user and the objective names."""

    rows: list[dict[str, Any]]
    best: list[dict[str, Any]]
    multi: bool
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


def complete_trials(study: Any) -> list[Any]:
    from optuna.trial import TrialState

    return [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]


def report_data(name: str, url: str) -> tuple[Any, Report]:
    """The study and the rows of its report: every complete trial, then the best 20 (feasible first)
    or the Pareto front."""
    import optuna

    study = load_study(name, url)
    complete = complete_trials(study)
    if not complete:
        raise InputError("study", f"{name!r} has no complete trial yet")
    names = objective_names(study)
    multi = len(study.directions) > 1
    if multi:
        best = sorted(study.best_trials, key=lambda t: t.values[0])
    else:
        sign = 1 if study.direction == optuna.study.StudyDirection.MINIMIZE else -1
        good = [t for t in complete if feasible(t)] or complete
        best = sorted(good, key=lambda t: sign * t.value)[:20]
    return study, Report(
        [trial_row(t, names) for t in complete], [trial_row(t, names) for t in best], multi, names=names
    )


def _column_rank(key: str, names: Sequence[str]) -> tuple[int, int]:
    """Columns in groups whatever trial comes first: trial and objectives, topology, bandwidths
    (by dimension), the record, the parameters, feasible."""
    if key == "topology":
        return (1, 0)
    if m := re.fullmatch(r"bw(\d+)_GBps", key):
        return (2, int(m.group(1)))
    if key.startswith("param_"):
        return (4, 0)
    if key == "feasible":
        return (5, 0)
    return (0 if key == "trial" or key in names else 3, 0)


def write_csv(path: Path, rows: list[dict[str, Any]], names: Sequence[str] = ()) -> None:
    """Rows as a CSV file, written atomically: the union of their keys, grouped (`_column_rank`;
    `names`: the objectives), each group in order of first appearance."""
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    keys.sort(key=lambda k: _column_rank(k, names))  # stable: within a group, the order of first appearance
    with atomic_output(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


#: Every file a report may write in its folder (checked before the study is read).
REPORT_FILES = ("trials.csv", "best.csv", "pareto.csv", "history.png", "pareto_front.png", "importances.png")


def write_report(name: str, url: str, out_dir: str | Path) -> Report:
    """trials.csv, best.csv or pareto.csv, and figures (history, Pareto front, importances) of a study.

    The output rules of `dse.core.files`: the folder and each of `REPORT_FILES` in it are checked
    before the study is read (a FIFO, device, socket or folder where a file goes is refused; a
    symlink is followed); the folder is created once the study is found, and removed again if
    nothing could be written in it."""
    from dse.output.study_plots import write_figures

    out = check_output_dir(out_dir, "out")
    check_outputs_in(out, REPORT_FILES, "out")
    study, rep = report_data(name, url)
    files = []
    with output_folder(out, "out"):
        for fname, rows in (("trials.csv", rep.rows), ("pareto.csv" if rep.multi else "best.csv", rep.best)):
            write_csv(out / fname, rows, rep.names)
            files.append(str(out / fname))
        figures, notes = write_figures(study, complete_trials(study), rep.names, out)
    return Report(rep.rows, rep.best, rep.multi, files + figures, notes, rep.names)
