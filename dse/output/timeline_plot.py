"""Timeline figures: each dimension's phases over time, the data in one function, the drawing in another.

`timeline_plot_data` turns an evaluation's timeline into lanes (one per dimension, labelled with its
kind, NPU count and bandwidth) of coloured bars, and the legend of exactly the colours used (pure,
testable, no matplotlib); `draw_timelines` draws one or more of them, stacked on one time axis, with
matplotlib's Agg backend. `result_timeline_data` starts from a `Result`, `json_timeline_data` from
the JSON `dse evaluate --json --timeline` prints, and `plot_timeline_file` draws such a file.

A bar is the time the dimension served the phase: from its start for its busy time. Where phases
share a dimension's bandwidth (the `paper` model with `active_chunks` > 1) a phase's busy time is
its work at the full bandwidth, not how long it held the dimension, so there a bar runs from the
phase's start to its end and the title says so. Phases that overlap on a dimension (active chunks
above 1) are drawn on separate rows of its lane.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.files import atomic_output, read_text
from dse.core.topology import Dim, Topology, parse_topology
from dse.core.units import format_size, format_time
from dse.output.iteration_timeline import iteration_plot_data
from dse.output.plots import figure_path
from dse.output.timeline_lanes import Bar, Lane, TimelinePlotData, stack_rows
from dse.sim.simulate import TimelineEntry

# What each phase kind is called and drawn in (dse.core.collectives: RS, AG, AR, A2A).
PHASE_STYLES: dict[str, tuple[str, str]] = {
    "RS": ("reduce-scatter phase", "tab:blue"),
    "AG": ("all-gather phase", "tab:orange"),
    "AR": ("all-reduce phase", "tab:green"),
    "A2A": ("all-to-all phase", "tab:purple"),
}
OTHER_STYLE = ("other phase", "tab:gray")
_KIND_NAMES = {"ring": "Ring", "fc": "FC", "switch": "SW"}
_TIME_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))


def lane_label(i: int, dim: Dim) -> str:
    """``dim 0: Ring(4) 375 GB/s``."""
    return f"dim {i}: {_KIND_NAMES.get(dim.kind, dim.kind)}({dim.npus}) {dim.bandwidth:g} GB/s"


def timeline_plot_data(
    entries: Sequence[Any], topology: Topology, *, time_ns: float, title: str, shared: bool = False
) -> TimelinePlotData:
    """Lanes of bars from timeline entries (`dse.sim.simulate.TimelineEntry`: chunk, dim, kind, start,
    end, busy); `shared`: bars run from start to end (phases shared the bandwidth), else from start
    for the busy time."""
    per_dim: list[list[Any]] = [[] for _ in topology.dims]
    for e in entries:
        per_dim[e.dim].append(e)
    used: set[str] = set()
    lanes = []
    for d, (dim, es) in enumerate(zip(topology.dims, per_dim)):
        spans = [(e.start, e.end if shared else e.start + e.busy) for e in es]
        rows, nrows = stack_rows(spans)
        lane = Lane(d, lane_label(d, dim), nrows)
        for e, (a, b), r in zip(es, spans, rows):
            color = PHASE_STYLES.get(e.kind, OTHER_STYLE)[1]
            used.add(color)
            lane.bars.append(Bar(e.chunk, e.kind, a, b, r, color))
        lanes.append(lane)
    legend = [s for s in (*PHASE_STYLES.values(), OTHER_STYLE) if s[1] in used]
    return TimelinePlotData(title, time_ns, lanes, legend, shared)


def _title(
    topology: str,
    collective: str,
    size_bytes: int,
    size_unit: str,
    chunks: int | str,
    scheduler: str,
    queue: str,
    cost_model: str,
    active: int,
    time_ns: float,
    shared: bool,
) -> str:
    t = (
        f"{topology}: {collective} of {format_size(size_bytes, size_unit)} per NPU, {chunks} chunks, "
        f"{scheduler} + {queue}, {cost_model}, active chunks {active}: {format_time(time_ns)}"
    )
    if shared:
        t += "\n(bars from a phase's start to its end: the phases on a dimension share its bandwidth)"
    return t


def result_timeline_data(result: Any, topology: Topology, title: str | None = None) -> TimelinePlotData:
    """`timeline_plot_data` of a `Result` evaluated with ``timeline=True``."""
    if result.timeline is None:
        raise InputError("timeline", "the result has no timeline", "evaluate(..., timeline=True)")
    shared = _shares(result.cost_model, result.active_chunks)
    if title is None:
        title = _title(
            result.topology,
            result.collective,
            result.size_bytes,
            result.size_unit,
            result.chunks,
            result.scheduler,
            result.queue,
            result.cost_model,
            result.active_chunks,
            result.time_ns,
            shared,
        )
    return timeline_plot_data(result.timeline, topology, time_ns=result.time_ns, title=title, shared=shared)


def _shares(cost_model: str, active: int) -> bool:
    from dse.costs import get_cost_model

    return active > 1 and get_cost_model(cost_model).rules.shares_bandwidth


_NEEDS = "a JSON object written by dse evaluate --json --timeline"


def _number(v: object, what: str, field_: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(field_, f"{what} is {v!r}, not a number >= 0", _NEEDS)
    return float(v)


def json_timeline_data(d: object, field_: str = "RESULT.json") -> TimelinePlotData:
    """`timeline_plot_data` of a parsed `dse evaluate --json --timeline` object; anything else is
    one `InputError` naming what is missing or wrong."""
    if not isinstance(d, Mapping):
        raise InputError(field_, "is not a JSON object", _NEEDS)
    if "timeline" not in d:
        raise InputError(field_, "has no timeline (written without --timeline?)", _NEEDS)
    tl = d["timeline"]
    if not isinstance(tl, list) or not tl:
        raise InputError(field_, "its timeline is empty or not a list", _NEEDS)
    spec = d.get("notation") or d.get("topology")
    if not isinstance(spec, str):
        raise InputError(field_, "names no topology", _NEEDS)
    topo = parse_topology(spec)
    entries = []
    for k, e in enumerate(tl):
        if not isinstance(e, Mapping) or not {"chunk", "dim", "kind", "start", "end", "busy"} <= set(e):
            raise InputError(field_, f"timeline entry {k} lacks chunk, dim, kind, start, end or busy", _NEEDS)
        dim, chunk = e["dim"], e["chunk"]
        if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < topo.ndims:
            raise InputError(
                field_, f"timeline entry {k} has dim {dim!r}", f"a dimension of {topo.ndims}: 0 to {topo.ndims - 1}"
            )
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 0:
            raise InputError(field_, f"timeline entry {k} has chunk {chunk!r}", _NEEDS)
        if not isinstance(e["kind"], str):
            raise InputError(field_, f"timeline entry {k} has kind {e['kind']!r}", _NEEDS)
        start, end, busy = (_number(e[x], f"timeline entry {k}'s {x}", field_) for x in ("start", "end", "busy"))
        entries.append(TimelineEntry(chunk, dim, e["kind"], start, end, busy))
    time_ns = d.get("time_ns")
    time_ns = _number(time_ns, "time_ns", field_) if time_ns is not None else max(e.end for e in entries)
    active = d.get("active_chunks", 1)
    cost_model = d.get("cost_model", "paper")
    if isinstance(active, bool) or not isinstance(active, int) or active < 1 or not isinstance(cost_model, str):
        raise InputError(field_, "has a malformed active_chunks or cost_model", _NEEDS)
    shared = _shares(cost_model, active)
    size = d.get("size_bytes")
    unit = "binary" if d.get("size_unit") == "binary" else "decimal"
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        title = _title(
            str(d.get("topology", spec)),
            str(d.get("collective", "?")),
            size,
            unit,
            d.get("chunks", "?"),
            str(d.get("scheduler", "?")),
            str(d.get("queue", "?")),
            cost_model,
            active,
            time_ns,
            shared,
        )
    else:
        title = f"{spec}: {format_time(time_ns)}"
    return timeline_plot_data(entries, topo, time_ns=time_ns, title=title, shared=shared)


def time_unit(ns: float) -> tuple[str, float]:
    """The unit of a time axis reaching `ns`: the largest of s, ms, µs, ns that it reaches."""
    return next(((u, k) for u, k in _TIME_UNITS if ns >= k), ("ns", 1.0))


def draw_timelines(panels: Sequence[TimelinePlotData], out: str | Path, *, caption: str | None = None) -> Path:
    """Draw `panels` stacked on one time axis to `out` (.png or .svg, by the extension), with one
    legend of the colours they use."""
    out, fmt = figure_path(out)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    unit, scale = time_unit(max((p.time_ns for p in panels), default=1.0))
    heights = [
        0.9 + 0.5 * sum(min(lane.rows, 4) ** 0.5 for lane in p.lanes) + 0.3 * p.title.count("\n") for p in panels
    ]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(12, sum(heights) + 0.8),
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )
    try:
        for ax, p in zip(axes[:, 0], panels):
            for y, lane in enumerate(p.lanes):
                h = 0.8 / lane.rows
                groups: dict[tuple[int, str], list[tuple[float, float]]] = {}
                for b in lane.bars:
                    groups.setdefault((b.row, b.color), []).append((b.start / scale, (b.end - b.start) / scale))
                for (row, color), spans in groups.items():
                    ax.broken_barh(spans, (y - 0.4 + row * h, h), facecolors=color, edgecolor="white", linewidth=0.3)
            ax.set_yticks(range(len(p.lanes)))
            ax.set_yticklabels([lane.label for lane in p.lanes], fontsize=8)
            ax.set_ylim(len(p.lanes) - 0.5, -0.5)
            ax.set_xlim(0, max(q.time_ns for q in panels) / scale)
            ax.set_title(p.title, fontsize=9, loc="left")
            ax.grid(True, axis="x", alpha=0.3)
        axes[-1, 0].set_xlabel(f"time ({unit})")
        seen: dict[str, str] = {}
        for p in panels:
            for label, color in p.legend:
                seen.setdefault(color, label)
        handles = [Patch(facecolor=c, label=label) for c, label in seen.items()]
        fig.legend(handles=handles, loc="lower right", ncol=len(handles), fontsize=8, frameon=False)
        if caption:
            fig.suptitle(caption, fontsize=10)
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        with atomic_output(out) as tmp:
            fig.savefig(tmp, format=fmt, dpi=110)
    finally:
        plt.close(fig)
    return out


def read_result(path: str | Path, out: str | Path) -> Any:
    """The JSON a ``dse ... --json --timeline`` file holds, `out` (the figure's name) checked first,
    so that a bad output name is refused before anything is read; bad JSON is one `InputError`."""
    figure_path(out)
    text = read_text(path, "RESULT.json")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(str(path), f"not valid JSON: {e}", _NEEDS) from None


def plot_timeline_file(path: str | Path, out: str | Path) -> Path:
    """Draw the timeline of a `dse evaluate --json --timeline` file (`json_timeline_data`), or of a
    `dse iterate --json --timeline` file (`dse.output.iteration_timeline`), with `draw_timelines`."""
    return plot_timeline_result(read_result(path, out), path, out)


def plot_timeline_result(d: Any, path: str | Path, out: str | Path) -> Path:
    """`plot_timeline_file` on the JSON `d` already read from `path`."""
    if isinstance(d, Mapping) and "nodes" in d and "timeline" not in d:  # dse iterate --json --timeline
        return draw_timelines([iteration_plot_data(d, str(path))], out)
    return draw_timelines([json_timeline_data(d, str(path))], out)
