"""Many evaluations at once: `evaluate_many`, and the compiled path of a single `evaluate`.

Points that share a shape (`dse.sim.tables`: the same dimensions but for bandwidths and latencies, the
same collective, size, chunks, model, scheduler and queue) are grouped; each group's table is built
once and all its points run in one C call that releases the GIL (`dse._engine.batch_run`): per
point the phase costs, the Themis orders and the event loop, with no Python objects. The numbers
are those of `evaluate`, to the bit: the same phases, the same trackers, the same engine.
`Result` objects are built only when asked (`BatchResult.result`, `BatchResult.results`).

What a table cannot run goes through `evaluate` one point at a time, with the same results:
schedulers whose orders depend on the costs other than Themis (`lp_guided`, custom ones), a
timeline, `active_chunks` > 1 in a model whose concurrent phases do not share bandwidth (its busy
time is the union of the phases' intervals), a fixed service order (queue `fixed`), and every point
when the C engine is not built.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dse.core.errors import InputError
from dse.core.limits import MAX_BANDWIDTH, MAX_NS, MIN_BANDWIDTH
from dse.core.topology import Topology
from dse.costs.base import CostModel
from dse.schedulers import Scheduler, ThemisScheduler
from dse.sim import engine as engine_front
from dse.sim.result import Result
from dse.sim.spec import SPEC_KEYS, RunSpec
from dse.sim.tables import OFFLINE_GREEDY, ShapeTable, schedulable

#: evaluate's keywords a point may set
KEYWORDS: tuple[str, ...] = ("topology", *SPEC_KEYS, "scheduler", "queue", "seed")
_TABLES: dict[tuple, ShapeTable] = {}
_SEEN: dict[tuple, bool] = {}  # shapes evaluated once, without a table
#: the most dimensions a table runs (more go through `evaluate`'s Python path)
MAX_DIMS = 5
_MAX_TABLES = 256


def prepare(point: Mapping[str, Any]) -> RunSpec:
    """Validate one point's keywords as `evaluate` does (one `InputError` line if one is wrong)."""
    unknown = set(point) - set(KEYWORDS)
    if unknown:
        raise InputError("point", f"unknown keyword(s) {', '.join(sorted(unknown))}", ", ".join(KEYWORDS))
    if "topology" not in point or "size" not in point:
        raise InputError("point", "needs a topology and a size", "e.g. {'topology': '2D-SW_SW', 'size': '1GB'}")
    return RunSpec.parse(point["topology"], **{k: v for k, v in point.items() if k != "topology"})


def tableable(p: RunSpec) -> bool:
    """Can a shape table run this point (module docstring)? (`table_for` may still decline a shape
    seen once.)"""
    model, spec = p.spec.cost_model, p.spec
    if not engine_front.c_engine_built() or engine_front.DEFAULT == "python" or p.queue == "fixed":
        return False
    if spec.active_chunks > 1 and not model.shares_bandwidth:
        return False
    if spec.topology.ndims > MAX_DIMS:  # Themis' table holds every order: 5! = 120
        return False
    if model.themis_flavor == "offline_greedy" and not getattr(engine_front._engine, "HAVE_INT128", 0):
        return False  # a build without 128-bit integers cannot run OfflineGreedy's exact arithmetic
    return schedulable(p.sched, spec.collective) and type(model).phases is CostModel.phases


def _sched_key(sched: Scheduler, seed: int) -> tuple:
    if type(sched) is ThemisScheduler:
        return ("themis", sched.seed_latency, sched.threshold_fraction)
    return (type(sched), repr(sched), seed)


def shape_key(p: RunSpec) -> tuple:
    """What a point's shape table depends on (module docstring): all but bandwidths and latencies.
    Of a dim, its kind, size and algorithm, and what else the model's kernel takes from the table
    (`CostModel.shape_fields`: astra-sim-1's links, NIC and router latencies)."""
    s = p.spec
    fields = s.cost_model.shape_fields
    dims = tuple((d.kind, d.npus, d.algorithm, *[getattr(d, f) for f in fields]) for d in s.topology.dims)
    return (
        dims,
        s.collective,
        s.size,
        s.chunks,
        s.cost_model,
        s.latency_mode,
        _sched_key(p.sched, p.seed),
        p.queue,
        s.active_chunks,
    )


