"""Many evaluations at once: `evaluate_many`, and the compiled path of a single `evaluate`.

Points that share a shape (`dse.tables`: the same dimensions but for bandwidths and latencies, the
same collective, size, chunks, model, scheduler and queue) are grouped; each group's table is built
once and all its points run in one C call that releases the GIL (`dse._engine.batch_run`): per
point the phase costs, the Themis orders and the event loop, with no Python objects. The numbers
are those of `evaluate`, to the bit: the same phases, the same trackers, the same engine.
`Result` objects are built only when asked (`BatchResult.result`, `BatchResult.results`).

What a table cannot run goes through `evaluate` one point at a time, with the same results:
schedulers whose orders depend on the costs other than Themis (`lp_guided`, custom ones), a
timeline, `active_chunks` > 1 in a model whose concurrent phases do not share bandwidth (its busy
time is the union of the phases' intervals), and every point when the C engine is not built.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import engine as engine_front
from .costs.base import CostModel
from .errors import InputError
from .result import Result
from .schedulers import Scheduler, ThemisScheduler, get_scheduler, parse_queue
from .spec import CollectiveSpec
from .tables import OFFLINE_GREEDY, ShapeTable, compiled
from .topology import Topology
from .units import parse_int, size_family

#: evaluate's keywords a point may set
KEYWORDS = ("topology", "collective", "size", "chunks", "scheduler", "queue", "cost_model", "latency_mode",
            "active_chunks", "seed")  # fmt: skip
_TABLES: dict[tuple, ShapeTable] = {}
_MAX_TABLES = 256


@dataclass(frozen=True)
class Prepared:
    """One point, validated: what `evaluate` parses, and the shape it belongs to."""

    spec: CollectiveSpec
    sched: Scheduler
    queue: str
    seed: int
    size_unit: str


def prepare(point: Mapping[str, Any]) -> Prepared:
    """Validate one point's keywords as `evaluate` does (one `InputError` line if one is wrong)."""
    unknown = set(point) - set(KEYWORDS)
    if unknown:
        raise InputError("point", f"unknown keyword(s) {', '.join(sorted(unknown))}", ", ".join(KEYWORDS))
    if "topology" not in point or "size" not in point:
        raise InputError("point", "needs a topology and a size", "e.g. {'topology': '2D-SW_SW', 'size': '1GB'}")
    spec = CollectiveSpec.parse(
        point["topology"], collective=point.get("collective", "all_reduce"), size=point["size"],
        chunks=point.get("chunks", 64), cost_model=point.get("cost_model", "paper"),
        latency_mode=point.get("latency_mode"), active_chunks=point.get("active_chunks", 1),
    )  # fmt: skip
    sched = get_scheduler(point.get("scheduler", "themis"))
    queue = parse_queue(point.get("queue", "scf"))
    seed = parse_int(point.get("seed", 0), "seed", minimum=0)
    return Prepared(spec, sched, queue, seed, size_family(point["size"]))


def tableable(p: Prepared) -> bool:
    """Can a shape table run this point (module docstring)?"""
    model, spec = p.spec.cost_model, p.spec
    if not engine_front.c_engine_built() or engine_front.DEFAULT == "python":
        return False
    if spec.active_chunks > 1 and not model.shares_bandwidth:
        return False
    return compiled(p.sched, spec.collective) and type(model).phases is CostModel.phases


def _sched_key(sched: Scheduler, seed: int) -> tuple:
    if type(sched) is ThemisScheduler:
        return ("themis", sched.seed_latency, sched.threshold_fraction)
    return (type(sched), repr(sched), seed)


def table_for(p: Prepared) -> ShapeTable:
    """The shape table of a point, built once (a bounded cache)."""
    s = p.spec
    topo = s.topology
    key = (tuple((d.kind, d.npus, d.algorithm) for d in topo.dims), s.collective, s.size, s.chunks, s.cost_model,
           s.latency_mode, _sched_key(p.sched, p.seed), p.queue, s.active_chunks)  # fmt: skip
    hit = _TABLES.get(key)
    if hit is None:
        if len(_TABLES) >= _MAX_TABLES:
            _TABLES.clear()
        hit = _TABLES[key] = ShapeTable(topo, s.collective, s.size, s.chunks, s.cost_model, s.latency_mode, p.sched,
                                        p.seed, p.queue, s.active_chunks)  # fmt: skip
    return hit


def _points(table: ShapeTable, topos: Sequence[Topology]) -> tuple:
    """The per-point rows `batch_run` reads: bandwidths and latencies for a kernel, else the costs
    (one point's are remembered by its table, a bounded cache)."""
    if len(topos) == 1:
        cache = table.__dict__.setdefault("_rows", {})
        hit = cache.get(topos[0])
        if hit is None:
            if len(cache) >= 64:
                cache.clear()
            hit = cache[topos[0]] = _rows(table, topos)
        return hit
    return _rows(table, topos)


