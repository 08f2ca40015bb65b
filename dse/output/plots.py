"""Figures of sweep results: the data in one function, the drawing in another.

`sweep_plot_data` turns CSV rows into panels of lines (pure, testable, no matplotlib);
`draw_sweep` draws them with matplotlib's Agg backend (no display needed). Rows that share a
panel, a line and an x value but differ in a parameter column the plot does not show (the seed, say)
are refused, naming those columns, unless `mean=True` asks to average them: then the data's
`averaged` names them, and each line's `n` says how many rows each point stands for. Output columns
(`OUTPUT_COLUMNS`: time_ns, bw_utilization, ..., point, crc) never count as parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.files import atomic_output, check_output_file

# Columns of a sweep CSV that are per-row outputs or bookkeeping, not parameters (dse.explore.sweep.columns).
OUTPUT_COLUMNS: frozenset[str] = frozenset(
    {"point", "crc", "time_ns", "bw_utilization", "algbw_GBps", "busbw_GBps", "bound_ns", "gap"}
)


def figure_path(out: str | Path, field: str = "out") -> tuple[Path, str]:
    """A figure's path and format (``png`` or ``svg``, from the extension); anything else is one
    `InputError`, before any work. The rules of `dse.core.files`: the folder must exist, a symlink
    is followed, a FIFO, device, socket or directory there is refused (every ``--plot`` and
    ``plot --out`` goes through here before its command runs)."""
    p = check_output_file(out, field, whole=True)
    fmt = p.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise InputError(field, f"cannot tell the format of {p.name!r}", "a file name ending in .png or .svg")
    return p, fmt


@dataclass
class Line:
    """One line of a panel: its label, x values (sorted), mean y and rows per point."""

    label: str
    x: list[Any] = field(default_factory=list)
    y: list[float] = field(default_factory=list)
    n: list[int] = field(default_factory=list)


@dataclass
class SweepPlotData:
    """What `draw_sweep` draws: panels (facet label -> lines), axis names, numeric or categorical x."""

    x: str
    y: str
    panels: dict[str, list[Line]]
    numeric_x: bool
    hue: str | None = None
    facet: str | None = None
    averaged: tuple[str, ...] = ()


def _cols(spec: str | None, header: Sequence[str], what: str) -> list[str]:
    if not spec:
        return []
    cols = [c.strip() for c in spec.split(",") if c.strip()]
    for c in cols:
        if c not in header:
            raise InputError(what, f"no column {c!r}", ", ".join(header))
    return cols


def _num(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


def varying_columns(rows: Sequence[dict[str, str]], point: Sequence[str], plotted: Sequence[str] = ()) -> list[str]:
    """The parameter columns (not `point`, not `plotted`, not `OUTPUT_COLUMNS`) whose value differs
    between rows that the `point` columns (x, hue, facet) put on the same point, in the CSV's order."""
    if not rows:
        return []
    rest = [c for c in rows[0] if c not in point and c not in plotted and c not in OUTPUT_COLUMNS]
    first: dict[tuple[str, ...], dict[str, str]] = {}
    varying: set[str] = set()
    for r in rows:
        key = tuple(r[c] for c in point)
        f = first.setdefault(key, r)
        varying.update(c for c in rest if r[c] != f[c])
    return [c for c in rest if c in varying]


def sweep_plot_data(
    rows: Sequence[dict[str, str]],
    x: str,
    y: str,
    hue: str | None = None,
    facet: str | None = None,
    *,
    mean: bool = False,
) -> SweepPlotData:
    """Group sweep rows into panels (`facet`) of lines (`hue`) of `y` against `x`.

    `hue` and `facet` may name several columns joined by commas (``scheduler,queue``). Panels and
    lines keep the order of first appearance; x is sorted numerically when every value is a number.
    Rows on one point that differ in another parameter column are refused (one `InputError` naming
    the columns), or with `mean` averaged, and `averaged` names those columns.
    """
    if not rows:
        raise InputError("csv", "no rows to plot")
    header = list(rows[0])
    (xcol,) = _cols(x, header, "x") or [x]
    (ycol,) = _cols(y, header, "y") or [y]
    hues, facets = _cols(hue, header, "hue"), _cols(facet, header, "facet")
    varying = varying_columns(rows, [xcol, *hues, *facets], [ycol])
    if varying and not mean:
        raise InputError(
            "plot sweep",
            f"rows on the same point differ in {', '.join(varying)}, which the plot does not show",
            f"add {'them' if len(varying) > 1 else 'it'} to --hue or --facet, or pass --mean to average them",
        )
    ys = [_num(r[ycol]) for r in rows]
    if any(v is None for v in ys):
        bad = next(r[ycol] for r, v in zip(rows, ys) if v is None)
        raise InputError("y", f"column {ycol!r} holds {bad!r}, not a number", "a numeric column")
    numeric_x = all(_num(r[xcol]) is not None for r in rows)
    acc: dict[str, dict[str, dict[Any, list[float]]]] = {}
    for r, yv in zip(rows, ys):
        panel = "+".join(r[c] for c in facets) if facets else ""
        label = "+".join(r[c] for c in hues) if hues else ycol
        xv = _num(r[xcol]) if numeric_x else r[xcol]
        acc.setdefault(panel, {}).setdefault(label, {}).setdefault(xv, []).append(yv)  # type: ignore[arg-type]
    panels: dict[str, list[Line]] = {}
    for panel, lines in acc.items():
        panels[panel] = []
        for label, pts in lines.items():
            line = Line(label)
            for xv in sorted(pts) if numeric_x else pts:
                vals = pts[xv]
                line.x.append(xv)
                line.y.append(sum(vals) / len(vals))
                line.n.append(len(vals))
            panels[panel].append(line)
    return SweepPlotData(xcol, ycol, panels, numeric_x, hue, facet, tuple(varying))


def draw_sweep(data: SweepPlotData, out: str | Path, *, logx: bool = False) -> Path:
    """Draw `data` to `out` (.png or .svg, by the extension) with matplotlib's Agg backend."""
    out, fmt = figure_path(out)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(data.panels)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False, sharey=True)
    try:
        for ax, (panel, lines) in zip(axes.flat, data.panels.items()):
            for line in lines:
                ax.plot(line.x, line.y, marker="o", markersize=3, label=line.label)
            if logx and data.numeric_x:
                ax.set_xscale("log", base=2)
            ax.set_title(panel or None, fontsize=9)
            ax.set_xlabel(data.x)
            ax.grid(True, alpha=0.3)
        for ax in axes.flat[n:]:
            ax.set_visible(False)
        for ax in axes[:, 0]:
            ax.set_ylabel(data.y)
        axes.flat[0].legend(fontsize=8, title=data.hue)
        fig.tight_layout()
        with atomic_output(out) as tmp:
            fig.savefig(tmp, format=fmt, dpi=120)
    finally:
        plt.close(fig)
    return out


def plot_sweep_file(
    csv_path: str | Path,
    out: str | Path,
    *,
    x: str,
    y: str,
    hue: str | None = None,
    facet: str | None = None,
    logx: bool = False,
    mean: bool = False,
) -> SweepPlotData:
    """Read a sweep CSV and draw it: `sweep_plot_data` then `draw_sweep`; returns the data drawn."""
    from dse.explore.sweep import read_rows

    figure_path(out)  # a bad output is refused before the CSV is read
    data = sweep_plot_data(read_rows(csv_path), x, y, hue, facet, mean=mean)
    draw_sweep(data, out, logx=logx)
    return data
