"""The exact optimum of LIBRA's model (docs/model.md §13): cutting planes on LPs, and a branch and bound over the cost.

**Iteration time** (`solve_time`). LIBRA's time is T(bw) = K + Σ_c w_c · max_d a_cd / bw_d (K the
compute, a_cd the bytes collective c puts on dimension d, w_c how many collectives have those
bytes): convex in bw. With s_d standing for 1/bw_d and t_c for collective c's time it is the
program min K + Σ w_c t_c subject to t_c >= a_cd·s_d, s_d >= 1/bw_d and bw in the polytope; only
s_d >= 1/bw_d is not linear. Outer approximation (Kelley): every tangent of 1/b at b0,
s_d >= 2/b0 - bw_d/b0², holds for every bw_d > 0 (1/b is convex), so the LP with any set of them is
a relaxation and its value a lower bound L. The LP's bw is a feasible allocation, so T there is an
upper bound U. Each round adds the tangents at the LP's bw where s_d < 1/bw_d, and stops when
(U - L)/U <= the tolerance, or when the LP budget is spent (the gap reached is reported). The first
LP holds 12 tangents per dimension, spread geometrically over the dimension's range.

**Iteration time x cost** (`solve_time_x_cost`). The cost C(bw) = c·bw + c0 is affine, so with
v(κ) = min{T(bw) : C(bw) = κ, bw in the polytope} the objective is min over κ in [κmin, κmax] (C's
range) of κ·v(κ)/1e10. v is convex: it is the value of a convex program as a function of the
right-hand side of a linear constraint. Solving v at κ_i with the cutting planes above (the cost row
fixed to κ_i) gives, besides a point, a line under v everywhere: with L_i the LP's value and λ_i
the dual of the cost row, v(κ) >= L_i + λ_i·(κ - κ_i) for every κ, since the LP is a relaxation at
every κ and its optimal dual stays feasible when only the cost row's bound moves (weak duality).
Hence on an interval [κ1, κ2] between two solved levels, for every κ in it (κ > 0),

    κ·v(κ) >= κ·E(κ),   E(κ) = max(L_1 + λ_1·(κ - κ1), L_2 + λ_2·(κ - κ2), K),

and min_{[κ1, κ2]} κ·E(κ) is a lower bound on the interval, computed exactly: on each piece of E
the function κ·E(κ) is a parabola, so its least value is at an end, a crossing of two lines or a
parabola's vertex, all of which are evaluated. Branch and bound: solve five levels evenly spread,
then split the interval of least bound at that bound's minimiser (kept in the interval's middle
half), until (U - least bound)/U <= the tolerance, U the best κ·T seen at a real point. Each level's
own gap is held to a tenth of the tolerance, which the lines absorb (they are lower bounds
whatever the gap). The bound's error on an interval of width w is O(w²), so levels gather where
κ·v(κ) is within the tolerance of its least value: a handful of dozens for LIBRA's workloads. A
workload without compute (K = 0) under constraints that scale (a cone) makes κ·v(κ) flat over a
whole range, which must be covered by levels; there the LP budget ends the search, and the gap
reached is what is reported.

Both bounds are exact up to HiGHS's feasibility tolerances (1e-10, `dse.explore.libra.small_lp`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dse.explore.libra.bw_constraints import BandwidthPolytope
from dse.explore.libra.small_lp import INF

_SCALE = 1e10  # LIBRA's "performance per cost" divides ns x $ by this
_INITIAL_CUTS = 12


@dataclass(frozen=True)
class LibraProblem:
    """LIBRA's program: the polytope, the distinct collectives (weight, bytes per dimension), the
    compute K (ns) and the cost (coefficients, constant) if any."""

    polytope: BandwidthPolytope
    weights: tuple[float, ...]
    loads: tuple[tuple[float, ...], ...]
    const: float
    cost: tuple[tuple[float, ...], float] | None = None

    @classmethod
    def build(
        cls,
        polytope: BandwidthPolytope,
        per_dim: Sequence[Sequence[float]],
        const: float,
        cost: tuple[tuple[float, ...], float] | None = None,
    ) -> LibraProblem:
        """Collectives with the same bytes per dimension merged into one with a weight."""
        counts: dict[tuple[float, ...], int] = {}
        for msg in per_dim:
            key = tuple(float(m) for m in msg)
            if any(key):
                counts[key] = counts.get(key, 0) + 1
        loads = tuple(sorted(counts))
        return cls(polytope, tuple(float(counts[k]) for k in loads), loads, float(const), cost)

    def time(self, bw: Sequence[float]) -> float:
        """T(bw), ns."""
        comm = math.fsum(w * max(a / b for a, b in zip(load, bw) if a > 0) for w, load in zip(self.weights, self.loads))
        return self.const + comm

    def dollars(self, bw: Sequence[float]) -> float:
        """C(bw) = c·bw + c0, the network's cost ($) of allocation `bw` (a problem with a cost only)."""
        assert self.cost is not None
        return math.fsum(c * b for c, b in zip(self.cost[0], bw)) + self.cost[1]


