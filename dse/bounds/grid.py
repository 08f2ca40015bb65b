"""The whole-step floor: a lower bound on the load-only ILP that the MIP solver cannot see on its own.

Each dimension's load is its floor plus a whole number of grid steps (in the paper model a step is
one chunk's smallest transfer there), and the bytes a chunk sends do not depend on its order, so a
weighted sum of the step counts is the same for every schedule. The smallest T for which whole step
counts under T can meet that sum is a lower bound; with it, HiGHS stops as soon as it finds a
schedule that reaches it, instead of branching for thousands of nodes to prove what arithmetic
proves. `dse.bounds.floor` searches for a schedule at that floor.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from dse.schedulers.order_mix import ChunkType


def _float_gcd(values: list[float], rel: float = 1e-9) -> float:
    """The largest step of which every value is a whole multiple (within `rel`)."""
    g = values[0]
    for v in values[1:]:
        a, b = max(g, v), min(g, v)
        while b > a * rel:
            a, b = b, math.fmod(a, b)
            if a - b <= a * rel:
                b = 0.0
        g = a
    return g


@dataclass(frozen=True)
class Grid:
    """Whole grid steps of one chunk size (module docstring): dimension d's load is n·base_d + unit_d·m_d
    with a whole m_d, and Σ wt_d·m_d = need in every schedule."""

    n: int
    base: tuple[float, ...]
    unit: tuple[float, ...]  # 0 where every order loads the dimension alike
    live: tuple[int, ...]  # the dimensions with steps
    wt: tuple[int, ...]  # per live dimension
    need: int
    top: tuple[int, ...]  # most steps per live dimension (every chunk at its most)

    @classmethod
    def from_types(cls, types: list[ChunkType], slots: int, bytes_per_ns: list[float]) -> Grid | None:
        """The grid of `types`, or None when their loads are not whole steps with a fixed weighted sum."""
        if not types or len({t.size for t in types}) != 1:
            return None
        n = types[0].count
        nd = len(types[0].load)
        loads = [[x / slots for x in t.load] for t in types]
        base, unit, grid = [], [], []
        for d in range(nd):
            col = [row[d] for row in loads]
            lo = min(col)
            diffs = sorted({v - lo for v in col if v - lo > 1e-12 * max(col)})
            base.append(lo)
            if not diffs:
                unit.append(0.0)
                grid.append([0] * len(col))
                continue
            u = _float_gcd(diffs)
            w = [round((v - lo) / u) for v in col]
            if u <= 0 or max(w) > 10**9 or any(abs(lo + k * u - v) > 1e-9 * max(col) for k, v in zip(w, col)):
                return None
            unit.append(u)
            grid.append(w)
        live = [d for d in range(nd) if unit[d] > 0]
        if not live:
            return cls(n, tuple(base), tuple(unit), (), (), 0, ())
        # integer weights: bytes per grid step, as small whole numbers; the weighted sum must be exact
        raw = [bytes_per_ns[d] * unit[d] for d in live]
        fr = [Fraction(r / min(raw)).limit_denominator(10**6) for r in raw]
        if any(abs(float(f) - r / min(raw)) > 1e-9 * (r / min(raw)) for f, r in zip(fr, raw)):
            return None
        den = math.lcm(*(f.denominator for f in fr))
        wt = [int(f * den) for f in fr]
        per_chunk = {sum(w * grid[d][i] for w, d in zip(wt, live)) for i in range(len(types))}
        if len(per_chunk) != 1:
            return None
        top = tuple(n * max(grid[d]) for d in live)
        return cls(n, tuple(base), tuple(unit), tuple(live), tuple(wt), n * per_chunk.pop(), top)

    def caps(self, t: float) -> list[int]:
        """The most whole steps per live dimension whose load stays at or under `t`."""
        n = self.n
        return [
            min(self.top[i], math.floor((t - n * self.base[d]) / self.unit[d] * (1 + 1e-12) + 1e-9))
            for i, d in enumerate(self.live)
        ]

    def walk(self, start: float, *, max_steps: int = 100_000) -> Iterator[tuple[float, list[int] | None, int]]:
        """Candidate times T >= `start` in increasing order (loads some schedule could have), each
        with the most steps per live dimension under T and the slack of the weighted sum; every T
        skipped is proven infeasible by arithmetic (the coin check). When the walk gives up it
        yields a last (T, None, 0): T is still a valid, weaker, bound."""
        n, base, unit, live = self.n, self.base, self.unit, self.live
        floor_t = max(start, max(n * b for b in base))
        if not live:
            yield floor_t, [], 0
            return
        heap = []
        for j, d in enumerate(live):
            k = max(0, math.ceil((floor_t - n * base[d]) / unit[d] * (1 - 1e-12) - 1e-9))
            heap.append((n * base[d] + k * unit[d], j, k))
        heapq.heapify(heap)
        last = -math.inf
        for _ in range(max_steps):
            if not heap:
                break
            t, j, k = heapq.heappop(heap)
            if k + 1 <= self.top[j]:
                heapq.heappush(heap, (n * base[live[j]] + (k + 1) * unit[live[j]], j, k + 1))
            if t <= last:
                continue
            last = t
            if t < floor_t * (1 - 1e-12):
                continue
            steps = self.caps(t)
            if min(steps) < 0:
                continue
            slack = sum(w * m for w, m in zip(self.wt, steps)) - self.need
            if slack < 0 or not _sum_reachable(slack, list(self.wt), steps):
                continue
            yield max(start, t), steps, slack
        yield max(floor_t, last), None, 0

    def floor(self, start: float) -> float:
        """The first candidate of `walk`: every T below it is proven infeasible by arithmetic."""
        return next(self.walk(start))[0]


def _grid_floor(types: list[ChunkType], slots: int, bytes_per_ns: list[float], start: float) -> float:
    """A lower bound >= `start` on the load-only ILP from whole grid steps (module docstring).

    Every candidate T below the returned value is proven infeasible by exact integer arithmetic; a
    check that cannot decide quickly answers "maybe", which only makes the bound weaker, never
    invalid. Applies to one chunk size (otherwise returns `start`); ASTRA-sim's AR composition is
    one more row, kept when it passes the same checks.
    """
    grid = Grid.from_types(types, slots, bytes_per_ns)
    if grid is None:
        return start
    return grid.floor(start)


def _sum_reachable(target: int, weights: list[int], caps: list[int], *, limit: int = 1 << 18) -> bool:
    """Whether target = Σ w_i·x_i with whole 0 <= x_i <= caps_i; True when too large to check."""
    if target > limit:
        return True
    reach = 1  # bit s set: sum s reachable
    mask = (1 << (target + 1)) - 1
    for w, cap in zip(weights, caps):
        cap = min(cap, target // w)
        k = 1
        while cap > 0:  # binary split of the bounded multiplicity
            take = min(k, cap)
            reach = (reach | (reach << (take * w))) & mask
            cap -= take
            k <<= 1
    return bool(reach >> target & 1)
