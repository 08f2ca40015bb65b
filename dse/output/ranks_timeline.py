"""Timeline figures of a per-rank iteration: each class of alike ranks' lanes over time (`dse plot timeline`).

`ranks_plot_data` turns a per-rank result (``dse iterate --json --timeline`` of a per-rank trace,
or the `RanksResult` itself; checked by `dse.output.perfetto.ranks_view`) into one panel per rank
class, titled ``class K (ranks 0-3,8): finish ..., compute ..., exposed ...``, with one lane per
lane name (compute, CPU, communication, receives, memory, dim 0 (Ring), ...: the same names and order as
the Perfetto trace). Pure data, no matplotlib; `draw_ranks_timeline` draws it with
`dse.output.timeline_plot.draw_timelines` (one time axis, its unit in the label), and
`plot_ranks_file` does both for a JSON file.

The choices made here:

- Every panel has the same lanes, the union of those the drawn classes use, so classes compare
  row by row; spans that overlap on a lane are drawn on separate rows of it.
- At most `MAX_CLASSES` (8) classes and `MAX_SPANS` (50,000) spans are drawn, so the figure
  stays readable and is drawn in seconds: the first classes by index while both hold (the first
  class always, cut to its earliest `MAX_SPANS` spans if it has more). What is left out is said
  in `RanksPlotData.notes` (printed by ``dse plot timeline``, and in the figure's caption); the
  Perfetto trace (``--trace``) shows every class.
- Colours are per kind of lane: compute, CPU, communication, receives, memory, network dimensions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.topology import Topology
from dse.core.units import format_time
from dse.output.perfetto import (
    NEEDS,
    ClassInfo,
    LaneSpan,
    RanksView,
    is_ranks_result,
    lane_category,
    lane_order,
    lane_title,
    rank_ranges,
    ranks_view,
    result_topology,
)
from dse.output.timeline_lanes import Bar, Lane, TimelinePlotData, stack_rows
from dse.output.timeline_plot import draw_timelines, read_result

MAX_CLASSES = 8
MAX_SPANS = 50_000
STYLES: dict[str, tuple[str, str]] = {
    "compute": ("compute", "tab:blue"),
    "cpu": ("CPU", "tab:gray"),
    "comm": ("communication", "tab:orange"),
    "recv": ("receive", "tab:green"),
    "mem": ("memory", "tab:olive"),
    "network": ("network dimension", "tab:purple"),
}
OTHER_STYLE = ("other", "tab:brown")


@dataclass
class RanksPlotData:
    """What `draw_ranks_timeline` draws: a panel per drawn class, a caption, and notes on what is
    not drawn (empty when everything is)."""

    panels: list[TimelinePlotData]
    caption: str
    notes: list[str] = field(default_factory=list)


def _chosen(view: RanksView, max_classes: int, max_spans: int) -> tuple[dict[int, list[LaneSpan]], list[str]]:
    """The spans of the classes drawn (module docstring: the cap), and notes on what is left out."""
    per: dict[int, list[LaneSpan]] = {k: [] for k in view.classes}
    for s in view.spans:
        per[s.cls].append(s)
    chosen: dict[int, list[LaneSpan]] = {}
    total = 0
    notes = []
    for k, spans in per.items():
        if chosen and (len(chosen) >= max_classes or total + len(spans) > max_spans):
            break
        if len(spans) > max_spans:
            spans = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))[:max_spans]
            notes.append(
                f"class {k}: drawing its first {max_spans:,} of {len(per[k]):,} spans "
                f"(up to {format_time(spans[-1].start_ns)})"
            )
        chosen[k] = spans
        total += len(spans)
    if len(chosen) < len(per):
        notes.insert(
            0,
            f"drawing the first {len(chosen)} of {len(per)} rank classes (at most {max_classes} classes and "
            f"{max_spans:,} spans in a figure; the Perfetto trace, --trace, shows them all)",
        )
    return chosen, notes


def _title(c: ClassInfo) -> str:
    times = [
        f"{what} {format_time(v)}"
        for what, v in (("finish", c.finish_ns), ("compute", c.compute_ns), ("exposed", c.exposed_ns))
        if v is not None
    ]
    head = f"class {c.index} (ranks {rank_ranges(c.ranks)})"
    return f"{head}: {', '.join(times)}" if times else head


def _panel(
    c: ClassInfo, spans: list[LaneSpan], lanes: list[str], topo: Topology | None, time_ns: float
) -> TimelinePlotData:
    """One class's panel: a lane per name in `lanes`, overlapping spans on separate rows."""
    by_lane: dict[str, list[tuple[int, LaneSpan]]] = {name: [] for name in lanes}
    for i, s in enumerate(spans):
        by_lane[s.lane].append((i, s))
    used: set[str] = set()
    out = []
    for d, name in enumerate(lanes):
        items = by_lane[name]
        rows, nrows = stack_rows([(s.start_ns, s.end_ns) for _, s in items])
        lane = Lane(d, lane_title(name, topo), nrows)
        label, color = STYLES.get(lane_category(name), OTHER_STYLE)
        for (i, s), row in zip(items, rows):
            lane.bars.append(Bar(i, name, s.start_ns, s.end_ns, row, color))
            used.add(label)
        out.append(lane)
    legend = [st for st in (*STYLES.values(), OTHER_STYLE) if st[0] in used]
    return TimelinePlotData(_title(c), time_ns, out, legend)