def _rows(table: ShapeTable, topos: Sequence[Topology]) -> tuple:
    n, model = len(topos), table.model
    bw, lat, busy, delay, ties, bwt, gbw = (array("d") for _ in range(7))
    if model.batch_kernel is not None:
        for t in topos:
            for d in t.dims:
                bw.append(d.bandwidth)
                lat.append(d.latency)
    else:
        for t in topos:
            b, dl, ti, bt = table.point_costs(t)
            busy.extend(b)
            delay.extend(dl)
            if ti is not None:
                ties.extend(ti)
            if bt is not None:
                bwt.extend(bt)
            lat.extend(d.latency for d in t.dims)
    if table.tracker == OFFLINE_GREEDY and model.batch_kernel != "astra-sim":
        for t in topos:
            gbw.extend(model.greedy_bandwidth(d) for d in t.dims)
    return (n, bw, lat, busy, delay, ties, bwt, gbw)


@dataclass
class _Group:
    table: ShapeTable
    index: list[int] = field(default_factory=list)
    topos: list[Topology] = field(default_factory=list)


class BatchResult:
    """The numbers of many evaluations, in the points' order; `Result` objects on demand.

    `time_ns[i]`, `dim_busy_ns[i]`, `dim_bytes[i]` as `evaluate` reports them; `result(i)` the
    whole `Result` (built then, and kept)."""

    def __init__(self, prepared: list[Prepared]) -> None:
        n = len(prepared)
        self._prepared = prepared
        self.time_ns: list[float] = [0.0] * n
        self.dim_busy_ns: list[tuple[float, ...]] = [()] * n
        self.dim_bytes: list[tuple[float, ...]] = [()] * n
        self._orders: list[tuple[tuple[int, ...], ...]] = [()] * n
        self._results: list[Result | None] = [None] * n

    def __len__(self) -> int:
        return len(self.time_ns)

    def result(self, i: int) -> Result:
        """Point i's `Result`, as `evaluate` returns it."""
        r = self._results[i]
        if r is None:
            from .evaluate import make_result
            from .simulate import SimOutput

            p = self._prepared[i]
            s = p.spec
            out = SimOutput(self.time_ns[i], self.dim_busy_ns[i], self.dim_bytes[i], (), None)
            r = self._results[i] = make_result(
                s.topology, s.collective, s.size, s.chunks, p.sched, p.queue, s.cost_model, s.latency_mode,
                s.active_chunks, p.seed, self._orders[i], out, size_unit=p.size_unit, keep_timeline=False,
            )  # fmt: skip
        return r

    def results(self) -> list[Result]:
        return [self.result(i) for i in range(len(self))]


def run_table(table: ShapeTable, topos: Sequence[Topology]) -> tuple[array, array, array, array]:
    """Run points of one shape in C: (time, per-dim busy, per-dim bytes, order ids per chunk)."""
    n, nd = len(topos), table.nd
    time, busy, sent = array("d", bytes(8 * n)), array("d", bytes(8 * n * nd)), array("d", bytes(8 * n * nd))
    orders = array("i", bytes(4 * n * table.nchunks))
    eng = engine_front._engine
    eng.batch_run(table.compiled(eng), _points(table, topos), (time, busy, sent, orders))  # type: ignore[union-attr]
    return time, busy, sent, orders


def evaluate_many(points: Iterable["Mapping[str, Any] | Topology | str"], **common: Any) -> BatchResult:
    """Evaluate many points; returns a `BatchResult` (numbers at once, `Result`s on demand).

    Each point is a topology (a `Topology`, preset name or notation) or a dict of `evaluate`'s
    keywords; `common` gives keywords every point shares (a point's own win). Example:
    ``evaluate_many(topologies, size="1GB", chunks=64)``. Bad input: the `InputError` of the first
    bad point, naming its index.
    """
    prepared = []
    for i, pt in enumerate(points):
        kw = dict(common)
        kw.update(pt if isinstance(pt, Mapping) else {"topology": pt})
        try:
            prepared.append(prepare(kw))
        except InputError as e:
            raise InputError(f"point {i}: {e.field}", e.problem, e.allowed) from None
    res = BatchResult(prepared)
    groups: dict[int, _Group] = {}
    from .evaluate import evaluate

    for i, p in enumerate(prepared):
        if not tableable(p):
            s = p.spec
            r = evaluate(s.topology, collective=s.collective, size=s.size, chunks=s.chunks, scheduler=p.sched,
                         queue=p.queue, cost_model=s.cost_model, latency_mode=s.latency_mode,
                         active_chunks=s.active_chunks, seed=p.seed)  # fmt: skip
            res._results[i] = r
            res.time_ns[i], res.dim_busy_ns[i], res.dim_bytes[i] = r.time_ns, r.dim_busy_ns, r.dim_bytes
            continue
        p.spec.check_work(queue=p.queue)
        t = table_for(p)
        g = groups.setdefault(id(t), _Group(t))
        g.index.append(i)
        g.topos.append(p.spec.topology)
    for g in groups.values():
        time, busy, sent, orders = run_table(g.table, g.topos)
        nd, nc, perms = g.table.nd, g.table.nchunks, g.table.perms
        for k, i in enumerate(g.index):
            res.time_ns[i] = time[k]
            res.dim_busy_ns[i] = tuple(busy[k * nd : (k + 1) * nd])
            res.dim_bytes[i] = tuple(sent[k * nd : (k + 1) * nd])
            res._orders[i] = tuple(perms[o] for o in orders[k * nc : (k + 1) * nc])
    return res