def table_for(p: RunSpec, *, now: bool = True) -> ShapeTable | None:
    """The shape table of a point, built once (a bounded cache). With `now` False a shape seen for
    the first time gets none: a table holds every order, which costs more than one evaluation in
    Python (a sweep over sizes or chunk counts has a new shape at every point)."""
    key = shape_key(p)
    hit = _TABLES.get(key)
    if hit is None:
        if not now and key not in _SEEN:
            if len(_SEEN) >= 4 * _MAX_TABLES:
                _SEEN.clear()
            _SEEN[key] = True
            return None
        if len(_TABLES) >= _MAX_TABLES:
            _TABLES.clear()
        s = p.spec
        hit = _TABLES[key] = ShapeTable(
            s.topology,
            s.collective,
            s.size,
            s.chunks,
            s.cost_model,
            s.latency_mode,
            p.sched,
            p.seed,
            p.queue,
            s.active_chunks,
        )
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


def _rows(table: ShapeTable, topos: Sequence[Topology], kernel: bool = True) -> tuple:
    """`_points`; with `kernel` False (or a table without one) the costs from the model's own methods."""
    n, model = len(topos), table.model
    kernel = kernel and table.kernel is not None
    bw, lat, busy, delay, ties, bwt, gbw = (array("d") for _ in range(7))
    if kernel:
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
    if table.tracker == OFFLINE_GREEDY and not kernel:
        for t in topos:
            gbw.extend(model.greedy_bandwidth(d) for d in t.dims)
    return (n, bw, lat, busy, delay, ties, bwt, gbw)


@dataclass
class _Group:
    table: ShapeTable
    index: list[int] = field(default_factory=list)
    topos: list[Topology] = field(default_factory=list)


def _shape(topo: Topology) -> tuple:
    return tuple((d.kind, d.npus, d.algorithm) for d in topo.dims)


class BatchResult:
    """The numbers of many evaluations, in the points' order; `Result` objects on demand.

    `time_ns[i]`, `dim_busy_ns[i]`, `dim_bytes[i]` as `evaluate` reports them; `result(i)` the
    whole `Result` (built then, and kept). The per-dim rows of a batch run at once are built when
    first read (`_flat` keeps them flat until then)."""

    def __init__(self, prepared: list[RunSpec] | _Vector) -> None:
        n = len(prepared)
        self._prepared = prepared
        self.time_ns: list[float] = [0.0] * n
        self._busy: list[tuple[float, ...]] = [()] * n
        self._sent: list[tuple[float, ...]] = [()] * n
        self._flat: tuple[int, array, array] | None = None  # (nd, busy, sent) of every point, not yet rows
        self._orders: list[tuple] = [()] * n  # (table, order ids, row): the orders, made in `result`
        self._all: tuple[ShapeTable, array] | None = None  # the same for every point at once
        self._results: list[Result | None] = [None] * n

    @property
    def dim_busy_ns(self) -> list[tuple[float, ...]]:
        self._rows()
        return self._busy

    @property
    def dim_bytes(self) -> list[tuple[float, ...]]:
        self._rows()
        return self._sent

    def _rows(self) -> None:
        if self._flat is not None:
            nd, busy, sent = self._flat
            self._busy, self._sent = list(zip(*[iter(busy)] * nd)), list(zip(*[iter(sent)] * nd))
            self._flat = None

    def __len__(self) -> int:
        return len(self.time_ns)

    def result(self, i: int) -> Result:
        """Point i's `Result`, as `evaluate` returns it."""
        r = self._results[i]
        if r is None:
            from dse.sim.evaluate import make_result
            from dse.sim.simulate import SimOutput

            p = self._prepared[i]
            table, ids, k = self._orders[i] if self._all is None else (*self._all, i)
            nc = table.nchunks
            orders = tuple(map(table.perms.__getitem__, ids[k * nc : (k + 1) * nc]))
            out = SimOutput(self.time_ns[i], self.dim_busy_ns[i], self.dim_bytes[i], (), None)
            r = self._results[i] = make_result(p, orders, out, keep_timeline=False)
        return r

    def results(self) -> list[Result]:
        return [self.result(i) for i in range(len(self))]

    def _fill(self, table: ShapeTable, index: Sequence[int], got: tuple[array, array, array, array]) -> None:
        time, busy, sent, orders = got
        nd = table.nd
        if isinstance(index, range) and index == range(len(self)):  # every point (the vectorised form)
            self.time_ns, self._flat = time.tolist(), (nd, busy, sent)
            self._all = (table, orders)
            return
        rows_busy, rows_sent = list(zip(*[iter(busy)] * nd)), list(zip(*[iter(sent)] * nd))  # rows of nd, in C
        self._rows()
        for k, i in enumerate(index):
            self.time_ns[i] = time[k]
            self._busy[i] = rows_busy[k]
            self._sent[i] = rows_sent[k]
            self._orders[i] = (table, orders, k)