def ranks_plot_data(
    result: Any,
    field_: str = "RESULT.json",
    *,
    topology: Topology | None = None,
    max_classes: int = MAX_CLASSES,
    max_spans: int = MAX_SPANS,
) -> RanksPlotData:
    """A panel per rank class (at most `max_classes` classes and `max_spans` spans: the module
    docstring) of a per-rank result; `topology` names the dimensions' kinds (else the result's
    own, when readable). A result without spans, or with none, is one `InputError` naming `field_`."""
    view = ranks_view(result, field_)
    if not view.spans:
        raise InputError(field_, "has an empty list of spans: nothing to draw", NEEDS)
    topo = topology if topology is not None else result_topology(view.meta)
    chosen, notes = _chosen(view, max_classes, max_spans)
    lanes = sorted({s.lane for spans in chosen.values() for s in spans}, key=lane_order)
    ends = [s.end_ns for s in view.spans] + [c.finish_ns or 0.0 for c in view.classes.values()]
    meta_time = view.meta.get("time_ns")
    time_ns = max(max(ends), float(meta_time) if isinstance(meta_time, (int, float)) else 0.0) or 1.0
    panels = [_panel(view.classes[k], spans, lanes, topo, time_ns) for k, spans in chosen.items()]
    m = view.meta
    caption = (
        f"{m.get('workload', '?')} on {m.get('topology', '?')}, {m.get('cost_model', '?')}: {format_time(time_ns)}; "
        f"{len(view.classes)} rank class{'es' if len(view.classes) != 1 else ''}"
    )
    if "npus" in m:
        caption += f" of {m['npus']} NPUs"
    if notes:
        caption += "\n" + "\n".join(notes)
    return RanksPlotData(panels, caption, notes)


def draw_ranks_timeline(data: RanksPlotData | Any, out: str | Path, field_: str = "--plot") -> Path:
    """Draw `data` to `out` (.png or .svg), a panel per class on one time axis, written atomically.
    `data` is a `RanksPlotData`, or a per-rank result (a `RanksResult`, or its dict with spans) made
    into one by `ranks_plot_data` (bad input: one `InputError` naming `field_`, nothing written)."""
    if not isinstance(data, RanksPlotData):
        data = ranks_plot_data(data, field_)
    return draw_timelines(data.panels, out, caption=data.caption)


def plot_ranks_file(path: str | Path, out: str | Path) -> RanksPlotData | None:
    """Draw a per-rank ``dse iterate --json --timeline`` file to `out` and return what was drawn;
    None (nothing drawn) when the file is valid JSON but not a per-rank result (`is_ranks_result`),
    for the caller to draw another way. Bad input is one `InputError`, before anything is written."""
    return plot_ranks_result(read_result(path, out), path, out)


def plot_ranks_result(d: Any, path: str | Path, out: str | Path) -> RanksPlotData | None:
    """`plot_ranks_file` on the JSON `d` already read from `path` (`dse.output.timeline_plot.read_result`)."""
    if not isinstance(d, Mapping) or not is_ranks_result(d):
        return None
    data = ranks_plot_data(d, str(path))
    draw_ranks_timeline(data, out)
    return data
