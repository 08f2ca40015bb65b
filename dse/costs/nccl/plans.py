"""NCCL's plans: for one system, parameters and collective, each (algorithm, protocol) NCCL could run,
with everything about its time but the size (`build_plans`), and its time for a size (`tuned_ns`).

A plan's time is its latency plus the slowest of its bandwidth terms (`dse.costs.nccl.model` states
the formula and `dse.costs.nccl.latency` the latencies); `fastest` is NCCL's tuner's pick among plans.
`dse.costs.nccl.model` caches plans and makes NCCL's choice with them.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

from dse.costs.nccl.latency import LL, LL128, SIMPLE, latency_ns
from dse.costs.nccl.log_runs import busbw_factor
from dse.costs.nccl.params import NcclParams, NcclSystem, channels
from dse.costs.nccl.tables import (
    MAX_NVLS_HEADS,
    PROTOCOLS,
    RING_LL128_FACTOR,
    RING_LL_FACTOR,
    RING_SIMPLE_MULTINODE_LAT,
    TREE_LL128_FACTOR,
    TREE_LL_FACTOR,
    TREE_SIZE_FACTOR,
    tree_factor,
)

#: A bandwidth term: (ns per byte, s_half^k, 1 - k, floor).
Term = tuple[float, float, float, float]


class Plan(NamedTuple):
    """One (algorithm, protocol) with everything about its time but the size. Its bandwidth time for
    S bytes is the largest over its `terms` (ns_per_byte, s_half^k, 1 - k, floor) of
    ns_per_byte·(S/f(S) + s_half^k·S^(1-k)), f the interpolated tree size factor of `tree_factors`
    (1 without; it scales NCCL's own term only, else time could fall with size where f rises), the
    curve's extra bounded by `floor` (`tuned_ns`). `step` (bytes, ns) adds ns to `latency_ns` from
    that size on (ring Simple's plateau across nodes), None for none."""

    algo: str
    proto: str
    latency_ns: float
    terms: tuple[Term, ...]
    tree_factors: tuple[float, ...] | None
    step: tuple[float, float] | None


def fastest(plans: tuple[Plan, ...], s: float) -> tuple[int, float]:
    """The index and time of the plan with the smallest time for `s` bytes; a later one wins only
    when strictly faster (NCCL's order)."""
    best, best_ns = 0, tuned_ns(plans[0], s)
    for i in range(1, len(plans)):
        t = tuned_ns(plans[i], s)
        if t < best_ns:
            best, best_ns = i, t
    return best, best_ns


def tuned_ns(plan: Plan, s: float) -> float:
    """The plan's time for `s` bytes (without the launch): what NCCL's tuner compares."""
    _, _, latency, terms, table, step = plan  # one unpacking: this runs for every plan at every size
    s_eff = s if table is None else s / tree_factor(table, s)
    worst = 0.0
    for per_byte, shk, omk, floor in terms:
        if not shk:
            t = per_byte * s_eff
        elif floor and s > 0:  # the floored curve: S·(1 - floor)·S_half^k / (S^k + floor·S_half^k) extra
            t = per_byte * (s_eff + s * (1.0 - floor) * shk / (s ** (1.0 - omk) + floor * shk))
        else:
            t = per_byte * (s_eff + shk * s**omk)
        if t > worst:
            worst = t
    return (latency + step[1] if step is not None and s >= step[0] else latency) + worst


def latency_at(plan: Plan, s: float) -> float:
    """The plan's latency for `s` bytes: its latency, plus its step's from the step's size on."""
    step = plan.step
    return plan.latency_ns + step[1] if step is not None and s >= step[0] else plan.latency_ns


@lru_cache(maxsize=512)
def build_plans(system: NcclSystem, params: NcclParams, collective: str) -> tuple[Plan, ...]:
    """Every (algorithm, protocol) `system` can run `collective` with, in NCCL's order, bandwidth > 0."""
    if collective == "alltoall":
        return (_p2p_plan(system, params),)
    algos = _algorithms(system, collective)
    built = (_plan(system, params, collective, a, p) for a in algos for p in _protocols(system, a))
    return tuple(plan for plan in built if plan is not None)


def _algorithms(system: NcclSystem, collective: str) -> tuple[str, ...]:
    """Algorithms NCCL offers for `collective` on `system` (NCCL's tuning.cc): tree for
    all-reduce; ring everywhere; NVLS for one node's all-reduce / all-gather / reduce-scatter (multi-node
    NVLS needs CollNet, not modelled); NVLSTree for all-reduce across nodes."""
    out = []
    if collective == "all_reduce":
        out.append("tree")
    out.append("ring")
    gather = collective in ("all_gather", "reduce_scatter") and system.gpus_per_node <= MAX_NVLS_HEADS
    if system.has_nvls and system.nodes == 1 and (collective == "all_reduce" or gather):
        out.append("nvls")
    if system.has_nvls and system.nodes > 1 and collective == "all_reduce":
        out.append("nvls_tree")
    return tuple(out)


def _protocols(system: NcclSystem, algo: str) -> tuple[int, ...]:
    """Protocols enabled for `algo`: NVLS and NVLSTree run Simple only; LL128 needs an NVLink fabric
    (NCCL turns it off on PCIe-only systems)."""
    if algo in ("nvls", "nvls_tree", "p2p"):
        return (SIMPLE,)
    if system.fabric == "pcie" and system.gpus_per_node > 1:
        return (LL, SIMPLE)
    return (LL, LL128, SIMPLE)


def _term(bw_GBps: float, s_half: float, k: float, factor: float, floor: float = 0.0) -> Term:
    """A bandwidth term for `factor` bus bytes per size byte over `bw_GBps` with curve (s_half, k),
    whose efficiency never falls below `floor` x e_max (0: the pure curve)."""
    return (factor / bw_GBps, s_half**k, 1.0 - k, floor)


def _tiers(system: NcclSystem, q: NcclParams, collective: str, algo: str) -> list[tuple[float, float, float, float]]:
    """(busbw ceiling GB/s, s_half, k, floor) per tier for `algo`, before the protocol's share. Tree:
    each tier's NCCL busbw; at 2 nodes only half a tree's traffic crosses the network (bandwidth x2)."""
    ppn, nodes = system.gpus_per_node, system.nodes
    b0 = system.pcie_GBps if system.fabric == "pcie" else system.nvlink_GBps
    b1 = system.nics_per_node * system.nic_GBps
    net_x = 2.0 if nodes == 2 else 1.0
    h = min(MAX_NVLS_HEADS, ppn)
    intra = {"ring": q.e_ring_intra, "tree": q.e_tree_intra}.get(algo, q.e_nvls_intra) * b0
    inter = {"ring": q.e_ring_inter, "tree": q.e_tree_inter * net_x}.get(algo, q.e_nvls_inter * net_x) * b1
    if algo in ("nvls", "nvls_tree"):
        # NVLS: h heads share each GPU's links (h+1 loads), one in h's work is the head's own;
        # all-reduce gets x2 (tuning.cc). All-gather/reduce-scatter: NCCL leaves algbw = its busbw.
        if collective == "all_reduce":
            intra *= 2 * (h - 1) / (h + 1)
        else:
            intra *= (h - 1) / (h + 1) * ((ppn - 1) / ppn) ** 2
    tiers = []
    multi = nodes > 1 and algo in ("tree", "nvls_tree") and q.s_half_multi_bytes > 0
    curve = (q.s_half_multi_bytes, q.k_multi, q.e_min_multi) if multi else None
    if ppn > 1:
        tiers.append((intra, *(curve or (q.s_half_intra_bytes, q.k_intra, 0.0))))
    if nodes > 1:
        tiers.append((inter, *(curve or (q.s_half_inter_bytes, q.k_inter, 0.0))))
    if algo == "nvls_tree":
        tiers.append((q.nvls_tree_max_GBps, 0.0, 1.0, 0.0))
    if algo == "tree" and collective == "all_reduce" and q.tree_max_GBps != math.inf:
        tiers.append((q.tree_max_GBps, 0.0, 1.0, 0.0))  # every protocol's base (tuning.cc)
    return tiers


def _plan(system: NcclSystem, q: NcclParams, collective: str, algo: str, p: int) -> Plan | None:
    """One (algorithm, protocol)'s plan, or None when its bandwidth is 0 (disabled)."""
    n = system.ranks
    f = busbw_factor(collective, n)
    tiers = _tiers(system, q, collective, algo)
    share, cap = protocol_share(system, algo, p), math.inf
    if algo == "ring":
        cap = (q.ll_max_GBps, q.ring_ll128_max_GBps, math.inf)[p]
    elif algo == "tree":
        cap = (q.ll_max_GBps, q.tree_ll128_max_GBps, math.inf)[p] * (n - 1) / n
    if any(bw <= 0 for bw, _, _, _ in tiers):
        return None
    terms = [_term(bw * share, sh, k, f, floor) for bw, sh, k, floor in tiers]
    if cap != math.inf:
        terms.append(_term(cap, 0.0, 1.0, f))
    x86_blackwell = system.generation == "blackwell" and system.cpu in ("intel", "amd")
    sized = collective == "all_reduce" and (algo == "tree" or (algo == "nvls_tree" and x86_blackwell))
    table = TREE_SIZE_FACTOR[p] if sized else None
    lat, step = latency_ns(system, q, collective, algo, p), None
    if algo == "ring" and p == SIMPLE and collective == "all_reduce" and system.nodes > 1:
        # tuning.cc's plateau: x1.4 (x1.9 Volta) once each channel's share of a rank's data is >= 64 B
        plateau = RING_SIMPLE_MULTINODE_LAT[system.generation] - 1.0
        step = (64.0 * channels(system).comm * n, lat * plateau)
    return Plan(algo, PROTOCOLS[p], lat, tuple(terms), table, step)


def protocol_share(system: NcclSystem, algo: str, p: int) -> float:
    """The busbw share protocol `p` gives `algo` (tuning.cc): ring LL 1/2, LL128 0.92; tree LL 1/3.8,
    LL128 7/9 (one node) or 120/128, times (n-1)/n (NCCL's tree busbw is per node; nccl-tests' is
    (n-1)/n of it); 1 otherwise."""
    if algo == "ring":
        return (RING_LL_FACTOR, RING_LL128_FACTOR, 1.0)[p]
    if algo == "tree":
        n = system.ranks
        return (TREE_LL_FACTOR, TREE_LL128_FACTOR[system.nodes > 1], 1.0)[p] * (n - 1) / n
    return 1.0


def _p2p_plan(system: NcclSystem, q: NcclParams) -> Plan:
    """All-to-all as grouped send/receive (NCCL has no tuner model for it; our choice): each GPU
    sends (ppn-1)/n of the buffer over the fabric and (n-ppn)/n over the network at the same time,
    through its own NIC share (NICs are not aggregated: at most one NIC per GPU); latency = Ring
    Simple's base + one fabric hop + one network hop (with the network's latency, twice as Simple)."""
    ppn, nodes, n = system.gpus_per_node, system.nodes, system.ranks
    b0 = system.pcie_GBps if system.fabric == "pcie" else system.nvlink_GBps
    terms = []
    if ppn > 1:
        terms.append(_term(b0 * q.e_ring_intra, q.s_half_intra_bytes, q.k_intra, (ppn - 1) / n))
    if nodes > 1:
        per_gpu_nic = system.nic_GBps * min(1.0, system.nics_per_node / ppn)
        terms.append(_term(per_gpu_nic * q.e_ring_inter, q.s_half_inter_bytes, q.k_inter, (n - ppn) / n))
    inter = q.ring_inter_hop_ns[SIMPLE] + 2 * q.net_latency_ns
    hops = (ppn > 1) * q.ring_intra_hop_ns[SIMPLE] + (nodes > 1) * inter
    return Plan("p2p", "Simple", q.ring_base_ns[SIMPLE] + hops, tuple(terms), None, None)
