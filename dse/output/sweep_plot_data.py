"""What a sweep figure shows, computed from the CSV's rows (no matplotlib): `sweep_plot_data`.

The form (`KINDS`): ``line`` (y against a numeric x, rows on one x averaged or refused), ``bar`` (y
for each category of x, grouped by hue), ``scatter`` (every row, y against a numeric x; a numeric
hue with many values becomes a colour scale) and ``cdf`` (the distribution of y: for each hue, the
share of rows at or below each value). Without a kind, a numeric x gives lines and any other x bars.

Every value is in the unit people read (`dse.core.quantities`: ns -> ms or another time unit chosen
from the axis' values, 0-1 fractions -> %), and every axis carries ``quantity (unit)``.

Rows that a line or bar plot puts on one point but that differ in a parameter column the plot does
not show (the seed, say) are refused, naming those columns, unless `mean=True` averages them.
Columns that follow from others are not named (`hidden_parameters`): `topology` (the notation run,
when a `design` column names the design) and `total_bw_GBps` when the per-dimension columns fix them,
the per-dimension `bwK_GBps` / `latK_ns` when the design fixes them, a queue that goes with its
scheduler. Output columns (`OUTPUT_COLUMNS`) never count as parameters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dse.core.errors import InputError
from dse.core.quantities import TEXT_COLUMNS, Quantity, quantity

#: Columns of a sweep CSV that are per-row outputs or bookkeeping, not parameters (dse.explore.sweep.sweeps
#: writes them; the unsuffixed `bw_utilization` and `gap` are the names of CSVs written before units).
OUTPUT_COLUMNS: frozenset[str] = frozenset(
    {
        "point",
        "crc",
        "time_ns",
        "bw_utilization_pct",
        "algbw_GBps",
        "busbw_GBps",
        "bound_ns",
        "gap_pct",
        "iteration_time_ns",
        "compute_ns",
        "comm_ns",
        "exposed_comm_ns",
        "exposed_comm_pct",
        "bw_utilization",
        "gap",
    }
)
KINDS = ("line", "bar", "scatter", "cdf")
MAX_CATEGORIES = 50  # bars on one axis
MAX_SERIES = 20  # lines, bar groups or curves a legend tells apart
MAX_PANELS = 12
COLOUR_SCALE_FROM = 9  # a numeric scatter hue with this many values or more is drawn as a colour scale
CDF_LABEL = "sweep points at or below (%)"
_DIM_COLUMN = re.compile(r"^(bw\d+_GBps|lat\d+_ns)$")


@dataclass
class Line:
    """One series of a panel: its label, x (shown units, or categories), y (shown units), rows per
    point, and for a colour-scaled scatter each point's colour value (shown units)."""

    label: str
    x: list[Any] = field(default_factory=list)
    y: list[float] = field(default_factory=list)
    n: list[int] = field(default_factory=list)
    c: list[float] = field(default_factory=list)


@dataclass
class SweepPlotData:
    """What `dse.output.plots.draw_sweep` draws: panels (facet label -> series) and their labels."""

    x: str | None
    y: str
    panels: dict[str, list[Line]]
    numeric_x: bool
    hue: str | None = None
    facet: str | None = None
    averaged: tuple[str, ...] = ()
    kind: str = "line"
    x_label: str = ""
    y_label: str = ""
    hue_label: str | None = None
    facet_label: str | None = None
    colour_scale: bool = False
    categories: list[str] = field(default_factory=list)
    left_out: int = 0  # rows with no number in x or y (a dimension a topology does not have)


def _cols(spec: str | None, header: Sequence[str], what: str) -> list[str]:
    if not spec:
        return []
    cols = [c.strip() for c in spec.split(",") if c.strip()]
    for c in cols:
        if c not in header:
            renamed = [h for h in header if h.startswith(c + "_") and quantity(h).unit]  # gap -> gap_pct
            if renamed:
                raise InputError(what, f"no column {c!r}: this CSV names it {renamed[0]}", renamed[0])
            raise InputError(what, f"no column {c!r}", ", ".join(header))
    return cols


def _one(spec: str | None, header: Sequence[str], what: str) -> str:
    """The one column `spec` names."""
    cols = _cols(spec, header, what)
    if len(cols) != 1:
        raise InputError(what, f"{spec!r} names {len(cols)} columns", "one column")
    return cols[0]


def _num(v: str | None) -> float | None:
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _numeric(rows: Sequence[dict[str, str]], col: str) -> bool:
    """Every non-empty cell of `col` is a number, and at least one is; text columns never are."""
    cells = [r[col] for r in rows if r[col] != ""]
    return col not in TEXT_COLUMNS and bool(cells) and all(_num(v) is not None for v in cells)


def _constant_within(rows: Sequence[dict[str, str]], key: Sequence[str], col: str) -> bool:
    """Whether `col` has one value among the rows of each group of the `key` columns."""
    seen: dict[tuple[str, ...], str] = {}
    return all(seen.setdefault(tuple(r[c] for c in key), r[col]) == r[col] for r in rows)


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


