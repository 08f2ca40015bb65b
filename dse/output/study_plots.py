"""Figures of a study's report: each figure's data in one function, its drawing in another.

Every objective is named with its unit and shown in it (`dse.explore.study.units`: ``time (ms) with
themis+scf``, ``cost ($)``, ``time x cost (ms·$)``); the journal's values are converted here.

- history: one panel per objective, titled with its name and direction: every complete trial's
  value against its number and the best so far (among feasible trials); a constrained objective's
  limit (the cost limit) as a labelled dashed line;
- Pareto front (several objectives): one panel per pair of objectives, every complete trial, the
  front marked, axes named with units, the limit of a constrained objective (the cost limit) as a
  labelled dashed line;
- importances: per objective, Optuna's importance (PED-ANOVA) of each parameter that varies over the
  complete trials, bandwidths counted as GB/s per dimension (``bw<i>_GBps``, labelled ``bw<i>
  (GB/s)``) rather than the weights a budget split samples. A parameter with one value, in the
  space or in every trial, explains nothing and is left out; with fewer than two left there is
  nothing to compare, so no figure is drawn and a note says why.

Tick labels are plain numbers in the axis's unit: no offset or ``1e6`` multiplier above an axis;
dollars read ``$1.5M``, ``$750k``; other numbers of 10,000 or more ``12k``, ``7.2G``.
"""

from __future__ import annotations

import itertools
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dse.core.files import atomic_output
from dse.explore.study.storage import feasible
from dse.explore.study.units import BW_PARAM, Shown, as_shown, bandwidths, constraint_limits

#: An objective's direction, as Optuna names it (`StudyDirection.name.lower()`).
Direction = Literal["minimize", "maximize"]


@dataclass
class HistoryPanel:
    """One objective over the trials: its name (with unit) and quantity (the y axis), values in that
    unit, feasibility, the best so far, the unit and the objective's limit (None: unconstrained)."""

    name: str
    label: str
    direction: str
    trials: list[int]
    values: list[float]
    feasible: list[bool]
    best: list[float]
    unit: str = ""
    limit: float | None = None

    @property
    def title(self) -> str:
        """The panel's title: the objective's name and its direction (``time (ms) with themis+scf, minimized``)."""
        return f"{self.name}, {self.direction}d"


def history_data(
    trials: Sequence[Any],
    names: Sequence[str | Shown],
    directions: Sequence[Direction],
    limits: Mapping[str, float] | None = None,
) -> list[HistoryPanel]:
    """One `HistoryPanel` per objective (`names`: the ids or their `Shown`; `limits`: the
    constrained ones' largest allowed values by id, stored unit), trials in number order (NaN best
    before a feasible one)."""
    ordered = sorted(trials, key=lambda t: t.number)
    panels = []
    for k, (name, direction) in enumerate(zip(names, directions)):
        s = as_shown(name)
        pick = min if direction == "minimize" else max
        best: float | None = None
        limit = (limits or {}).get(s.id)
        panel = HistoryPanel(
            s.name, s.quantity, direction, [], [], [], [], s.unit.unit, None if limit is None else s.value(limit)
        )
        for t in ordered:
            v = s.value(t.values[k])
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
    """Two objectives against each other: every complete trial, which are on the front; each axis's
    label (name and unit), unit and limit (None: unconstrained), in the axis's unit."""

    x_label: str
    y_label: str
    x: list[float]
    y: list[float]
    front: list[bool]
    feasible: list[bool]
    x_unit: str = ""
    y_unit: str = ""
    x_limit: float | None = None
    y_limit: float | None = None


