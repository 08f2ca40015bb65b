"""A schedule that meets the load-only ILP's whole-step floor exactly, found without a MIP solver.

The floor (`dse.bounds.api._Grid`) is a proven lower bound on the load-only ILP, so a schedule whose
busiest dimension is at the floor is optimal and nothing is left to prove. Finding one is an
exact-fit problem (every dimension's load at its cap, to the grid step) that LP-based branch and
bound is slow at (tens of milliseconds to seconds at 4-5 dimensions) and that this module's
searches usually settle in a few hundred nodes. `dse.bounds.api._floor_search` runs them.

They work on the ILP's flow over dimension sets (`bounds._flow_edges`) in whole grid steps: a
chunk's order is a path from the empty set (no dimension after it) up to the full set, and edge
(S, d) adds `steps[(S, d)]` to dimension d. A target gives each live dimension's steps exactly.

`Lattice.find`, a guided search (not exhaustive: its None proves nothing):

1. A guide: real chunk counts per order that meet the target (`Lattice.guide`: a projection of
   the uniform mix, the most central counts by LP, or those moved towards a seeded random vertex).
2. Top down over the sets of three or more dimensions (largest first): a set's whole chunks are
   split over the dimension that comes just before it; candidate splits near the guide (rounded,
   then one or two chunks moved), ranked by how close they keep the expected final steps to the
   target (error diffusion: a coarse rounding is corrected by the finer splits below it). Each
   dimension's steps must stay within what the chunks not yet placed can still add, at least and
   at most, or the branch is cut.
3. At each leaf the two-dimension sets are split exactly: one unknown per pair of dimensions, one
   equation per dimension, solved by an exhaustive search with interval pruning.

`Lattice.exhaustive` tries every split instead (values nearest a guide, or the middle, first): a schedule,
or a proof that none meets the target. Both are bounded by node budgets, so they are deterministic
and cheap when they give up; the caller then falls back to the MIP solver.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

Edge = tuple[int, int]  # (bit mask of the dimensions after d, d)


def targets(
    wt: list[int], caps: list[int], slack: int, *, limit: int, max_visits: int = 100_000
) -> list[list[int]] | None:
    """Step vectors m <= caps with Σ wt·(caps - m) = slack: all of them, or the first `limit` (in
    lexicographic order of caps - m). None when the enumeration gives up after `max_visits` partial
    vectors: the list would then be neither complete nor `limit` long."""
    out: list[list[int]] = []
    visits = [0]

    def rec(j: int, rem: int, acc: list[int]) -> None:
        visits[0] += 1
        if len(out) >= limit or visits[0] > max_visits:
            return
        if j == len(wt) - 1:
            if rem % wt[j] == 0 and rem // wt[j] <= caps[j]:
                out.append([c - s for c, s in zip(caps, acc + [rem // wt[j]])])
            return
        for s in range(min(rem // wt[j], caps[j]) + 1):
            rec(j + 1, rem - s * wt[j], acc + [s])

    rec(0, slack, [])
    return None if visits[0] > max_visits and len(out) < limit else out


class OutOfBudget(Exception):
    """An exhaustive search ran out of its node budget: it proved nothing."""


class Lattice:
    """The flow over dimension sets of one topology in whole grid steps, with what every search
    on it shares: the orders as paths, per-set step ranges, the order sets are split in, and the
    pairs of dimensions the leaves solve exactly."""

    def __init__(self, steps: dict[Edge, int], nd: int, live: list[int]) -> None:
        self.steps, self.nd, self.live = steps, nd, list(live)
        full = self.full = (1 << nd) - 1
        L = len(live)
        self.li = li = {d: j for j, d in enumerate(live)}
        self.members = members = [[d for d in range(nd) if s >> d & 1] for s in range(full + 1)]
        self.paths = []
        for o in itertools.permutations(range(nd)):
            after, es = 0, []
            for d in reversed(o):
                es.append((after, d))
                after |= 1 << d
            self.paths.append(es)
        self.V = np.array(
            [[sum(steps[e] for e in es if e[1] == d) for d in live] + [1] for es in self.paths], dtype=float
        ).T
        # least and most steps one chunk at set s still adds to each dimension in s (0 elsewhere), by
        # dimension (`exhaustive`) and by live dimension (`find`)
        self.lo_all = [[0] * nd for _ in range(full + 1)]
        self.hi_all = [[0] * nd for _ in range(full + 1)]
        for s in range(1, full + 1):
            for d in members[s]:
                rest = s & ~(1 << d)
                vals = [steps[(a, d)] for a in range(full + 1) if a & rest == a]
                self.lo_all[s][d], self.hi_all[s][d] = min(vals), max(vals)
        self.lo = [[row[d] for d in live] for row in self.lo_all]
        self.hi = [[row[d] for d in live] for row in self.hi_all]
        self.by_size = sorted(range(1, full + 1), key=lambda s: len(members[s]))
        self.top_down = sorted(range(1, full + 1), key=lambda s: (-len(members[s]), -s))
        self.nodes = [s for s in self.top_down if len(members[s]) >= 3]
        # an edge's own steps as a vector over live dimensions
        self.own = {e: [0] * L for e in steps}
        for (a, d), v in steps.items():
            if d in li:
                self.own[(a, d)][li[d]] = v
        # leaves: set {a, b}; m chunks through ({a}, b) then (∅, a), the rest through ({b}, a) then (∅, b)
        self.pairs = []
        for a, b in itertools.combinations(range(nd), 2):
            base = [0] * L  # steps when m = 0, per chunk
            slope = [0] * L  # change per unit of m
            if a in li:
                base[li[a]] += steps[(1 << b, a)]
                slope[li[a]] += steps[(0, a)] - steps[(1 << b, a)]
            if b in li:
                base[li[b]] += steps[(0, b)]
                slope[li[b]] += steps[(1 << a, b)] - steps[(0, b)]
            self.pairs.append(((1 << a) | (1 << b), a, b, base, slope))
        self._central: dict = {}  # (target, n) -> central counts, shared by the guides built on them
        self.spent = 0  # nodes the last `find` visited (for tuning and benchmarks)

    def guide(self, n: int, target: list[int], how: str | int) -> dict[Edge, float] | None:
        """Real flows of `n` chunks meeting `target`, or None when no real counts do. `how`:
        ``"projection"`` (the uniform mix projected onto the targets, clipped at zero: near them,
        not always on them), ``"central"`` (the least order count as large as an LP can make it),
        or a number k: the central counts moved a fifth of the way to the vertex that a random
        objective (seeded with k) picks, a different guess each k and the same on every run."""
        b = np.array(list(target) + [n], dtype=float)
        key = (tuple(target), n)
        try:
            if how == "projection":
                raise ImportError  # (the same path as without HiGHS)
            if key not in self._central:
                self._central[key] = _lp(self.V, b, None)
            x = self._central[key]
            if x is not None and how != "central":
                c = np.random.default_rng(int(how)).random(self.V.shape[1])
                v = _lp(self.V, b, c)
                x = None if v is None else 0.8 * x + 0.2 * v
        except ImportError:  # projection, or no HiGHS for the LPs
            x = _projection(self.V, b)
        if x is None:
            return None
        real = dict.fromkeys(self.steps, 0.0)
        for c, es in zip(x.tolist(), self.paths):
            for e in es:
                real[e] += c
        return real

    def find(self, n: int, target: list[int], how: str | int, *, budget: int) -> dict[Edge, int] | None:
        """An integer flow of `n` chunks whose steps on each live dimension equal `target`, or None
        when the search (module docstring) finds none within `budget` nodes; guided as `guide(how)`."""
        steps, L, members, lo, hi, own = self.steps, len(self.live), self.members, self.lo, self.hi, self.own
        real = self.guide(n, target, how)
        if real is None:
            return None  # not even real counts meet the targets
        full = self.full
        through = [0.0] * (full + 1)
        for (a, d), v in real.items():
            through[a | 1 << d] += v
        # expected steps per chunk below each set under the guidance (g); per edge into s: vec
        g = [[0.0] * L for _ in range(full + 1)]
        vec: dict[Edge, list[float]] = {}
        for s in self.by_size:
            acc = [0.0] * L
            k = len(members[s])
            for d in members[s]:
                child = s ^ (1 << d)
                o = own[(child, d)]
                v = [gc + oc for gc, oc in zip(g[child], o)]
                vec[(s, d)] = v
                p = real[(child, d)] / through[s] if through[s] > 1e-12 else 1.0 / k
                for j in range(L):
                    acc[j] += p * v[j]
            g[s] = acc
        nodes = self.nodes
        count = [0] * (full + 1)
        count[full] = n
        flow = dict.fromkeys(steps, 0)
        expect = [n * v for v in g[full]]
        committed = [0] * L
        low = [n * v for v in lo[full]]  # committed steps + least the open sets can still add
        high = [n * v for v in hi[full]]
        spent = [0]
        found: list = [None]

        def apply(s: int, split: list[int], sign: int) -> None:
            c = sign * count[s]
            los, his = lo[s], hi[s]
            for j in range(L):
                low[j] -= c * los[j]
                high[j] -= c * his[j]
            for k, d in enumerate(members[s]):
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

        def rec(i: int) -> bool:
            spent[0] += 1
            if spent[0] > budget:
                return True  # out of budget: stop the search (found stays None)
            if i == len(nodes):
                out = self._leaves(flow, count, [t - c for t, c in zip(target, committed)], spent, budget)
                if out is not None:
                    found[0] = out
                    return True
                return False
            s = nodes[i]
            c = count[s]
            if c == 0:
                return rec(i + 1)
            ds = members[s]
            share = [c * (real[(s ^ (1 << d), d)] / through[s] if through[s] > 1e-12 else 1.0 / len(ds)) for d in ds]
            vs = [vec[(s, d)] for d in ds]
            # what each chunk sent to child k adds at least / at most (its edge, then the child's range)
            lo_k = [[a + b for a, b in zip(lo[s ^ (1 << d)], own[(s ^ (1 << d), d)])] for d in ds]
            hi_k = [[a + b for a, b in zip(hi[s ^ (1 << d)], own[(s ^ (1 << d), d)])] for d in ds]
            base, moves = _candidates(share, c, vs, expect, target)
            # the least and most final steps with the rounded split; a move shifts them linearly
            low_b = [low[j] - c * lo[s][j] + sum(m * v[j] for m, v in zip(base, lo_k)) for j in range(L)]
            high_b = [high[j] - c * hi[s][j] + sum(m * v[j] for m, v in zip(base, hi_k)) for j in range(L)]
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
                split = list(base)
                if a >= 0:
                    split[a] += m
                    split[b] -= m
                apply(s, split, 1)
                for j in range(L):
                    expect[j] += dE[j]
                if rec(i + 1):
                    return True
                for j in range(L):
                    expect[j] -= dE[j]
                apply(s, split, -1)
                if spent[0] > budget:
                    return True
            return False

        rec(0)
        self.spent = spent[0]
        return found[0]

    def exhaustive(
        self, n: int, target: list[int], *, budget: list[int], guide: dict[Edge, float] | None = None
    ) -> dict[Edge, int] | None:
        """An integer flow of `n` chunks whose steps equal `target` on every dimension (give 0 where a
        dimension has no steps), or None when there is none: this search is exhaustive, so None is a
        proof. `budget` is a one-item list of nodes left, spent in place (a budget several searches
        share); raises `OutOfBudget` when it runs out. `guide`: real flows (`Lattice.guide`) whose
        shares are tried first; without it, the middle of each range is.

        Top down over the sets, as `Lattice.find`, but every split is tried: the chunks at a set are
        given its dimensions one by one, each the whole range of counts that keeps every dimension's
        steps within what the chunks not yet placed can still add at least and at most.
        """
        steps, nd, full, members = self.steps, self.nd, self.full, self.members
        lo, hi, order = self.lo_all, self.hi_all, self.top_down
        share = {}  # the guide's share of a set's chunks per edge into it
        if guide is not None:
            through = [0.0] * (full + 1)
            for (a, d), v in guide.items():
                through[a | 1 << d] += v
            share = {(a, d): v / through[a | 1 << d] for (a, d), v in guide.items() if through[a | 1 << d] > 1e-12}
        cnt = [0] * (full + 1)
        cnt[full] = n
        f_lo = [n * lo[full][d] for d in range(nd)]
        f_hi = [n * hi[full][d] for d in range(nd)]
        t = list(target)
        flow: dict[Edge, int] = {}
        cnt_s = [0]  # chunks at the set being split

        def tick() -> None:
            budget[0] -= 1
            if budget[0] < 0:
                raise OutOfBudget

        def node(pos: int) -> bool:
            tick()
            while pos < len(order) and cnt[order[pos]] == 0:
                pos += 1
            if pos == len(order):
                return not any(t)
            s = order[pos]
            c = cnt[s]
            ds = members[s]
            cnt[s] = 0
            for d in ds:
                f_lo[d] -= c * lo[s][d]
                f_hi[d] -= c * hi[s][d]
            saved = cnt_s[0]
            cnt_s[0] = c
            ok = split(s, ds, 0, c, pos)
            cnt_s[0] = saved
            for d in ds:
                f_lo[d] += c * lo[s][d]
                f_hi[d] += c * hi[s][d]
            cnt[s] = c
            return ok

        def bounds_left(ds: list[int], i: int, s: int, d: int) -> tuple[int, int]:
            others = [s & ~(1 << g) for g in ds[i + 1 :]]
            return min(lo[o][d] for o in others), max(hi[o][d] for o in others)

        def split(s: int, ds: list[int], i: int, left: int, pos: int) -> bool:
            """Give x of the `left` chunks at s the dimension ds[i] next, then the rest."""
            tick()
            if i == len(ds):
                return all(f_lo[d] <= t[d] <= f_hi[d] for d in range(nd)) and node(pos + 1)
            d = ds[i]
            child = s & ~(1 << d)
            coef = steps[(child, d)]
            if i + 1 < len(ds):  # the chunks not given d go to later siblings: bound what they add to d
                c_lo, c_hi = bounds_left(ds, i, s, d)
                lo_x, hi_x = 0, left
                # f_lo + left·c_lo + x·(coef - c_lo) <= t_d <= f_hi + left·c_hi + x·(coef - c_hi)
                for gap, slope, upper in (
                    (t[d] - f_lo[d] - left * c_lo, coef - c_lo, True),
                    (t[d] - f_hi[d] - left * c_hi, coef - c_hi, False),
                ):
                    if slope == 0:
                        if (gap < 0) if upper else (gap > 0):
                            return False
                    elif (slope > 0) == upper:
                        hi_x = min(hi_x, gap // slope)
                    else:
                        lo_x = max(lo_x, -(-gap // slope))
                if lo_x > hi_x:
                    return False
                # the guide's share of the set's chunks, of which `left` are still to place
                mid = cnt_s[0] * share[(child, d)] if (child, d) in share else (lo_x + hi_x) / 2
                xs = sorted(range(lo_x, hi_x + 1), key=lambda x: abs(x - mid))
            else:
                xs = [left]
            for x in xs:
                if x:
                    t[d] -= x * coef
                    cnt[child] += x
                    for e in members[child]:
                        f_lo[e] += x * lo[child][e]
                        f_hi[e] += x * hi[child][e]
                if i + 1 < len(ds):
                    c_lo, c_hi = bounds_left(ds, i, s, d)
                    fits = f_lo[d] + (left - x) * c_lo <= t[d] <= f_hi[d] + (left - x) * c_hi
                else:
                    fits = f_lo[d] <= t[d] <= f_hi[d]
                ok = fits and split(s, ds, i + 1, left - x, pos)
                if ok and x:
                    flow[(child, d)] = flow.get((child, d), 0) + x
                if x:
                    t[d] += x * coef
                    cnt[child] -= x
                    for e in members[child]:
                        f_lo[e] -= x * lo[child][e]
                        f_hi[e] -= x * hi[child][e]
                if ok:
                    return True
            return False

        if not node(0):
            return None
        out = dict.fromkeys(steps, 0)
        out.update(flow)
        return out

    def _leaves(
        self, flow: dict[Edge, int], count: list[int], need: list[int], spent: list[int], budget: int
    ) -> dict[Edge, int] | None:
        """Split the chunks of every two-dimension set so that the live dimensions' remaining steps
        are exactly `need` (an exhaustive search with interval pruning); None if there is none.
        Each node visited counts in `spent`; past `budget` the search stops (None, proving nothing)."""
        L = len(need)
        need = list(need)
        pairs = []
        for s, _a, _b, base, slope in self.pairs:
            c = count[s]
            if c:
                for j in range(L):
                    need[j] -= c * base[j]
                pairs.append((c, slope))
        P = len(pairs)
        # the range of what pairs i.. can still add to each dimension (suffix sums), for pruning
        rlo = [[0] * L for _ in range(P + 1)]
        rhi = [[0] * L for _ in range(P + 1)]
        for i in range(P - 1, -1, -1):
            c, slope = pairs[i]
            for j in range(L):
                rlo[i][j] = rlo[i + 1][j] + min(0, c * slope[j])
                rhi[i][j] = rhi[i + 1][j] + max(0, c * slope[j])
        m = [0] * P

        def rec(i: int) -> bool:
            spent[0] += 1
            if spent[0] > budget:
                return False
            if i == P:
                return not any(need)
            c, slope = pairs[i]
            nlo, nhi = rlo[i + 1], rhi[i + 1]
            lo_m, hi_m = 0, c  # values of m that keep every dimension within reach of the later pairs
            for j in range(L):
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
                for j in range(L):
                    need[j] -= v * slope[j]
                if rec(i + 1):
                    m[i] = v
                    return True
                for j in range(L):
                    need[j] += v * slope[j]
            return False

        if any(not rlo[0][j] <= need[j] <= rhi[0][j] for j in range(L)) or not rec(0):
            return None
        out = dict(flow)
        k = 0
        for s, a, b, _, _ in self.pairs:
            c = count[s]
            if c:
                v = m[k]
                k += 1
                out[(1 << a, b)] += v
                out[(0, a)] += v
                out[(1 << b, a)] += c - v
                out[(0, b)] += c - v
        return out


def _outward(mid: int, lo: int, hi: int) -> Iterator[int]:
    """lo..hi, starting at `mid` and moving outwards (mid, mid+1, mid-1, mid+2, ...)."""
    yield mid
    for k in range(1, max(mid - lo, hi - mid) + 1):
        if mid + k <= hi:
            yield mid + k
        if mid - k >= lo:
            yield mid - k


def _projection(V: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The uniform mix projected onto V x = b and clipped at zero, a few times over."""
    P = V.shape[1]
    x = np.full(P, b[-1] / P)
    pinv = np.linalg.pinv(V)
    for _ in range(8):
        x = np.maximum(x + pinv @ (b - V @ x), 0.0)
    return x


