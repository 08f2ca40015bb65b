"""`Result`: what one evaluation of a collective returns (docs/model.md §6.5)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from dse.sim.simulate import TimelineEntry


@dataclass(frozen=True)
class Point:
    """What one evaluation ran, in canonical form: the parameters a `Result` reports and the
    columns a sweep's CSV row names them by (`dse.explore.sweep.sweeps`). Declared once, here."""

    topology: str
    collective: str
    size_bytes: int
    chunks: int
    scheduler: str
    queue: str
    cost_model: str
    latency_mode: str
    active_chunks: int
    seed: int

    def values(self) -> tuple:
        """The parameters' values, in `POINT_FIELDS` order."""
        return tuple(getattr(self, name) for name in POINT_FIELDS)

    def run_args(self) -> dict[str, Any]:
        """The point as `evaluate`'s keywords (`dse.sim.spec.RunArgs`), the topology apart."""
        return {
            "collective": self.collective,
            "size": self.size_bytes,
            "chunks": self.chunks,
            "scheduler": self.scheduler,
            "queue": self.queue,
            "cost_model": self.cost_model,
            "latency_mode": self.latency_mode,
            "active_chunks": self.active_chunks,
            "seed": self.seed,
        }

    def bound_key(self) -> tuple:
        """What the lower bound depends on (not the schedule, queue or seed): the topology, then
        the collective's keywords in `dse.sim.spec.SPEC_KEYS` order."""
        return (
            self.topology,
            self.collective,
            self.size_bytes,
            self.chunks,
            self.cost_model,
            self.latency_mode,
            self.active_chunks,
        )


#: the parameters' names, in order (a sweep's CSV columns after `point`)
POINT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Point))


@dataclass(frozen=True)
class Result(Point):
    """One simulated collective: its `Point` (what ran), then what came out.

    `time_ns` is when the last chunk finishes. `size_unit` is the unit family the size was given in
    (``decimal`` or ``binary``, `dse.core.units.size_family`), so reports print it back the same way.

    `bw_utilization_uncapped` is the paper's BW utilisation: the bytes one NPU must send for the
    collective over `time_ns` x Σ_d B_d, in the cost model's bandwidth unit. It cannot pass 1 when a
    dimension's concurrent phases share its bandwidth (the `paper` model), but ASTRA-sim's
    congestion-unaware backend (`astra-sim`, `astra-sim-1`) runs up to `active_chunks` phases at
    once on a dimension, each at the full bandwidth, so more bytes move than the bandwidth allows
    and it can. `bw_utilization` is that value capped at 1 (`evaluate` warns, naming the cause,
    when it caps). `algbw_GBps` = size / time and `busbw_GBps` follow nccl-tests (decimal GB/s,
    1e9 B/s, whatever the model).

    Per dimension: `dim_busy_ns` is the measure of the union of the intervals in which the
    dimension serves at least one phase (a phase holds it from its start for its busy time; under
    shared bandwidth, until its transfer ends), so it never exceeds `time_ns`; with one phase at a
    time it is the sum of the phases' busy times. `dim_utilization` = `dim_busy_ns` / `time_ns`
    (0-1) and `dim_bytes` the bytes sent on it. `orders` holds one dimension order per chunk;
    `timeline` the phases as they ran, when asked for.
    """

    size_unit: str
    time_ns: float
    bytes_sent: float
    bw_utilization: float
    bw_utilization_uncapped: float
    algbw_GBps: float
    busbw_GBps: float
    dim_busy_ns: tuple[float, ...]
    dim_bytes: tuple[float, ...]
    dim_utilization: tuple[float, ...]
    orders: tuple[tuple[int, ...], ...]
    simulated_chunks: int
    timeline: tuple[TimelineEntry, ...] | None = field(default=None, repr=False)

    @classmethod
    def from_fields(cls, values: dict[str, Any]) -> Result:
        """`Result(**values)` for `values` holding every field by name, made without the dataclass's
        field-by-field `__init__` (`evaluate`'s every call makes one, so it is kept cheap)."""
        if len(values) != len(RESULT_FIELDS):
            raise TypeError(f"Result needs its {len(RESULT_FIELDS)} fields, got {sorted(values)}")
        r = object.__new__(cls)
        r.__dict__.update(values)
        return r

    def to_dict(self, *, timeline: bool = False) -> dict[str, Any]:
        """A JSON-ready dict of every field (the timeline only if asked and present)."""
        d = asdict(self)
        d["orders"] = ["".join(map(str, o)) if len(o) <= 10 else list(o) for o in self.orders]
        d["dim_busy_ns"] = list(self.dim_busy_ns)
        d["dim_bytes"] = list(self.dim_bytes)
        d["dim_utilization"] = list(self.dim_utilization)
        if timeline and self.timeline is not None:
            d["timeline"] = [e._asdict() for e in self.timeline]
        else:
            d.pop("timeline")
        return d


#: every field of a `Result`, in order
RESULT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Result))