def hidden_parameters(rows: Sequence[dict[str, str]], point: Sequence[str], plotted: Sequence[str] = ()) -> list[str]:
    """`varying_columns` without the columns that follow from others: in the CSV's order, each
    parameter that the shown columns and the parameters kept before it fix (a queue that goes with
    its scheduler); then the per-dimension columns the shown and kept parameters fix (a design's
    bandwidths); then `total_bw_GBps` and (with a `design` column) `topology` when all those fix them."""
    varying = varying_columns(rows, point, plotted)
    derived = {"total_bw_GBps"} | ({"topology"} if rows and "design" in rows[0] else set())
    primary: list[str] = []
    for c in varying:
        if c not in derived and not _DIM_COLUMN.match(c) and not _constant_within(rows, [*point, *primary], c):
            primary.append(c)
    dims = [c for c in varying if _DIM_COLUMN.match(c) and not _constant_within(rows, [*point, *primary], c)]
    kept = [*primary, *dims]
    rest = [c for c in varying if c in derived and not _constant_within(rows, [*point, *kept], c)]
    return [c for c in varying if c in kept or c in rest]


def _check_kind(kind: str | None, x: str | None, numeric_x: bool, rows: Sequence[dict[str, str]]) -> str:
    """The form to draw: `kind`, or from the data (numeric x: line, else bar); a form the x cannot take is refused."""
    if kind is not None and kind not in KINDS:
        raise InputError("--kind", f"unknown kind {kind!r}", ", ".join(KINDS))
    if kind == "cdf":
        if x is not None:
            raise InputError("--x", "given with --kind cdf, which draws the distribution of --y", "no --x")
        return kind
    if x is None:
        raise InputError("--x", "missing", "a column for the x axis, or --kind cdf for the distribution of --y")
    if kind is None:
        return "line" if numeric_x else "bar"
    if kind in ("line", "scatter") and not numeric_x:
        bad = next((r[x] for r in rows if r[x] != "" and _num(r[x]) is None), "")
        raise InputError(
            "--x", f"column {x!r} holds {bad!r}, not a number, which a {kind} needs", "--kind bar, or a numeric column"
        )
    return kind


def _refuse_hidden(hidden: list[str], kind: str) -> None:
    it = "them" if len(hidden) > 1 else "it"
    raise InputError(
        "plot sweep",
        f"rows on the same point differ in {', '.join(hidden)}, which the plot does not show",
        f"add {it} to --hue or --facet, pass --mean to average {it}"
        + (", or --kind scatter to draw every row" if kind == "line" else ""),
    )


def _group_label(row: dict[str, str], cols: Sequence[str], qs: dict[str, Quantity]) -> str:
    """A hue or facet value: each column's cell, numbers in their shown unit."""
    parts = []
    for c in cols:
        v = _num(row[c]) if qs[c].kind != "text" else None
        parts.append(row[c] if v is None else f"{qs[c].show(v):g}")
    return "+".join(parts)


def _group_title(cols: Sequence[str], qs: dict[str, Quantity]) -> str | None:
    """A legend's or facet's title: each column's quantity and unit, one a line when they are long."""
    labels = [qs[c].axis_label for c in cols]
    joined = " + ".join(labels)
    return (" +\n".join(labels) if len(joined) > 30 else joined) if cols else None


def _quantities(rows: Sequence[dict[str, str]], cols: Sequence[str]) -> dict[str, Quantity]:
    """Each column's `Quantity`, its unit chosen from its numbers."""
    out = {}
    for c in cols:
        vals = [v for v in (_num(r[c]) for r in rows) if v is not None]
        out[c] = quantity(c, vals)
    return out


def sweep_plot_data(
    rows: Sequence[dict[str, str]],
    x: str | None,
    y: str,
    hue: str | None = None,
    facet: str | None = None,
    *,
    mean: bool = False,
    kind: str | None = None,
) -> SweepPlotData:
    """Panels (`facet`) of series (`hue`) of `y` against `x` in the form `kind` (module docstring).

    `hue` and `facet` may name several columns joined by commas (``scheduler,queue``). Panels and
    text series keep the order of first appearance, numeric ones are sorted. Rows with an empty x
    (numeric x) or y cell are left out (`left_out` counts them)."""
    if not rows:
        raise InputError("csv", "no rows to plot")
    header = list(rows[0])
    xcol = _one(x, header, "--x") if x else None
    ycol = _one(y, header, "--y")
    hues, facets = _cols(hue, header, "--hue"), _cols(facet, header, "--facet")
    numeric_x = xcol is not None and _numeric(rows, xcol)
    kind = _check_kind(kind, xcol, numeric_x, rows)
    if mean and kind in ("scatter", "cdf"):
        raise InputError("--mean", f"given with --kind {kind}, which draws every row", "--mean with a line or bar plot")
    kept = [r for r in rows if r[ycol] != "" and not (numeric_x and r[xcol] == "")]  # type: ignore[index]
    bad = next((r[ycol] for r in kept if _num(r[ycol]) is None), None)
    if bad is not None:
        raise InputError("--y", f"column {ycol!r} holds {bad!r}, not a number", "a numeric column")
    if not kept:
        raise InputError("--y", f"column {ycol!r} has no values on the rows with an x", "a column the sweep filled")
    averaged: tuple[str, ...] = ()
    if kind in ("line", "bar"):
        averaged = tuple(hidden_parameters(kept, [c for c in (xcol, *hues, *facets) if c], [ycol]))
        if averaged and not mean:
            _refuse_hidden(list(averaged), kind)
    qs = _quantities(kept, [c for c in dict.fromkeys((xcol, ycol, *hues, *facets)) if c])
    data = SweepPlotData(
        xcol,
        ycol,
        {},
        numeric_x,
        hue,
        facet,
        averaged,
        kind,
        hue_label=_group_title(hues, qs),
        left_out=len(rows) - len(kept),
    )
    data.facet_label = _group_title(facets, qs)
    data.y_label = qs[ycol].axis_label
    data.x_label = qs[xcol].axis_label if xcol else ""
    if kind == "cdf":
        data.x_label, data.y_label = data.y_label, CDF_LABEL
    _fill(data, kept, hues, facets, qs)
    return data