@dataclass(frozen=True)
class Solution:
    """An optimum: the allocation, the objective there, the proven lower bound and the work."""

    bandwidths: tuple[float, ...]
    value: float
    lower: float
    lps: int
    iterations: int
    levels: int = 0

    @property
    def gap(self) -> float:
        """The relative gap (value - lower) / value, at least 0 (0 for a value of 0)."""
        return max(0.0, (self.value - self.lower) / self.value) if self.value > 0 else 0.0


@dataclass(frozen=True)
class Level:
    """v at one cost level (or unconstrained): the best point, T there, and the line under v."""

    kappa: float
    bandwidths: tuple[float, ...]
    time: float
    lower: float
    slope: float
    iterations: int


class CuttingPlanes:
    """The LP of the module docstring, kept between solves (cuts hold at every cost level)."""

    def __init__(self, problem: LibraProblem, max_lps: int) -> None:
        self.p = problem
        self.max_lps = max_lps
        poly = problem.polytope
        n, m = poly.ndims, len(problem.loads)
        self.n = n
        self.lp = poly.lp()
        self.s0 = self.lp.add_cols([1 / hi for _, hi in poly.ranges], [1 / lo for lo, _ in poly.ranges])
        t0 = self.lp.add_cols([0.0] * m, [INF] * m)
        ref = poly.point([0.5] * poly.free)
        self.scale = max(problem.time(ref) - problem.const, 1e-30) if m else 1.0
        for c, load in enumerate(problem.loads):
            for d, a in enumerate(load):
                if a > 0:
                    self.lp.add_row(0.0, INF, {t0 + c: 1.0, self.s0 + d: -a / self.scale})
        self.cost_row = -1
        if problem.cost is not None:
            self.cost_row = self.lp.add_row(-INF, INF, {d: v for d, v in enumerate(problem.cost[0]) if v})
        self.used = [d for d in range(n) if any(load[d] > 0 for load in problem.loads)]
        for d in self.used:
            lo, hi = poly.ranges[d]
            for b in np.geomspace(lo, hi, _INITIAL_CUTS if hi > lo else 1):
                self.cut(d, float(b))
        self.lp.set_cost([0.0] * (2 * n) + list(problem.weights))

    def cut(self, d: int, b: float) -> None:
        """The tangent of 1/b at `b`, times b: b·s_d + bw_d/b >= 2."""
        self.lp.add_row(2.0, INF, {d: 1.0 / b, self.s0 + d: b})

    @property
    def budget_left(self) -> bool:
        """Whether the LP budget (`max_lps` solves) allows another solve."""
        return self.lp.solves < self.max_lps

    def solve(self, tol: float, kappa: float | None = None) -> Level:
        """v(kappa) (or min T with kappa None) to relative gap `tol`, or as far as the budget goes."""
        if self.cost_row >= 0:
            assert self.p.cost is not None
            rhs = (-INF, INF) if kappa is None else (kappa - self.p.cost[1],) * 2
            self.lp.set_row_bounds(self.cost_row, *rhs)
        best: tuple[float, tuple[float, ...]] | None = None
        rounds = 0
        while True:
            status = self.lp.solve()
            if status != "optimal":  # pragma: no cover - the polytope and the cuts are never empty
                raise RuntimeError(f"LIBRA optimum: the cutting-plane LP is {status} at cost {kappa}")
            rounds += 1
            x = self.lp.x
            lower = self.p.const + self.scale * self.lp.objective
            slope = self.scale * float(self.lp.row_duals[self.cost_row]) if kappa is not None else 0.0
            bw = tuple(max(float(v), 1e-300) for v in x[: self.n])
            t = self.p.time(bw)
            if best is None or t < best[0]:
                best = (t, bw)
            if best[0] - lower <= tol * best[0] or not self.budget_left:
                break
            fresh = [d for d in self.used if x[self.s0 + d] < (1 - 1e-12) / bw[d]]
            for d in fresh:
                self.cut(d, bw[d])
            if not fresh:
                break
        return Level(kappa if kappa is not None else math.nan, best[1], best[0], min(lower, best[0]), slope, rounds)


def solve_time(problem: LibraProblem, tol: float, max_lps: int) -> Solution:
    """min T over the polytope (module docstring)."""
    cp = CuttingPlanes(problem, max_lps)
    level = cp.solve(tol)
    return Solution(level.bandwidths, level.time, level.lower, cp.lp.solves, level.iterations)


