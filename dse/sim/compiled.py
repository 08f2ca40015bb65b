"""The one compiled path below `evaluate` and `evaluate_many`: shapes built once, any point run in C.

Many evaluations share a *shape*: the same dimensions (kind, size, algorithm), collective, cost model,
latency mode, scheduler and queue, differing only in size, chunk count, bandwidths and latencies (a
sweep over sizes or bandwidth splits, a study's trials). A `Shape` holds what they share: every order
a chunk may take (all permutations under Themis; else the scheduler's own, `Scheduler.shape_only`),
each order's steps (`CostModel.steps`), the dimensions' constants and the run's rules, handed to the C
engine once, by field name (the names are the engine's: `FIELD_NAMES`). Per point the engine makes the
rest (dse/sim/_derive.c: the chunk sizes, each plan's phases, Themis' charges, exactly as the cost
model's Python does), costs the phases with the model's kernel (dse/sim/_kernels.c), orders the chunks
(dse/sim/_trackers.c) and runs the event loop; a point whose (size, chunks) or rows repeat reuses what
it made. `CACHE` holds the shapes and the calls `evaluate` has validated; `CACHE.clear()` empties both.

What the compiled path does not run goes through `dse.sim.evaluate.evaluate_prepared` (Python's
phases, the same engine): a timeline, schedulers whose orders depend on costs other than Themis
(`lp_guided`, custom ones), `active_chunks` > 1 without shared bandwidth, a fixed service order, cost
models other than the three built-in ones (a subclass, or `astra-sim` with a local-memory reduction
cost), more than `MAX_DIMS` dimensions, a build without the C engine, and points beyond the kernels'
exact range (sizes of 2^53 bytes and more, byte counts the integer kernels cannot hold).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from itertools import accumulate, permutations
from typing import Any, NamedTuple

from dse.core.collectives import A2A, AG, ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, AR, REDUCE_SCATTER, RS
from dse.costs import AstraSim1Model, AstraSimModel, CostModel, PaperModel
from dse.costs.base import ChunkPlan
from dse.schedulers import Order, ScheduleProblem, Scheduler, ThemisScheduler, baseline_order
from dse.sim import engine as engine_front
from dse.sim.engine_io import policy_code
from dse.sim.simulate import schedule_time
from dse.sim.spec import RunSpec

NO_TRACKER, LOAD_TRACKER, OFFLINE_GREEDY = 0, 1, 2
#: the cost models the engine's kernels compute, to the bit, and their kernel numbers
KERNELS: dict[type[CostModel], tuple[str, int]] = {
    PaperModel: ("paper", 1),
    AstraSimModel: ("astra-sim", 2),
    AstraSim1Model: ("astra-sim-1", 3),
}
KIND_CODES = {RS: 0, AG: 1, AR: 2, A2A: 3}
COLLECTIVE_CODES = {REDUCE_SCATTER: 0, ALL_GATHER: 1, ALL_REDUCE: 2, ALL_TO_ALL: 3}
ALGO_CODES = {"ring": 0, "direct": 1, "halving_doubling": 2}
DIM_KINDS = {"ring": 0, "fc": 1, "switch": 2}
#: the integer kernels hold bytes, links and ns below this
KERNEL_INTS = 2**61
#: the most dimensions a shape holds (Themis' holds every order: 5! = 120)
MAX_DIMS = 5
#: the most shapes `CACHE` keeps, and the most calls
MAX_SHAPES, MAX_CALLS = 256, 1024


def _engine() -> Any:
    return engine_front.c_engine_module()


def _field_names() -> tuple[str, ...]:
    eng = _engine()
    return tuple(eng.batch_table()) if eng is not None else ()


#: the shape's fields, as the C engine names them (dse/sim/_shape.c declares them)
FIELD_NAMES: tuple[str, ...] = _field_names()


def compilable(p: RunSpec) -> bool:
    """Can the compiled path run this point (module docstring)?"""
    spec, model = p.spec, p.spec.cost_model
    eng = _engine()
    if eng is None or engine_front.DEFAULT == "python" or p.queue == "fixed" or spec.topology.ndims > MAX_DIMS:
        return False
    kernel = KERNELS.get(type(model))
    if kernel is None or model.batch_kernel != kernel[0]:
        return False
    if spec.active_chunks > 1 and not model.rules.shares_bandwidth:
        return False
    if model.rules.themis_flavor == "offline_greedy" and not getattr(eng, "HAVE_INT128", 0):
        return False  # OfflineGreedy's exact arithmetic needs 128-bit integers
    if kernel[1] == 3 and any(d.links is None or not 1 <= d.links < KERNEL_INTS for d in spec.topology.dims):
        return False
    if not 0 <= getattr(model, "endpoint_delay_ns", 0) < 2**31:
        return False
    sched = p.sched
    return sched.shape_only or type(sched) is ThemisScheduler or spec.collective == ALL_TO_ALL


def _sched_key(sched: Scheduler, seed: int) -> tuple:
    if type(sched) is ThemisScheduler:
        return ("themis", sched.seed_latency, sched.threshold_fraction)
    return (type(sched), repr(sched), seed)


def shape_key(p: RunSpec) -> tuple:
    """What a point's shape depends on: all but its size, chunks, bandwidths and latencies. Of a dim,
    its kind, size and algorithm, and what else the model's kernel takes from the shape
    (`CostModel.shape_fields`: astra-sim-1's links, NIC and router latencies)."""
    s = p.spec
    fields = s.cost_model.shape_fields
    dims = tuple((d.kind, d.npus, d.algorithm, *[getattr(d, f) for f in fields]) for d in s.topology.dims)
    return (dims, s.collective, s.cost_model, s.latency_mode, _sched_key(p.sched, p.seed), p.queue, s.active_chunks)


class Shape:
    """What every point of a shape shares (module docstring), parsed by the C engine once (`capsule`).

    `perms[i]` is order id i, the orders the engine reports per chunk."""

    def __init__(self, p: RunSpec, chunks: int) -> None:
        spec, sched = p.spec, p.sched
        self.run, self.nd = p, spec.topology.ndims
        self.themis = type(sched) is ThemisScheduler and spec.collective != ALL_TO_ALL
        model = spec.cost_model
        if self.themis:
            self.tracker = LOAD_TRACKER if model.rules.themis_flavor == "load_tracker" else OFFLINE_GREEDY
            self.perms: list[Order] = list(permutations(range(self.nd)))
            self.prefix: list[int] = []
        else:
            self.tracker = NO_TRACKER
            self._prefix_orders(2 * chunks + 2)
        self.capsule = _engine().batch_table(self.fields())

    def _prefix_orders(self, n: int) -> None:
        """The scheduler's orders of the first `n` chunks (`Scheduler.shape_only`: those of fewer chunks are
        their first ones), as order ids."""
        p = self.run
        spec = p.spec
        plan = ChunkPlan((1.0,) * n, (1.0,) * n)  # the orders depend on the count alone
        problem = ScheduleProblem(
            spec.topology,
            spec.collective,
            plan,
            spec.cost_model,
            p.seed,
            p.queue,
            spec.latency_mode,
            spec.active_chunks,
            simulate=schedule_time,
        )
        orders = p.sched.orders(problem)
        self.perms = list(dict.fromkeys(orders))
        ids = {o: i for i, o in enumerate(self.perms)}
        self.prefix = [ids[o] for o in orders]

    def grow(self, chunks: int) -> None:
        """Orders for at least `chunks` chunks (a scheduler's prefix, `IndexError` from the engine)."""
        self._prefix_orders(max(2 * chunks + 2, 2 * len(self.prefix)))
        self.capsule = _engine().batch_table(self.fields())

    def fields(self) -> dict[str, Any]:
        """The shape as the engine takes it, by field name."""
        p = self.run
        spec, sched = p.spec, p.sched
        topo, model, coll, nd = spec.topology, spec.cost_model, spec.collective, self.nd
        kernel = KERNELS[type(model)][1]
        order_id = {o: i for i, o in enumerate(self.perms)}
        load = self.tracker == LOAD_TRACKER
        return {
            "nd": nd,
            "norder": len(self.perms),
            "tracker": self.tracker,
            "kernel": kernel,
            "coll": COLLECTIVE_CODES[coll],
            "baseline": int(sched.is_baseline),
            "policy": policy_code(p.queue, model.rules.scf_rule),
            "slots": spec.active_chunks,
            "shared": int(spec.active_chunks > 1 and model.rules.shares_bandwidth),
            "dimkey": int(model.rules.dim_tiebreak),
            "base": order_id.get(baseline_order(coll, nd), -1),
            "seed_latency": int(load and sched.seed_latency),  # type: ignore[attr-defined]
            "serialized": int(spec.latency_mode == "serialized"),
            "ag_div": int(coll == ALL_GATHER and not model.rules.ag_input_shard),
            "fifo_a2a": int(kernel == 3),  # astra-sim-1 queues an all-to-all phase FIFO as an AR one
            "tied": int(model.rules.phase_ties),
            "npus": topo.npus,
            "endpoint": int(getattr(model, "endpoint_delay_ns", 0)),
            "thr_frac": float(sched.threshold_fraction) if load else 0.0,  # type: ignore[attr-defined]
            "prefix": array("i", self.prefix),
            **self._order_fields(model),
            **self._dim_fields(kernel),
        }

    def _order_fields(self, model: CostModel) -> dict[str, array]:
        """The orders, their codes and their steps."""
        p, nd = self.run, self.nd
        permcode = array("i", [-1] * nd**nd)
        step_off, step_dim, step_kind = array("i", [0]), array("i"), array("i")
        for i, o in enumerate(self.perms):
            permcode[sum(d * nd**k for k, d in enumerate(o))] = i
            for d, kind in model.steps(p.spec.collective, o, p.spec.topology, baseline=p.sched.is_baseline):
                step_dim.append(d)
                step_kind.append(KIND_CODES[kind])
            step_off.append(len(step_dim))
        perm = array("i", [d for o in self.perms for d in o])
        return {"perm": perm, "permcode": permcode, "step_off": step_off, "step_dim": step_dim, "step_kind": step_kind}

    def _dim_fields(self, kernel: int) -> dict[str, array]:
        """The dimensions' constants (astra-sim-1's only with its kernel)."""
        dims = self.run.spec.topology.dims
        a1 = kernel == 3
        return {
            "dim_steps": array("i", [d.steps for d in dims]),
            "dim_p": array("i", [d.npus for d in dims]),
            "dim_algo": array("i", [ALGO_CODES[str(d.algorithm)] for d in dims]),
            "dim_switch": array("i", [d.kind == "switch" for d in dims]),
            "dim_kind": array("i", [DIM_KINDS[d.kind] for d in dims] if a1 else []),
            "dim_links": array("q", [d.links or 0 for d in dims] if a1 else []),
            "dim_nic": array("d", [d.nic_latency for d in dims] if a1 else []),
            "dim_router": array("d", [d.router_latency for d in dims] if a1 else []),
        }


@dataclass
class Runs:
    """What the engine gives many points of one shape: per point its time (ns), per-dim busy ns and bytes
    (flat, nd a point), its chunk count, and its chunks' order ids (`orders[order_off[i]:][:nch[i]]`);
    `python[i]`: the point is beyond the compiled path's exact range and runs in Python instead."""

    shape: Shape
    time: array
    busy: array
    bytes: array
    nch: array
    orders: array
    order_off: array
    python: set[int]

    def orders_of(self, i: int) -> list[Order]:
        """Point i's orders, one per chunk."""
        k = self.order_off[i]
        return list(map(self.shape.perms.__getitem__, self.orders[k : k + self.nch[i]]))


class One(NamedTuple):
    """What the engine gives one point: its time (ns), per-dim busy ns and bytes, its chunks' orders."""

    time_ns: float
    dim_busy_ns: tuple[float, ...]
    dim_bytes: tuple[float, ...]
    orders: list[Order]


class CompiledCache:
    """The shapes the compiled path has built (`shape`), and what `evaluate` remembers of the calls it
    validated (`calls`), both bounded; `clear()` empties both."""

    def __init__(self) -> None:
        self.shapes: dict[tuple, Shape] = {}
        self.calls: dict[tuple, Any] = {}

    def clear(self) -> None:
        """Forget every shape and call."""
        self.shapes.clear()
        self.calls.clear()

    def remember(self, key: tuple, call: Any) -> None:
        """Keep what `evaluate` made of a call."""
        if len(self.calls) >= MAX_CALLS:
            self.calls.clear()
        self.calls[key] = call

    def shape(self, p: RunSpec) -> Shape:
        """The shape of a compilable point (`compilable`), built once."""
        key = shape_key(p)
        hit = self.shapes.get(key)
        if hit is None:
            if len(self.shapes) >= MAX_SHAPES:
                self.shapes.clear()
            hit = self.shapes[key] = Shape(p, p.spec.chunks)
        return hit

    @staticmethod
    def run_one(shape: Shape, size: int, chunks: int, bw: array, lat: array) -> One | None:
        """One point of a shape in the engine (`run` of one, with Python objects); None: the engine
        declines it (it runs in Python)."""
        while True:
            try:
                time, busy, sent, ids = _engine().batch_one(shape.capsule, size, chunks, bw, lat)
            except OverflowError:
                return None
            except IndexError as e:  # more chunks than the scheduler's orders so far
                shape.grow(e.args[1])
                continue
            return One(time, busy, sent, list(map(shape.perms.__getitem__, ids)))

    def run_batch(self, shape: Shape, sizes: array, chunks: array, bw: array, lat: array) -> Runs:
        """Run points of one shape (size and chunk count each, bandwidths GB/s and latencies ns, nd a
        point, flat) in the engine; a point it declines is listed in `Runs.python`."""
        n, nd = len(sizes), shape.nd
        off = array("q", accumulate((2 * c + 2 for c in chunks), initial=0))
        total = off[-1]
        out = Runs(
            shape,
            array("d", bytes(8 * n)),
            array("d", bytes(8 * n * nd)),
            array("d", bytes(8 * n * nd)),
            array("i", bytes(4 * n)),
            array("i", bytes(4 * total)),
            off,
            set(),
        )
        start = 0
        while start < n:
            start = self._run_from(out, start, sizes, chunks, bw, lat)
        return out

    @staticmethod
    def _run_from(out: Runs, start: int, sizes: array, chunks: array, bw: array, lat: array) -> int:
        """Run points start.. into `out`; the point to go on from (all done: their count)."""
        n, nd, shape = len(sizes), out.shape.nd, out.shape
        rows = (sizes, chunks, bw, lat, out.order_off)
        if start:
            rows = (
                sizes[start:],
                chunks[start:],
                bw[start * nd :],
                lat[start * nd :],
                array("q", [k - out.order_off[start] for k in out.order_off[start:]]),
            )
        outs = (
            memoryview(out.time)[start:],
            memoryview(out.busy)[start * nd :],
            memoryview(out.bytes)[start * nd :],
            memoryview(out.nch)[start:],
            memoryview(out.orders)[out.order_off[start] :],
        )
        try:
            _engine().batch_run(shape.capsule, (n - start, *rows), outs)
        except OverflowError as e:  # the point the kernel declines runs in Python
            at = start + (e.args[0] if e.args and isinstance(e.args[0], int) else 0)
            out.python.add(at)
            return at + 1
        except IndexError as e:  # more chunks than the scheduler's orders so far
            at, need = e.args
            shape.grow(need)
            return start + at
        return n


#: the one cache of the compiled path (`CompiledCache`)
CACHE = CompiledCache()
