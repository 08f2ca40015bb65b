"""The data of every timeline figure: lanes of coloured bars, and the rows overlapping bars need.

What `dse.output.timeline_plot.draw_timelines` draws. The figures' data functions build it
(`dse.output.timeline_plot` for a collective, `dse.output.iteration_timeline` for a training
iteration, `dse.output.ranks_timeline` for a per-rank trace); pure data, no matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Bar:
    """One phase on a lane: its chunk and kind, from `start` to `end` (ns), on row `row`, in `color`."""

    chunk: int
    kind: str
    start: float
    end: float
    row: int
    color: str


@dataclass
class Lane:
    """One dimension: its label, how many rows its overlapping phases need, and its bars."""

    dim: int
    label: str
    rows: int
    bars: list[Bar] = field(default_factory=list)


@dataclass
class TimelinePlotData:
    """What `draw_timelines` draws for one panel: a title, its time, lanes and legend.

    `legend` is (label, colour) for exactly the colours the bars use, in the order of the figure's
    styles (`dse.output.timeline_plot.PHASE_STYLES` for a collective); `shared`: the bars run from a
    phase's start to its end because phases shared the bandwidth."""

    title: str
    time_ns: float
    lanes: list[Lane]
    legend: list[tuple[str, str]]
    shared: bool = False


def stack_rows(spans: list[tuple[float, float]]) -> tuple[list[int], int]:
    """A row per span such that spans on one row do not overlap (first free row, in start order),
    and the number of rows (at least 1)."""
    order = sorted(range(len(spans)), key=lambda k: (spans[k][0], spans[k][1], k))
    ends: list[float] = []
    rows = [0] * len(spans)
    for k in order:
        a, b = spans[k]
        r = next((j for j, e in enumerate(ends) if e <= a), len(ends))
        if r == len(ends):
            ends.append(b)
        else:
            ends[r] = b
        rows[k] = r
    return rows, max(1, len(ends))
