"""A schedule that meets the load-only ILP's whole-step floor exactly, found without a MIP solver.

The floor (`dse.bounds.grid.Grid`) is a proven lower bound on the load-only ILP, so a schedule whose
busiest dimension is at the floor is optimal and nothing is left to prove. Finding one is an
exact-fit problem (every dimension's load at its cap, to the grid step) that LP-based branch and
bound is slow at and that this module's searches usually settle in a few hundred nodes.
`dse.bounds.floor.floor_search` runs them.

They work on the ILP's flow over dimension sets (`dse.bounds.flow.flow_edges`) in whole grid steps,
the `Lattice` (`dse.bounds.lattice`): a chunk's order is a path from the empty set (no dimension
after it) up to the full set, and edge (S, d) adds `steps[(S, d)]` to dimension d. A target gives
each live dimension's steps exactly.

`find_flow`, a guided search (`GuidedSearch`; not exhaustive: its None proves nothing):

1. A guide: real chunk counts per order that meet the target (`Lattice.guide`: a projection of
   the uniform mix, the most central counts by LP, or those moved towards a seeded random vertex).
2. Top down over the sets of three or more dimensions (largest first): a set's whole chunks are
   split over the dimension that comes just before it; candidate splits near the guide (rounded,
   then one or two chunks moved), ranked by how close they keep the expected final steps to the
   target (error diffusion: a coarse rounding is corrected by the finer splits below it). Each
   dimension's steps must stay within what the chunks not yet placed can still add, at least and
   at most, or the branch is cut.
3. At each leaf the two-dimension sets are split exactly (`LeafSearch`): one unknown per pair of
   dimensions, one equation per dimension, solved by an exhaustive search with interval pruning.

`exhaustive_flow` (`ExhaustiveSearch`) tries every split instead (values nearest a guide, or the
middle, first): a schedule, or a proof that none meets the target. Both are bounded by node
budgets, so they are deterministic and cheap when they give up; the caller then falls back to the
MIP solver.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from dse.bounds.lattice import Edge, Lattice


def find_flow(lattice: Lattice, n: int, target: list[int], how: str | int, *, budget: int) -> dict[Edge, int] | None:
    """An integer flow of `n` chunks on `lattice` whose steps on each live dimension equal `target`,
    or None when the guided search finds none within `budget` nodes; guided as `Lattice.guide(how)`.
    `lattice.spent` is then the nodes it visited."""
    real = lattice.guide(n, target, how)
    if real is None:
        return None  # not even real counts meet the targets
    search = GuidedSearch(lattice, n, target, real, budget)
    found = search.search()
    lattice.spent = search.spent[0]
    return found


def exhaustive_flow(
    lattice: Lattice, n: int, target: list[int], *, budget: list[int], guide: dict[Edge, float] | None = None
) -> dict[Edge, int] | None:
    """An integer flow of `n` chunks on `lattice` whose steps equal `target` on every dimension (give 0
    where a dimension has no steps), or None when there is none: this search is exhaustive, so None
    is a proof. `budget` is a one-item list of nodes left, spent in place (a budget several searches
    share); raises `OutOfBudget` when it runs out. `guide`: real flows (`Lattice.guide`) whose shares
    are tried first; without it, the middle of each range is."""
    return ExhaustiveSearch(lattice, n, target, budget, guide).search()


def targets(
    wt: list[int], caps: list[int], slack: int, *, limit: int, max_visits: int = 100_000
) -> list[list[int]] | None:
    """Step vectors m <= caps with Σ wt·(caps - m) = slack: all of them, or the first `limit` (in
    lexicographic order of caps - m). None when the enumeration gives up after `max_visits` partial
    vectors: the list would then be neither complete nor `limit` long."""
    walk = _Targets(wt, caps, limit, max_visits)
    walk.extend(0, slack, [])
    return None if walk.visits > max_visits and len(walk.out) < limit else walk.out


class _Targets:
    """The depth-first enumeration behind `targets`: the vectors found, and the partial ones visited."""

    def __init__(self, wt: list[int], caps: list[int], limit: int, max_visits: int) -> None:
        self.wt, self.caps, self.limit, self.max_visits = wt, caps, limit, max_visits
        self.out: list[list[int]] = []
        self.visits = 0

    def extend(self, j: int, rem: int, acc: list[int]) -> None:
        """Every completion of `acc` (the steps taken off entries 0..j-1) that takes `rem` weighted
        steps off entries j.. within their caps, appended to `out` (up to `limit`)."""
        wt, caps = self.wt, self.caps
        self.visits += 1
        if len(self.out) >= self.limit or self.visits > self.max_visits:
            return
        if j == len(wt) - 1:
            if rem % wt[j] == 0 and rem // wt[j] <= caps[j]:
                self.out.append([c - s for c, s in zip(caps, acc + [rem // wt[j]])])
            return
        for s in range(min(rem // wt[j], caps[j]) + 1):
            self.extend(j + 1, rem - s * wt[j], acc + [s])


class OutOfBudget(Exception):
    """An exhaustive search ran out of its node budget: it proved nothing."""


class GuidedSearch:
    """One run of `find_flow` (module docstring): the chunks placed so far, top down, the steps
    their edges commit, and the least and most steps the open sets can still add."""

    def __init__(self, lattice: Lattice, n: int, target: list[int], real: dict[Edge, float], budget: int) -> None:
        self.lattice, self.target, self.real, self.budget = lattice, target, real, budget
        full = lattice.full
        self.through = through = [0.0] * (full + 1)  # the guide's chunks through each set
        for (a, d), v in real.items():
            through[a | 1 << d] += v
        expected, self.vec = self._expected()
        self.count = [0] * (full + 1)
        self.count[full] = n
        self.flow = dict.fromkeys(lattice.steps, 0)
        self.expect = [n * v for v in expected]
        self.committed = [0] * len(lattice.live)
        self.low = [n * v for v in lattice.lo[full]]  # committed steps + least the open sets can still add
        self.high = [n * v for v in lattice.hi[full]]
        self.spent = [0]  # nodes visited, shared with the leaves' searches
        self.found: dict[Edge, int] | None = None

    def _expected(self) -> tuple[list[float], dict[Edge, list[float]]]:
        """The steps a chunk at the full set is expected to add under the guide, and per edge (s, d)
        into a set s what a chunk taking it adds: its own steps plus the expectation below it."""
        lat, real, through = self.lattice, self.real, self.through
        L = len(lat.live)
        g = [[0.0] * L for _ in range(lat.full + 1)]
        vec: dict[Edge, list[float]] = {}
        for s in lat.by_size:
            acc = [0.0] * L
            k = len(lat.members[s])
            for d in lat.members[s]:
                child = s ^ (1 << d)
                v = [gc + oc for gc, oc in zip(g[child], lat.own[(child, d)])]
                vec[(s, d)] = v
                p = real[(child, d)] / through[s] if through[s] > 1e-12 else 1.0 / k
                for j in range(L):
                    acc[j] += p * v[j]
            g[s] = acc
        return g[lat.full], vec

    def search(self) -> dict[Edge, int] | None:
        """The flow found, or None (none within the budget)."""
        self.split_from(0)
        return self.found

    def apply(self, s: int, split: list[int], sign: int) -> None:
        """Give (`sign` 1) or take back (-1) `split`: set s's chunks per dimension in `members[s]`."""
        lat = self.lattice
        lo, hi, own = lat.lo, lat.hi, lat.own
        low, high, committed, count, flow = self.low, self.high, self.committed, self.count, self.flow
        L = len(low)
        c = sign * count[s]
        los, his = lo[s], hi[s]
        for j in range(L):
            low[j] -= c * los[j]
            high[j] -= c * his[j]
        for k, d in enumerate(lat.members[s]):
            m = split[k] * sign
            if not m:
                continue
            child = s ^ (1 << d)
            flow[(child, d)] += m
            count[child] += m
            o, loc, hic = own[(child, d)], lo[child], hi[child]
            for j in range(L):
                low[j] += m * (loc[j] + o[j])
                high[j] += m * (hic[j] + o[j])
                committed[j] += m * o[j]

    def split_from(self, i: int) -> bool:
        """Split the chunks of the i-th set (`Lattice.nodes`) and of those after it; True when done
        (a flow found, or the budget spent)."""
        lat, target, spent = self.lattice, self.target, self.spent
        spent[0] += 1
        if spent[0] > self.budget:
            return True  # out of budget: stop the search (found stays None)
        if i == len(lat.nodes):
            need = [t - c for t, c in zip(target, self.committed)]
            self.found = LeafSearch(lat, self.count, need, spent, self.budget).complete(self.flow)
            return self.found is not None
        s = lat.nodes[i]
        c = self.count[s]
        if c == 0:
            return self.split_from(i + 1)
        lo, hi, own, ds = lat.lo, lat.hi, lat.own, lat.members[s]
        through = self.through[s]
        share = [c * (self.real[(s ^ (1 << d), d)] / through if through > 1e-12 else 1.0 / len(ds)) for d in ds]
        # what each chunk sent to child k adds at least / at most (its edge, then the child's range)
        lo_k = [[a + b for a, b in zip(lo[s ^ (1 << d)], own[(s ^ (1 << d), d)])] for d in ds]
        hi_k = [[a + b for a, b in zip(hi[s ^ (1 << d)], own[(s ^ (1 << d), d)])] for d in ds]
        base, moves = _candidates(share, c, [self.vec[(s, d)] for d in ds], self.expect, target)
        # the least and most final steps with the rounded split; a move shifts them linearly
        L = len(target)
        low_b = [self.low[j] - c * lo[s][j] + sum(m * v[j] for m, v in zip(base, lo_k)) for j in range(L)]
        high_b = [self.high[j] - c * hi[s][j] + sum(m * v[j] for m, v in zip(base, hi_k)) for j in range(L)]
        for a, b, m, dE in moves:
            spent[0] += 1
            if a < 0:
                fits = all(low_b[j] <= target[j] <= high_b[j] for j in range(L))
            else:
                la, lb, ha, hb = lo_k[a], lo_k[b], hi_k[a], hi_k[b]
                fits = all(
                    low_b[j] + m * (la[j] - lb[j]) <= target[j] <= high_b[j] + m * (ha[j] - hb[j]) for j in range(L)
                )
            if not fits:
                continue
            if self._descend(i, s, base, (a, b, m), dE) or spent[0] > self.budget:
                return True
        return False

    def _descend(self, i: int, s: int, base: list[int], move: tuple[int, int, int], dE: list[float]) -> bool:
        """Give set s the rounded split `base` with `move` (to, from, chunks) applied, search the sets
        after it, and take the split back unless that found a flow or spent the budget."""
        a, b, m = move
        split = list(base)
        if a >= 0:
            split[a] += m
            split[b] -= m
        expect = self.expect
        self.apply(s, split, 1)
        for j in range(len(expect)):
            expect[j] += dE[j]
        if self.split_from(i + 1):
            return True
        for j in range(len(expect)):
            expect[j] -= dE[j]
        self.apply(s, split, -1)
        return False


