"""Per-dimension bandwidth and latency axes of a sweep file, and the CSV cells that record them.

Keys of ``[sweep]`` (dimension 0 is the innermost, as in a topology's notation)::

    bandwidth = [375, 175, 150, 100]                  # GB/s per NPU, one value per dimension
    bandwidth = [[375, 175, 150, 100], [200, 200, 200, 200]]    # several vectors
    bandwidth = { total = 800, step = 40, min = 40, max = 400, constraints = ["bw0 >= bw1"] }
    latency = [20, 700, 700, 1700]                    # ns per step, or a list of such vectors
    bw0 = [100, 200]   bw3 = 50                       # one dimension each: a value or a list
    lat1 = [500, 700]

A vector replaces every dimension's value, so every topology of the sweep must have as many
dimensions as it has values; ``bwK`` (``latK``) replaces dimension K only (every topology needs
more than K dimensions) and the others keep the topology's own. ``bwK`` keys multiply as a
Cartesian product in the order of K (the largest K varies fastest); they cannot be combined with
``bandwidth``, nor ``latK`` with ``latency``. Bandwidths are in [1e-9, 1e9] GB/s, latencies in
[0, 1e15] ns (`dse.core.limits`).

The generator table takes every split of ``total`` GB/s into the dimensions in whole multiples of
``step``, each between ``min`` (default: ``step``) and ``max`` (default: ``total``), and keeps the
splits that meet every constraint of ``constraints`` (optional; the syntax studies take,
`dse.explore.libra.bw_constraints`: ``"bw0 >= bw1"``, ``"bw2 + bw3 == 200"``, ...). ``total`` must be a
whole multiple of ``step`` (both read as the decimals written: 0.1 divides 0.8). Order: ascending
lexicographic in (bw0, bw1, ..., bw{n-2}); the last dimension takes what is left. The number of
splits is counted in closed form before any is made: above `MAX_SWEEP_POINTS` the generator is
refused in one line, and while the constraints filter, it stops as soon as the points kept (times
the sweep's other axes) pass the limit. All topologies of a sweep with a generator have one
number of dimensions.

A point's topology is its design's with the values substituted (`dataclasses.replace` on its
dimensions); it is run, and recorded in the ``topology`` column, by `exact_notation`, which parses
back to the same dimensions bit for bit.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from dse.core.errors import InputError
from dse.core.limits import MAX_BANDWIDTH, MAX_NS, MAX_SWEEP_POINTS, MIN_BANDWIDTH
from dse.core.topology import Topology, parse_notation
from dse.core.units import parse_positive

#: a substitution: (dimension, value) pairs, dimension order
Subst = tuple[tuple[int, float], ...]
_PER_DIM = re.compile(r"(bw|lat)(0|[1-9][0-9]?)")
GENERATOR_KEYS = ("total", "step", "min", "max", "constraints")


def is_axis_key(key: str) -> bool:
    """Whether a `[sweep]` key is one of this module's: bandwidth, latency, bwK, latK."""
    return key in ("bandwidth", "latency") or _PER_DIM.fullmatch(key) is not None


@dataclass(frozen=True)
class Axes:
    """A sweep's substitutions: bandwidth ones, latency ones (each `((),)` when not swept)."""

    bandwidth: tuple[Subst, ...] = ((),)
    latency: tuple[Subst, ...] = ((),)

    @property
    def swept(self) -> bool:
        """Whether any bandwidth or latency is swept."""
        return self.bandwidth != ((),) or self.latency != ((),)

    def variants(self, topo: Topology) -> Iterator[Topology]:
        """The design `topo` with each bandwidth substitution, then each latency one (the latter fastest)."""
        for bws in self.bandwidth:
            for lats in self.latency:
                if not bws and not lats:
                    yield topo
                    continue
                dims = list(topo.dims)
                for k, v in bws:
                    dims[k] = replace(dims[k], bandwidth=v)
                for k, v in lats:
                    dims[k] = replace(dims[k], latency=v)
                yield Topology(tuple(dims))


def parse_axes(table: dict[str, Any], topos: dict[str, Topology], others: int) -> Axes:
    """The axes of a `[sweep]` table (module docstring) for its designs `topos`; `others` is the
    number of points each substitution makes (the designs times the other parameters), which a
    generator's count is held to."""
    latency = _vectors(table, "latency", "lat", topos)
    bandwidth = _vectors(table, "bandwidth", "bw", topos, others * len(latency))
    return Axes(bandwidth, latency)


def _vectors(
    table: dict[str, Any], key: str, prefix: str, topos: dict[str, Topology], others: int = 1
) -> tuple[Subst, ...]:
    """The substitutions of `key` (vectors or a generator) or of its per-dimension keys."""
    per_dim = sorted((int(m.group(2)), k) for k in table if (m := _PER_DIM.fullmatch(k)) and m.group(1) == prefix)
    if key in table and per_dim:
        raise InputError(
            f"sweep.{per_dim[0][1]}", f"given with sweep.{key}", f"either {key} or {prefix}0, {prefix}1, ..."
        )
    if per_dim:
        return _per_dim(table, per_dim, prefix, topos)
    if key not in table:
        return ((),)
    raw = table[key]
    if isinstance(raw, dict):
        if key == "latency":
            raise InputError("sweep.latency", "a table", "a list of ns per dimension, or a list of such lists")
        return _generate(raw, _common_ndims(topos), others)
    return _lists(raw, key, topos)


