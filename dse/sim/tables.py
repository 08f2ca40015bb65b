"""Shape tables: one collective's phases for every dimension order, built once per shape, costed per point.

Many evaluations share a *shape*: the same dimensions (kind, size, algorithm), collective, size,
chunks, cost model, scheduler and queue, differing only in bandwidths and latencies (a sweep over
bandwidth splits, a study's trials). What the phases are (which dimension, kind and bytes, their
smallest-first key, bytes sent) depends only on the shape; what they cost depends on the point. A
`ShapeTable` holds the first once:

- `combos`: every distinct phase (dim, kind, bytes in) any order of any chunk can run, and per
  plan slot (order, chunk size) the list of combos a chunk runs (`CostModel.phases` decides, once);
- the orders: every permutation under Themis (its tracker runs per point, in C: the paper's load
  tracker or ASTRA-sim's OfflineGreedy, `CostModel.themis_flavor`), or the scheduler's own orders
  when they depend on the shape alone (`Scheduler.shape_only`);
- what the trackers charge: the phases' bandwidth-only times (`charge_combos`) and thresholds.

Per point, `point_costs` gives each combo's busy, delay and tie offsets and each charge combo's
time, from the cost model's own methods (`CostModel.phase_costs`, `CostModel.bandwidth_time`),
or the C kernel that replicates them from the point's bandwidths and latencies (`ShapeTable.kernel`,
dse/sim/_kernels.c: ``paper``, ``astra-sim``, ``astra-sim-1``, whose per-dim constants, such as links,
the table carries; the tests hold both equal). `dse.sim.batch` runs the points in C.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from itertools import permutations
from typing import Any

from dse.core.collectives import A2A, AG, ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, AR, RS
from dse.core.topology import Topology
from dse.costs.base import CostModel
from dse.schedulers import ScheduleProblem, Scheduler, ThemisScheduler, baseline_order
from dse.sim.engine_io import policy_code
from dse.sim.simulate import schedule_time

NO_TRACKER, LOAD_TRACKER, OFFLINE_GREEDY = 0, 1, 2
KIND_CODES = {RS: 0, AG: 1, AR: 2, A2A: 3}
ALGO_CODES = {"ring": 0, "direct": 1, "halving_doubling": 2}
KERNELS = {None: 0, "paper": 1, "astra-sim": 2, "astra-sim-1": 3}
DIM_KINDS = {"ring": 0, "fc": 1, "switch": 2}
#: the integer kernels hold bytes (and astra-sim-1 its links and ns) below this; larger run in Python
KERNEL_INTS = 2**61


@dataclass(frozen=True)
class Combo:
    """One distinct phase: dimension, kind, bytes per NPU in, and its shape-level numbers."""

    dim: int
    kind: str
    c: float
    key: float
    sent: float
    fifo_only: bool
    tied: bool


def schedulable(sched: Scheduler, collective: str) -> bool:
    """Can a shape table run this scheduler: its orders from the shape alone, Themis' trackers, or
    an all-to-all (always in ascending order)?"""
    return sched.shape_only or type(sched) is ThemisScheduler or collective == ALL_TO_ALL


class ShapeTable:
    """The shape-level part of many evaluations (module docstring); build with `shape_table`."""

    def __init__(
        self,
        topo: Topology,
        coll: str,
        nbytes: int,
        nchunks: int,
        model: CostModel,
        mode: str,
        sched: Scheduler,
        seed: int,
        queue: str,
        active: int,
    ) -> None:
        self.nd = nd = topo.ndims
        self.coll, self.model, self.mode, self.sched = coll, model, mode, sched
        self.queue, self.active = queue, active
        self._dims = topo.dims  # for what the shape fixes only (`dse.sim.batch.shape_key`)
        plan = model.chunking(coll, nbytes, nchunks, topo, baseline=sched.is_baseline)
        self.sizes, self.charges = plan.sizes, plan.charges
        self.nchunks = len(plan.sizes)
        themis = type(sched) is ThemisScheduler and coll != ALL_TO_ALL
        self.tracker = NO_TRACKER
        self.fixed: list[tuple[int, ...]] = []
        if themis:
            self.tracker = LOAD_TRACKER if model.themis_flavor == "load_tracker" else OFFLINE_GREEDY
            self.perms = list(permutations(range(nd)))
        else:
            problem = ScheduleProblem(topo, coll, plan, model, seed, queue, mode, active, simulate=schedule_time)
            self.fixed = sched.orders(problem)
            self.perms = list(dict.fromkeys(self.fixed))
        self.order_id = {o: i for i, o in enumerate(self.perms)}
        self.base = self.order_id.get(baseline_order(coll, nd), -1)
        self.size_classes = list(dict.fromkeys(self.sizes))
        self.charge_classes = list(dict.fromkeys(self.charges))
        self._build_combos(topo)
        self.kernel = self._kernel()
        if self.tracker == LOAD_TRACKER:
            self._build_charges(topo, sched)  # type: ignore[arg-type]

    def _build_combos(self, topo: Topology) -> None:
        """Every plan slot's phases as combo indices, from the cost model's own `phases`."""
        model, memo, ids = self.model, {}, {}  # type: ignore[var-annotated]
        combos: list[Combo] = []
        self.slot_of = array("i", [-1] * (len(self.perms) * len(self.size_classes)))
        self.plan_off = array("i", [0])
        self.plan_combo = array("i")
        for o, order in enumerate(self.perms):
            for s, size in enumerate(self.size_classes):
                phases = model.phases(
                    topo, self.coll, order, size, latency_mode=self.mode, baseline=self.sched.is_baseline, memo=memo
                )
                by_phase = {id(v[0]): k for k, v in memo.items()}
                for ph in phases:
                    k = by_phase[id(ph)]
                    j = ids.get(k)
                    if j is None:
                        j = ids[k] = len(combos)
                        combos.append(Combo(k[0], k[1], k[2], ph.key, ph.sent, bool(ph.fifo_only), bool(ph.tie)))
                    self.plan_combo.append(j)
                self.slot_of[o * len(self.size_classes) + s] = len(self.plan_off) - 1
                self.plan_off.append(len(self.plan_combo))
        self.combos = combos
        self.tied = any(c.tied for c in combos)

    def _kernel(self) -> str | None:
        """The model's C kernel (`CostModel.batch_kernel`), unless this shape's byte counts or links
        are beyond its integers (`KERNEL_INTS`); None: the model's own methods cost each point."""
        name = self.model.batch_kernel
        if name not in KERNELS:
            return None
        if name in ("astra-sim", "astra-sim-1") and any(int(c.c) >= KERNEL_INTS for c in self.combos):
            return None
        if name == "astra-sim-1" and any(d.links is None or d.links >= KERNEL_INTS for d in self._dims):
            return None
        return name

    def _build_charges(self, topo: Topology, sched: ThemisScheduler) -> None:
        """What Algorithm 1 charges per (order, charge size), and its thresholds, as charge combos."""
        model, coll = self.model, self.coll
        ids: dict[tuple, int] = {}
        self.charge_combos: list[tuple[int, str, float]] = []

        def cid(d: int, kind: str, c: float) -> int:
            k = (d, kind, c)
            if k not in ids:
                ids[k] = len(self.charge_combos)
                self.charge_combos.append(k)
            return ids[k]

        ncc = len(self.charge_classes)
        self.thr_idx = array(
            "i", [cid(d, RS, size * sched.threshold_fraction) for size in self.charge_classes for d in range(self.nd)]
        )
        self.ch_off, self.ch_idx, self.ch_dim, self.ch_fac = array("i", [0]), array("i"), array("i"), array("d")
        for order in self.perms:
            for size in self.charge_classes:
                c = model.start_bytes(coll, size, topo)
                for d in order:
                    p = topo.dims[d].npus
                    if coll == ALL_GATHER:
                        self.ch_idx.append(cid(d, AG, c))
                        self.ch_fac.append(1.0)
                        c = c * p
                    else:
                        self.ch_idx.append(cid(d, RS, c))
                        self.ch_fac.append(2.0 if coll == ALL_REDUCE else 1.0)
                        c = c / p
                    self.ch_dim.append(d)
                self.ch_off.append(len(self.ch_idx))
        assert len(self.ch_off) == len(self.perms) * ncc + 1
        self.seed_latency = sched.seed_latency

    def point_costs(self, topo: Topology) -> tuple[array, array, array | None, array | None]:
        """Per combo (busy, delay), tie offsets (3 per combo) if any, and per charge combo the
        bandwidth time: the cost model's own methods at this point."""
        cache = self.__dict__.setdefault("_costs", {})
        hit = cache.get(topo)
        if hit is not None:
            return hit
        if len(cache) >= 64:
            cache.clear()
        hit = cache[topo] = self._point_costs(topo)
        return hit

    def _point_costs(self, topo: Topology) -> tuple[array, array, array | None, array | None]:
        model, mode, dims = self.model, self.mode, topo.dims
        busy, delay = array("d"), array("d")
        ties = array("d") if self.tied else None
        for cb in self.combos:
            ph, _ = model._make_phase(dims[cb.dim], cb.dim, cb.kind, cb.c, mode)
            busy.append(ph.busy)
            delay.append(ph.delay)
            if ties is not None:
                ties.extend(ph.tie if ph.tie else (0.0, 0.0, 0.0))
        bwt = None
        if self.tracker == LOAD_TRACKER:
            bwt = array("d", [model.bandwidth_time(dims[d], kind, c) for d, kind, c in self.charge_combos])
        return busy, delay, ties, bwt

    def compiled(self, engine: Any, kernel: bool = True) -> Any:
        """The table parsed by the C engine once (`dse._engine.batch_table`), for `batch_run`; with
        `kernel` False, one whose points bring their costs (`point_costs`)."""
        cache = self.__dict__.setdefault("_compiled", {})
        hit = cache.get(kernel)
        if hit is None:
            hit = cache[kernel] = engine.batch_table(self.packed(kernel))
        return hit

    def packed(self, kernel: bool = True) -> tuple:
        """The table as `dse._engine.batch_table` reads it (dse/sim/_batch.c lists the fields), with its
        cost kernel (`kernel`: `self.kernel`'s, else none)."""
        cache = self.__dict__.setdefault("_packed", {})
        hit = cache.get(kernel)
        if hit is None:
            hit = cache[kernel] = self._pack(KERNELS[self.kernel] if kernel else 0)
        return hit

    def _pack(self, kernel: int) -> tuple:
        """The header's ints, then the arrays, in the order dse/sim/_batch.c reads them."""
        return (self._header(kernel), *self._arrays(kernel))

    def _header(self, kernel: int) -> tuple[int, ...]:
        """The table's sizes and the run's settings, as ints."""
        nd, model = self.nd, self.model
        load = self.tracker == LOAD_TRACKER
        return (
            nd,
            self.nchunks,
            len(self.combos),
            len(self.perms),
            len(self.size_classes),
            len(self.charge_classes),
            len(self.charge_combos if load else []),
            self.tracker,
            kernel,
            policy_code(self.queue, model.scf_rule),
            self.active,
            int(self.active > 1 and model.shares_bandwidth),
            int(model.dim_tiebreak),
            self.base,
            int(load and self.seed_latency),
            int(self.coll == ALL_GATHER),
            int(self.coll == ALL_GATHER),
            int(self.mode == "serialized"),
            int(getattr(model, "endpoint_delay_ns", 0)),
        )

    def _arrays(self, kernel: int) -> tuple:
        """The combos', plans', trackers' and dims' arrays."""
        nd, combos = self.nd, self.combos
        load = self.tracker == LOAD_TRACKER
        chk = self.charge_combos if load else []
        shape_dims = self._dims
        permcode = array("i", [-1] * nd**nd)
        for i, o in enumerate(self.perms):
            permcode[sum(d * nd**k for k, d in enumerate(o))] = i
        sc = {s: i for i, s in enumerate(self.size_classes)}
        cc = {s: i for i, s in enumerate(self.charge_classes)}
        empty_i, empty_d = array("i"), array("d")
        a1 = kernel == KERNELS["astra-sim-1"]
        return (
            array("i", [c.dim for c in combos]),
            array("d", [c.key for c in combos]),
            array("d", [c.sent for c in combos]),
            array("B", [c.fifo_only for c in combos]),
            array("i", [c.tied for c in combos]),
            self.plan_off,
            self.plan_combo,
            self.slot_of,
            array("i", [sc[s] for s in self.sizes]),
            array("i", [cc[s] for s in self.charges]),
            array("i", [self.order_id[o] for o in self.fixed]) if self.tracker == NO_TRACKER else empty_i,
            array("i", [d for o in self.perms for d in o]),
            permcode,
            self.thr_idx if load else empty_i,
            self.ch_off if load else empty_i,
            self.ch_idx if load else empty_i,
            self.ch_dim if load else empty_i,
            self.ch_fac if load else empty_d,
            array("i", [d.steps for d in shape_dims]),
            array("i", [d.npus for d in shape_dims]),
            array("q", [int(r) for r in self.charges]) if self.tracker == OFFLINE_GREEDY else array("q"),
            array("i", [KIND_CODES[c.kind] for c in combos]),
            array("q", [int(c.c) for c in combos]) if kernel >= KERNELS["astra-sim"] else array("q"),
            array("i", [ALGO_CODES[str(d.algorithm)] for d in shape_dims]),  # filled in by Dim
            array("i", [d.kind == "switch" for d in shape_dims]),
            array("d", [_numerator(c, kind, shape_dims[d].npus) for d, kind, c in chk]) if kernel == 1 else empty_d,
            array("i", [d for d, _, _ in chk]) if kernel == 1 else empty_i,
            array("i", [DIM_KINDS[d.kind] for d in shape_dims]) if a1 else empty_i,
            array("q", [d.links for d in shape_dims]) if a1 else array("q"),
            array("d", [d.nic_latency for d in shape_dims]) if a1 else empty_d,
            array("d", [d.router_latency for d in shape_dims]) if a1 else empty_d,
        )


def _numerator(c: float, kind: str, p: int) -> float:
    """The `paper` model's bandwidth time times the bandwidth, as `PaperModel.bandwidth_time` computes it."""
    if kind == AG:
        return c * (p - 1)
    if kind == AR:
        return 2 * c * (p - 1) / p
    return c * (p - 1) / p