class _Vector:
    """The points of the vectorised form: one base point, per point its bandwidths and latencies."""

    def __init__(self, base: RunSpec, bw: array, lat: array) -> None:
        self.base, self.bw, self.lat = base, bw, lat
        self.nd = base.spec.topology.ndims

    def __len__(self) -> int:
        return len(self.bw) // self.nd

    def __getitem__(self, i: int) -> RunSpec:
        dims = self.base.spec.topology.dims
        k = i * self.nd
        topo = Topology(
            tuple(replace(d, bandwidth=self.bw[k + j], latency=self.lat[k + j]) for j, d in enumerate(dims))
        )
        return replace(self.base, spec=replace(self.base.spec, topology=topo))


def run_table(table: ShapeTable, topos: Sequence[Topology]) -> tuple[array, array, array, array]:
    """Run points of one shape in C: (time, per-dim busy, per-dim bytes, order ids per chunk)."""
    return _run(table, _points(table, topos), len(topos), lambda: topos)


def point_rows(table: ShapeTable, topo: Topology) -> tuple:
    """One point's rows for `run_point` (made once, for a caller that runs the point again)."""
    return _points(table, (topo,))


def run_point(table: ShapeTable, topo: Topology, rows: tuple) -> tuple[array, array, array, array]:
    """`run_table` of one point whose rows (`point_rows`) are known."""
    return _run(table, rows, 1, lambda: (topo,))


def _run(
    table: ShapeTable, rows: tuple, n: int, topos: Callable[[], Sequence[Topology]]
) -> tuple[array, array, array, array]:
    """`run_table` on the rows of `_points`; `topos` gives the points as topologies, for when the
    table's kernel refuses one (a time beyond its integers, `KERNEL_INTS`): then the model's own
    methods cost them all."""
    nd = table.nd
    time, busy, sent = array("d", bytes(8 * n)), array("d", bytes(8 * n * nd)), array("d", bytes(8 * n * nd))
    orders = array("i", bytes(4 * n * table.nchunks))
    eng = engine_front._engine
    outs = (time, busy, sent, orders)
    try:
        eng.batch_run(table.compiled(eng), rows, outs)
    except OverflowError:
        rows = _rows(table, topos(), kernel=False)
        eng.batch_run(table.compiled(eng, kernel=False), rows, outs)
    return time, busy, sent, orders


def _prepare_all(points: Iterable[Mapping[str, Any] | Topology | str], common: Mapping[str, Any]) -> list[RunSpec]:
    """Every point validated; points that share their other keywords and their shape with an earlier
    one reuse its validation (only what depends on the topology is checked again)."""
    seen: dict[tuple, RunSpec] = {}
    out = []
    for i, pt in enumerate(points):
        kw = dict(common)
        kw.update(pt if isinstance(pt, Mapping) else {"topology": pt})
        try:
            try:
                key = tuple(sorted((k, v) for k, v in kw.items() if k != "topology"))
                hash(key)
            except TypeError:
                key = None
            topo = kw.get("topology")
            first = seen.get(key) if key is not None and isinstance(topo, Topology) else None
            if first is not None and isinstance(topo, Topology) and _shape(first.spec.topology) == _shape(topo):
                s = first.spec
                s.cost_model.check(topo, s.collective, s.latency_mode, s.active_chunks)
                out.append(replace(first, spec=replace(s, topology=topo)))
                continue
            p = prepare(kw)
        except InputError as e:
            raise InputError(f"point {i}: {e.field}", e.problem, e.allowed) from None
        if key is not None and isinstance(topo, Topology):
            seen[key] = p
        out.append(p)
    return out


def _matrix(values: Any, n_cols: int, name: str, low: float, high: float) -> array:
    """A flat array of `values` (rows of `n_cols` numbers), each in [low, high]: converted and checked
    by numpy at once; anything it cannot take goes through `_matrix_rows` for its error line."""
    import numpy as np

    try:
        a = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return _matrix_rows(values, n_cols, name, low, high)
    if a.size == 0:
        return array("d")
    if a.ndim != 2 or a.shape[1] != n_cols:
        return _matrix_rows(values, n_cols, name, low, high)
    bad = ~((a >= low) & (a <= high))  # NaN fails too
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise InputError(f"{name} row {i}", f"{float(a[i, j])!r} is out of range", f"{low:g} to {high:g}")
    flat = array("d")
    flat.frombytes(np.ascontiguousarray(a).tobytes())
    return flat


