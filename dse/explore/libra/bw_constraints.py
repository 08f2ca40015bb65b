"""Linear constraints on per-dimension bandwidths, and the polytope of allocations they allow.

A study (or LIBRA's optimum, `dse.explore.libra.model`) may restrict the per-NPU bandwidths
``bw0 .. bw{n-1}`` (GB/s, dimension 0 innermost) by linear (in)equalities written as strings::

    "bw0 + bw1 + bw2 + bw3 == 1000"     "sum == 1000"         (sum, or total: every bw added up)
    "bw0 >= bw1"                        "bw2 + bw3 == 200"    "2*bw1 - bw0 <= 10"    "0.5 * bw0 = 250"

Syntax: two sides joined by one of ``==`` (or ``=``), ``<=``, ``>=``; each side a sum of terms
``[number *] name`` or ``number``, added or subtracted, numbers in decimal or scientific notation
(``1e3``). Names are ``bw0`` .. ``bw{n-1}`` (any case) and ``sum``/``total``. A product of two
names, ``<`` or ``>``, an unknown name, a missing operator or a constraint left with no bandwidth
is one `InputError` naming the constraint.

`BandwidthPolytope` adds the box ``minimum <= bw_d <= maximum`` (minimum > 0, so every time stays
finite) and maps the unit cube onto the allowed allocations (`BandwidthPolytope.point`):

1. the equalities (given, and the inequalities that hold with equality at every allowed point,
   found by one LP each) are solved for some coordinates by Gaussian elimination, choosing pivots
   from the last dimension down, so ``sum == 1000`` makes ``bw{n-1}`` the dependent one; the
   others are the `free` coordinates;
2. ``point(u)`` takes the free coordinates in order: the i-th is ``lo + u_i·(hi - lo)``, where
   [lo, hi] is its range (two LPs, HiGHS) given the ones before it, and the dependent coordinates
   follow from the equalities, each from its own row, so an equality holds to the last bit or two.

Every u in [0,1]^free gives an allowed point (each range is taken inside the polytope's section
through the earlier choices, which is never empty), and every allowed point is reached (its own
coordinates lie in those ranges). Points satisfy every row to `TOLERANCE` relative to the row's
scale (`LinearConstraint.holds`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dse.core.errors import InputError
from dse.explore.libra.small_lp import SmallLp

SENSES = ("==", "<=", ">=")
#: relative tolerance of `LinearConstraint.holds` and `BandwidthPolytope.contains`
TOLERANCE = 1e-9
#: LIBRA's constraint sets (its README and inputs/constraints), and one total alone
LIBRA_CONSTRAINTS: dict[str, tuple[str, ...]] = {
    "total_bw_500gbps": ("sum == 500",),
    "multiple_constraints": ("sum == 1000", "bw0 == 500", "bw0 >= bw1", "bw1 >= bw2", "bw2 + bw3 == 200"),
    "total_bw_1000gbps": ("sum == 1000",),
}
_TOKEN = re.compile(
    r"\s*(?:(\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_][A-Za-z0-9_]*)|(<=|>=|==|[=<>+\-*]))"
)


@dataclass(frozen=True)
class LinearConstraint:
    """``Σ coeffs[d]·bw_d  sense  rhs``, as parsed from `text`."""

    coeffs: tuple[float, ...]
    sense: str
    rhs: float
    text: str = ""

    def __post_init__(self) -> None:
        where = f"constraint {self.text!r}"
        if self.sense not in SENSES:
            raise InputError(where, f"sense {self.sense!r}", " ".join(SENSES))
        if not all(math.isfinite(c) for c in self.coeffs) or not math.isfinite(self.rhs):
            raise InputError(where, "a coefficient or bound is not finite", "finite numbers")
        if not any(self.coeffs):
            raise InputError(where, "no bandwidth left once the terms are collected", "a constraint on bw0, bw1, ...")

    def lhs(self, bw: Sequence[float]) -> float:
        """The left-hand side at `bw`: Σ coeffs[d]·bw[d]."""
        return math.fsum(c * b for c, b in zip(self.coeffs, bw))

    def holds(self, bw: Sequence[float], tol: float = TOLERANCE) -> bool:
        """Whether `bw` satisfies the constraint to `tol` x max(1, |rhs|, Σ|coeff·bw|)."""
        slack = tol * max(1.0, abs(self.rhs), math.fsum(abs(c * b) for c, b in zip(self.coeffs, bw)))
        v = self.lhs(bw) - self.rhs
        return {"==": abs(v) <= slack, "<=": v <= slack, ">=": v >= -slack}[self.sense]


def _tokens(text: str, where: str) -> list[tuple[str, str]]:
    """(kind, token) pairs: ``num``, ``name``, ``op``."""
    out, pos = [], 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise InputError(
                where, f"unexpected {text[pos:].strip()[:20]!r}", "numbers, bw0 .. bwN, sum, + - * == <= >="
            )
        kind = "num" if m.group(1) else "name" if m.group(2) else "op"
        out.append((kind, m.group(m.lastindex or 0)))
        pos = m.end()
    return out


def _name(tok: str, ndims: int, where: str) -> list[float]:
    """A name's coefficient vector: ``bwI`` or ``sum``/``total``."""
    low = tok.lower()
    if low in ("sum", "total"):
        return [1.0] * ndims
    m = re.fullmatch(r"bw(\d+)", low)
    if m is None or int(m.group(1)) >= ndims:
        raise InputError(where, f"unknown variable {tok!r} for {ndims} dimensions", f"bw0 to bw{ndims - 1}, sum, total")
    vec = [0.0] * ndims
    vec[int(m.group(1))] = 1.0
    return vec


