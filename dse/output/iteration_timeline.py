"""Timeline figures of a training iteration: each NPU resource's nodes over time (`dse plot timeline`).

`iteration_plot_data` turns the node list of ``dse iterate --json --timeline`` (or
`IterationResult.as_dict()` of ``iterate(..., nodes=True)``) into lanes for `draw_timelines`: GPU
compute, CPU, and communication (collectives and replayed communication; several rows where
collectives overlap, as dse's own rules let them). Pure data, no matplotlib: drawing is
`dse.output.timeline_plot.draw_timelines`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from dse.core.errors import InputError
from dse.core.units import format_time
from dse.output.timeline_lanes import Bar, Lane, TimelinePlotData, stack_rows

LANES = (("gpu", "GPU compute"), ("cpu", "CPU"), ("net", "communication"))
STYLES = {
    "compute": ("compute", "tab:blue"),
    "comm": ("collective", "tab:orange"),
    "replay": ("replayed (broadcast, CPU-side call)", "tab:gray"),
}
_NEEDS = "a JSON object written by dse iterate --json --timeline"


def _is_time(x: object) -> TypeGuard[float]:
    """A finite number of ns >= 0 (not a bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def iteration_plot_data(d: Mapping[str, Any], field_: str = "RESULT.json") -> TimelinePlotData:
    """Lanes of bars, one lane per resource that ran anything; bad input is one `InputError`."""
    nodes = d.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise InputError(field_, "has no nodes (written without --timeline?)", _NEEDS)
    per: dict[str, list[tuple[int, str, float, float]]] = {r: [] for r, _ in LANES}
    for k, n in enumerate(nodes):
        if not isinstance(n, Mapping) or n.get("resource") not in per or n.get("kind") not in STYLES:
            raise InputError(field_, f"node entry {k} lacks a known resource or kind", _NEEDS)
        a, b = n.get("start_ns"), n.get("end_ns")
        if not (_is_time(a) and _is_time(b)):
            raise InputError(field_, f"node entry {k} has start {a!r} and end {b!r}", _NEEDS)
        per[n["resource"]].append((int(n.get("index", k)), n["kind"], float(a), float(b)))
    lanes: list[Lane] = []
    used: set[str] = set()
    for r, label in LANES:
        items = per[r]
        if not items:
            continue
        rows, nrows = stack_rows([(a, b) for _, _, a, b in items])
        lane = Lane(len(lanes), label, nrows)
        for (i, kind, a, b), row in zip(items, rows):
            color = STYLES[kind][1]
            used.add(kind)
            lane.bars.append(Bar(i, kind, a, b, row, color))
        lanes.append(lane)
    time_ns = d.get("total_ns") or max(b.end for lane in lanes for b in lane.bars)
    title = (
        f"{d.get('workload', '?')} on {d.get('topology', '?')}, {d.get('scheduler', '?')} + {d.get('queue', '?')}, "
        f"{d.get('cost_model', '?')}: {format_time(float(time_ns))}"
    )
    legend = [STYLES[k] for k in STYLES if k in used]
    return TimelinePlotData(title, float(time_ns), lanes, legend)
