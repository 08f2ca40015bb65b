"""Themis (Rashidi et al., ISCA 2022): balance the dimensions' loads chunk by chunk.

Two flavours, chosen by the cost model (`CostModel.themis_flavor`):

- ``load_tracker`` (the paper's Algorithm 1, DESIGN.md §5; `paper` model). One predicted busy
  time per dimension, reset per collective (``seed_latency=True`` seeds each with the dimension's
  fixed per-phase latency). For each chunk in issue order: if max load − min load is less than the
  time the least-loaded dimension needs to send a reduce-scatter phase of chunk/16 bytes, take the
  baseline order; otherwise sort the dimensions by load once (ties by dimension index), lowest
  first for RS and AR, highest first for a standalone AG. Then charge each of the chunk's phases'
  bandwidth time (RS and AG for an all-reduce) to its dimension.
- ``offline_greedy`` (ASTRA-sim's `OfflineGreedy`, reference/astra-sim-themis.md §3): loads in MiB
  normalised to dim 0's bandwidth, a persistent list re-sorted stably per chunk, the r/16 gap test
  in bytes, the identity-order fallback with its all-gather quirk, charges at the recommended chunk
  size. Implemented as written, quirks included, because it reproduces the simulator.
"""

from __future__ import annotations

from itertools import groupby
from operator import add, itemgetter

from ..collectives import AG, ALL_GATHER, ALL_REDUCE, RS
from .base import Order, ScheduleProblem, Scheduler, baseline_order

MIB = 2**20


class ThemisScheduler(Scheduler):
    name = "themis"
    description = "Themis: least-loaded dimension first (the paper's Algorithm 1)"

    def __init__(self, *, seed_latency: bool = False, threshold_fraction: float = 1 / 16) -> None:
        self.seed_latency = seed_latency
        self.threshold_fraction = threshold_fraction

    def __repr__(self) -> str:
        return f"ThemisScheduler(seed_latency={self.seed_latency})"

    def _orders(self, problem: ScheduleProblem) -> list[Order]:
        if problem.cost_model.themis_flavor == "offline_greedy":
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
    """ASTRA-sim's OfflineGreedy chunk orders (reference/astra-sim-themis.md §3.2), quirks included."""
    topo, model = problem.topology, problem.cost_model
    ag = problem.collective == ALL_GATHER
    dims = topo.dims
    nd = len(dims)
    bw = [model.greedy_bandwidth(d) for d in dims]
    ps = [d.npus for d in dims]
    b0 = bw[0]

    def inc(d: int, c: int) -> tuple[float, int]:
        p = ps[d]
        if ag:
            return (c / MIB * (p - 1)) / (bw[d] / b0), c * p
        return (c / MIB * ((p - 1) / p)) / (bw[d] / b0), c // p

    table = [[d, 0.0] for d in range(nd)]  # the persistent list T of (dim, load)
    charges: dict[tuple[tuple[int, ...], int], list[float]] = {}

    def charge(dims_in_order: tuple[int, ...], r: int) -> list[float]:
        """Charges by position: position i gets inc(dims_in_order[i]) with the evolving c."""
        got, c = [], r
        for d in dims_in_order:
            amount, c = inc(d, c)
            got.append(amount)
        charges[(dims_in_order, r)] = got
        return got

    identity = tuple(range(nd))
    load_of = itemgetter(1)
    out: list[Order] = []
    for r in problem.chunks.charges:
        r = int(r)
        table.sort(key=load_of)  # stable
        if ag:
            table.reverse()
        first = table[0]
        if ag:
            last = table[-1]
            delta = abs(last[1] - first[1])
            dl = last[0]
            gap = int((delta * (bw[dl] / b0)) / (ps[dl] - 1) * MIB)
            for e in table[:-1]:
                gap //= ps[e[0]]
        else:
            delta = abs(table[-1][1] - first[1])
            df = first[0]
            gap = int((delta * (bw[df] / b0)) / ((ps[df] - 1) / ps[df]) * MIB)
        if gap < r // 16:
            order = identity
            loads = {e[0]: e[1] for e in table}
            table = [[d, loads[d]] for d in range(nd)]
            if ag:  # the quirk: position i (dim D-1-i) is charged with dim i's volume
                table.reverse()
        else:
            order = tuple([e[0] for e in table])
        amounts = charges.get((order, r)) or charge(order, r)
        for e, amount in zip(table, amounts):
            e[1] += amount
        out.append(order)
    return out