class LeafSearch:
    """The leaves of `GuidedSearch`: split the chunks of every two-dimension set so that the live
    dimensions' remaining steps are exactly `need` (an exhaustive search with interval pruning).
    Each node visited counts in `spent`; past `budget` the search stops (None, proving nothing)."""

    def __init__(self, lattice: Lattice, count: list[int], need: list[int], spent: list[int], budget: int) -> None:
        self.lattice, self.count, self.spent, self.budget = lattice, count, spent, budget
        L = len(need)
        self.need = need = list(need)
        self.pairs: list[tuple[int, list[int]]] = []  # (chunks, change of the steps per unit of m)
        for s, _a, _b, base, slope in lattice.pairs:
            c = count[s]
            if c:
                for j in range(L):
                    need[j] -= c * base[j]
                self.pairs.append((c, slope))
        P = len(self.pairs)
        # the range of what pairs i.. can still add to each dimension (suffix sums), for pruning
        self.rlo = rlo = [[0] * L for _ in range(P + 1)]
        self.rhi = rhi = [[0] * L for _ in range(P + 1)]
        for i in range(P - 1, -1, -1):
            c, slope = self.pairs[i]
            for j in range(L):
                rlo[i][j] = rlo[i + 1][j] + min(0, c * slope[j])
                rhi[i][j] = rhi[i + 1][j] + max(0, c * slope[j])
        self.m = [0] * P

    def complete(self, flow: dict[Edge, int]) -> dict[Edge, int] | None:
        """`flow` with the leaves' edges added, or None when no split meets `need`."""
        need, rlo, rhi = self.need, self.rlo, self.rhi
        if any(not rlo[0][j] <= need[j] <= rhi[0][j] for j in range(len(need))) or not self.choose_from(0):
            return None
        out = dict(flow)
        k = 0
        for s, a, b, _, _ in self.lattice.pairs:
            c = self.count[s]
            if c:
                v = self.m[k]
                k += 1
                out[(1 << a, b)] += v
                out[(0, a)] += v
                out[(1 << b, a)] += c - v
                out[(0, b)] += c - v
        return out

    def choose_from(self, i: int) -> bool:
        """Choose m for pair i and those after it: m chunks through ({a}, b) then (∅, a), the rest
        through ({b}, a) then (∅, b)."""
        spent, need = self.spent, self.need
        spent[0] += 1
        if spent[0] > self.budget:
            return False
        if i == len(self.pairs):
            return not any(need)
        c, slope = self.pairs[i]
        nlo, nhi = self.rlo[i + 1], self.rhi[i + 1]
        lo_m, hi_m = 0, c  # values of m that keep every dimension within reach of the later pairs
        for j in range(len(need)):
            sl = slope[j]
            if sl > 0:
                lo_m = max(lo_m, -(-(need[j] - nhi[j]) // sl))
                hi_m = min(hi_m, (need[j] - nlo[j]) // sl)
            elif sl < 0:
                lo_m = max(lo_m, -(-(need[j] - nlo[j]) // sl))
                hi_m = min(hi_m, (need[j] - nhi[j]) // sl)
        if lo_m > hi_m:
            return False
        for v in _outward((lo_m + hi_m) // 2, lo_m, hi_m):
            for j in range(len(need)):
                need[j] -= v * slope[j]
            if self.choose_from(i + 1):
                self.m[i] = v
                return True
            for j in range(len(need)):
                need[j] += v * slope[j]
        return False


class ExhaustiveSearch:
    """One run of `exhaustive_flow`: top down over the sets, as `GuidedSearch`, but every split is
    tried. The chunks at a set are given its dimensions one by one, each the whole range of counts
    that keeps every dimension's steps within what the chunks not yet placed can still add at least
    (`f_lo`) and at most (`f_hi`); `t` is each dimension's steps still to place."""

    def __init__(
        self, lattice: Lattice, n: int, target: list[int], budget: list[int], guide: dict[Edge, float] | None
    ) -> None:
        self.lattice, self.budget = lattice, budget
        full, nd, lo, hi = lattice.full, lattice.nd, lattice.lo_all, lattice.hi_all
        self.share: dict[Edge, float] = {}  # the guide's share of a set's chunks per edge into it
        if guide is not None:
            through = [0.0] * (full + 1)
            for (a, d), v in guide.items():
                through[a | 1 << d] += v
            self.share = {(a, d): v / through[a | 1 << d] for (a, d), v in guide.items() if through[a | 1 << d] > 1e-12}
        self.cnt = [0] * (full + 1)
        self.cnt[full] = n
        self.f_lo = [n * lo[full][d] for d in range(nd)]
        self.f_hi = [n * hi[full][d] for d in range(nd)]
        self.t = list(target)
        self.flow: dict[Edge, int] = {}
        self.cnt_s = 0  # chunks at the set being split

    def search(self) -> dict[Edge, int] | None:
        """The flow, or None: a proof that none meets the target. Raises `OutOfBudget`."""
        if not self.node(0):
            return None
        out = dict.fromkeys(self.lattice.steps, 0)
        out.update(self.flow)
        return out

    def spend_node(self) -> None:
        """Count one node against the shared budget; `OutOfBudget` once it is spent."""
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise OutOfBudget

    def node(self, pos: int) -> bool:
        """Split the first set from `pos` on (`Lattice.top_down`) that holds chunks, then the rest."""
        self.spend_node()
        order, cnt, f_lo, f_hi = self.lattice.top_down, self.cnt, self.f_lo, self.f_hi
        while pos < len(order) and cnt[order[pos]] == 0:
            pos += 1
        if pos == len(order):
            return not any(self.t)
        s = order[pos]
        c = cnt[s]
        ds = self.lattice.members[s]
        lo, hi = self.lattice.lo_all[s], self.lattice.hi_all[s]
        cnt[s] = 0
        for d in ds:
            f_lo[d] -= c * lo[d]
            f_hi[d] -= c * hi[d]
        saved = self.cnt_s
        self.cnt_s = c
        ok = self.split(s, ds, 0, c, pos)
        self.cnt_s = saved
        for d in ds:
            f_lo[d] += c * lo[d]
            f_hi[d] += c * hi[d]
        cnt[s] = c
        return ok

    def bounds_left(self, ds: list[int], i: int, s: int, d: int) -> tuple[int, int]:
        """The least and most steps on d a chunk given a later sibling of ds[i] adds."""
        lo, hi = self.lattice.lo_all, self.lattice.hi_all
        others = [s & ~(1 << g) for g in ds[i + 1 :]]
        return min(lo[o][d] for o in others), max(hi[o][d] for o in others)

    def split(self, s: int, ds: list[int], i: int, left: int, pos: int) -> bool:
        """Give x of the `left` chunks at s the dimension ds[i] next, then the rest."""
        self.spend_node()
        t, f_lo, f_hi = self.t, self.f_lo, self.f_hi
        if i == len(ds):
            return all(f_lo[d] <= t[d] <= f_hi[d] for d in range(self.lattice.nd)) and self.node(pos + 1)
        d = ds[i]
        child = s & ~(1 << d)
        coef = self.lattice.steps[(child, d)]
        last = i + 1 == len(ds)
        c_lo, c_hi = (0, 0) if last else self.bounds_left(ds, i, s, d)
        if last:
            xs = [left]
        else:  # the chunks not given d go to later siblings: bound what they add to d
            # f_lo + left·c_lo + x·(coef - c_lo) <= t_d <= f_hi + left·c_hi + x·(coef - c_hi)
            span = _count_range(
                left, t[d] - f_lo[d] - left * c_lo, coef - c_lo, t[d] - f_hi[d] - left * c_hi, coef - c_hi
            )
            if span is None:
                return False
            lo_x, hi_x = span
            # the guide's share of the set's chunks, of which `left` are still to place
            mid = self.cnt_s * self.share[(child, d)] if (child, d) in self.share else (lo_x + hi_x) / 2
            xs = sorted(range(lo_x, hi_x + 1), key=lambda x: abs(x - mid))
        for x in xs:
            self.give(child, d, x)
            fits = f_lo[d] + (left - x) * c_lo <= t[d] <= f_hi[d] + (left - x) * c_hi
            ok = fits and self.split(s, ds, i + 1, left - x, pos)
            if ok and x:
                self.flow[(child, d)] = self.flow.get((child, d), 0) + x
            self.give(child, d, -x)
            if ok:
                return True
        return False

    def give(self, child: int, d: int, x: int) -> None:
        """Send x chunks (x < 0: take them back) along edge (child, d): their steps on d are placed,
        and the range of what they can still add joins set `child`'s."""
        if not x:
            return
        lo, hi = self.lattice.lo_all[child], self.lattice.hi_all[child]
        self.t[d] -= x * self.lattice.steps[(child, d)]
        self.cnt[child] += x
        for e in self.lattice.members[child]:
            self.f_lo[e] += x * lo[e]
            self.f_hi[e] += x * hi[e]


def _count_range(left: int, low_gap: int, low_slope: int, high_gap: int, high_slope: int) -> tuple[int, int] | None:
    """The counts 0 <= x <= `left` with x·low_slope <= low_gap and x·high_slope >= high_gap, as
    (least, most), or None when there are none."""
    lo_x, hi_x = 0, left
    for gap, slope, upper in ((low_gap, low_slope, True), (high_gap, high_slope, False)):
        if slope == 0:
            if (gap < 0) if upper else (gap > 0):
                return None
        elif (slope > 0) == upper:
            hi_x = min(hi_x, gap // slope)
        else:
            lo_x = max(lo_x, -(-gap // slope))
    return None if lo_x > hi_x else (lo_x, hi_x)


def _outward(mid: int, lo: int, hi: int) -> Iterator[int]:
    """lo..hi, starting at `mid` and moving outwards (mid, mid+1, mid-1, mid+2, ...)."""
    yield mid
    for k in range(1, max(mid - lo, hi - mid) + 1):
        if mid + k <= hi:
            yield mid + k
        if mid - k >= lo:
            yield mid - k


def _candidates(
    share: list[float], c: int, vecs: list[list[float]], expect: list[float], target: list[int]
) -> tuple[list[int], list[tuple[int, int, int, list[float]]]]:
    """Whole splits of `c` chunks near the real `share`: the largest-remainder rounding, and every
    move of one or two chunks from one child to another, best first by the squared distance of the
    expected steps from the targets. Returns (rounding, [(to, from, chunks, change of the expected
    steps)]); the rounding itself is the move (-1, -1, 0, ...)."""
    k, L = len(share), len(expect)
    base = [math.floor(v) for v in share]
    for i in sorted(range(k), key=lambda i: base[i] - share[i])[: c - sum(base)]:
        base[i] += 1
    d0 = [0.0] * L
    for i in range(k):
        delta = base[i] - share[i]
        if delta:
            v = vecs[i]
            for j in range(L):
                d0[j] += delta * v[j]
    e0 = [expect[j] + d0[j] - target[j] for j in range(L)]
    out = [(sum(x * x for x in e0), -1, -1, 0, d0)]
    for i, j in itertools.permutations(range(k), 2):
        diff = [a - b for a, b in zip(vecs[i], vecs[j])]
        for m in (1, 2):
            if base[j] >= m:
                err = sum((x + m * y) ** 2 for x, y in zip(e0, diff))
                out.append((err, i, j, m, [a + m * b for a, b in zip(d0, diff)]))
    out.sort(key=lambda z: z[0])
    return base, [(i, j, m, dE) for _, i, j, m, dE in out]
