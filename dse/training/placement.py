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
from dataclasses import replace

from dse.core.errors import InputError
from dse.core.topology import Dim, Topology


def split_dim(dim: Dim, first: int) -> tuple[Dim, Dim]:
    """The two logical dims of `first` x npus/first NPUs cut from `dim` (module docstring)."""
    second = dim.npus // first
    if dim.kind != "fc":
        return replace(dim, npus=first), replace(dim, npus=second)

    def part(k: int) -> Dim:
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
