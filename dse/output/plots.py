"""Figures of sweep results: `dse.output.sweep_plot_data` computes what a figure shows, `draw_sweep`
draws it with matplotlib's Agg backend (no display needed), `plot_sweep_file` does both from a CSV.

Lines and scatters over a numeric x, bars over categories (horizontal when the labels are long or
many, each bar labelled with its value when there are few), cumulative distributions as steps. Every
axis is labelled ``quantity (unit)`` and ticks are plain numbers (no ``1e6`` offset); several series
get a legend titled by the hue, a colour-scaled scatter a colour bar.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.files import atomic_output, check_output_file
from dse.output.sweep_plot_data import (
    KINDS,
    OUTPUT_COLUMNS,
    Line,
    SweepPlotData,
    hidden_parameters,
    sweep_plot_data,
    varying_columns,
)

__all__ = [
    "KINDS",
    "OUTPUT_COLUMNS",
    "Line",
    "SweepPlotData",
    "draw_sweep",
    "figure_path",
    "hidden_parameters",
    "plain_number",
    "wrap_label",
    "plot_sweep_file",
    "sweep_figure",
    "sweep_plot_data",
    "varying_columns",
]

LEGEND_INSIDE = 6  # more series than this: the legend goes to the right of the panels
BAR_LABELS = 40  # at most this many bars in a panel: each is labelled with its value
WRAP = 32  # category labels longer than this are broken after an underscore


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


def plain_number(v: float, _pos: Any = None) -> str:
    """A tick or bar label as a plain number: ``1,500,000``, ``250``, ``0.125`` (never ``1e6``)."""
    if v == 0:
        return "0"
    if abs(v) >= 1e4:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def plain_ticks(ax: Any, axes: str = "xy", *, wide_x: int | None = None) -> None:
    """Plain-number tick labels (`plain_number`) on the numeric `axes` of `ax`, minor ticks unlabelled;
    `wide_x`: at most this many x ticks on a linear axis, for long labels (``1,500,000``) that would touch."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

    for name in axes:
        axis = ax.xaxis if name == "x" else ax.yaxis
        if name == "x" and wide_x and ax.get_xscale() == "linear":
            axis.set_major_locator(MaxNLocator(nbins=wide_x))
        axis.set_major_formatter(FuncFormatter(plain_number))
        axis.set_minor_formatter(NullFormatter())


def _horizontal(data: SweepPlotData) -> bool:
    """Bars lie down when their category labels are long or many."""
    return max((len(c) for c in data.categories), default=0) > 8 or len(data.categories) > 12


def wrap_label(text: str, width: int = WRAP) -> str:
    """A long category label on lines of about `width` characters, broken after a ``_`` (between a
    topology's dimensions) or at a space."""
    lines = [""]
    for part in re.split(r"(?<=[_ ])", text):
        if lines[-1] and len(lines[-1]) + len(part.rstrip()) > width:
            lines[-1] = lines[-1].rstrip()
            lines.append("")
        lines[-1] += part
    return "\n".join(line.rstrip() for line in lines)


