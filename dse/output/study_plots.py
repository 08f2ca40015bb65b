"""Figures of a study's report: each figure's data in one function, its drawing in another.

- history: one panel per objective, every complete trial's value against its number and the best so
  far (among feasible trials), in the metric's unit (`dse.output.study_report.axis`: ms, %, $);
- Pareto front (several objectives): one panel per pair of objectives, every complete trial, the
  front marked, axes with units;
- importances: per objective, Optuna's importance (PED-ANOVA) of each parameter that varies over the
  complete trials, bandwidths counted as GB/s per dimension (`bw<i>_GBps`) rather than the weights a
  budget split samples. A parameter with one value, in the space or in every trial, explains
  nothing and is left out; with fewer than two left there is nothing to compare, so no figure is
  drawn and a note says why.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dse.core.files import atomic_output
from dse.output.study_report import BW_PARAM, axis, bandwidths, feasible

#: An objective's direction, as Optuna names it (`StudyDirection.name.lower()`).
Direction = Literal["minimize", "maximize"]


@dataclass
class HistoryPanel:
    """One objective over the trials: values in the axis's unit, feasibility, the best so far."""

    name: str
    label: str
    direction: str
    trials: list[int]
    values: list[float]
    feasible: list[bool]
    best: list[float]


def history_data(trials: Sequence[Any], names: Sequence[str], directions: Sequence[Direction]) -> list[HistoryPanel]:
    """One `HistoryPanel` per objective, trials in number order (NaN best before a feasible one)."""
    ordered = sorted(trials, key=lambda t: t.number)
    panels = []
    for k, (name, direction) in enumerate(zip(names, directions)):
        ax = axis(name)
        pick = min if direction == "minimize" else max
        best: float | None = None
        panel = HistoryPanel(name, ax.label, direction, [], [], [], [])
        for t in ordered:
            v = t.values[k] * ax.scale
            ok = feasible(t)
            if ok:
                best = v if best is None else pick(best, v)
            panel.trials.append(t.number)
            panel.values.append(v)
            panel.feasible.append(ok)
            panel.best.append(math.nan if best is None else best)
        panels.append(panel)
    return panels


@dataclass
class ParetoPanel:
    """Two objectives against each other: every complete trial, which are on the front."""

    x_label: str
    y_label: str
    x: list[float]
    y: list[float]
    front: list[bool]
    feasible: list[bool]


def pareto_data(trials: Sequence[Any], front: set[int], names: Sequence[str]) -> list[ParetoPanel]:
    """One `ParetoPanel` per pair of objectives; `front` holds the trial numbers on the front."""
    panels = []
    for i, j in itertools.combinations(range(len(names)), 2):
        ax, ay = axis(names[i]), axis(names[j])
        panels.append(
            ParetoPanel(
                ax.label,
                ay.label,
                [t.values[i] * ax.scale for t in trials],
                [t.values[j] * ay.scale for t in trials],
                [t.number in front for t in trials],
                [feasible(t) for t in trials],
            )
        )
    return panels


def design_params(trial: Any) -> dict[str, Any]:
    """A trial's parameters in the report's terms: the sampled ones, bandwidth parameters replaced
    by each dimension's GB/s (``bw<i>_GBps``)."""
    params = {k: v for k, v in trial.params.items() if not BW_PARAM.match(k)}
    params.update({f"bw{i}_GBps": bw for i, bw in enumerate(bandwidths(trial))})
    return params


def varying(per_trial: Sequence[dict[str, Any]]) -> list[str]:
    """The parameters that take more than one value over the trials, in order of first appearance."""
    seen: dict[str, set] = {}
    for params in per_trial:
        for k, v in params.items():
            seen.setdefault(k, set()).add(v)
    return [k for k, values in seen.items() if len(values) > 1]


@dataclass
class Importances:
    """Per objective name, each varying parameter's importance (they sum to 1 per objective)."""

    params: list[str]
    by_objective: dict[str, dict[str, float]]