def _side(toks: list[tuple[str, str]], ndims: int, where: str) -> tuple[list[float], float]:
    """A sum of terms: (coefficients, constant)."""
    if not toks:
        raise InputError(where, "a side of the comparison is empty", "e.g. bw0 + bw1 == 500")
    if toks[-1][0] == "op":
        raise InputError(where, f"a side ends with {toks[-1][1]!r}", "a term after every + - *")
    coeffs, const = [0.0] * ndims, 0.0
    sign, factor, vec, expect_term = 1.0, 1.0, None, True
    for kind, tok in [*toks, ("op", "+")]:
        if expect_term:
            if kind == "op" and tok in "+-" and factor == 1.0 and vec is None:  # a sign before a term
                sign = -sign if tok == "-" else sign
                continue
            if kind == "op":
                raise InputError(where, f"{tok!r} where a number or a name belongs", "terms like 2*bw0 or 500")
            if kind == "num":
                factor *= float(tok)
            elif vec is not None:
                raise InputError(where, f"non-linear term: a product of two names ({tok})", "linear terms like 2*bw0")
            else:
                vec = _name(tok, ndims, where)
            expect_term = False
        elif kind == "op" and tok == "*":
            expect_term = True
        elif kind == "op" and tok in "+-":
            term = sign * factor
            if vec is None:
                const += term
            else:
                coeffs = [c + term * v for c, v in zip(coeffs, vec)]
            sign, factor, vec, expect_term = (-1.0 if tok == "-" else 1.0), 1.0, None, True
        else:
            raise InputError(where, f"{tok!r} follows a term without an operator", "+, - or * between terms")
    return coeffs, const


