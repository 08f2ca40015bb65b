"""What a per-rank run reports (`dse.training.chakra.ranks_run.iterate_ranks`): every rank's times, its classes, spans.

Times are ns of simulated time. A rank's `finish_ns` is when its last node ends; its `compute_ns`
is the GPU compute it executed (the roofline's times where the roofline timed it, at least 1 ns a
node under ASTRA-sim 2.x's rules); `exposed_ns` = finish − compute, ASTRA-sim's "exposed
communication" (what the rank spends not computing: waiting for collectives, messages, memory).
Ranks of one class run the same graph (up to their peers); `classes` gives each class's ranks and,
since alike ranks may still finish apart, the latest finish among them.

`spans` (only when asked for): what each class's first rank did, on lanes ``compute`` (GPU),
``cpu``, ``comm`` (collectives and sends holding the communication slot), ``recv`` (a receive from
its post to its end), ``mem`` and ``dim<k>`` (a collective or message on network dimension k).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

LANES = ("compute", "cpu", "comm", "recv", "mem")


@dataclass(frozen=True)
class Span:
    """One interval of one class's first rank on one lane."""

    cls: int
    lane: str
    name: str
    start_ns: float
    end_ns: float


@dataclass(frozen=True)
class RankClassResult:
    """A class of alike ranks: its `index`, `ranks`, and the latest finish, compute and exposed ns among them."""

    index: int
    ranks: tuple[int, ...]
    finish_ns: float
    compute_ns: float
    exposed_ns: float


@dataclass(frozen=True)
class RanksResult:
    """One run of a per-rank trace (module docstring). `time_ns` is the latest rank's finish."""

    workload: str
    topology: str
    cost_model: str
    scheduler: str
    queue: str
    chunks: int
    npus: int
    time_ns: float
    finish_ns_by_rank: tuple[float, ...]
    exposed_ns_by_rank: tuple[float, ...]
    compute_ns_by_rank: tuple[float, ...]
    classes: tuple[RankClassResult, ...]
    messages: int = 0
    collectives: int = 0
    spans: tuple[Span, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self, *, spans: bool = False) -> dict[str, Any]:
        """The JSON form: every field, lists for tuples; `spans` only when asked for. Besides, the
        fields a single-rank `IterationResult` has that a per-rank run defines: ``iterations`` (1),
        ``total_ns`` (= `time_ns`), ``compute_ns`` and ``exposed_comm_ns`` of the rank that finishes
        last (the lowest such rank), ``collective_count``."""
        d = asdict(self)
        last = self.finish_ns_by_rank.index(self.time_ns) if self.finish_ns_by_rank else 0
        d |= {
            "iterations": 1,
            "total_ns": self.time_ns,
            "compute_ns": self.compute_ns_by_rank[last] if self.compute_ns_by_rank else 0.0,
            "exposed_comm_ns": self.exposed_ns_by_rank[last] if self.exposed_ns_by_rank else 0.0,
            "collective_count": self.collectives,
        }
        for k, v in list(d.items()):
            if isinstance(v, tuple):
                d[k] = list(v)
        d["classes"] = [{**c, "ranks": list(c["ranks"])} for c in d["classes"]]
        if not spans:
            d.pop("spans")
        d["per_rank"] = True
        return d