def _value(key: str, v: object, field: str) -> float:
    """A bandwidth (GB/s) or latency (ns) within `dse.core.limits`."""
    unit, lo, hi = ("ns", 0.0, MAX_NS) if key == "latency" else ("GB/s", MIN_BANDWIDTH, MAX_BANDWIDTH)
    allowed = f"{lo:g} to {hi:g} {unit}"
    try:
        x = parse_positive(v, field, allow_zero=key == "latency", maximum=hi)
    except InputError as e:
        raise InputError(field, e.problem, allowed) from None
    if x < lo:
        raise InputError(field, f"{v!r} {unit} is too small", allowed)
    return x


def _lists(raw: object, key: str, topos: dict[str, Topology]) -> tuple[Subst, ...]:
    """One vector or a list of vectors, each as long as every topology has dimensions."""
    what = "a list of one number per dimension, or a list of such lists"
    if not isinstance(raw, list) or not raw:
        problem = "an empty list" if raw == [] else f"{raw!r} is not a list"
        raise InputError(f"sweep.{key}", problem, what + (", or a generator table" if key == "bandwidth" else ""))
    nested = isinstance(raw[0], list)
    vectors = raw if nested else [raw]
    out = []
    for i, vec in enumerate(vectors):
        field = f"sweep.{key}[{i}]" if nested else f"sweep.{key}"
        if not isinstance(vec, list) or not vec or any(isinstance(v, list) for v in vec):
            raise InputError(field, f"{vec!r} is not a list of numbers", what)
        out.append(tuple((k, _value(key, v, f"{field}[{k}]")) for k, v in enumerate(vec)))
    n = len(out[0])
    for i, vec in enumerate(out):
        if len(vec) != n:
            raise InputError(f"sweep.{key}[{i}]", f"{len(vec)} values, the first vector {n}", "one length for all")
    for name, topo in topos.items():
        if topo.ndims != n:
            raise InputError(
                f"sweep.{key}",
                f"topology {name!r} has {topo.ndims} dimensions, the vectors {n} values",
                "one value per dimension of every topology",
            )
    return tuple(out)


def _per_dim(
    table: dict[str, Any], keys: list[tuple[int, str]], prefix: str, topos: dict[str, Topology]
) -> tuple[Subst, ...]:
    """The Cartesian product of the ``bwK`` (``latK``) keys, K ascending."""
    kind = "bandwidth" if prefix == "bw" else "latency"
    choices = []
    for k, key in keys:
        raw = table[key]
        vals = raw if isinstance(raw, list) else [raw]
        if not vals:
            raise InputError(f"sweep.{key}", "empty list", "a value or a list of values")
        choices.append([(k, _value(kind, v, f"sweep.{key}")) for v in vals])
    top, key = keys[-1]
    for name, topo in topos.items():
        if topo.ndims <= top:
            raise InputError(
                f"sweep.{key}",
                f"topology {name!r} has {topo.ndims} dimensions, {key} needs at least {top + 1}",
                f"{prefix}0 to {prefix}{topo.ndims - 1}",
            )
    return tuple(tuple(c) for c in itertools.product(*choices))


def _common_ndims(topos: dict[str, Topology]) -> int:
    """The one number of dimensions of every topology (a generator needs it)."""
    (first, t0), *rest = topos.items()
    for name, t in rest:
        if t.ndims != t0.ndims:
            raise InputError(
                "sweep.bandwidth",
                f"a generator for topologies of different dimensions: {first!r} has {t0.ndims}, {name!r} {t.ndims}",
                "topologies with one number of dimensions, or bandwidth vectors",
            )
    return t0.ndims


# ---------------------------------------------------------------- the generator


def _decimal(raw: dict[str, Any], key: str, default: Fraction | None = None) -> Fraction:
    """A generator field as the exact decimal written (0.1 is 1/10), checked like a bandwidth."""
    if key not in raw:
        if default is None:
            raise InputError(f"sweep.bandwidth.{key}", "missing", f"{MIN_BANDWIDTH:g} to {MAX_BANDWIDTH:g} GB/s")
        return default
    v = raw[key]
    x = _value("bandwidth", v, f"sweep.bandwidth.{key}")
    return Fraction(v) if isinstance(v, int) else Fraction(repr(x))


def count_splits(k: int, n: int, lo: int, hi: int) -> int:
    """How many ways `k` splits into `n` whole parts each in [lo, hi] (inclusion-exclusion over the
    parts above `hi`, after taking `lo` from each): the generator's count, before any constraint."""
    s, w = k - n * lo, hi - lo + 1
    if s < 0 or w <= 0:
        return 0
    return sum(
        (-1) ** j * math.comb(n, j) * math.comb(s - j * w + n - 1, n - 1) for j in range(n + 1) if s - j * w >= 0
    )


