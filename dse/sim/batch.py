"""Many evaluations at once: `evaluate_many`, and the `BatchResult` it returns.

Points are validated as `evaluate` validates them. Those the compiled path runs (`dse.sim.compiled`)
are grouped by shape, and each group runs in one C call that releases the GIL, whatever its points'
sizes, chunk counts, bandwidths and latencies; the rest go through `evaluate`'s Python path one at a
time. The numbers are `evaluate`'s, to the bit. `Result` objects are built only when asked
(`BatchResult.result`, `BatchResult.results`).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dse.core.errors import InputError
from dse.core.limits import MAX_BANDWIDTH, MAX_NS, MIN_BANDWIDTH
from dse.core.topology import Topology
from dse.sim.compiled import CACHE, Runs, Shape, compilable
from dse.sim.evaluate import Metrics, evaluate_prepared, make_result, result_metrics, size_constants
from dse.sim.result import Result
from dse.sim.simulate import SimOutput
from dse.sim.spec import SPEC_KEYS, CollectiveSpec, RunSpec

#: evaluate's keywords a point may set
KEYWORDS: tuple[str, ...] = ("topology", *SPEC_KEYS, "scheduler", "queue", "seed")


def prepare(point: Mapping[str, Any]) -> RunSpec:
    """Validate one point's keywords as `evaluate` does (one `InputError` line if one is wrong)."""
    unknown = set(point) - set(KEYWORDS)
    if unknown:
        raise InputError("point", f"unknown keyword(s) {', '.join(sorted(unknown))}", ", ".join(KEYWORDS))
    if "topology" not in point or "size" not in point:
        raise InputError("point", "needs a topology and a size", "e.g. {'topology': '2D-SW_SW', 'size': '1GB'}")
    return RunSpec.parse(point["topology"], **{k: v for k, v in point.items() if k != "topology"})


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
        self._runs: list[tuple[Runs, int] | None] = [None] * n  # where point i's orders are
        self._all: Runs | None = None  # the same for every point at once
        self._results: list[Result | None] = [None] * n

    @property
    def dim_busy_ns(self) -> list[tuple[float, ...]]:
        """Per point, each dimension's busy ns, as `Result.dim_busy_ns`."""
        self._rows()
        return self._busy

    @property
    def dim_bytes(self) -> list[tuple[float, ...]]:
        """Per point, the bytes each dimension sent, as `Result.dim_bytes`."""
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
            runs, k = (self._all, i) if self._all is not None else self._runs[i]  # type: ignore[misc]
            out = SimOutput(self.time_ns[i], self.dim_busy_ns[i], self.dim_bytes[i], (), None)
            r = self._results[i] = make_result(self._prepared[i], runs.orders_of(k), out, keep_timeline=False)
        return r

    def results(self) -> list[Result]:
        """Every point's `Result`, in the points' order."""
        return [self.result(i) for i in range(len(self))]

    def metrics(self, i: int) -> Metrics:
        """Point i's figures of merit, as its `Result` has them, without building the `Result`."""
        r = self._results[i]
        if r is not None:
            return Metrics(r.bw_utilization, r.bw_utilization_uncapped, r.algbw_GBps, r.busbw_GBps)
        spec = self._prepared[i].spec
        topo, coll, model = spec.topology, spec.collective, spec.cost_model
        need, data, factor = size_constants(topo.shape, coll, spec.size, model)
        total = sum(model.bytes_per_ns(d, coll) for d in topo.dims)
        return result_metrics(self._prepared[i], self.time_ns[i], need, total, data, factor)

    def _set(self, i: int, r: Result) -> None:
        """Point i's numbers from its `Result`."""
        self._rows()
        self._results[i] = r
        self.time_ns[i], self._busy[i], self._sent[i] = r.time_ns, r.dim_busy_ns, r.dim_bytes

    def _fill(self, runs: Runs, index: Sequence[int]) -> None:
        """The points `index` from a run of the compiled path (point k of it is point index[k])."""
        nd = runs.shape.nd
        if isinstance(index, range) and index == range(len(self)):  # every point (the vectorised form)
            self.time_ns, self._flat, self._all = runs.time.tolist(), (nd, runs.busy, runs.bytes), runs
            return
        rows_busy, rows_sent = list(zip(*[iter(runs.busy)] * nd)), list(zip(*[iter(runs.bytes)] * nd))
        self._rows()
        for k, i in enumerate(index):
            self.time_ns[i] = runs.time[k]
            self._busy[i] = rows_busy[k]
            self._sent[i] = rows_sent[k]
            self._runs[i] = (runs, k)


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


