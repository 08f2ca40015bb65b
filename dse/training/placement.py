"""Where a workload's collectives run: the model-parallel group's dimensions, split if need be.

A hybrid workload's model-parallel group of G NPUs takes the leading dimensions of the topology;
data parallelism takes the rest. When no prefix of dimensions holds exactly G NPUs, one dimension
is split in two logical dimensions (ASTRA-sim 1.0's ``break_dimension``): walking the dims, the
first one that would take the product past G, of P NPUs with A NPUs before it, becomes G/A x P/(G/A)
(2D-SW_SW, 16 x 64, with G = 128: 16 x 8 x 8). The two logical dimensions share the physical one's
links, as in ASTRA-sim 1.0, whose analytical network has no contention between them:

- a switch: both logical dims keep its bandwidth, links and latency (each NPU's port serves both);
- fully connected: each logical dim of k NPUs has the direct links to its k-1 peers, so its
  bandwidth and links are the physical dim's times (k-1)/(P-1) (the same per-link rate);
- a ring: both logical rings keep its bandwidth, links and latency per step. (In ASTRA-sim 1.0 the
  logical neighbours of a split ring are several physical hops apart; no reference run has a split
  ring, and dse does not model those hops.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from dse.core.errors import InputError
from dse.core.topology import Dim, Topology


def split_dim(dim: Dim, first: int) -> tuple[Dim, Dim]:
    """The two logical dims of `first` x npus/first NPUs cut from `dim` (module docstring)."""
    second = dim.npus // first
    if dim.kind != "fc":
        return replace(dim, npus=first), replace(dim, npus=second)

    def part(k: int) -> Dim:
        """The part of `dim` with `k` NPUs, its bandwidth and links cut in proportion."""
        share = (k - 1) / (dim.npus - 1)
        links = None if dim.links is None else max(1, round(dim.links * share))
        return replace(dim, npus=k, bandwidth=dim.bandwidth * share, links=links)

    return part(first), part(second)


def group_topology(topology: Topology, group: int | None, field: str = "model_parallel_group") -> tuple[Topology, int]:
    """The logical topology for a model-parallel group of `group` NPUs, and how many of its
    leading dims the group spans (0 for no group or a group of 1). `InputError` (naming `field`)
    when no prefix and no split of one dimension gives the group."""
    if not group or group == 1:
        return topology, 0
    shape = "x".join(map(str, topology.shape))
    if group > topology.npus:
        raise InputError(
            field,
            f"a group of {group} NPUs is larger than {topology.label()} ({shape}, {topology.npus} NPUs)",
            f"at most {topology.npus}",
        )
    before = 1
    for i, d in enumerate(topology.dims):
        if before * d.npus < group:
            before *= d.npus
            continue
        if before * d.npus == group:
            return topology, i + 1
        first = group // before
        if group % before or d.npus % first:
            prefixes = [math.prod(topology.shape[: j + 1]) for j in range(topology.ndims)]
            raise InputError(
                field,
                f"a group of {group} NPUs is neither a prefix of {topology.label()} ({shape}) nor a "
                f"split of its dim {i} ({d.npus} NPUs after {before}) into two whole parts",
                "a product of leading dims (" + ", ".join(map(str, prefixes)) + ") or such a product "
                "times a divisor of the next dim",
            )
        a, b = split_dim(d, first)
        dims = topology.dims[:i] + (a, b) + topology.dims[i + 1 :]
        name = f"{topology.label()} split {shape} -> {'x'.join(str(x.npus) for x in dims)}"
        return Topology(dims, name=name), i + 1
    raise AssertionError("unreachable: group <= npus")  # pragma: no cover


@dataclass(frozen=True)
class PartScope:
    """A collective's scope under a `Placement`: its (physical dimension, NPUs) pairs."""

    parts: tuple[tuple[int, int], ...]

    @property
    def dims(self) -> tuple[int, ...]:
        """The physical dimensions the scope spans."""
        return tuple(d for d, _ in self.parts)

    def topology(self, topology: Topology) -> Topology | None:
        """The topology the collective runs on: each involved dimension cut to its group (same
        kind, per-NPU bandwidth and latency); None when it spans no dimension."""
        if not self.parts:
            return None
        return Topology(tuple(replace(topology.dims[d], npus=k) for d, k in self.parts))


def shape_text(shape: tuple[int, ...], involved: tuple[bool, ...]) -> str:
    """NPUs per dimension as ``4x8x4x32``, ``*`` for a dimension no group spans (any size fits)."""
    return "x".join(str(n) if used else "*" for n, used in zip(shape, involved, strict=True))


#: a placement's slots, as `dse.training.workloads.SLOTS`
PLACEMENT_SLOTS = ("fwd", "ig", "wg")
#: the words for "this dimension is not involved" (LIBRA's -1, and 0 or 1: a group of one)
NOT_INVOLVED = (-1, 0, 1)


