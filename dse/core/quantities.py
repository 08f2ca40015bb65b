"""What a CSV or JSON column means to a person: its quantity, unit and the scale from the stored value.

A column's name carries its stored unit as a suffix (`_ns` nanoseconds, `_pct` percent 0-100,
`_GBps` GB/s, `_usd` US dollars, `_bytes` bytes); unitless counts (`chunks`, `seed`, `point`, ...)
and text columns (`design`, `topology`, `scheduler`, ...) have plain names. `quantity(column)`
reads the suffix and a small table of known names and returns a `Quantity`: the label ("iteration
time"), the unit shown ("ms") and the factor that turns a stored value into a shown one
(``shown = stored * scale``). The old sweep names `bw_utilization` and `gap`, 0-1 fractions, are
shown in % (scale 100), so CSVs written before the suffixes still read right.

Units shown: times in ms, unless `values` are given, then per axis the largest of s, ms, µs, ns
that the largest magnitude reaches (a 20 ns latency reads "20 ns", a 250 ms iteration "250 ms");
sizes likewise in B, KB/MB/GB/TB, or KiB/MiB/GiB/TiB when every value is a multiple of 1024 (MB
without values); percentages in %, bandwidths in GB/s, cost in $, counts and text without a unit.
`axis_label(column, unit)` is the label of an axis or table header: "iteration time (ms)".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

TIME_UNITS: tuple[tuple[str, float], ...] = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))
SIZE_UNITS: dict[str, tuple[tuple[str, float], ...]] = {
    "decimal": (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3), ("B", 1.0)),
    "binary": (("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10), ("B", 1.0)),
}

#: Columns of text, never numbers, whatever their cells hold.
TEXT_COLUMNS = frozenset(
    {
        "design",
        "topology",
        "workload",
        "placement",
        "scheduler",
        "queue",
        "cost_model",
        "collective",
        "latency_mode",
        "crc",
    }
)

#: Labels by column name without its unit suffix (a column not here is labelled by its name, "_" as " ").
LABELS: dict[str, str] = {
    "time": "collective time",
    "iteration_time": "iteration time",
    "compute": "compute time",
    "comm": "communication in flight",
    "exposed_comm": "exposed communication",
    "bound": "lower bound",
    "bw_utilization": "BW utilisation",
    "gap": "gap to the lower bound",
    "algbw": "algorithm bandwidth",
    "busbw": "bus bandwidth",
    "total_bw": "total bandwidth",
    "size": "size per NPU",
    "cost": "cost",
    "chunks": "chunks per collective",
    "active_chunks": "active chunks per dimension",
    "cost_model": "cost model",
    "latency_mode": "latency mode",
}

#: Suffix -> (kind, unit, scale from the stored unit); times and sizes get their unit from the data.
SUFFIXES: dict[str, tuple[str, str, float]] = {
    "_ns": ("time", "ms", 1e-6),
    "_pct": ("percent", "%", 1.0),
    "_GBps": ("bandwidth", "GB/s", 1.0),
    "_ms_usd": ("product", "ms·$", 1.0),  # before `_usd`: a time x cost, already in ms·$
    "_usd": ("money", "$", 1.0),
    "_bytes": ("size", "MB", 1e-6),
}

#: Old names without a suffix: 0-1 fractions, shown in %.
FRACTIONS = frozenset({"bw_utilization", "gap"})

_DIM_COLUMN = re.compile(r"^(bw|lat)(\d+)$")


@dataclass(frozen=True)
class Quantity:
    """A column as people read it: ``label (unit)``, and ``shown = stored * scale``.

    `kind`: time, size, percent, bandwidth, money, ratio, count or text (unit "" for the last two)."""

    column: str
    label: str
    unit: str
    scale: float = 1.0
    kind: str = "count"

    def show(self, stored: float) -> float:
        """A stored value in the unit shown."""
        return stored * self.scale

    @property
    def axis_label(self) -> str:
        """``label (unit)``, or the label alone for counts and text."""
        return f"{self.label} ({self.unit})" if self.unit else self.label


#: Columns whose unit reads better spelled out.
SPECIAL: dict[str, Quantity] = {
    "exposed_comm_pct": Quantity("exposed_comm_pct", "exposed communication", "% of iteration", 1.0, "percent"),
    "speedup": Quantity("speedup", "speed-up against the first", "x", 1.0, "ratio"),
}


def _label(stem: str) -> str:
    m = _DIM_COLUMN.match(stem)
    if m:
        return f"{'bandwidth' if m.group(1) == 'bw' else 'latency'} of dim {m.group(2)}"
    return LABELS.get(stem, stem.replace("_", " "))


def _unit_for(units: tuple[tuple[str, float], ...], values: Iterable[float]) -> tuple[str, float]:
    """The largest unit that the largest magnitude among `values` reaches (the smallest unit if none)."""
    top = max((abs(v) for v in values), default=0.0)
    return next(((u, k) for u, k in units if top >= k), units[-1])


def quantity(column: str, values: Iterable[float] | None = None) -> Quantity:
    """The `Quantity` of a column (module docstring); `values` (stored units) choose a time or size unit."""
    if column in SPECIAL:
        return SPECIAL[column]
    if column in FRACTIONS:
        return Quantity(column, _label(column), "%", 100.0, "percent")
    if column in TEXT_COLUMNS:
        return Quantity(column, _label(column), "", 1.0, "text")
    for suffix, (kind, unit, scale) in SUFFIXES.items():
        if column.endswith(suffix) and len(column) > len(suffix):
            stem = column[: -len(suffix)]
            if values is not None and kind in ("time", "size"):
                vals = list(values)
                if kind == "time":
                    unit, per = _unit_for(TIME_UNITS, vals)
                else:
                    family = "binary" if vals and all(v % 1024 == 0 for v in vals) else "decimal"
                    unit, per = _unit_for(SIZE_UNITS[family], vals)
                scale = 1.0 / per
            return Quantity(column, _label(stem), unit, scale, kind)
    return Quantity(column, _label(column), "", 1.0, "count")


def axis_label(column: str, unit: str | None = None) -> str:
    """The label of an axis or header showing `column` in `unit` (None: `quantity`'s default unit):
    ``axis_label("iteration_time_ns", "ms")`` is "iteration time (ms)"."""
    q = quantity(column)
    u = q.unit if unit is None else unit
    return f"{q.label} ({u})" if u else q.label