def importance_data(trials: Sequence[Any], names: Sequence[str], directions: Sequence[Direction]) -> Importances | str:
    """Each varying parameter's importance for each objective, or a one-line reason there are none."""
    import optuna
    from optuna.distributions import FloatDistribution

    per = [design_params(t) for t in trials]
    vary = varying(per)
    if len(vary) < 2:
        return (
            f"no importances.png: {len(vary)} parameter{'s' if len(vary) != 1 else ''} of the space "
            f"{'varies' if len(vary) == 1 else 'vary'} over the complete trials ({', '.join(vary) or 'none'}); "
            "importances compare two or more"
        )
    dists = {}
    for p in vary:
        values = [params[p] for params in per if p in params]
        have = next(t for t, params in zip(trials, per) if p in params)
        dists[p] = have.distributions[p] if p in have.distributions else FloatDistribution(min(values), max(values))
    out: dict[str, dict[str, float]] = {}
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no line per in-memory study
    for k, (name, direction) in enumerate(zip(names, directions)):
        study = optuna.create_study(direction=direction)
        study.add_trials(
            [
                optuna.trial.create_trial(
                    params={p: params[p] for p in vary if p in params},
                    distributions={p: dists[p] for p in vary if p in params},
                    value=t.values[k],
                )
                for t, params in zip(trials, per)
            ]
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out[name] = optuna.importance.get_param_importances(study, params=vary)
            except (ValueError, RuntimeError, ZeroDivisionError) as e:  # too few trials to tell, say
                return (
                    f"no importances.png: Optuna could not weigh the parameters for {name} ({' '.join(str(e).split())})"
                )
    return Importances(vary, out)


# ----------------------------------------------------------------------------- drawing
def _figure(rows: int, cols: int, size: tuple[float, float]) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(rows, cols, figsize=size, squeeze=False)


def _save(fig: Any, path: Path) -> str:
    import matplotlib.pyplot as plt

    try:
        fig.tight_layout()
        with atomic_output(path) as tmp:
            fig.savefig(tmp, dpi=100, format="png")
    finally:
        plt.close(fig)
    return str(path)


def draw_history(panels: Sequence[HistoryPanel], path: Path) -> str:
    """One panel per objective: trials as dots (crosses if infeasible), the best so far as a line."""
    fig, axes = _figure(len(panels), 1, (8, 1.5 + 2.8 * len(panels)))
    for ax, p in zip(axes[:, 0], panels):
        ok = [(n, v) for n, v, f in zip(p.trials, p.values, p.feasible) if f]
        bad = [(n, v) for n, v, f in zip(p.trials, p.values, p.feasible) if not f]
        if ok:
            ax.scatter(*zip(*ok), s=10, color="tab:blue", label="trial")
        if bad:
            ax.scatter(*zip(*bad), s=14, marker="x", color="tab:gray", label="infeasible trial")
        ax.step(p.trials, p.best, where="post", color="tab:red", label="best so far")
        ax.set_title(f"{p.name} ({p.direction})", fontsize=10)
        ax.set_ylabel(p.label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[-1, 0].set_xlabel("trial")
    return _save(fig, path)


def draw_pareto(panels: Sequence[ParetoPanel], path: Path) -> str:
    """One panel per pair of objectives: every trial, the Pareto front highlighted."""
    cols = min(len(panels), 3)
    rows = -(-len(panels) // cols)
    fig, axes = _figure(rows, cols, (6 * cols, 4.5 * rows))
    for ax, p in zip(axes.flat, panels):
        rest = [(x, y) for x, y, f, ok in zip(p.x, p.y, p.front, p.feasible) if not f and ok]
        bad = [(x, y) for x, y, ok in zip(p.x, p.y, p.feasible) if not ok]
        front = sorted((x, y) for x, y, f in zip(p.x, p.y, p.front) if f)
        if rest:
            ax.scatter(*zip(*rest), s=10, color="tab:blue", alpha=0.6, label="trial")
        if bad:
            ax.scatter(*zip(*bad), s=14, marker="x", color="tab:gray", label="infeasible trial")
        if front:
            ax.plot(*zip(*front), marker="o", markersize=5, color="tab:red", label="Pareto front")
        ax.set_xlabel(p.x_label)
        ax.set_ylabel(p.y_label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    return _save(fig, path)


def draw_importances(imp: Importances, path: Path) -> str:
    """One panel per objective: each varying parameter's importance as a horizontal bar."""
    n = len(imp.by_objective)
    fig, axes = _figure(1, n, (6 * n, 1.5 + 0.4 * len(imp.params)))
    for ax, (name, values) in zip(axes[0], imp.by_objective.items()):
        order = sorted(values, key=lambda p: values[p])
        ax.barh(order, [values[p] for p in order], color="tab:blue")
        ax.set_xlabel(f"importance for {name}")
        ax.set_xlim(0, 1)
        ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, path)


def write_figures(study: Any, trials: Sequence[Any], names: Sequence[str], out: Path) -> tuple[list[str], list[str]]:
    """history.png, pareto_front.png (several objectives), importances.png (two or more varying
    parameters) in `out`; returns the files written and notes on any figure not written."""
    directions = [d.name.lower() for d in study.directions]
    files = [draw_history(history_data(trials, names, directions), out / "history.png")]
    if len(names) > 1:
        front = {t.number for t in study.best_trials}
        files.append(draw_pareto(pareto_data(trials, front, names), out / "pareto_front.png"))
    imp = importance_data(trials, names, directions)
    if isinstance(imp, str):
        return files, [imp]
    files.append(draw_importances(imp, out / "importances.png"))
    return files, []
