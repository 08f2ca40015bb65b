"""Themis (Rashidi et al., ISCA 2022): balance the dimensions' loads chunk by chunk.

Two flavours, chosen by the cost model (`SimRules.themis_flavor` of `CostModel.rules`):

- ``load_tracker`` (the paper's Algorithm 1, docs/model.md §5.4; `paper` model). One predicted busy
  time per dimension, reset per collective (``seed_latency=True`` seeds each with the dimension's
  fixed per-phase latency). For each chunk in issue order: if max load − min load is less than the
  time the least-loaded dimension needs to send a reduce-scatter phase of chunk/16 bytes, take the
  baseline order; otherwise sort the dimensions by load once (ties by dimension index), lowest
  first for RS and AR, highest first for a standalone AG. Then charge each of the chunk's phases'
  bandwidth time (RS and AG for an all-reduce) to its dimension.
- ``offline_greedy`` (ASTRA-sim's `OfflineGreedy`, docs/model.md §5.5): loads in MiB
  normalised to dim 0's bandwidth, a persistent list re-sorted stably per chunk, the r/16 gap test
  in bytes, the identity-order fallback with its all-gather quirk, charges at the recommended chunk
  size. Implemented as written, quirks included, because it reproduces the simulator.
"""

from __future__ import annotations

from itertools import groupby
from operator import add, attrgetter

from dse.core.collectives import AG, ALL_GATHER, ALL_REDUCE, RS
from dse.schedulers.base import Order, ScheduleProblem, Scheduler, baseline_order

MIB = 2**20


class ThemisScheduler(Scheduler):
    """Themis: each chunk takes the order that balances the dimensions' loads (module docstring)."""

    name = "themis"
    description = "Themis: least-loaded dimension first (the paper's Algorithm 1)"

    def __init__(self, *, seed_latency: bool = False, threshold_fraction: float = 1 / 16) -> None:
        self.seed_latency = seed_latency
        self.threshold_fraction = threshold_fraction

    def __repr__(self) -> str:
        return f"ThemisScheduler(seed_latency={self.seed_latency})"

    def _orders(self, problem: ScheduleProblem) -> list[Order]:
        if problem.cost_model.rules.themis_flavor == "offline_greedy":
            return offline_greedy_orders(problem)
        return self._load_tracker_orders(problem)

    def _load_tracker_orders(self, problem: ScheduleProblem) -> list[Order]:
        loads = [d.steps * d.latency if self.seed_latency else 0.0 for d in problem.topology.dims]
        return self.track(problem, loads)[0]

    def track(self, problem: ScheduleProblem, loads: list[float]) -> tuple[list[Order], list[float]]:
        """Algorithm 1 from given per-dimension loads: the orders, and the loads afterwards.

        Several collectives in flight (training iterations) share one tracker by passing the
        loads of one call to the next."""
        dims = problem.topology.dims
        nd = len(dims)
        model, coll = problem.cost_model, problem.collective
        base = baseline_order(coll, nd)
        highest_first = coll == ALL_GATHER
        out: list[Order] = []
        dims_range = range(nd)
        # Charges depend only on (order, chunk size) and the threshold on (dim, size): runs of
        # equal chunk sizes share both.
        for size, run in groupby(problem.chunks.charges):
            thr = [model.bandwidth_time(d, RS, size * self.threshold_fraction) for d in dims]
            cache: dict[Order, list[float]] = {}
            for _ in run:
                lo = min(loads)
                if max(loads) - lo < thr[loads.index(lo)]:
                    order = base
                else:  # stable sorts: ties keep the dimension order
                    order = tuple(sorted(dims_range, key=loads.__getitem__, reverse=highest_first))
                inc = cache.get(order)
                if inc is None:
                    inc = cache[order] = self._charges(problem, order, size)
                loads = list(map(add, loads, inc))
                out.append(order)
        return out, loads

    @staticmethod
    def _charges(problem: ScheduleProblem, order: Order, size: float) -> list[float]:
        """Bandwidth time one chunk adds to each dimension (RS and AG of an all-reduce)."""
        topo, model, coll = problem.topology, problem.cost_model, problem.collective
        inc = [0.0] * topo.ndims
        c = model.start_bytes(coll, size, topo)
        for d in order:
            dim = topo.dims[d]
            if coll == ALL_GATHER:
                inc[d] += model.bandwidth_time(dim, AG, c)
                c = c * dim.npus
            else:
                t = model.bandwidth_time(dim, RS, c)
                inc[d] += 2 * t if coll == ALL_REDUCE else t
                c = c / dim.npus
        return inc