def _fill(
    data: SweepPlotData, rows: Sequence[dict[str, str]], hues: list[str], facets: list[str], qs: dict[str, Quantity]
) -> None:
    """Group the rows into `data.panels` by facet and hue (series sorted when the hue is numeric)."""
    colour = data.kind == "scatter" and len(hues) == 1 and _numeric(rows, hues[0])
    colour = colour and len({r[hues[0]] for r in rows}) >= COLOUR_SCALE_FROM
    groups: dict[str, dict[str, list[dict[str, str]]]] = {}
    for r in rows:
        label = "" if colour or not hues else _group_label(r, hues, qs)
        groups.setdefault(_group_label(r, facets, qs), {}).setdefault(label, []).append(r)
    if len(groups) > MAX_PANELS:
        raise InputError(
            "--facet", f"{len(groups)} panels, more than a figure can show ({MAX_PANELS})", "a column with fewer values"
        )
    if all(_numeric(rows, c) for c in hues):
        for series in groups.values():
            ordered = sorted(series.items(), key=lambda kv: tuple(_num(kv[1][0][c]) or 0.0 for c in hues))
            series.clear()
            series.update(ordered)
    most = max(len(s) for s in groups.values())
    if most > MAX_SERIES:
        raise InputError(
            "--hue",
            f"{most} values of {data.hue}, more than a legend can tell apart ({MAX_SERIES})",
            "a column with fewer values, a --facet, or --kind scatter with a numeric --hue (a colour scale)",
        )
    data.colour_scale = colour
    if data.kind == "bar":
        data.categories = _categories(rows, data.x, data.numeric_x, qs)  # type: ignore[arg-type]
    for panel, series in groups.items():
        data.panels[panel] = [_series(data, label, rs, qs) for label, rs in series.items()]


def _categories(rows: Sequence[dict[str, str]], xcol: str, numeric: bool, qs: dict[str, Quantity]) -> list[str]:
    """The bars' categories: x's values, numbers sorted and in their shown unit; at most `MAX_CATEGORIES`."""
    cells = list(dict.fromkeys(r[xcol] for r in rows))
    if numeric:
        cells = [f"{qs[xcol].show(v):g}" for v in sorted({float(c) for c in cells})]
    if len(cells) > MAX_CATEGORIES:
        raise InputError(
            "--x",
            f"{len(cells)} categories of {xcol}, more bars than a figure can show ({MAX_CATEGORIES})",
            "--kind scatter with a numeric --x (e.g. total_bw_GBps or bw0_GBps), or a CSV filtered to fewer values",
        )
    return cells


def _series(data: SweepPlotData, label: str, rows: list[dict[str, str]], qs: dict[str, Quantity]) -> Line:
    """One series: every row (scatter), the cumulative shares (cdf), or y averaged per x (line, bar)."""
    qy = qs[data.y]
    ys = [qy.show(float(r[data.y])) for r in rows]
    if data.kind == "cdf":
        ys.sort()
        return Line(label, ys, [100.0 * (i + 1) / len(ys) for i in range(len(ys))], [1] * len(ys))
    qx = qs[data.x]  # type: ignore[index]
    xs: list[Any] = [qx.show(float(r[data.x])) for r in rows] if data.numeric_x else [r[data.x] for r in rows]  # type: ignore[index]
    if data.kind == "scatter":
        c = [qs[data.hue].show(float(r[data.hue])) for r in rows] if data.colour_scale else []  # type: ignore[index]
        return Line(label, xs, ys, [1] * len(ys), c)
    if data.kind == "bar" and data.numeric_x:
        xs = [f"{v:g}" for v in xs]
    acc: dict[Any, list[float]] = {}
    for xv, yv in zip(xs, ys):
        acc.setdefault(xv, []).append(yv)
    keys = sorted(acc) if data.kind == "line" else [k for k in data.categories if k in acc]
    return Line(label, keys, [sum(acc[k]) / len(acc[k]) for k in keys], [len(acc[k]) for k in keys])
