"""LIBRA's analytic model of a training iteration, and its exact optimum (docs/model.md §13).

LIBRA (Won et al., ISPASS 2024) prices a bandwidth allocation bw_d (GB/s per NPU, per dimension)
for a training workload with a closed form, no simulation:

- a collective of S bytes per NPU puts msg_d bytes on each dimension its group spans, walking the
  dimensions in order with p the group's NPUs there: an all-reduce 2·S·(p-1)/p, then S /= p; a
  reduce-scatter S·(p-1)/p, then S /= p; an all-to-all S·(p-1)/p, S unchanged; an all-gather walks
  the dimensions in reverse, S·(p-1), then S *= p. Its time is max_d msg_d / bw_d (bytes over GB/s
  is ns), no latency; no collective, or 0 bytes, takes no time;
- LIBRA's ``no_overlap`` loop: the iteration is the sum of every layer's forward compute and
  forward collective, then of every layer's input-gradient compute and collective and
  weight-gradient compute and collective. Nothing overlaps; the weight update is not counted.

Where each collective runs is the workload's `Placement` (LIBRA's communicator file); a workload
without one runs every collective on all of every dimension. Layer 0's input gradient is counted
when the workload says it is computed (`Workload.layer0_input_gradient`; LIBRA's files set it, as
LIBRA's loop counts it). Activation recompute is not part of LIBRA's model and is not counted.

`libra_optimum` finds the allocation that minimises LIBRA's iteration time, or iteration time x
network cost / 1e10 (LIBRA's "performance per cost"), over a `BandwidthPolytope`, exactly: a
cutting-plane method with a certified gap (`dse.explore.libra.solve`; docs/model.md §13).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from dse.core.collectives import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER
from dse.core.errors import InputError
from dse.core.topology import Topology
from dse.explore.hwcost import HardwareCost
from dse.explore.libra.bw_constraints import BandwidthPolytope, LinearConstraint
from dse.explore.libra.files import LibraNetwork
from dse.explore.libra.solve import LibraProblem, solve_time, solve_time_x_cost
from dse.training.placement import PartScope
from dse.training.workloads import ALL, SLOTS, Workload

OBJECTIVES = ("time", "time_x_cost")
#: LIBRA divides iteration time (ns) x network cost ($) by this in its "performance per cost"
PERF_PER_COST_SCALE = 1e10


@dataclass(frozen=True)
class LibraCollective:
    """One collective of a workload under LIBRA's model: the bytes it puts on each dimension."""

    layer: int
    slot: str
    collective: str
    nbytes: int
    per_dim: tuple[float, ...]

    def ns(self, bandwidths: Sequence[float]) -> float:
        """max_d msg_d / bw_d: bytes over GB/s is ns."""
        return max((m / b for m, b in zip(self.per_dim, bandwidths) if m > 0), default=0.0)


def libra_messages(collective: str, nbytes: float, parts: Sequence[tuple[int, int]], ndims: int) -> tuple[float, ...]:
    """LIBRA's bytes per dimension (module docstring) of a collective on `parts`, its (dimension,
    group NPUs) pairs in dimension order."""
    msg = [0.0] * ndims
    size = float(nbytes)
    order = list(reversed(parts)) if collective == ALL_GATHER else list(parts)
    for d, p in order:
        if collective == ALL_REDUCE:
            msg[d] = 2 * size / p * (p - 1)
            size /= p
        elif collective == REDUCE_SCATTER:
            msg[d] = size / p * (p - 1)
            size /= p
        elif collective == ALL_TO_ALL:
            msg[d] = size / p * (p - 1)
        elif collective == ALL_GATHER:
            msg[d] = size * (p - 1)
            size *= p
        else:
            raise InputError("collective", f"{collective!r} is not in LIBRA's model", "all_reduce, reduce_scatter, ...")
    return tuple(msg)


def _npus(network: LibraNetwork | Topology) -> tuple[int, ...]:
    return tuple(network.npus) if isinstance(network, LibraNetwork) else tuple(network.shape)


def with_bandwidths(network: LibraNetwork | Topology, bandwidths: Sequence[float]) -> Topology:
    """The dse topology of `network` with these per-NPU bandwidths (GB/s)."""
    if isinstance(network, LibraNetwork):
        return network.topology(bandwidths)
    if len(bandwidths) != network.ndims:
        raise InputError("bandwidths", f"{len(bandwidths)} values for {network.ndims} dimensions", "one per dimension")
    return Topology(tuple(replace(d, bandwidth=float(b)) for d, b in zip(network.dims, bandwidths)), network.name)