def envelope_min(lines: Sequence[tuple[float, float, float]], floor: float, a: float, b: float) -> tuple[float, float]:
    """min over κ in [a, b] (0 < a <= b) of κ·max(floor, max_i (L_i + λ_i·(κ - κ_i))), and where:
    `lines` are (κ_i, L_i, λ_i). Exact: every end, crossing and parabola vertex is evaluated."""
    alphas = [(lv - s * k, s) for k, lv, s in lines] + [(floor, 0.0)]  # each piece is α + β·κ
    cands = {a, b}
    for i, (a1, b1) in enumerate(alphas):
        if b1 > 0:
            cands.add(-a1 / (2 * b1))
        for a2, b2 in alphas[i + 1 :]:
            if b1 != b2:
                cands.add((a2 - a1) / (b1 - b2))
    best = (math.inf, a)
    for k in cands:
        if a <= k <= b:
            best = min(best, (k * max(al + be * k for al, be in alphas), k))
    return best


class _CostSearch:
    """The branch and bound over the cost level (module docstring)."""

    def __init__(self, problem: LibraProblem, tol: float, max_lps: int) -> None:
        assert problem.cost is not None
        self.p, self.tol = problem, tol
        self.cp = CuttingPlanes(problem, max_lps)
        coeffs, c0 = problem.cost
        lp = problem.polytope.lp()
        ends = []
        for sign in (1.0, -1.0):
            lp.set_cost([sign * c for c in coeffs])
            if lp.solve() != "optimal":  # pragma: no cover - the polytope is bounded and not empty
                raise RuntimeError("LIBRA optimum: the cost's range LP failed")
            ends.append(sign * lp.objective + c0)
        self.lo, self.hi = ends[0], max(ends)
        self.levels: dict[float, Level] = {}
        self.best: tuple[float, tuple[float, ...]] = (math.inf, ())
        self.iterations = 0

    def level(self, kappa: float) -> Level:
        """Solve v at `kappa`; at an end of the cost's range the cost row may miss the polytope by
        rounding, and the level moves inside by 1e-12, then 1e-10 of the range (the lines still
        bound v at the very end)."""
        span = self.hi - self.lo
        for step in (0.0, 1e-12, 1e-10):
            k = min(max(kappa, self.lo + step * span), self.hi - step * span)
            try:
                lv = self.cp.solve(self.tol / 10, k)
                break
            except RuntimeError:
                if step == 1e-10:
                    raise
        kappa = k
        self.levels[kappa] = lv
        self.iterations += lv.iterations
        f = lv.time * self.p.dollars(lv.bandwidths) / _SCALE
        self.best = min(self.best, (f, lv.bandwidths))
        return lv

    def bound(self, k1: float, k2: float) -> tuple[float, float, float, float]:
        """(lower bound, its minimiser, k1, k2) of the interval between two solved levels; the
        outermost intervals reach the ends of the cost's range."""
        lines = [(k, self.levels[k].lower, self.levels[k].slope) for k in (k1, k2)]
        a = self.lo if k1 == min(self.levels) else k1
        b = self.hi if k2 == max(self.levels) else k2
        value, where = envelope_min(lines, self.p.const, a, b)
        return value / _SCALE, where, k1, k2

    def search(self) -> Solution:
        """The branch and bound over the cost κ (module docstring): the best allocation found, its value
        and the proven lower bound, to the tolerance or until the LP budget is spent."""
        width = self.hi - self.lo
        if width <= 1e-12 * max(abs(self.hi), 1.0):
            k = (self.lo + self.hi) / 2
            lv = self.level(k)
            lower = min(
                self.best[0], envelope_min([(k, lv.lower, lv.slope)], self.p.const, self.lo, self.hi)[0] / _SCALE
            )
            return Solution(self.best[1], self.best[0], lower, self.cp.lp.solves, self.iterations, 1)
        for k in np.linspace(self.lo, self.hi, 5):
            self.level(float(k))
        ks = sorted(self.levels)
        heap = [self.bound(k1, k2) for k1, k2 in zip(ks, ks[1:])]
        heapq.heapify(heap)
        while self.best[0] - heap[0][0] > self.tol * self.best[0] and self.cp.budget_left:
            _, where, k1, k2 = heapq.heappop(heap)
            w = k2 - k1
            km = min(max(where, k1 + 0.25 * w), k2 - 0.25 * w)
            km = self.level(km).kappa
            heapq.heappush(heap, self.bound(k1, km))
            heapq.heappush(heap, self.bound(km, k2))
        lower = min(heap[0][0], self.best[0])
        return Solution(self.best[1], self.best[0], lower, self.cp.lp.solves, self.iterations, len(self.levels))


def solve_time_x_cost(problem: LibraProblem, tol: float, max_lps: int) -> Solution:
    """min T·C/1e10 over the polytope (module docstring)."""
    return _CostSearch(problem, tol, max_lps).search()
