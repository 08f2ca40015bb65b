"""The flow over dimension sets of one topology in whole grid steps (`Lattice`), the real-valued
guides its searches follow, and the small dense LPs (HiGHS, in process) that build them.

A chunk's order is a path from the empty set (no dimension after it) up to the full set, and edge
(S, d) adds `steps[(S, d)]` to dimension d (`dse.bounds.floor`). The searches on it
(`find_flow`, `exhaustive_flow`) are in `dse.bounds.floorfit`.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

Edge = tuple[int, int]  # (bit mask of the dimensions after d, d)


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
        self.spent = 0  # nodes the last `dse.bounds.floorfit.find_flow` on it visited (for tuning)

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
                objective = np.random.default_rng(int(how)).random(int(self.V.shape[1]))
                v = _lp(self.V, b, objective)
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
