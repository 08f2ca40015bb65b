"""What a communicator group spans, for the `paper` and `astra-sim-1` models: whole dimensions or parts.

Under those models a collective on a group (a tuple of ranks, dim 0 varying fastest: rank =
c0 + P0·c1 + ...) runs like any collective on the dimensions it spans, with the chosen scheduler.
`group_scope` maps the group to them:

- The group must be a box: per dimension a set of coordinates, every combination present once
  (its size the product of the sets' sizes), the other coordinates fixed.
- A dimension where it takes every coordinate is spanned whole; if every spanned dimension is whole
  the scope is their indices (a tuple, what a Chakra ``involved_dim`` gives).
- A dimension where it takes k of P coordinates (1 < k < P) is a part: on a ring the k coordinates
  must be consecutive round the ring (wrapping past P−1 is fine: a stretch of the ring); on a
  fully-connected or switch dimension any k will do, since every k NPUs of it are connected alike.
  With a part the scope is a `PartScope` of (dimension, NPUs) pairs, ascending, whole dimensions
  included with their P: the collective runs the dimension's algorithm on k NPUs at its per-NPU
  bandwidth and latency, queued on that physical dimension (`dse.training.placement.Placement`).
- One member: the empty tuple (no dimension; the collective takes no time). All NPUs: every dimension.

The members' order does not matter here (it does under `astra-sim`, whose ring follows it:
`dse.costs.p2p`). Anything else (a rank twice, outside the topology, a shape that is not a box, a
broken stretch of a ring) is one `InputError` naming the group.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dse.core.errors import InputError
from dse.core.topology import Topology
from dse.training.placement import PartScope

ALLOWED = (
    "ranks that vary over whole dimensions, or over part of a dimension (consecutive coordinates "
    "on a ring, any on a fully-connected or switch dimension), every combination once, the other "
    "coordinates fixed"
)


def group_scope(topology: Topology, members: Sequence[int], *, name: str = "") -> tuple[int, ...] | PartScope:
    """The dimensions, or (dimension, NPUs) parts, that the group `members` spans on `topology`
    (module docstring); `name` (its ``pg_name``) names it in an error."""
    field = f"group {name!r}" if name else "group"
    ranks = list(members)
    n = topology.npus
    shown = _show(ranks)
    if not ranks:
        raise InputError(field, "no members", "one rank or more")
    for r in ranks:
        if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < n:
            raise InputError(field, f"rank {r!r} of {shown} is not an NPU of {topology.label()}", f"0 to {n - 1}")
    if len(set(ranks)) != len(ranks):
        raise InputError(field, f"a rank listed twice in {shown}", "distinct ranks")
    shape = topology.shape
    values: list[set[int]] = [set() for _ in shape]
    for r in ranks:
        for d, p in enumerate(shape):
            r, c = divmod(r, p)
            values[d].add(c)
    if math.prod(len(v) for v in values) != len(ranks):
        raise InputError(field, f"{shown} is not a box of coordinates on {topology.label()}", ALLOWED)
    parts: list[tuple[int, int]] = []
    for d, (p, v) in enumerate(zip(shape, values)):
        k = len(v)
        if k == 1:
            continue
        if k < p and topology.dims[d].kind == "ring" and not _stretch(v, p):
            raise InputError(
                field,
                f"{shown} takes coordinates {sorted(v)} of ring dimension {d} ({p} NPUs), not a stretch of it",
                ALLOWED,
            )
        parts.append((d, k))
    if all(k == shape[d] for d, k in parts):
        return tuple(d for d, _ in parts)
    return PartScope(tuple(parts))


def _stretch(coords: set[int], p: int) -> bool:
    """Are `coords` consecutive round a ring of `p` (a gap of exactly one run of missing ones)?"""
    return sum(1 for c in coords if (c + 1) % p not in coords) == 1


def _show(ranks: list) -> str:
    head = ", ".join(map(repr, ranks[:8]))
    return f"[{head}{', ...' if len(ranks) > 8 else ''}]"
