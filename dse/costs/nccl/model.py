"""NCCL collective times in closed form: what nccl-tests would print for a collective on a GPU system.

A system is two tiers: tier 0 is the node's GPU fabric (NVSwitch, an NVLink mesh or PCIe; B0 = one
GPU's line rate per direction), tier 1 the network (B1 = the line rate of all a node's NICs, per
direction). For each algorithm NCCL could run (ring, tree, nvls, nvls_tree; p2p for all-to-all) and
each protocol it enables (LL, LL128, Simple) the model predicts

    t(S) = L + max over tiers t of S·F / (c_t·B_t·e_t(S)),   e_t(S) = e_max·S^k / (S^k + S_half^k)

with S the nccl-tests size, F its bus-bandwidth factor (the bandwidth term predicts busbw), c_t how
the algorithm turns a tier's bandwidth into busbw (ring 1, NVLS 2(h-1)/(h+1), a 2-node tree 2, ...)
times the protocol's share (LL 1/2, LL128 0.92), L the latency (a base plus hop counts times per-hop
latencies, plus the network's own latency per network hop, plus `launch_ns(G)` for nccl-tests' -g G);
tree and NVLSTree across nodes take one slower curve for every tier (`s_half_multi_bytes`, `k_multi`),
whose efficiency stays above a floor (`e_min_multi`). NCCL's per-channel caps (ring LL128, tree, tree
LL128, NVLSTree) bound the bandwidth by NCCL's channel count (`channels`, dse.costs.nccl.channels);
`max_channels` limits the channels like NCCL_MAX_NCHANNELS. The inputs (`NcclSystem`, `NcclParams`,
`default_params`) live in dse.costs.nccl.params and are re-exported here; each algorithm and
protocol's terms (a `Plan`) are built in dse.costs.nccl.plans.
NCCL's choice is the smallest time without launch (its tuner does not see it) under the system's
default parameters and the multi-node curve of the parameters given (NCCL's tuner as dse models it:
it does not know a calibration's efficiencies or latencies, which time the chosen plan only; the curve
is ours, `_tuner_plans`), ties to the first of tree, ring, nvls, nvls_tree; LL, LL128, Simple.
Defaults: NCCL 2.30.7's (src/graph/tuning.cc, topo.h, search.cc, numbers only, restated in
docs/model.md §15; tables in `dse.costs.nccl.tables`; latencies in `dse.costs.nccl.latency`) but the
per-network and launch latencies and the multi-node curve (ours, from public runs).
Departures carry a comment (tiers combined by a minimum, broadcast/reduce chains, tree sizes
interpolated, all-to-all, the multi-node curve).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

from dse.core.errors import InputError
from dse.core.limits import MAX_BYTES
from dse.costs.nccl.channels import MAX_CHANNELS
from dse.costs.nccl.env import allowed
from dse.costs.nccl.logs import busbw_factor
from dse.costs.nccl.params import Lat3, NcclParams, NcclSystem, channels, default_params  # noqa: F401 (re-exported)
from dse.costs.nccl.plans import Plan, build_plans, fastest, latency_at, protocol_share, tuned_ns
from dse.costs.nccl.tables import (  # noqa: F401 (every upper-case table is re-exported)
    ALGORITHMS,
    COLLECTIVES,
    CPUS,
    EFA_FAST_LATENCY_NS,
    FABRICS,
    GENERATIONS,
    LAUNCH_PER_GPU_NS,
    MAX_NVLS_HEADS,
    MULTI_NODE_CURVE,
    MULTI_NODE_FLOORS,
    NET_EFFICIENCY,
    NET_LATENCY_NS,
    NET_TRANSPORT,
    NETWORKS,
    NEWEST_RELEASE,
    NVLS_EFFICIENCY,
    NVLS_TREE_NET_HOP_NS,
    PCIE_EFFICIENCY,
    PROTOCOLS,
    RING_LL128_FACTOR,
    RING_LL_FACTOR,
    RING_SIMPLE_MULTINODE_LAT,
    TREE_FACTOR,
    TREE_LL128_FACTOR,
    TREE_LL_FACTOR,
    TREE_SIZE_FACTOR,
    EFA_FAST_NIC_GBps,
    LL_MAX_MULTI_NODE_GBps,
    LL_MAX_ONE_NODE_GBps,
    MultiNodeCurve,
    NVLINK_EFFECTIVE_GBps,
    NVLS_TREE_MAX_PER_CHANNEL_GBps,
    PER_CHANNEL_RING_LL128_GBps,
    PER_CHANNEL_TREE_GBps,
    PER_CHANNEL_TREE_LL128_GBps,
    check_choice,
    check_forced,
    check_integer,
    check_lat3,
    check_number,
    launch_ns,
    tree_factor,
)


class NcclCandidate(NamedTuple):
    """One (algorithm, protocol) NCCL could run, with its predicted time and latency term, ns."""

    algo: str
    proto: str
    time_ns: float
    latency_ns: float


@dataclass(frozen=True)
class NcclPrediction:
    """What nccl-tests would print for one size: time, algbw = size/time and busbw = algbw x the
    collective's factor (GB/s = B/ns), the algorithm and protocol that ran (NCCL's choice, or the
    forced one), and every candidate NCCL could have chosen, unforced, in NCCL's order."""

    collective: str
    size_bytes: int
    time_ns: float
    algbw_GBps: float
    busbw_GBps: float
    algo: str
    proto: str
    candidates: tuple[NcclCandidate, ...]


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw for `collective` on `ranks` GPUs: 2(n-1)/n all-reduce, (n-1)/n
    reduce-scatter, all-gather and all-to-all, 1 broadcast and reduce (nccl-tests src/*.cu)."""
    check_choice("collective", collective, COLLECTIVES)
    return busbw_factor(collective, ranks)


def predict(
    system: NcclSystem,
    collective: str,
    size_bytes: int,
    *,
    params: NcclParams | None = None,
    algo: str | None = None,
    proto: str | None = None,
    gpus_per_thread: int = 1,
    max_channels: int | None = None,
) -> NcclPrediction:
    """nccl-tests' time, algbw and busbw for `collective` of `size_bytes` (nccl-tests' size column:
    the whole buffer; all-gather's output, reduce-scatter's input) on `system`. `params` defaults
    to `default_params(system)`; NCCL's choice is made under the defaults with `params`' multi-node
    curve (module docstring). `algo`/`proto` force an algorithm or protocol like NCCL_ALGO /
    NCCL_PROTO; one the system cannot run for this collective is an `InputError` naming those it can.
    `gpus_per_thread` (nccl-tests' ``-g``) adds `launch_ns` to every candidate's latency, NCCL's choice
    unchanged; its default 1 (one process per GPU, as training frameworks run NCCL) adds nothing.
    `max_channels` caps the channels rings and trees run on, like NCCL_MAX_NCHANNELS: below NCCL's
    own count (`channels(system).comm`) their bandwidth is at most that many channels at NCCL's
    per-channel speed (`channel_ceiling_GBps`), NCCL's choice unchanged (its tuner counts the
    search's channels)."""
    plans = _cached_plans(system, params, collective, size_bytes)
    if algo is not None or proto is not None:
        check_forced(plans, collective, algo, proto)
    s, launch = float(size_bytes), launch_ns(gpus_per_thread)
    tuned = [tuned_ns(p, s) for p in plans]
    actual = tuned
    if max_channels is not None:
        actual = [_capped_ns(system, collective, p, s, t, max_channels) for p, t in zip(plans, tuned)]
    candidates = tuple(
        NcclCandidate(p.algo, p.proto, t + launch, latency_at(p, s) + launch) for p, t in zip(plans, actual)
    )
    ranked = tuned if params is None else _tuner_ns(system, params, collective, size_bytes, plans)
    best, best_ns, algos, protos = None, math.inf, allowed(algo, collective), allowed(proto, collective)
    for c, t in zip(candidates, ranked):  # NCCL's order; a later one wins only when strictly faster
        if (algos is None or c.algo in algos) and (protos is None or c.proto in protos) and t < best_ns:
            best, best_ns = c, t
    assert best is not None  # check_forced guarantees one
    algbw = s / best.time_ns if best.time_ns > 0 else 0.0
    busbw = algbw * bus_factor(collective, system.ranks)
    return NcclPrediction(collective, size_bytes, best.time_ns, algbw, busbw, best.algo, best.proto, candidates)


def channel_ceiling_GBps(system: NcclSystem, algo: str, proto: str, max_channels: int) -> float:
    """The busbw ceiling of `algo` with `proto` on `max_channels` channels: NCCL's per-channel speed
    (the search's channels x speed over the collective's channels) x the channels x the protocol's
    share (tree: also 0.92 and (n-1)/n, as its bandwidth); inf for NVLS, NVLSTree and all-to-all
    (their channels are their own) and for a cap at or above NCCL's own count."""
    ch = channels(system)
    if algo not in ("ring", "tree") or max_channels >= ch.comm:
        return math.inf
    rate = max_channels * ch.ring * ch.ring_GBps / ch.comm
    return rate * (TREE_FACTOR if algo == "tree" else 1.0) * protocol_share(system, algo, PROTOCOLS.index(proto))


def predict_time(
    system: NcclSystem,
    collective: str,
    size_bytes: int,
    params: NcclParams | None = None,
    gpus_per_thread: int = 1,
    *,
    algo: str | None = None,
    proto: str | None = None,
    max_channels: int | None = None,
) -> tuple[float, float, str, str]:
    """(time_ns, latency_ns, algo, proto) of NCCL's choice (or the forced one: `algo`, `proto`,
    `max_channels` as `predict`'s) for `collective` of `size_bytes` on `system`: the same numbers as
    `predict` (same arguments), without building its candidates. Bad input: `InputError`."""
    plans = _cached_plans(system, params, collective, size_bytes)
    if algo is not None or proto is not None or max_channels is not None:
        return _forced_time(system, collective, size_bytes, plans, params, gpus_per_thread, algo, proto, max_channels)
    if not plans:
        check_forced(plans, collective, None, None)
    s, launch = float(size_bytes), launch_ns(gpus_per_thread)
    if params is None:  # a point at a new size is the common case here: nothing remembered
        i, best_ns = fastest(plans, s)
        best = plans[i]
    else:  # NCCL's pick under the defaults (with `params`' curve), timed with `params`
        view = _tuner_view(system, params, collective, size_bytes, plans)
        pick = view.picks.get(s)
        j = view.same[_remember(view, s) if pick is None else pick]
        if j is None:  # `params` disable the tuner's pick: the tuner's best of what they enable
            ranked = _tuner_ns(system, params, collective, size_bytes, plans)
            j = min(range(len(plans)), key=ranked.__getitem__)  # the first of equals: NCCL's order
        best = plans[j]
        best_ns = tuned_ns(best, s)
    return best_ns + launch, latency_at(best, s) + launch, best.algo, best.proto


def _forced_time(
    system: NcclSystem, collective: str, size_bytes: int, plans: tuple[Plan, ...], params: NcclParams | None,
    gpus_per_thread: int, algo: str | None, proto: str | None, max_channels: int | None,
) -> tuple[float, float, str, str]:  # fmt: skip
    """`predict_time` with a forced choice: `predict`'s pick among the plans that match (ranked by
    the tuner's times; `params` None: `plans` are the defaults' own), timed as `predict` times it."""
    algos, protos = allowed(algo, collective), allowed(proto, collective)
    only = [
        i for i, p in enumerate(plans) if (algos is None or p.algo in algos) and (protos is None or p.proto in protos)
    ]
    if not only:
        check_forced(plans, collective, algo, proto)  # raises, naming what the system can run
    s, launch = float(size_bytes), launch_ns(gpus_per_thread)
    ranked = (
        [tuned_ns(plans[i], s) for i in only]
        if params is None
        else _tuner_ns(system, params, collective, size_bytes, plans, only)
    )
    best, best_ns = None, math.inf
    for i, t in zip(only, ranked):  # NCCL's order; a later one wins only when strictly faster
        if t < best_ns:
            best, best_ns = plans[i], t
    assert best is not None  # the defaults run every plan a calibration can (both gate algorithms by system)
    time_ns = tuned_ns(best, s)
    if max_channels is not None:
        time_ns = _capped_ns(system, collective, best, s, time_ns, max_channels)
    return time_ns + launch, latency_at(best, s) + launch, best.algo, best.proto


def _capped_ns(system: NcclSystem, collective: str, plan: Plan, s: float, t: float, max_channels: int) -> float:
    """A plan's time `t` for `s` bytes on at most `max_channels` channels (checked, `InputError`):
    at least its latency plus the bus bytes over `channel_ceiling_GBps`."""
    check_integer("max_channels", max_channels, 1, MAX_CHANNELS)
    ceiling = channel_ceiling_GBps(system, plan.algo, plan.proto, max_channels)
    return max(t, latency_at(plan, s) + bus_factor(collective, system.ranks) * s / ceiling)


class _TunerView(NamedTuple):
    """What NCCL's choice under some parameters needs: the tuner's plans (`_tuner_plans`), where each
    of them is among the parameters' plans (`_same_plans`), and the tuner's picks by size, shared by
    every parameters with the same tuner plans (a fit times the same sizes under them many times)."""

    tuner: tuple[Plan, ...]
    same: tuple[int | None, ...]
    picks: dict[float, int]


_VIEWS: dict[tuple[int, int, str], tuple[NcclSystem, NcclParams, _TunerView]] = {}


def _tuner_view(
    system: NcclSystem, params: NcclParams, collective: str, size_bytes: int, plans: tuple[Plan, ...]
) -> _TunerView:
    """The `_TunerView` of `params` (whose plans are `plans`), found by identity (kept alive)."""
    key = (id(system), id(params), collective)
    hit = _VIEWS.get(key)
    if hit is not None and hit[0] is system and hit[1] is params:
        return hit[2]
    _, tuner, picks = _tuner_entry(system, params, collective, size_bytes)
    view = _TunerView(tuner, _same_plans(tuner, plans), picks)
    if len(_VIEWS) >= 1024:
        _VIEWS.clear()
    _VIEWS[key] = (system, params, view)
    return view


def _remember(view: _TunerView, s: float) -> int:
    """The tuner's pick for `s` bytes (`fastest`), kept in `view.picks` (at most 4,096 sizes)."""
    if len(view.picks) >= 4096:
        view.picks.clear()
    i = view.picks[s] = fastest(view.tuner, s)[0]
    return i


_SAME_CACHE: dict[tuple[int, int], tuple[tuple[Plan, ...], tuple[Plan, ...], tuple[int | None, ...]]] = {}


def _same_plans(plans: tuple[Plan, ...], others: tuple[Plan, ...]) -> tuple[int | None, ...]:
    """For each of `plans`, the index of the same (algorithm, protocol) in `others` (None where
    `others` lack it), cached by identity (the cache keeps both alive)."""
    key = (id(plans), id(others))
    hit = _SAME_CACHE.get(key)
    if hit is not None and hit[0] is plans and hit[1] is others:
        return hit[2]
    where = {(p.algo, p.proto): i for i, p in enumerate(others)}
    same = tuple(where.get((p.algo, p.proto)) for p in plans)
    if len(_SAME_CACHE) >= 1024:
        _SAME_CACHE.clear()
    _SAME_CACHE[key] = (plans, others, same)
    return same


def _tuner_ns(
    system: NcclSystem, params: NcclParams, collective: str, size_bytes: int, plans: tuple[Plan, ...],
    only: list[int] | None = None,
) -> list[float]:  # fmt: skip
    """What NCCL's tuner compares for each of `plans` (or those at the indices `only`): its (algorithm,
    protocol)'s time under `_tuner_plans` (the tuner does not know a calibration's efficiencies).
    `plans` are the ones some parameters enable: the defaults' or fewer (an efficiency of 0 disables a plan)."""
    s, tuner = float(size_bytes), _tuner_plans(system, params, collective, size_bytes)
    same = _same_plans(plans, tuner)
    js = (same[i] for i in (only or range(len(plans))))
    return [math.inf if j is None else tuned_ns(tuner[j], s) for j in js]


_TUNER_CACHE: dict[tuple[int, str, float, float, float], tuple[NcclSystem, tuple[Plan, ...], dict[float, int]]] = {}


def _tuner_plans(system: NcclSystem, params: NcclParams, collective: str, size_bytes: int) -> tuple[Plan, ...]:
    """The plans NCCL's tuner ranks: the defaults', with `params`' multi-node curve. That curve is ours,
    not NCCL's; dse's tuner takes it (`default_params`), so a calibration that refits it moves the
    choice between tree or NVLSTree and ring across nodes with it. Cached by system and curve."""
    return _tuner_entry(system, params, collective, size_bytes)[1]


def _tuner_entry(
    system: NcclSystem, params: NcclParams, collective: str, size_bytes: int
) -> tuple[NcclSystem, tuple[Plan, ...], dict[float, int]]:
    """(system, `_tuner_plans`, the tuner's picks by size so far), cached by system and curve."""
    curve = (params.s_half_multi_bytes, params.k_multi, params.e_min_multi)
    key = (id(system), collective, *curve)
    hit = _TUNER_CACHE.get(key)
    if hit is not None and hit[0] is system:
        return hit
    d = default_params(system)
    if curve == (d.s_half_multi_bytes, d.k_multi, d.e_min_multi):
        plans = _cached_plans(system, None, collective, size_bytes)
    else:
        s_half, k, floor = curve
        plans = build_plans(system, replace(d, s_half_multi_bytes=s_half, k_multi=k, e_min_multi=floor), collective)
    if len(_TUNER_CACHE) >= 1024:
        _TUNER_CACHE.clear()
    entry = _TUNER_CACHE[key] = (system, plans, {})
    return entry


_IDENTITY_CACHE: dict[tuple[int, int, str], tuple[NcclSystem, NcclParams | None, tuple[Plan, ...]]] = {}


def _cached_plans(system: NcclSystem, params: NcclParams | None, collective: str, size_bytes: int) -> tuple[Plan, ...]:
    """`build_plans` for these objects, found by identity first (cheaper than hashing; the cache keeps them
    alive, so no id is reused); checks `size_bytes`, and the rest on a miss (`InputError`)."""
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int) or not 0 <= size_bytes <= MAX_BYTES:
        raise InputError("size_bytes", f"{size_bytes!r} is not a byte count", f"an integer from 0 to {MAX_BYTES}")
    key = (id(system), id(params), collective)
    hit = _IDENTITY_CACHE.get(key)
    if hit is not None and hit[0] is system and hit[1] is params:
        return hit[2]
    check_choice("collective", collective, COLLECTIVES)
    if not isinstance(system, NcclSystem):
        raise InputError("system", f"{type(system).__name__} is not NcclSystem", "an NcclSystem")
    if params is not None and not isinstance(params, NcclParams):
        raise InputError("params", f"{type(params).__name__} is not NcclParams", "an NcclParams or None")
    plans = build_plans(system, default_params(system) if params is None else params, collective)
    if len(_IDENTITY_CACHE) >= 1024:
        _IDENTITY_CACHE.clear()
    _IDENTITY_CACHE[key] = (system, params, plans)
    return plans
