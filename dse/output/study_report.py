"""Reports of dse studies: CSV files of the trials and of the best (or the Pareto front), and figures.

The report speaks the study's terms rather than Optuna's, every number with its unit
(`dse.explore.study.units`):

- each objective is a column named by its metric and unit suffix: ``time_themis_scf_ns``,
  ``bw_utilization_themis_scf_pct`` (0-100), ``gap_themis_scf_pct``, ``cost_usd``,
  ``iteration_time_x_cost_themis_scf_ms_usd``; the journal's values and ids stay as stored
  (``time_ns_themis_scf``): only the report names them so;
- the record's columns end in their unit too (``time_themis_ns``, ``bound_ns``, ``cost_usd``,
  ``bw_utilization_pct``, ``gap_pct``);
- the bandwidth of dimension i (from the innermost) is ``bw<i>_GBps``, read from the trial's
  record: a budget-split space samples weights, which say nothing on their own, so the sampled
  ``bw_*`` parameters are left out;
- the figures (`dse.output.study_plots`) name each objective with its unit (``time (ms) with
  themis+scf``), draw a cost limit where the study has one, and weigh only the parameters that vary;
- a study under a closed-form cost model (`nccl`) names that model where a scheduler would be
  (``time_nccl_ns``, ``time (ms) with nccl``: `dse.explore.study.units`).
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
from dse.explore.study.storage import feasible, load_study, redact, trial_params, trial_record
from dse.explore.study.units import (
    BW_PARAM,
    Shown,
    as_shown,
    bandwidths,
    closed_form_model,
    constraint_limits,
    number,
    record_columns,
    study_ids,
    study_objectives,
)
from dse.output.study_plots import write_figures

#: A design's choices that only a chunk schedule uses: not columns under a closed-form model (nccl).
SCHEDULE_PARAMS = ("chunks", "scheduler", "queue")


def objective_names(study: Any) -> list[str]:
    """The study's objective ids (`dse.explore.study.units.objective_ids`)."""
    return study_ids(study)


def trial_row(trial: Any, objectives: Sequence[str | Shown], model: str = "") -> dict[str, Any]:
    """One CSV row: the trial number, its objectives (ids or `Shown`) in their columns' units,
    its record and bandwidths in GB/s, the design's choices (sampled or fixed by the space;
    bandwidth parameters left out) and whether it is feasible; a closed-form `model`'s times named
    as `record_columns` names them, and the schedule's choices (`SCHEDULE_PARAMS`) left out. Trials
    of either layout (`dse.explore.study.storage`) give the same row."""
    r: dict[str, Any] = {"trial": trial.number}
    for o, v in zip(objectives, trial.values):
        s = as_shown(o, model)
        r[s.column] = v * s.unit.column_scale
    attrs = record_columns(trial_record(trial), model)
    if "topology" in attrs:
        r["topology"] = attrs.pop("topology")
    r.update({f"bw{i}_GBps": bw for i, bw in enumerate(bandwidths(trial))})
    r.update({k: v for k, v in attrs.items() if k not in r})
    unused = SCHEDULE_PARAMS if model else ()  # a closed-form time has no schedule
    r.update({f"param_{k}": v for k, v in trial_params(trial).items() if not BW_PARAM.match(k) and k not in unused})
    r["feasible"] = feasible(trial)
    return r


@dataclass(frozen=True)
class Report:
    """A study's report: its rows (every complete trial), the best or the Pareto front, whether it
    has several objectives, the files written, notes for the user, the objective ids and the
    objectives as people read them (`objectives`; from `names` when not given)."""

    rows: list[dict[str, Any]]
    best: list[dict[str, Any]]
    multi: bool
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    objectives: list[Shown] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.objectives:
            object.__setattr__(self, "objectives", [as_shown(n) for n in self.names])

    @property
    def columns(self) -> list[str]:
        """The objectives' CSV columns."""
        return [s.column for s in self.objectives]