def parse_constraint(text: str, ndims: int, field_name: str = "constraints") -> LinearConstraint:
    """One constraint string (module docstring) on `ndims` bandwidths."""
    where = f"{field_name}: {text!r}"
    if not isinstance(text, str) or not text.strip():
        raise InputError(field_name, f"{text!r} is not a constraint", 'a string like "bw0 + bw1 == 500"')
    toks = _tokens(text, where)
    ops = [i for i, (k, t) in enumerate(toks) if k == "op" and t in ("==", "=", "<=", ">=", "<", ">")]
    if not ops:
        raise InputError(where, "no comparison", "==, <=, >= (= is ==)")
    if len(ops) > 1:
        raise InputError(where, "more than one comparison", "one per constraint: write a range as two constraints")
    sense = toks[ops[0]][1]
    if sense in ("<", ">"):
        raise InputError(where, f"strict inequality {sense!r}", "<= or >=")
    left, lc = _side(toks[: ops[0]], ndims, where)
    right, rc = _side(toks[ops[0] + 1 :], ndims, where)
    coeffs = tuple(float(a - b) + 0.0 for a, b in zip(left, right))
    if not all(math.isfinite(c) for c in coeffs) or not math.isfinite(rc - lc):
        raise InputError(where, "a number is too large", "finite numbers")
    if not any(coeffs):
        raise InputError(where, "no bandwidth left once the terms are collected", "a constraint on bw0, bw1, ...")
    return LinearConstraint(coeffs, "==" if sense == "=" else sense, rc - lc + 0.0, text.strip())


def parse_constraints(
    texts: Sequence[str | LinearConstraint], ndims: int, field_name: str = "constraints"
) -> tuple[LinearConstraint, ...]:
    """A list of constraint strings (or parsed constraints), each checked for `ndims` bandwidths."""
    if isinstance(texts, str):
        raise InputError(field_name, "a single string", 'a list of strings, e.g. ["sum == 1000"]')
    out = []
    for i, t in enumerate(texts):
        if isinstance(t, LinearConstraint):
            if len(t.coeffs) != ndims:
                raise InputError(f"{field_name}[{i}]", f"{len(t.coeffs)} coefficients", f"{ndims}, one per dimension")
            out.append(t)
        else:
            out.append(parse_constraint(t, ndims, f"{field_name}[{i}]"))
    return tuple(out)