@dataclass
class _Group:
    """The points of one shape: their indices and rows."""

    shape: Shape
    index: list[int] = field(default_factory=list)
    sizes: array = field(default_factory=lambda: array("q"))
    chunks: array = field(default_factory=lambda: array("q"))
    bw: array = field(default_factory=lambda: array("d"))
    lat: array = field(default_factory=lambda: array("d"))
    checked: set[int] = field(default_factory=set)  # chunk counts whose work was checked

    def add(self, i: int, p: RunSpec) -> None:
        """Append point `i` (its work checked once per chunk count) to the vectors."""
        spec = p.spec
        if spec.chunks not in self.checked:  # the work depends on the chunks, not the size
            spec.check_work(queue=p.queue)
            self.checked.add(spec.chunks)
        self.index.append(i)
        self.sizes.append(spec.size)
        self.chunks.append(spec.chunks)
        for d in spec.topology.dims:
            self.bw.append(d.bandwidth)
            self.lat.append(d.latency)


def _in_python(res: BatchResult, i: int, p: RunSpec) -> None:
    """Point i through `evaluate`'s Python path."""
    p.spec.check_work(queue=p.queue, extra_simulations=p.sched.simulations())
    res._set(i, evaluate_prepared(p))


def _prepare_all(points: Iterable[Mapping[str, Any] | Topology | str], common: Mapping[str, Any]) -> list[RunSpec]:
    """Every point validated; points that share their other keywords and their shape with an earlier
    one reuse its validation (what depends on the topology and the size is checked again)."""
    seen: dict[tuple, tuple[RunSpec, Any, Any]] = {}
    out = []
    for i, pt in enumerate(points):
        kw = dict(common)
        kw.update(pt if isinstance(pt, Mapping) else {"topology": pt})
        topo = kw.get("topology")
        try:
            key = _reuse_key(kw) if isinstance(topo, Topology) else None
            hit = seen.get(key) if key is not None else None
            if hit is not None and _shape(hit[0].spec.topology) == _shape(topo):  # type: ignore[arg-type]
                out.append(_like(*hit, topo, kw["size"], kw.get("chunks")))  # type: ignore[arg-type]
                continue
            p = prepare(kw)
        except InputError as e:
            raise InputError(f"point {i}: {e.field}", e.problem, e.allowed) from None
        if key is not None:
            seen[key] = (p, kw["size"], kw.get("chunks"))
        out.append(p)
    return out


def _reuse_key(kw: Mapping[str, Any]) -> tuple | None:
    """What a point must share with an earlier one to reuse its validation: every keyword but its
    topology, size and chunks (None: not hashable, or no size)."""
    if "size" not in kw:
        return None
    key = tuple(sorted((k, v) for k, v in kw.items() if k not in ("topology", "size", "chunks")))
    key += (("chunks given", "chunks" in kw),)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _like(first: RunSpec, first_size: Any, first_chunks: Any, topo: Topology, size: Any, chunks: Any) -> RunSpec:
    """`first` on another topology of its shape, at another size and chunk count, checked as `prepare`
    checks them."""
    s = first.spec
    if topo is not s.topology:
        s.cost_model.check(topo, s.collective, s.latency_mode, s.active_chunks)
        s = CollectiveSpec(topo, s.collective, s.size, s.chunks, s.cost_model, s.latency_mode, s.active_chunks)
        first = RunSpec(s, first.sched, first.queue, first.seed, first.size_unit, first.service_order)
    if (
        size == first_size
        and type(size) is type(first_size)
        and chunks == first_chunks
        and type(chunks) is type(first_chunks)
    ):
        return first
    return first.resized(size, chunks)


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
    if not n or not compilable(base):
        return evaluate_many([vec[i].spec.topology for i in range(n)], **common)
    base.spec.check_work(queue=base.queue)
    runs = CACHE.run_batch(
        CACHE.shape(base), array("q", [base.spec.size]) * n, array("q", [base.spec.chunks]) * n, bw, lat
    )
    res = BatchResult(vec)
    res._fill(runs, range(n))
    for i in sorted(runs.python):
        _in_python(res, i, vec[i])
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
    ``evaluate_many(topologies, size="1GB", chunks=64)``; points may differ in anything, sizes and
    chunk counts included. The vectorised form gives one `topology` and per point its bandwidths
    (rows of one GB/s value per dimension, a list of lists or a 2-D array) and optionally latencies
    (ns): ``evaluate_many(bandwidths=rows, topology="4D-Ring_FC_Ring_SW", size="1GB")``. Bad input: one
    `InputError` naming the point (or row) and the field.
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
    for i, p in enumerate(prepared):
        if not compilable(p):
            _in_python(res, i, p)
            continue
        shape = CACHE.shape(p)
        g = groups.get(id(shape))
        if g is None:
            g = groups[id(shape)] = _Group(shape)
        g.add(i, p)
    for g in groups.values():
        runs = CACHE.run_batch(g.shape, g.sizes, g.chunks, g.bw, g.lat)
        res._fill(runs, g.index)
        for k in sorted(runs.python):
            _in_python(res, g.index[k], prepared[g.index[k]])
    return res