def _parts(workload: Workload, slot: str, npus: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    scope = workload.scope(slot)
    if isinstance(scope, PartScope):
        return scope.parts
    if scope != ALL:
        raise InputError(
            workload.field("placement"),
            f"a {workload.parallelism} workload's model-parallel group is not in LIBRA's model",
            "a placement (LIBRA's communicator file) or a workload whose collectives span every dimension",
        )
    return tuple(enumerate(npus))


def libra_collectives(workload: Workload, network: LibraNetwork | Topology) -> tuple[LibraCollective, ...]:
    """Every collective LIBRA's loop runs, with its bytes per dimension (none of 0 bytes)."""
    npus = _npus(network)
    if workload.placement is not None:
        workload.placement.check(with_bandwidths(network, [1.0] * len(npus)), workload.field("placement"))
    out = []
    for li, layer in enumerate(workload.layers):
        for slot in SLOTS:
            comm = layer.comm(slot)
            if comm is None or (slot == "ig" and li == 0 and not workload.layer0_input_gradient):
                continue
            msg = libra_messages(comm[0], comm[1], _parts(workload, slot, npus), len(npus))
            if any(msg):
                out.append(LibraCollective(li, slot, comm[0], comm[1], msg))
    return tuple(out)


def libra_compute_ns(workload: Workload) -> float:
    """The loop's compute: every forward, input-gradient and weight-gradient compute (layer 0's
    input gradient only when `layer0_input_gradient`)."""
    total = math.fsum(layer.compute_ns for layer in workload.layers)
    return total if workload.layer0_input_gradient else total - workload.layers[0].ig_compute


def _check_bandwidths(bandwidths: Sequence[float], ndims: int) -> tuple[float, ...]:
    bw = tuple(float(b) for b in bandwidths)
    if len(bw) != ndims or not all(math.isfinite(b) and b > 0 for b in bw):
        raise InputError("bandwidths", f"{list(bandwidths)!r}", f"{ndims} positive GB/s values, one per dimension")
    return bw


def libra_iteration_ns(
    workload: Workload, network: LibraNetwork | Topology, bandwidths: Sequence[float] | None = None
) -> float:
    """LIBRA's no-overlap iteration time (ns) of `workload` on `network` with per-NPU `bandwidths`
    (GB/s; default a Topology's own)."""
    if bandwidths is None:
        if not isinstance(network, Topology):
            raise InputError("bandwidths", "none given for a LIBRA network", "one GB/s value per dimension")
        bandwidths = [d.bandwidth for d in network.dims]
    bw = _check_bandwidths(bandwidths, len(_npus(network)))
    return libra_compute_ns(workload) + math.fsum(c.ns(bw) for c in libra_collectives(workload, network))


@dataclass(frozen=True)
class LibraOptimum:
    """LIBRA's optimum over a polytope: the allocation, its iteration time and cost, the objective
    (``time``: ns; ``time_x_cost``: ns x $ / 1e10), a proven lower bound on it, the certified
    relative gap (value - lower_bound) / value, and the work done (LPs solved, cutting-plane
    iterations, cost levels of the branch and bound)."""

    bandwidths: tuple[float, ...]
    predicted_ns: float
    cost_usd: float | None
    objective: str
    value: float
    lower_bound: float
    gap: float
    lps: int
    iterations: int
    levels: int = 0

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise InputError("objective", f"{self.objective!r}", ", ".join(OBJECTIVES))


def cost_coefficients(prices: HardwareCost, network: LibraNetwork | Topology) -> tuple[tuple[float, ...], float]:
    """The network cost as c·bw + c0: `prices.dollars` is affine in the bandwidths, so its
    coefficients are differences of two evaluations."""
    n = len(_npus(network))
    ones = prices.dollars(with_bandwidths(network, [1.0] * n))
    coeffs = tuple(
        prices.dollars(with_bandwidths(network, [2.0 if j == d else 1.0 for j in range(n)])) - ones for d in range(n)
    )
    return coeffs, ones - math.fsum(coeffs)


def libra_optimum(
    workload: Workload,
    network: LibraNetwork | Topology,
    constraints: BandwidthPolytope | Sequence[str | LinearConstraint],
    *,
    objective: str = "time",
    prices: HardwareCost | None = None,
    tolerance: float = 1e-7,
    max_lps: int = 5_000,
) -> LibraOptimum:
    """LIBRA's optimum of `objective` over `constraints` (a polytope, or constraint strings with the
    polytope's default box), certified to `tolerance` (relative gap) unless `max_lps` LPs run out;
    `prices` are needed for ``time_x_cost`` and give `cost_usd` for either objective."""
    if objective not in OBJECTIVES:
        raise InputError("objective", f"{objective!r}", ", ".join(OBJECTIVES))
    if objective == "time_x_cost" and prices is None:
        raise InputError("prices", "none given for objective time_x_cost", "a HardwareCost (LIBRA's cost model)")
    if not (isinstance(tolerance, float) and 0 < tolerance < 1) or isinstance(max_lps, bool) or max_lps < 10:
        raise InputError("tolerance, max_lps", f"{tolerance!r}, {max_lps!r}", "0 < tolerance < 1, max_lps >= 10")
    npus = _npus(network)
    poly = (
        constraints if isinstance(constraints, BandwidthPolytope) else BandwidthPolytope.parse(constraints, len(npus))
    )
    if poly.ndims != len(npus):
        raise InputError("constraints", f"a polytope of {poly.ndims} dimensions", f"{len(npus)}, the network's")
    colls = libra_collectives(workload, network)
    cost = cost_coefficients(prices, network) if prices is not None else None
    problem = LibraProblem.build(poly, [c.per_dim for c in colls], libra_compute_ns(workload), cost)
    if objective == "time":
        sol = solve_time(problem, tolerance, max_lps)
    else:
        sol = solve_time_x_cost(problem, tolerance, max_lps)
    bw = sol.bandwidths
    ns = libra_iteration_ns(workload, network, bw)
    dollars = prices.dollars(with_bandwidths(network, bw)) if prices is not None else None
    return LibraOptimum(bw, ns, dollars, objective, sol.value, sol.lower, sol.gap, sol.lps, sol.iterations, sol.levels)