@dataclass(frozen=True)
class BandwidthPolytope:
    """The allocations ``minimum <= bw_d <= maximum`` (None: no upper bound) meeting `constraints`.

    Construction solves a few LPs: it refuses, as one `InputError`, constraints no allocation meets
    and ones that let a bandwidth grow without limit. `free`, `ranges` and `point` are described in
    the module docstring."""

    constraints: tuple[LinearConstraint, ...]
    ndims: int
    minimum: float = 1e-3
    maximum: float | None = None
    free: int = field(init=False, compare=False)
    #: per dimension, the least and largest bandwidth of an allowed allocation
    ranges: tuple[tuple[float, float], ...] = field(init=False, compare=False, repr=False)
    #: the free coordinates' dimensions, in the order `point` takes them
    free_dims: tuple[int, ...] = field(init=False, compare=False, repr=False)
    #: the equalities solved for their pivot, in the order to evaluate them: (pivot, coeffs, rhs)
    _pivots: tuple[tuple[int, tuple[float, ...], float], ...] = field(init=False, compare=False, repr=False)

    @classmethod
    def parse(
        cls,
        texts: Sequence[str | LinearConstraint],
        ndims: int,
        *,
        minimum: float = 1e-3,
        maximum: float | None = None,
        field_name: str = "constraints",
    ) -> BandwidthPolytope:
        """The polytope of constraint strings (the module docstring's syntax)."""
        return cls(parse_constraints(texts, ndims, field_name), ndims, minimum, maximum)

    def __post_init__(self) -> None:
        if isinstance(self.ndims, bool) or not isinstance(self.ndims, int) or not 1 <= self.ndims <= 64:
            raise InputError("ndims", f"{self.ndims!r}", "1 to 64 dimensions")
        if not (isinstance(self.minimum, (int, float)) and math.isfinite(self.minimum) and self.minimum > 0):
            raise InputError("minimum bandwidth", f"{self.minimum!r} GB/s", "a positive number")
        hi = self.maximum
        if hi is not None and not (isinstance(hi, (int, float)) and self.minimum <= hi < math.inf):
            raise InputError("maximum bandwidth", f"{hi!r} GB/s", f"a finite number >= the minimum {self.minimum:g}")
        object.__setattr__(self, "constraints", parse_constraints(tuple(self.constraints), self.ndims))
        ranges, equalities = self._explore()
        explicit = sum(c.sense == "==" for c in self.constraints)
        pivots, free = _eliminate(equalities, self.ndims, explicit)
        object.__setattr__(self, "ranges", ranges)
        object.__setattr__(self, "_pivots", pivots)
        object.__setattr__(self, "free_dims", free)
        object.__setattr__(self, "free", len(free))

    @property
    def upper(self) -> float:
        """Every bandwidth's upper bound: `maximum`, or infinity without one."""
        return math.inf if self.maximum is None else float(self.maximum)

    def lp(self) -> SmallLp:
        """A fresh LP over the bandwidths (columns 0..n-1) holding the box and every constraint."""
        lp = SmallLp([float(self.minimum)] * self.ndims, [self.upper] * self.ndims)
        for c in self.constraints:
            lo = c.rhs if c.sense in ("==", ">=") else -math.inf
            hi = c.rhs if c.sense in ("==", "<=") else math.inf
            lp.add_row(lo, hi, {d: v for d, v in enumerate(c.coeffs) if v})
        return lp

    def _explore(self) -> tuple[tuple[tuple[float, float], ...], list[tuple[tuple[float, ...], float]]]:
        """Per-dimension ranges, and the equalities: given ones, inequalities tight at every allowed
        point, and dimensions with a single allowed value."""
        lp = self.lp()
        lp.set_cost([0.0] * self.ndims)
        if lp.solve() != "optimal":
            texts = ", ".join(c.text or "?" for c in self.constraints)
            raise InputError("constraints", f"no allocation meets them all with every bw >= {self.minimum:g}: {texts}")
        ranges = []
        for d in range(self.ndims):
            s_lo, lo = lp.extreme(d, maximise=False)
            s_hi, hi = lp.extreme(d, maximise=True)
            if s_hi != "optimal" or s_lo != "optimal":
                raise InputError(
                    "constraints",
                    f"bw{d} can grow without limit",
                    "a maximum bandwidth, or constraints that bound every bw (e.g. sum == 1000)",
                )
            ranges.append((lo, max(lo, hi)))
        eqs = [(c.coeffs, c.rhs) for c in self.constraints if c.sense == "=="]
        for c in self.constraints:
            if c.sense != "==" and _max_slack(lp, c) <= TOLERANCE * max(1.0, abs(c.rhs)):
                eqs.append((c.coeffs, c.rhs))
        for d, (lo, hi) in enumerate(ranges):
            if hi - lo <= TOLERANCE * max(1.0, hi):
                eqs.append((tuple(1.0 if j == d else 0.0 for j in range(self.ndims)), (lo + hi) / 2))
        return tuple(ranges), eqs

    def point(self, u: Sequence[float]) -> tuple[float, ...]:
        """The allowed allocation of `u` in [0,1]^free (module docstring): deterministic, onto."""
        if len(u) != self.free or not all(_unit(v) for v in u):
            raise InputError("u", f"{list(u)!r}", f"{self.free} numbers from 0 to 1")
        x = np.zeros(self.ndims)
        lp = self.lp() if self.free else None
        for ui, col in zip(u, self.free_dims):
            assert lp is not None
            lo, hi = self._range(lp, col)
            x[col] = min(hi, max(lo, lo + float(ui) * (hi - lo)))
            lp.set_col_bounds(col, x[col], x[col])
        for col, coeffs, rhs in self._pivots:
            rest = math.fsum(c * x[j] for j, c in enumerate(coeffs) if j != col and c)
            x[col] = (rhs - rest) / coeffs[col]
        return tuple(float(v) for v in x)

    def coordinates(self, bw: Sequence[float]) -> tuple[float, ...]:
        """The u in [0,1]^free that `point` maps to the allowed allocation `bw` (its inverse, up to
        rounding; a coordinate whose range is a single value gives 0)."""
        if not self.contains(bw):
            raise InputError(
                "bandwidths", f"{list(bw)!r} is not an allowed allocation", "one that meets the constraints"
            )
        lp = self.lp()
        u = []
        for col in self.free_dims:
            lo, hi = self._range(lp, col)
            v = min(hi, max(lo, float(bw[col])))  # within the section, whatever the rounding
            u.append((v - lo) / (hi - lo) if hi > lo else 0.0)
            lp.set_col_bounds(col, v, v)
        return tuple(u)

    @staticmethod
    def _range(lp: SmallLp, col: int) -> tuple[float, float]:
        """The least and largest value of bandwidth `col` in the LP's section."""
        s_lo, lo = lp.extreme(col, maximise=False)
        s_hi, hi = lp.extreme(col, maximise=True)
        if s_lo != "optimal" or s_hi != "optimal":  # pragma: no cover - the section is never empty
            raise RuntimeError(f"bandwidth polytope: the range of bw{col} is {s_lo}/{s_hi}")
        return lo, max(lo, hi)

    def contains(self, bw: Sequence[float], tol: float = TOLERANCE) -> bool:
        """Whether `bw` is an allowed allocation, each row and bound to `tol` (relative)."""
        if len(bw) != self.ndims or not all(math.isfinite(b) for b in bw):
            return False
        lo, hi = self.minimum * (1 - tol), self.upper * (1 + tol)
        return all(lo <= b <= hi for b in bw) and all(c.holds(bw, tol) for c in self.constraints)