@dataclass(frozen=True)
class Placement:
    """Where each slot's collectives run: per physical dimension, the NPUs of it the group spans
    (0: the dimension is not involved). LIBRA's communicator files say the same: GPT-3's
    tensor-parallel ``[4, 4, -1, -1]`` is all 4 NPUs of dim 0 and 4 of the 8 of dim 1.

    A group of k of a dimension's P NPUs (k divides P) runs that dimension's algorithm on k NPUs at
    the dimension's per-NPU bandwidth and latency, on the dimension's own links: every collective on
    a physical dimension, whole or part, queues for that one dimension (docs/model.md §9)."""

    fwd: tuple[int, ...]
    ig: tuple[int, ...]
    wg: tuple[int, ...]

    def __post_init__(self) -> None:
        sizes = {len(getattr(self, s)) for s in PLACEMENT_SLOTS}
        if len(sizes) != 1:
            raise InputError("placement", "the slots name different numbers of dimensions", "one entry per dimension")
        for s in PLACEMENT_SLOTS:
            for k in getattr(self, s):
                if isinstance(k, bool) or not isinstance(k, int) or k < 0:
                    raise InputError(f"placement.{s}", f"{k!r} is not a group size", "0 (not involved) or k >= 2")

    @classmethod
    def parse(cls, raw: object, field: str = "placement") -> Placement:
        """From a mapping slot -> list (``fwd``/``ig``/``wg``, or LIBRA's ``Forward``/``InputGrad``/
        ``WeightGrad``); -1, 0 and 1 mean "not involved"."""
        if not isinstance(raw, dict):
            raise InputError(field, f"{raw!r} is not a table", "fwd = [...], ig = [...], wg = [...]")
        names = {"forward": "fwd", "inputgrad": "ig", "weightgrad": "wg", "fwd": "fwd", "ig": "ig", "wg": "wg"}
        got: dict[str, tuple[int, ...]] = {}
        for key, value in raw.items():
            slot = names.get(str(key).lower().replace("_", ""))
            if slot is None:
                raise InputError(f"{field}.{key}", "unknown slot", "fwd, ig, wg (or Forward, InputGrad, WeightGrad)")
            if slot in got:
                raise InputError(f"{field}.{key}", "given twice", "each slot once")
            if not isinstance(value, list) or not value:
                raise InputError(f"{field}.{key}", f"{value!r} is not a list", "one group size per dimension")
            sizes = []
            for k in value:
                if isinstance(k, bool) or not isinstance(k, int) or k < -1:
                    raise InputError(f"{field}.{key}", f"{k!r} is not a group size", "-1, 0 or 1 (none), or k >= 2")
                sizes.append(0 if k in NOT_INVOLVED else k)
            got[slot] = tuple(sizes)
        missing = [s for s in PLACEMENT_SLOTS if s not in got]
        if missing:
            raise InputError(f"{field}.{missing[0]}", "missing", "fwd, ig and wg, one group size per dimension")
        return cls(got["fwd"], got["ig"], got["wg"])

    def parts(self, slot: str) -> PartScope:
        """The slot's (dimension, NPUs) pairs, innermost first (empty: the slot communicates nowhere)."""
        return PartScope(tuple((d, k) for d, k in enumerate(getattr(self, slot)) if k))

    def shape(self) -> tuple[int, ...]:
        """The shape the placement was made for: per dimension, the NPUs of its model-parallel group
        (fwd and ig) times those of its data-parallel group (wg). On it the model-parallel groups
        tile the NPUs and so do the data-parallel ones (LIBRA's GPT-3 4D placement: 4x8x4x32)."""
        return tuple(
            math.lcm(max(f, 1), max(i, 1)) * max(w, 1) for f, i, w in zip(self.fwd, self.ig, self.wg, strict=True)
        )

    def involved(self) -> tuple[bool, ...]:
        """Per dimension, whether any slot's group spans part of it (one that none does may have any size)."""
        return tuple(any(ks) for ks in zip(self.fwd, self.ig, self.wg, strict=True))

    def multiples(self) -> tuple[int, ...]:
        """Per dimension, what its NPU count must be a multiple of for `check` to accept it: every
        group size on it divides it."""
        return tuple(math.lcm(*(max(k, 1) for k in ks)) for ks in zip(self.fwd, self.ig, self.wg, strict=True))

    def fits_text(self, topology: Topology | None = None) -> str:
        """What a placement error allows: the shape the placement needs, and the option that gives
        another placement (for `topology`, when given)."""
        shape, least = shape_text(self.shape(), self.involved()), shape_text(self.multiples(), self.involved())
        other = f" (or dimensions that are multiples of {least})" if least != shape else ""
        other += "; *: a dimension of any size" if not all(self.involved()) else ""
        where = f" for {topology.label()}" if topology is not None else ""
        return (
            f"a topology of shape {shape}, which the placement was made for{other}; or a placement{where}: "
            "dse iterate --placement FILE, or placement = FILE in a sweep or study"
        )

    def check(self, topology: Topology, field: str = "placement") -> None:
        """Each slot names every dimension of `topology`, and each group size divides its dimension;
        an error names the topology's shape, the shape the placement needs and --placement."""
        nd = topology.ndims
        given = f"{topology.label()} is {'x'.join(map(str, topology.shape))}"
        for s in PLACEMENT_SLOTS:
            sizes = getattr(self, s)
            if len(sizes) != nd:
                raise InputError(
                    f"{field}.{s}",
                    f"{len(sizes)} entries for {nd} dimensions: {given}",
                    self.fits_text(topology),
                )
            for d, k in enumerate(sizes):
                p = topology.dims[d].npus
                if k and (k > p or p % k):
                    raise InputError(
                        f"{field}.{s}",
                        f"a group of {k} NPUs in dimension {d} of {p}: {given}",
                        self.fits_text(topology),
                    )

    def to_table(self) -> dict[str, list[int]]:
        """The TOML form (`parse` reads it back)."""
        return {s: list(getattr(self, s)) for s in PLACEMENT_SLOTS}