def _layout(data: SweepPlotData, horizontal: bool) -> tuple[int, int, float, float]:
    """Rows and columns of panels and each panel's width and height (inches)."""
    n = len(data.panels)
    cols = min(n, 3)
    rows = -(-n // cols)
    width, height = 5.4, 3.6
    if horizontal:
        labels = [wrap_label(c) for c in data.categories]
        lines = sum(max(1, label.count("\n") + 1) for label in labels)
        per_category = max(1.0, 0.45 * max(len(s) for s in data.panels.values()))
        height = max(2.5, 0.22 * max(lines, len(labels) * per_category) + 1.2)
        width += 0.065 * max(len(line) for label in labels for line in label.split("\n"))
    return rows, cols, width, height


def draw_sweep(data: SweepPlotData, out: str | Path, *, logx: bool = False) -> Path:
    """Draw `data` to `out` (.png or .svg, by the extension) with matplotlib's Agg backend."""
    out, fmt = figure_path(out)
    fig = sweep_figure(data, logx=logx)
    try:
        with atomic_output(out) as tmp:
            fig.savefig(tmp, format=fmt, dpi=120, bbox_inches="tight")
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return out


def sweep_figure(data: SweepPlotData, *, logx: bool = False) -> Any:
    """The matplotlib figure of `data` (Agg backend; the caller closes it): one panel per facet."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    horizontal = data.kind == "bar" and _horizontal(data)
    nrows, ncols, w, h = _layout(data, horizontal)
    most = max(len(s) for s in data.panels.values())
    beside = 1.0 if data.colour_scale else 2.2 if data.hue and (data.kind == "bar" or most > LEGEND_INSIDE) else 0.0
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(w * ncols + beside, h * nrows),
        squeeze=False,
        sharey=not horizontal,
        sharex=horizontal,
        layout="constrained",
    )
    lim = _colour_limits(data)
    mappable = None
    for ax, (panel, series) in zip(axes.flat, data.panels.items()):
        if most > 10:
            ax.set_prop_cycle(color=[plt.get_cmap("tab20")(i) for i in range(20)])
        mappable = _draw_panel(ax, data, series, horizontal, lim) or mappable
        if logx and data.kind != "bar":
            ax.set_xscale("log", base=2)
        ax.set_title(wrap_label(f"{data.facet_label}: {panel}", 60) if data.facet_label else None, fontsize=9)
        ax.grid(True, alpha=0.3)
        plain_ticks(ax, "x" if horizontal else "y" if data.kind == "bar" else "xy", wide_x=_wide_x(data, horizontal))
    for ax in axes.flat[len(data.panels) :]:
        ax.set_visible(False)
    _labels(axes, data, horizontal)
    if mappable is not None:
        fig.colorbar(mappable, ax=list(axes.flat), label=data.hue_label, format=plain_number)
    else:
        _legend(fig, axes, data)
    return fig


def _wide_x(data: SweepPlotData, horizontal: bool) -> int | None:
    """At most 5 x ticks when the x axis reaches 100,000 (labels of 7 characters or more), else matplotlib's."""
    if horizontal:
        values = [v for series in data.panels.values() for s in series for v in s.y]
    elif data.kind == "bar" or not data.numeric_x and data.kind != "cdf":
        return None
    else:
        values = [v for series in data.panels.values() for s in series for v in s.x]
    return 5 if max((abs(v) for v in values), default=0) >= 1e5 else None


def _colour_limits(data: SweepPlotData) -> tuple[float, float] | None:
    """One colour scale for every panel of a colour-scaled scatter."""
    values = [v for series in data.panels.values() for s in series for v in s.c]
    return (min(values), max(values)) if data.colour_scale and values else None


def _draw_panel(ax: Any, data: SweepPlotData, series: list[Line], horizontal: bool, lim: Any) -> Any:
    """One panel's series in the data's form; returns the colour-scaled scatter, if it drew one."""
    if data.kind == "bar":
        _bars(ax, data, series, horizontal)
        return None
    mappable = None
    for s in series:
        if data.kind == "line":
            ax.plot(s.x, s.y, marker="o", markersize=3, label=s.label)
        elif data.kind == "cdf":
            ax.step([s.x[0], *s.x], [0.0, *s.y], where="post", label=s.label)
            ax.set_ylim(0, 102)
        else:
            size = 30 if len(s.x) < 100 else 12 if len(s.x) < 1000 else 5
            if s.c:
                mappable = ax.scatter(s.x, s.y, c=s.c, s=size, cmap="viridis", vmin=lim[0], vmax=lim[1])
            else:
                ax.scatter(s.x, s.y, s=size, alpha=0.8, label=s.label)
    return mappable


def _bars(ax: Any, data: SweepPlotData, series: list[Line], horizontal: bool) -> None:
    """Grouped bars: one group per category, one bar per series; values on the bars when few."""
    cats = data.categories
    width = 0.8 / len(series)
    labelled = len(cats) * len(series) <= BAR_LABELS
    for j, s in enumerate(series):
        pos = [cats.index(k) + (j - (len(series) - 1) / 2) * width for k in s.x]
        bars = (ax.barh if horizontal else ax.bar)(pos, s.y, width, label=s.label)
        if labelled:
            ax.bar_label(bars, labels=[plain_number(v) for v in s.y], fontsize=7, padding=2)
    ticks = list(range(len(cats)))
    if horizontal:
        ax.set_yticks(ticks, [wrap_label(c) for c in cats], fontsize=8)
        ax.set_ylim(len(cats) - 0.5, -0.5)  # the first category on top
        ax.margins(x=0.12)
    else:
        ax.set_xticks(ticks, cats, rotation=30 if len(cats) > 6 else 0, ha="right" if len(cats) > 6 else "center")
        ax.margins(y=0.1)


def _labels(axes: Any, data: SweepPlotData, horizontal: bool) -> None:
    """Axis labels: quantity and unit on every panel's x, on the first column's y."""
    xl, yl = (data.y_label, data.x_label) if horizontal else (data.x_label, data.y_label)
    for ax in axes.flat:
        ax.set_xlabel(xl)
    for ax in axes[:, 0]:
        ax.set_ylabel(yl)


def _legend(fig: Any, axes: Any, data: SweepPlotData) -> None:
    """One legend of every series' label (none when there is no hue): inside the first panel when
    short and not over bars, else to the right of the figure."""
    if not data.hue:
        return
    seen: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    style = {"fontsize": 8, "title": data.hue_label, "title_fontsize": 8}
    if len(seen) <= LEGEND_INSIDE and data.kind != "bar":
        axes.flat[0].legend(seen.values(), seen.keys(), **style)
    else:
        fig.legend(seen.values(), seen.keys(), loc="outside right upper", **style)


def plot_sweep_file(
    csv_path: str | Path,
    out: str | Path,
    *,
    x: str | None,
    y: str,
    hue: str | None = None,
    facet: str | None = None,
    logx: bool = False,
    mean: bool = False,
    kind: str | None = None,
) -> SweepPlotData:
    """Read a sweep CSV and draw it: `sweep_plot_data` then `draw_sweep`; returns the data drawn."""
    from dse.explore.sweep.sweeps import read_rows

    figure_path(out)  # a bad output is refused before the CSV is read
    data = sweep_plot_data(read_rows(csv_path), x, y, hue, facet, mean=mean, kind=kind)
    if logx and data.kind == "bar":
        raise InputError("--logx", "given with a bar plot, whose x is categories", "--logx with a line, scatter or cdf")
    if logx and any(v <= 0 for ss in data.panels.values() for s in ss for v in s.x):
        raise InputError(
            "--logx",
            f"the x axis ({data.x_label}) holds values <= 0, which a logarithmic axis cannot show",
            "no --logx",
        )
    draw_sweep(data, out, logx=logx)
    return data