def complete_trials(study: Any) -> list[Any]:
    """The study's complete trials, in Optuna's order."""
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
    names, objectives = objective_names(study), study_objectives(study)
    model = closed_form_model(study._storage.get_study_system_attrs(study._study_id))
    multi = len(study.directions) > 1
    if multi:
        best = sorted(study.best_trials, key=lambda t: t.values[0])
    else:
        sign = 1 if study.direction == optuna.study.StudyDirection.MINIMIZE else -1
        good = [t for t in complete if feasible(t)] or complete
        best = sorted(good, key=lambda t: sign * t.value)[:20]
    rows, best_rows = ([trial_row(t, objectives, model) for t in ts] for ts in (complete, best))
    return study, Report(rows, best_rows, multi, names=names, objectives=objectives)


def _column_rank(key: str, columns: Sequence[str]) -> tuple[int, int]:
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
    return (0 if key == "trial" or key in columns else 3, 0)


def write_csv(path: Path, rows: list[dict[str, Any]], columns: Sequence[str] = ()) -> None:
    """Rows as a CSV file, written atomically: the union of their keys, grouped (`_column_rank`;
    `columns`: the objectives'), each group in order of first appearance."""
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    keys.sort(key=lambda k: _column_rank(k, columns))  # stable: within a group, the order of first appearance
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
    out = check_output_dir(out_dir, "out")
    check_outputs_in(out, REPORT_FILES, "out")
    study, rep = report_data(name, url)
    files = []
    with output_folder(out, "out"):
        for fname, rows in (("trials.csv", rep.rows), ("pareto.csv" if rep.multi else "best.csv", rep.best)):
            write_csv(out / fname, rows, rep.columns)
            files.append(str(out / fname))
        figures, notes = write_figures(study, complete_trials(study), rep.objectives, out)
    return Report(rep.rows, rep.best, rep.multi, files + figures, notes, rep.names, rep.objectives)


def show_rows(rep: Report, top: int, constrained: bool) -> tuple[list[str], list[list[str]]]:
    """`dse study show`'s table: the Pareto front, or the best `top` trials (feasible first); the
    objectives named with their units and shown in them, each dimension's GB/s, whether the design
    meets the constraints (`constrained` studies), the topology."""
    rows = rep.best if rep.multi else rep.best[:top]
    objectives = rep.objectives
    dims = max((int(m.group(1)) + 1 for r in rows for k in r if (m := re.fullmatch(r"bw(\d+)_GBps", k))), default=0)
    head = ["trial", *(s.name for s in objectives), *(f"bw{i} (GB/s)" for i in range(dims))]
    head += ["feasible"] * constrained + ["topology"]
    body = []
    for r in rows:
        values = [s.text(r[s.column] / s.unit.column_scale) if s.column in r else "" for s in objectives]
        bws = [number(r[f"bw{i}_GBps"]) if f"bw{i}_GBps" in r else "" for i in range(dims)]
        ok = ["yes" if r["feasible"] else "no"] * constrained
        body.append([str(r["trial"]), *values, *bws, *ok, str(r.get("topology", ""))])
    return head, body


def show_text(study: Any, rep: Report, url: str, top: int) -> str:
    """What `dse study show` prints: the study, its objectives and constraints with their units,
    then `show_rows` as a table."""
    from dse.output.report import format_table

    directions = [d.name.lower() for d in study.directions]
    system = study._storage.get_study_system_attrs(study._study_id)
    limits = constraint_limits(system, complete_trials(study), rep.names)
    model = closed_form_model(system)
    lines = [
        f"{study.study_name}: {len(rep.rows)} complete trials on {redact(url)}",
        "objectives: " + "; ".join(f"{s.name} ({d})" for s, d in zip(rep.objectives, directions)),
    ]
    if limits:
        shown_limits = [(as_shown(i, model), v) for i, v in limits.items()]
        lines.append("constraints: " + "; ".join(f"{s.name} <= {s.text(v)}" for s, v in shown_limits))
    constrained = bool(limits) or any(t.constraints for t in complete_trials(study))
    head, body = show_rows(rep, top, constrained)
    what = (
        f"Pareto front, {len(body)} designs"
        if rep.multi
        else f"best {len(body)} of {len(rep.rows)} trials (feasible first)"
    )
    lines += [f"{what}:", format_table(head, body, align="r" * (len(head) - 1) + "l")]
    return "\n".join(lines)
