"""`lp_guided`: orders that realise the fluid-optimal order mix, sequenced by the simulator.

The fluid LP (`dse.schedulers.order_mix`) says which mix of dimension orders balances the dimensions'
loads best. A mix is not a schedule: the order in which chunks are issued decides how fast the
pipeline fills and drains, and interleaving the mix by running deficit lands 1-8 % above the bound at 64 chunks. So:

1. the LP mix, rounded to whole chunks by largest remainders;
2. three starting sequences: that mix interleaved by running deficit, that mix issued greedily so
   the running loads stay balanced (the least-loaded-first idea of Themis, drawing from the mix),
   and Themis's own orders;
3. the best of them (by simulating it with the evaluation's queue, latency mode and active chunks)
   improved by a seeded local search over the simulator: swap two chunks' orders, or give one chunk
   another order (which may leave the mix), keeping every change that does not make it slower.

Because Themis's orders are a starting point and changes are kept only when not slower, lp_guided
is never behind Themis under the same queue and cost model. The search is deterministic for a seed
and costs at most `budget` + 3 simulations (`LPGuidedScheduler.simulations`).

This scheduler needs the LP over dimension orders (`dse.schedulers.order_mix`) and a simulator,
which the sim layer passes in with the problem (`ScheduleProblem.simulate`). It is loaded on its
first lookup in `dse.schedulers.SCHEDULERS` and registers itself there.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dse.core.collectives import ALL_TO_ALL
from dse.core.errors import InputError
from dse.core.limits import LP_ORDER_TYPES
from dse.costs.base import Phase
from dse.schedulers import register_scheduler
from dse.schedulers.base import Order, ScheduleProblem, Scheduler, Simulate
from dse.schedulers.order_mix import count_text, fluid_mix, types_for_plan
from dse.schedulers.themis import ThemisScheduler


@register_scheduler
class LPGuidedScheduler(Scheduler):
    """Realises the fluid LP's order mix in whole chunks and sequences it by simulation (module docstring)."""

    name = "lp_guided"
    description = "the LP-optimal order mix, sequenced by simulation (ours, beyond the paper)"

    def __init__(self, *, budget: int = 300) -> None:
        if budget < 0:
            raise ValueError("budget must be >= 0")
        self.budget = budget

    def __repr__(self) -> str:
        return f"LPGuidedScheduler(budget={self.budget})"

    def simulations(self) -> int:
        """The most simulations one schedule costs: the three starts and the `budget` moves."""
        return self.budget + 3

    def _orders(self, problem: ScheduleProblem) -> list[Order]:
        ndims = problem.ndims
        if problem.collective == ALL_TO_ALL or ndims == 1:
            return [tuple(range(ndims))] * problem.nchunks
        reason = too_many_orders(ndims, len(set(problem.chunks.sizes)))
        if reason:
            raise InputError(
                "scheduler", f"lp_guided cannot run here: {reason}", "at most 8 dimensions, or another scheduler"
            )
        mix = _OrderMix.for_problem(problem)
        time_of = _Sequences(problem, mix.orders, problem.simulator()).time
        index = {o: i for i, o in enumerate(mix.orders)}
        starts = [
            _deficit_sequence(mix.counts, problem.nchunks),
            _balanced_sequence(mix.counts, mix.loads, problem.nchunks),
            [index[o] for o in ThemisScheduler().orders(problem)],
        ]
        return [mix.orders[i] for i in self._improve(problem, time_of, starts, len(mix.orders))]

    def _improve(
        self, problem: ScheduleProblem, time_of: Callable[[list[int]], float], starts: list[list[int]], norders: int
    ) -> list[int]:
        """The fastest start, improved by `budget` seeded moves, each kept when it is not slower."""
        best_t, _, best = min((time_of(s), k, s) for k, s in enumerate(starts))
        best = list(best)
        n = problem.nchunks
        rng = random.Random(problem.seed)
        edge = min(n, 2 * problem.ndims + 2)  # fill and drain happen at the ends
        for _ in range(self.budget):
            cand = _neighbour(rng, best, edge, norders)
            if cand is None:
                continue
            t = time_of(cand)
            if t <= best_t:
                best_t, best = t, cand
        return best