def _matrix_rows(values: Any, n_cols: int, name: str, low: float, high: float) -> array:
    """`_matrix` row by row: the first bad row's error, or the array."""
    flat = array("d")
    if not isinstance(values, Iterable) or isinstance(values, (str, bytes)):
        raise InputError(name, f"{values!r} is not rows of numbers", f"a list of rows of {n_cols} numbers")
    for i, row in enumerate(values):
        try:
            row = [float(x) for x in row]
        except (TypeError, ValueError):
            raise InputError(f"{name} row {i}", f"{row!r} is not a row of numbers", f"{n_cols} numbers") from None
        if len(row) != n_cols:
            raise InputError(f"{name} row {i}", f"{len(row)} values", f"one per dimension ({n_cols})")
        for v in row:
            if not low <= v <= high:  # NaN fails too
                raise InputError(f"{name} row {i}", f"{v!r} is out of range", f"{low:g} to {high:g}")
            flat.append(v)
    return flat


def _vectorised(bandwidths: Any, latencies: Any, common: Mapping[str, Any]) -> BatchResult:
    base = prepare(common)
    topo = base.spec.topology
    nd = topo.ndims
    bw = _matrix(bandwidths, nd, "bandwidths", MIN_BANDWIDTH, MAX_BANDWIDTH)
    n = len(bw) // nd
    lat = (
        _matrix(latencies, nd, "latencies", 0.0, MAX_NS)
        if latencies is not None
        else array("d", [d.latency for d in topo.dims] * n)
    )
    if len(lat) != len(bw):
        raise InputError("latencies", f"{len(lat) // nd} rows for {n} rows of bandwidths", "one row per point")
    vec = _Vector(base, bw, lat)
    table = table_for(base) if n and tableable(base) else None

    def topos() -> list[Topology]:
        return [vec[i].spec.topology for i in range(n)]

    if table is None or table.kernel is None:  # the rows need the model's own methods: as topologies
        return evaluate_many(topos(), **common)
    res = BatchResult(vec)
    empty = array("d")
    res._fill(table, range(n), _run(table, (n, bw, lat, empty, empty, empty, empty, empty), n, topos))
    return res


def evaluate_many(
    points: Iterable[Mapping[str, Any] | Topology | str] | None = None,
    *,
    bandwidths: Any = None,
    latencies: Any = None,
    **common: Any,
) -> BatchResult:
    """Evaluate many points; returns a `BatchResult` (numbers at once, `Result`s on demand).

    Each point is a topology (a `Topology`, preset name or notation) or a dict of `evaluate`'s
    keywords; `common` gives keywords every point shares (a point's own win). Example:
    ``evaluate_many(topologies, size="1GB", chunks=64)``. The vectorised form gives one `topology`
    and per point its bandwidths (rows of one GB/s value per dimension, a list of lists or a 2-D
    array) and optionally latencies (ns): ``evaluate_many(bandwidths=rows, topology="4D-Ring_FC_Ring_SW",
    size="1GB")``. Bad input: one `InputError` naming the point (or row) and the field.
    """
    if bandwidths is not None:
        if points is not None:
            raise InputError("points", "given with bandwidths", "either points, or one topology and bandwidths")
        return _vectorised(bandwidths, latencies, common)
    if latencies is not None:
        raise InputError("latencies", "given without bandwidths", "bandwidths and latencies together")
    prepared = _prepare_all(points or (), common)
    res = BatchResult(prepared)
    groups: dict[int, _Group] = {}
    from dse.sim.evaluate import evaluate_prepared

    counts: dict[tuple | None, int] = {}
    ok = [tableable(p) for p in prepared]
    keys = [shape_key(p) if t else None for p, t in zip(prepared, ok)]
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    for i, p in enumerate(prepared):
        # a shape with one point gets a table only if it was seen before (`table_for`)
        t = table_for(p, now=counts[keys[i]] > 1) if ok[i] else None
        if t is None:
            p.spec.check_work(queue=p.queue, extra_simulations=p.sched.simulations())
            r = evaluate_prepared(p)
            res._results[i] = r
            res.time_ns[i], res.dim_busy_ns[i], res.dim_bytes[i] = r.time_ns, r.dim_busy_ns, r.dim_bytes
            continue
        g = groups.get(id(t))
        if g is None:
            p.spec.check_work(queue=p.queue)  # the same for every point of a shape
            g = groups[id(t)] = _Group(t)
        g.index.append(i)
        g.topos.append(p.spec.topology)
    for g in groups.values():
        res._fill(g.table, g.index, run_table(g.table, g.topos))
    return res