def offline_greedy_orders(problem: ScheduleProblem) -> list[Order]:
    """ASTRA-sim's OfflineGreedy chunk orders (docs/model.md §5.5), quirks included."""
    topo, model = problem.topology, problem.cost_model
    greedy = OfflineGreedy([model.greedy_bandwidth(d) for d in topo.dims], topo.shape)
    involved = (True,) * topo.ndims
    ag = problem.collective == ALL_GATHER
    return [greedy.order(int(r), involved, ag) for r in problem.chunks.charges]


class _Entry:
    """One place in OfflineGreedy's list: a dim and the load charged to it."""

    __slots__ = ("dim", "load")

    def __init__(self, dim: int, load: float = 0.0) -> None:
        self.dim = dim
        self.load = load


class OfflineGreedy:
    """ASTRA-sim's OfflineGreedy load state over all (logical) dims of a topology.

    Loads live until `reset` (ASTRA-sim 1.0 keeps them across collectives, `dse.training.iteration_planner`
    decides when they are reset); each `order` call schedules one chunk of a collective that
    involves the dims flagged in `involved`, and returns an order over all dims (the uninvolved
    ones included, where the simulator's list has them; the caller skips them). Quirks kept: the
    gap of a reduce-scatter is taken to the last dim of the sorted list whether involved or not,
    and the identity-order fallback of an all-gather charges position i with dim i's volume.
    """

    def __init__(self, bandwidths: list[float] | tuple[float, ...], npus: tuple[int, ...]) -> None:
        self.bw = list(bandwidths)
        self.ps = list(npus)
        self.nd = len(self.ps)
        self.table = [_Entry(d) for d in range(self.nd)]  # the persistent list of (dim, load)
        self._charges: dict[tuple, list[float]] = {}

    def reset(self) -> None:
        """Zero the loads and renumber the list by position (ASTRA-sim's ``reset_loads``)."""
        self.table = [_Entry(d) for d in range(self.nd)]

    def _inc(self, d: int, c: int, ag: bool) -> tuple[float, int]:
        p = self.ps[d]
        rel = self.bw[d] / self.bw[0]
        if ag:
            return (c / MIB * (p - 1)) / rel, c * p
        return (c / MIB * ((p - 1) / p)) / rel, c // p

    def _charge(self, dims: tuple[int, ...], r: int, skip: tuple[bool, ...], ag: bool) -> list[float]:
        """Charges by position: position i gets dims[i]'s volume (0 where skipped), c evolving."""
        key = (dims, r, skip, ag)
        got = self._charges.get(key)
        if got is None:
            got, c = [], r
            for d, sk in zip(dims, skip):
                if sk:
                    got.append(0.0)
                    continue
                amount, c = self._inc(d, c, ag)
                got.append(amount)
            self._charges[key] = got
        return got

    def order(self, r: int, involved: tuple[bool, ...], ag: bool) -> Order:
        """One chunk of recommended size `r`: its dim order, the loads charged."""
        table, ps, bw, b0 = self.table, self.ps, self.bw, self.bw[0]
        table.sort(key=attrgetter("load"))  # stable
        if ag:
            table.reverse()
        off = [not involved[e.dim] or ps[e.dim] == 1 for e in table]
        ptr = off.index(False) if False in off else len(table)
        if ptr < len(table):
            first = table[ptr]
            if ag:
                last = len(table) - 1
                while off[last]:
                    last -= 1
                dl = table[last].dim
                gap = int((abs(table[last].load - first.load) * (bw[dl] / b0)) / (ps[dl] - 1) * MIB)
                for j in range(last - 1, ptr - 1, -1):
                    if not off[j]:
                        gap //= ps[table[j].dim]
            else:
                df = first.dim
                gap = int((abs(table[-1].load - first.load) * (bw[df] / b0)) / ((ps[df] - 1) / ps[df]) * MIB)
            if gap < r // 16:
                loads = {e.dim: e.load for e in table}
                self.table = table = [_Entry(d, loads[d]) for d in range(self.nd)]
                if ag:  # the quirk: position i (dim D-1-i) is charged with dim i's volume
                    table.reverse()
                identity = tuple(range(self.nd))
                skip = tuple(not involved[d] or ps[d] == 1 for d in identity)
                for e, amount in zip(table, self._charge(identity, r, skip, ag)):
                    e.load += amount
                return identity
        order = tuple(e.dim for e in table)
        for e, amount in zip(table, self._charge(order, r, tuple(off), ag)):
            e.load += amount
        return order