def splits(k: int, n: int, lo: int, hi: int) -> Iterator[tuple[int, ...]]:
    """Every split of `k` into `n` parts in [lo, hi], ascending lexicographic."""
    return _splits(k, n, lo, hi)


def _splits(k: int, n: int, lo: int, hi: int) -> Iterator[tuple[int, ...]]:
    if n == 1:
        if lo <= k <= hi:
            yield (k,)
        return
    for first in range(max(lo, k - (n - 1) * hi), min(hi, k - (n - 1) * lo) + 1):
        for rest in _splits(k - first, n - 1, lo, hi):
            yield (first, *rest)


def _generate(raw: dict[str, Any], n: int, others: int) -> tuple[Subst, ...]:
    """The splits of a generator table (module docstring), counted before they are made."""
    unknown = [k for k in raw if k not in GENERATOR_KEYS]
    if unknown:
        raise InputError(f"sweep.bandwidth.{unknown[0]}", "unknown key", ", ".join(GENERATOR_KEYS))
    total, step = _decimal(raw, "total"), _decimal(raw, "step")
    lo_bw, hi_bw = _decimal(raw, "min", step), _decimal(raw, "max", total)
    if total % step:
        raise InputError(
            "sweep.bandwidth.total",
            f"{float(total):g} GB/s is not a whole multiple of step {float(step):g} GB/s",
            "a total that step divides",
        )
    k, lo, hi = int(total / step), math.ceil(lo_bw / step), math.floor(hi_bw / step)
    count = count_splits(k, n, lo, hi)
    if count == 0:
        raise InputError(
            "sweep.bandwidth",
            f"no split of {float(total):g} GB/s over {n} dimensions in multiples of {float(step):g} "
            f"from {float(lo_bw):g} to {float(hi_bw):g} GB/s",
            "min x dimensions <= total <= max x dimensions",
        )
    if count > MAX_SWEEP_POINTS or (count * others > MAX_SWEEP_POINTS and "constraints" not in raw):
        raise InputError(
            "sweep.bandwidth",
            f"the generator makes {count:,} splits ({count * others:,} points with the other axes)",
            f"at most {MAX_SWEEP_POINTS:,} points per sweep file: a larger step, or min/max closer together",
        )
    keep = _constraints(raw, n)
    value = {j: float(j * step) for j in range(lo, hi + 1)}
    out: list[Subst] = []
    for parts in splits(k, n, lo, hi):
        bw = [value[j] for j in parts]
        if all(c.holds(bw) for c in keep):
            out.append(tuple(enumerate(bw)))
            if len(out) * others > MAX_SWEEP_POINTS:
                raise InputError(
                    "sweep.bandwidth",
                    f"the generator keeps more than {len(out) - 1:,} splits ({len(out) * others:,}+ points)",
                    f"at most {MAX_SWEEP_POINTS:,} points per sweep file",
                )
    if not out:
        raise InputError(
            "sweep.bandwidth.constraints", f"none of the {count:,} splits meets them", "constraints a split meets"
        )
    return tuple(out)


def _constraints(raw: dict[str, Any], n: int) -> tuple:
    """The generator's constraints, parsed for `n` bandwidths (imported only when there are some)."""
    texts = raw.get("constraints", [])
    if not isinstance(texts, list):
        raise InputError(
            "sweep.bandwidth.constraints", f"{texts!r} is not a list", 'a list of strings, e.g. ["bw0 >= bw1"]'
        )
    if not texts:
        return ()
    from dse.explore.libra.bw_constraints import parse_constraints

    return parse_constraints(texts, n, "sweep.bandwidth.constraints")


# ---------------------------------------------------------------- notation and CSV cells


def exact_notation(topo: Topology) -> str:
    """`topo` in the ``Ring(4,375,20)_SW(8,100,1700)`` notation with every number exact
    (`Topology.notation`), checked to parse back to the same dimensions."""
    text = topo.notation(exact=True)
    if parse_notation(text, check=False).dims != topo.dims:  # a guard: every field is written
        raise InputError("topology", f"{text!r} does not read back as the topology it writes", "a dse bug: report it")
    return text


def axis_columns(ndims: int) -> tuple[str, ...]:
    """The per-dimension columns of a sweep's CSV for topologies of up to `ndims` dimensions."""
    return (
        *(f"bw{k}_GBps" for k in range(ndims)),
        *(f"lat{k}_ns" for k in range(ndims)),
        "total_bw_GBps",
    )


def axis_cells(topo: Topology, ndims: int) -> tuple[float | str, ...]:
    """`topo`'s cells under `axis_columns(ndims)`: empty for the dimensions it does not have."""
    pad: tuple[str, ...] = ("",) * (ndims - topo.ndims)
    return (
        *(d.bandwidth for d in topo.dims),
        *pad,
        *(d.latency for d in topo.dims),
        *pad,
        topo.total_bandwidth,
    )