@dataclass(frozen=True)
class _OrderMix:
    """The fluid LP's order mix for the problem's most common chunk size, in whole chunks."""

    orders: list[Order]  # per chunk type (index)
    loads: list[tuple[float, ...]]  # busy ns per dimension of one chunk of each type
    counts: list[int]  # chunks per type, summing to the problem's

    @classmethod
    def for_problem(cls, problem: ScheduleProblem) -> _OrderMix:
        """The mix of the problem's most common chunk size: the fluid LP's fractions rounded to whole chunks."""
        model = problem.cost_model
        mode = problem.latency_mode or model.default_latency_mode
        types = types_for_plan(model, problem.topology, problem.collective, problem.chunks, mode, ar_phase=False)
        main_size = Counter(problem.chunks.sizes).most_common(1)[0][0]
        main = [t for t in types if t.size == main_size]
        slots = 1 if model.rules.shares_bandwidth else problem.active_chunks
        counts = _round_mix(fluid_mix(main, slots, time_limit_s=10.0), problem.nchunks)
        return cls([t.order for t in main], [t.load for t in main], counts)


class _Sequences:
    """Times a sequence of order indices (one per chunk, in issue order) with the simulator; each
    (order, chunk size)'s phases are built once."""

    def __init__(self, problem: ScheduleProblem, orders: list[Order], simulate: Simulate) -> None:
        self.problem, self.orders, self.simulate = problem, orders, simulate
        self.mode = problem.latency_mode or problem.cost_model.default_latency_mode
        self.memo: dict = {}
        self.plans: dict[tuple[int, float], Sequence[Phase]] = {}

    def plan(self, i: int, size: float) -> Sequence[Phase]:
        """The phases of a chunk of `size` bytes on order index `i` (built once)."""
        p = self.plans.get((i, size))
        if p is None:
            problem = self.problem
            p = self.plans[(i, size)] = problem.cost_model.phases(
                problem.topology, problem.collective, self.orders[i], size, latency_mode=self.mode, memo=self.memo
            )
        return p

    def time(self, seq: list[int]) -> float:
        """The simulated ns of the chunks run on the orders of `seq`, in issue order."""
        return self.simulate(self.problem, [self.plan(i, s) for i, s in zip(seq, self.problem.chunks.sizes)])


def too_many_orders(ndims: int, sizes: int = 1) -> str | None:
    """Why lp_guided's LP over every dimension order is too large (`dse.core.limits`), or None."""
    orders = math.factorial(ndims)
    if orders * sizes <= LP_ORDER_TYPES:
        return None
    return (
        f"its LP over {count_text(orders)} dimension orders ({ndims} dimensions) is larger than the "
        f"{LP_ORDER_TYPES:,} allowed"
    )


def _pick(rng: random.Random, n: int, edge: int) -> int:
    """A position, half the time among the first or last `edge` chunks."""
    if rng.random() < 0.5:
        k = rng.randrange(2 * edge)
        return k if k < edge else n - 1 - (k - edge)
    return rng.randrange(n)


def _neighbour(rng: random.Random, best: list[int], edge: int, norders: int) -> list[int] | None:
    """A seeded move from `best`: give one chunk another order, or swap two chunks' orders; None
    when the move changes nothing."""
    n = len(best)
    cand = list(best)
    if rng.random() < 0.5 or n < 2:
        pos = _pick(rng, n, edge)
        cand[pos] = rng.randrange(norders)
        if cand[pos] == best[pos]:
            return None
    else:
        a, b = _pick(rng, n, edge), rng.randrange(n)
        if cand[a] == cand[b]:
            return None
        cand[a], cand[b] = cand[b], cand[a]
    return cand


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