def pareto_data(
    trials: Sequence[Any], front: set[int], names: Sequence[str | Shown], limits: Mapping[str, float] | None = None
) -> list[ParetoPanel]:
    """One `ParetoPanel` per pair of objectives (ids or their `Shown`); `front` holds the trial
    numbers on the front."""
    panels = []
    lim = limits or {}
    for i, j in itertools.combinations(range(len(names)), 2):
        sx, sy = as_shown(names[i]), as_shown(names[j])
        lx, ly = lim.get(sx.id), lim.get(sy.id)
        panels.append(
            ParetoPanel(
                sx.name,
                sy.name,
                [sx.value(t.values[i]) for t in trials],
                [sy.value(t.values[j]) for t in trials],
                [t.number in front for t in trials],
                [feasible(t) for t in trials],
                sx.unit.unit,
                sy.unit.unit,
                None if lx is None else sx.value(lx),
                None if ly is None else sy.value(ly),
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
    """Per objective id, each varying parameter's importance (they sum to 1 per objective), and
    each objective's title (its `Shown.name`)."""

    params: list[str]
    by_objective: dict[str, dict[str, float]]
    titles: dict[str, str] = field(default_factory=dict)


def importance_data(
    trials: Sequence[Any], names: Sequence[str | Shown], directions: Sequence[Direction]
) -> Importances | str:
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
    shown = [as_shown(n) for n in names]
    for k, (s, direction) in enumerate(zip(shown, directions)):
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
                out[s.id] = optuna.importance.get_param_importances(study, params=vary)
            except (ValueError, RuntimeError, ZeroDivisionError) as e:  # too few trials to tell, say
                return (
                    f"no importances.png: Optuna could not weigh the parameters for {s.name} "
                    f"({' '.join(str(e).split())})"
                )
    return Importances(vary, out, {s.id: s.name for s in shown})


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


_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_MONEY = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def tick_text(v: float, unit: str, large: bool) -> str:
    """One tick label in the axis's unit: dollars as ``$1.5M``; with `large` (an axis reaching
    10,000) other numbers as ``12k``, ``7.2G``; otherwise the plain number."""
    money = unit == "$"
    a = abs(v)
    for div, sym in _MONEY if money else _SI:
        if a >= div and (money or large):
            text = f"{v / div:.4g}{sym}"
            break
    else:
        text = f"{v:.4g}" if money or large else f"{v:g}"
    return ("-$" + text[1:] if text.startswith("-") else "$" + text) if money else text


def _plain_ticks(axis: Any, unit: str, values: Sequence[float]) -> None:
    """Plain tick labels on a matplotlib axis (`tick_text`): no offset, no multiplier."""
    from matplotlib.ticker import FuncFormatter

    finite = [abs(v) for v in values if math.isfinite(v)]
    large = bool(finite) and max(finite) >= 1e4
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: tick_text(v, unit, large)))


def _limit_text(limit: float, unit: str, label: str) -> str:
    what = "cost limit" if unit == "$" else f"{label.split(' (')[0]} limit"
    return f"{what} {tick_text(limit, unit, True) if unit == '$' else f'{limit:.4g} {unit}'}"


def _legend(ax: Any) -> None:
    """The legend beside the panel, where it hides no point."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def draw_history(panels: Sequence[HistoryPanel], path: Path) -> str:
    """`history_figure` saved as a PNG file."""
    return _save(history_figure(panels), path)


def history_figure(panels: Sequence[HistoryPanel]) -> Any:
    """One panel per objective: trials as dots (crosses if infeasible), the best so far as a line,
    the objective's limit as a dashed line."""
    fig, axes = _figure(len(panels), 1, (10, 1.5 + 2.8 * len(panels)))
    for ax, p in zip(axes[:, 0], panels):
        ok = [(n, v) for n, v, f in zip(p.trials, p.values, p.feasible) if f]
        bad = [(n, v) for n, v, f in zip(p.trials, p.values, p.feasible) if not f]
        if ok:
            ax.scatter(*zip(*ok), s=10, color="tab:blue", label="trial")
        if bad:
            ax.scatter(*zip(*bad), s=14, marker="x", color="tab:gray", label="infeasible trial")
        ax.step(p.trials, p.best, where="post", color="tab:red", label="best so far")
        if p.limit is not None:
            ax.axhline(p.limit, color="tab:orange", linestyle="--", label=_limit_text(p.limit, p.unit, p.label))
        ax.set_title(p.title, fontsize=10)
        ax.set_ylabel(p.label)
        _plain_ticks(ax.yaxis, p.unit, p.values + ([p.limit] if p.limit is not None else []))
        ax.grid(True, alpha=0.3)
        _legend(ax)
    from matplotlib.ticker import MaxNLocator

    for ax in axes[:, 0]:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # trial numbers
    axes[-1, 0].set_xlabel("trial")
    return fig