def highs_lp(
    A: np.ndarray,
    cost: np.ndarray,
    col_lower: np.ndarray,
    col_upper: np.ndarray,
    row_lower: np.ndarray,
    row_upper: np.ndarray,
) -> Any:
    """Minimise cost·x subject to row_lower <= A x <= row_upper and the column bounds, in process
    through highspy (a small dense LP: building it this way costs far less than a PuLP model).
    Returns the solved `highspy.Highs`, or None unless HiGHS calls it optimal. np.inf is no bound."""
    import highspy

    inf = highspy.kHighsInf
    nz = (A != 0).T
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    lp = highspy.HighsLp()
    lp.num_row_, lp.num_col_ = A.shape
    lp.col_cost_ = np.asarray(cost, dtype=float)
    lp.col_lower_, lp.col_upper_ = (np.clip(np.asarray(v, dtype=float), -inf, inf) for v in (col_lower, col_upper))
    lp.row_lower_, lp.row_upper_ = (np.clip(np.asarray(v, dtype=float), -inf, inf) for v in (row_lower, row_upper))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.r_[0, np.cumsum(nz.sum(axis=1))].astype(np.int32)
    lp.a_matrix_.index_ = np.nonzero(nz)[1].astype(np.int32)
    lp.a_matrix_.value_ = A.T[nz]
    h.passModel(lp)
    h.run()
    return h if h.getModelStatus() == highspy.HighsModelStatus.kOptimal else None


def _lp(V: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> np.ndarray | None:
    """x >= 0 with V x = b (HiGHS, in process): maximising c·x, or with c None the least entry of
    x (as x = y + mu with y >= 0, maximising mu). None when there is no such x."""
    m, P = V.shape
    if c is None:
        A = np.hstack([V, V.sum(axis=1, keepdims=True)])
        cost = np.r_[np.zeros(P), -1.0]
    else:
        A, cost = V, -np.asarray(c, dtype=float)
    cols = A.shape[1]
    h = highs_lp(A, cost, np.zeros(cols), np.full(cols, np.inf), b, b)
    if h is None:
        return None
    x = np.array(h.getSolution().col_value)
    return np.maximum(x[:P] + x[P], 0.0) if c is None else np.maximum(x, 0.0)


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
