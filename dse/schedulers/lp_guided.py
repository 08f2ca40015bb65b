"""`lp_guided`: orders that realise the fluid-optimal order mix, sequenced by the simulator.

The bound (dse.bounds) says which mix of dimension orders balances the dimensions' loads best. A
mix is not a schedule: the order in which chunks are issued decides how fast the pipeline fills and
drains, and interleaving the mix by running deficit lands 1-8 % above the bound at 64 chunks. So:

1. the LP mix, rounded to whole chunks by largest remainders;
2. three starting sequences: that mix interleaved by running deficit, that mix issued greedily so
   the running loads stay balanced (the least-loaded-first idea of Themis, drawing from the mix),
   and Themis's own orders;
3. the best of them (by simulating it with the evaluation's queue, latency mode and active chunks)
   improved by a seeded local search over the simulator: swap two chunks' orders, or give one chunk
   another order (which may leave the mix), keeping every change that does not make it slower.

Because Themis's orders are a starting point and changes are kept only when not slower, lp_guided
is never behind Themis under the same queue and cost model. The search is deterministic for a seed
and costs `budget` simulations (~50 us each at 64 chunks with the C engine).

This scheduler needs the bounds and the simulator, so it lives at the bounds layer and registers
itself with `dse.schedulers.register_scheduler`.
"""

from __future__ import annotations

import math
import random
from collections import Counter

from dse.bounds.api import _solve, types_for_plan
from dse.core.collectives import ALL_TO_ALL
from dse.core.errors import InputError
from dse.core.limits import LP_ORDER_TYPES
from dse.schedulers import Order, ScheduleProblem, Scheduler, ThemisScheduler, register_scheduler
from dse.sim.simulate import simulate


@register_scheduler
class LPGuidedScheduler(Scheduler):
    name = "lp_guided"
    description = "the LP-optimal order mix, sequenced by simulation (ours, beyond the paper)"

    def __init__(self, *, budget: int = 300) -> None:
        if budget < 0:
            raise ValueError("budget must be >= 0")
        self.budget = budget

    def __repr__(self) -> str:
        return f"LPGuidedScheduler(budget={self.budget})"

    def simulations(self) -> int:
        return self.budget + 3

    def _orders(self, problem: ScheduleProblem) -> list[Order]:
        model, topo, coll = problem.cost_model, problem.topology, problem.collective
        n = problem.nchunks
        mode = problem.latency_mode or model.default_latency_mode
        if coll == ALL_TO_ALL or topo.ndims == 1:
            return [tuple(range(topo.ndims))] * n
        reason = too_many_orders(topo.ndims, len(set(problem.chunks.sizes)))
        if reason:
            raise InputError(
                "scheduler", f"lp_guided cannot run here: {reason}", "at most 8 dimensions, or another scheduler"
            )
        types = types_for_plan(model, topo, coll, problem.chunks, mode, ar_phase=False)
        main_size = Counter(problem.chunks.sizes).most_common(1)[0][0]
        main = [t for t in types if t.size == main_size]
        orders = [t.order for t in main]
        index = {o: i for i, o in enumerate(orders)}
        slots = 1 if model.shares_bandwidth else problem.active_chunks
        counts = _round_mix(_solve(main, slots, relax=True, solver="highs", time_limit_s=10.0).counts, n)

        # plans per (order index, chunk size), built once
        memo: dict = {}
        plan_cache: dict[tuple[int, float], tuple] = {}

        def plan(i: int, size: float) -> tuple:
            p = plan_cache.get((i, size))
            if p is None:
                p = plan_cache[(i, size)] = model.phases(topo, coll, orders[i], size, latency_mode=mode, memo=memo)
            return p

        sizes = problem.chunks.sizes

        def run(seq: list[int]) -> float:
            plans = [plan(i, s) for i, s in zip(seq, sizes)]
            out = simulate(
                plans,
                topo.ndims,
                queue=problem.queue,
                rules=model.sim_rules,
                active_chunks=problem.active_chunks,
            )
            return out.time_ns

        loads = [t.load for t in main]
        starts = [
            _deficit_sequence(counts, n),
            _balanced_sequence(counts, loads, n),
            [index[o] for o in ThemisScheduler().orders(problem)],
        ]
        scored = [(run(s), k, s) for k, s in enumerate(starts)]
        best_t, _, best = min(scored)
        best = list(best)
        rng = random.Random(problem.seed)
        edge = min(n, 2 * topo.ndims + 2)  # fill and drain happen at the ends
        for _ in range(self.budget):
            cand = list(best)
            if rng.random() < 0.5 or n < 2:
                pos = _pick(rng, n, edge)
                cand[pos] = rng.randrange(len(orders))
                if cand[pos] == best[pos]:
                    continue
            else:
                a, b = _pick(rng, n, edge), rng.randrange(n)
                if cand[a] == cand[b]:
                    continue
                cand[a], cand[b] = cand[b], cand[a]
            t = run(cand)
            if t <= best_t:
                best_t, best = t, cand
        return [orders[i] for i in best]


def too_many_orders(ndims: int, sizes: int = 1) -> str | None:
    """Why lp_guided's LP over every dimension order is too large (`dse.core.limits`), or None."""
    orders = math.factorial(ndims)
    if orders * sizes <= LP_ORDER_TYPES:
        return None
    return f"its LP over {orders:,} dimension orders ({ndims} dimensions) is larger than the {LP_ORDER_TYPES:,} allowed"


def _pick(rng: random.Random, n: int, edge: int) -> int:
    """A position, half the time among the first or last `edge` chunks."""
    if rng.random() < 0.5:
        k = rng.randrange(2 * edge)
        return k if k < edge else n - 1 - (k - edge)
    return rng.randrange(n)


def _round_mix(fractions: tuple[float, ...], n: int) -> list[int]:
    """Whole chunk counts summing to `n`, by largest remainders (ties by type index)."""
    total = sum(fractions) or 1.0
    exact = [f * n / total for f in fractions]
    counts = [int(x) for x in exact]
    rest = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in rest[: n - sum(counts)]:
        counts[i] += 1
    return counts


def _deficit_sequence(counts: list[int], n: int) -> list[int]:
    """Interleave the mix: each next chunk takes the type furthest behind its share."""
    done = [0] * len(counts)
    seq = []
    for k in range(1, n + 1):
        i = max(range(len(counts)), key=lambda j: (counts[j] * k / n - done[j], counts[j], -j))
        done[i] += 1
        seq.append(i)
    return seq


def _balanced_sequence(counts: list[int], loads: list[tuple[float, ...]], n: int) -> list[int]:
    """Draw from the mix so that the running loads stay as balanced as possible."""
    left = list(counts)
    run = [0.0] * len(loads[0])
    seq = []
    for _ in range(n):
        best, best_key = -1, None
        for i, k in enumerate(left):
            if k <= 0:
                continue
            key = (max(r + x for r, x in zip(run, loads[i])), -k, i)
            if best_key is None or key < best_key:
                best, best_key = i, key
        left[best] -= 1
        run = [r + x for r, x in zip(run, loads[best])]
        seq.append(best)
    return seq