def draw_pareto(panels: Sequence[ParetoPanel], path: Path) -> str:
    """`pareto_figure` saved as a PNG file."""
    return _save(pareto_figure(panels), path)


def pareto_figure(panels: Sequence[ParetoPanel]) -> Any:
    """One panel per pair of objectives: every trial, the Pareto front highlighted, a constrained
    objective's limit as a dashed line."""
    cols = min(len(panels), 3)
    rows = -(-len(panels) // cols)
    fig, axes = _figure(rows, cols, (7.5 * cols, 4.5 * rows))
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
        if p.x_limit is not None:
            ax.axvline(p.x_limit, color="tab:orange", linestyle="--", label=_limit_text(p.x_limit, p.x_unit, p.x_label))
        if p.y_limit is not None:
            ax.axhline(p.y_limit, color="tab:orange", linestyle="--", label=_limit_text(p.y_limit, p.y_unit, p.y_label))
        ax.set_xlabel(p.x_label)
        ax.set_ylabel(p.y_label)
        _plain_ticks(ax.xaxis, p.x_unit, p.x + ([p.x_limit] if p.x_limit is not None else []))
        _plain_ticks(ax.yaxis, p.y_unit, p.y + ([p.y_limit] if p.y_limit is not None else []))
        ax.grid(True, alpha=0.3)
        _legend(ax)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    return fig


def param_label(param: str) -> str:
    """A parameter as a figure names it: ``bw0_GBps`` -> ``bw0 (GB/s)``; others as they are."""
    m = re.fullmatch(r"bw(\d+)_GBps", param)
    return f"bw{m.group(1)} (GB/s)" if m else param


def draw_importances(imp: Importances, path: Path) -> str:
    """`importances_figure` saved as a PNG file."""
    return _save(importances_figure(imp), path)


def importances_figure(imp: Importances) -> Any:
    """One panel per objective: each varying parameter's importance as a horizontal bar."""
    n = len(imp.by_objective)
    fig, axes = _figure(1, n, (6 * n, 1.5 + 0.4 * len(imp.params)))
    for ax, (name, values) in zip(axes[0], imp.by_objective.items()):
        order = sorted(values, key=lambda p: values[p])
        ax.barh([param_label(p) for p in order], [values[p] for p in order], color="tab:blue")
        ax.set_title(imp.titles.get(name) or as_shown(name).name, fontsize=10)
        ax.set_xlabel("importance (the parameters' importances add up to 1)")
        ax.set_xlim(0, 1)
        ax.grid(True, axis="x", alpha=0.3)
    return fig


def write_figures(
    study: Any, trials: Sequence[Any], names: Sequence[str | Shown], out: Path
) -> tuple[list[str], list[str]]:
    """history.png, pareto_front.png (several objectives), importances.png (two or more varying
    parameters) in `out` (`names`: the objectives, ids or their `Shown`); returns the files
    written and notes on any figure not written."""
    directions = [d.name.lower() for d in study.directions]
    ids = [as_shown(n).id for n in names]
    limits = constraint_limits(study._storage.get_study_system_attrs(study._study_id), trials, ids)
    files = [draw_history(history_data(trials, names, directions, limits), out / "history.png")]
    if len(names) > 1:
        front = {t.number for t in study.best_trials}
        files.append(draw_pareto(pareto_data(trials, front, names, limits), out / "pareto_front.png"))
    imp = importance_data(trials, names, directions)
    if isinstance(imp, str):
        return files, [imp]
    files.append(draw_importances(imp, out / "importances.png"))
    return files, []