def _unit(v: object) -> bool:
    """Whether `v` is a number (not a bool) from 0 to 1."""
    try:
        return not isinstance(v, bool) and 0.0 <= float(v) <= 1.0  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _max_slack(lp: SmallLp, c: LinearConstraint) -> float:
    """The largest slack of an inequality over the polytope (the LP's own rows)."""
    sign = 1.0 if c.sense == ">=" else -1.0  # slack = sign·(coeffs·x - rhs)
    lp.set_cost([-sign * v for v in c.coeffs])
    if lp.solve() != "optimal":
        return math.inf
    return sign * (float(np.dot(c.coeffs, lp.x)) - c.rhs)


def _eliminate(
    equalities: list[tuple[tuple[float, ...], float]], n: int, explicit: int
) -> tuple[tuple[tuple[int, tuple[float, ...], float], ...], tuple[int, ...]]:
    """Gaussian elimination with pivots chosen from the last column down (one of the first
    `explicit` rows, the given equalities, where one can serve; else the largest relative entry):
    the pivots in the order to evaluate them, and the free columns. A pivot's row keeps only free
    columns and pivots evaluated before it."""
    rows = [np.r_[np.asarray(a, dtype=float), b] for a, b in equalities]
    scale = [float(np.max(np.abs(r[:n]))) for r in rows]  # an entry below 1e-9 of it is rounding
    remaining = list(range(len(rows)))
    chosen: list[tuple[int, tuple[float, ...], float]] = []
    for col in reversed(range(n)):
        scores = {r: abs(rows[r][col]) / scale[r] for r in remaining}
        usable = [r for r in remaining if scores[r] > 1e-9]
        if not usable:
            continue
        # a given equality before an implied one (so it holds exactly), then the largest entry
        best = max(usable, key=lambda r: (r < explicit, scores[r], -r))
        remaining.remove(best)
        piv = rows[best]
        chosen.append((col, tuple(float(v) for v in piv[:n]), float(piv[n])))
        for r in remaining:
            rows[r] = rows[r] - rows[r][col] / piv[col] * piv
            rows[r][:n][np.abs(rows[r][:n]) <= 1e-12 * scale[r]] = 0.0
            rows[r][col] = 0.0
    pivots = {c for c, _, _ in chosen}
    return tuple(reversed(chosen)), tuple(c for c in range(n) if c not in pivots)
