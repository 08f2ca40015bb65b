"""The closed-form NCCL model (dse/costs/nccl/model.py): its formulas, its invariants, bad input, and
sanity checks against public nccl-tests measurements.

The sanity checks use the DEFAULT parameters (NCCL 2.30.7's own tuner constants), not calibrated
ones: they show the model starts in the right place (plateaus within 10 %, latency floors within a
factor of 2, NCCL's algorithm switch points). The calibrated validation on held-out sizes and scales
comes with `dse calibrate` (next session). Measured numbers are copied here with their source.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from dse.core.errors import InputError
from dse.costs.nccl import model
from dse.costs.nccl.logs import read_nccl_tests
from dse.costs.nccl.model import (
    COLLECTIVES,
    NcclParams,
    NcclSystem,
    bus_factor,
    default_params,
    predict,
    predict_time,
)
from dse.costs.nccl.tables import (
    LAUNCH_PER_GPU_NS,
    MULTI_NODE_CURVE,
    TREE_SIZE_FACTOR,
    launch_ns,
    tree_factor,
)

GiB = 2**30
MiB = 2**20
KiB = 2**10
# 8 x H100 SXM, NVSwitch, NVLink4: 18 links x 25 GB/s per direction (NVIDIA's H100 datasheet).
H100 = NcclSystem("hopper", 8, nvlink_GBps=450.0, nvlink_links=18)
# 2 x AWS p5: 32 x 100 Gb/s EFA per node (aws_p5_2node_allreduce.txt header).
P5_X2 = NcclSystem("hopper", 8, 2, nvlink_GBps=450.0, nvlink_links=18, nics_per_node=32, nic_GBps=12.5)
# 3 x DGX-A100-class, 4 x HDR 200 Gb/s per node (ncclt119_3xdgxa100_hdr.txt header).
A100_X3 = NcclSystem("ampere", 8, 3, nvlink_GBps=300.0, nvlink_links=12, nics_per_node=4, nic_GBps=25.0)
A100 = NcclSystem("ampere", 8, nvlink_GBps=300.0, nvlink_links=12)
V100_MESH = NcclSystem("volta", 8, fabric="nvlink_mesh", nvlink_GBps=150.0, nvlink_links=6)
PCIE = NcclSystem("ampere", 4, fabric="pcie", pcie_GBps=32.0)
H100_X4_AMD = NcclSystem("hopper", 8, 4, nvlink_GBps=450.0, nvlink_links=18, nics_per_node=8, nic_GBps=50.0, cpu="amd")
ONE_GPU_PER_NODE = NcclSystem("ampere", 1, 4, nics_per_node=1, nic_GBps=25.0)
P5_X4_EFA = dataclasses.replace(P5_X2, nodes=4, network="efa", cpu="amd")
SYSTEMS = (H100, P5_X2, A100_X3, A100, V100_MESH, PCIE, H100_X4_AMD, ONE_GPU_PER_NODE, P5_X4_EFA)
SIZES = (0, 1, 8, 100, 4096, 65536, 10**6, MiB, 3 * MiB + 5, 64 * MiB, 10**9, 4 * GiB, 16 * GiB)
# A calibrated-looking parameter set with a size-dependent efficiency on both tiers.
CURVED = {"s_half_intra_bytes": 8.0 * MiB, "k_intra": 0.6, "s_half_inter_bytes": 64.0 * MiB, "k_inter": 1.0}


def _curved(system: NcclSystem) -> NcclParams:
    return dataclasses.replace(default_params(system), **CURVED)


# --- closed forms ------------------------------------------------------------------------------------


def test_ring_simple_all_reduce_is_latency_plus_bus_bytes_over_bandwidth() -> None:
    """Forced ring Simple, one node: t = base + 2(n-1) hops + 2(n-1)/n S / (B e), e = 20.6/25."""
    n, s = 8, 3 * GiB
    lat = 8400.0 + 2 * (n - 1) * 3400.0
    bw = 450.0 * 20.6 / 25.0
    p = predict(H100, "all_reduce", s, algo="ring", proto="Simple")
    assert p.time_ns == pytest.approx(lat + 2 * (n - 1) / n * s / bw, rel=1e-12)
    assert (p.algo, p.proto) == ("ring", "Simple")


def test_ring_all_gather_and_broadcast_closed_forms() -> None:
    s = 256 * MiB
    bw = 450.0 * 20.6 / 25.0
    ag = predict(H100, "all_gather", s, algo="ring", proto="Simple")
    assert ag.time_ns == pytest.approx(8400.0 + 7 * 3400.0 + 7 / 8 * s / bw, rel=1e-12)
    # broadcast: a chain of n-1 hops (nodes-1 across the network), bus factor 1.
    bc = predict(A100_X3, "broadcast", s, algo="ring", proto="Simple")
    intra, inter = max(3400.0, 3 * 1000.0), 14000.0
    assert bc.time_ns == pytest.approx(8400.0 + 21 * intra + 2 * inter + s / (4 * 25.0 * 0.96), rel=1e-12)


def test_protocol_shares_and_the_ll_cap() -> None:
    """Ring LL128 gets 0.92 of the link, ring LL half of it capped at NCCL's llMaxBw (141 GB/s on one
    Hopper node); tree is 0.92 of the link, x 7/9 for LL128 on one node, x (n-1)/n as nccl-tests busbw
    (4 GiB: past the tree size table, factor 1)."""
    s, link = 4 * GiB, 450.0 * 20.6 / 25.0
    t = {(c.algo, c.proto): c.time_ns - c.latency_ns for c in predict(H100, "all_reduce", s).candidates}
    bus = 2 * 7 / 8 * s
    assert t["ring", "LL128"] == pytest.approx(bus / (0.92 * link), rel=1e-12)
    assert t["ring", "LL"] == pytest.approx(bus / 141.0, rel=1e-12)
    assert t["tree", "Simple"] == pytest.approx(bus / (0.92 * link * 7 / 8), rel=1e-12)
    assert t["tree", "LL128"] == pytest.approx(bus / (0.92 * link * 7 / 9 * 7 / 8), rel=1e-12)
    # The tree size table: 64 KiB is point 10 (Simple 0.6); 96 KiB lies log2(1.5) of the way to point 11 (0.5).
    for size, f in ((64 * 1024, 0.6), (96 * 1024, 0.6 - 0.1 * math.log2(1.5))):
        c = {(c.algo, c.proto): c for c in predict(A100, "all_reduce", size).candidates}["tree", "Simple"]
        expect = 2 * 7 / 8 * size / (0.92 * 240.0 * 7 / 8 * f)
        assert c.time_ns - c.latency_ns == pytest.approx(expect, rel=1e-6)


def test_multi_node_ring_takes_the_slower_tier_and_the_plateau_latency() -> None:
    """3 nodes of 4 HDR NICs: ring busbw limited by 4 x 25 x 0.96 = 96 GB/s, not NVLink's 240;
    latency (46 steps: 4 across nodes) x 1.4 for Simple all-reduce across nodes."""
    n, s = 24, 8 * GiB
    p = predict(A100_X3, "all_reduce", s, algo="ring", proto="Simple")
    lat = (8400.0 + (46 - 4) * 3400.0 + 4 * 14000.0) * 1.4
    assert p.time_ns == pytest.approx(lat + 2 * (n - 1) / n * s / 96.0, rel=1e-12)


def test_hop_counts_per_algorithm() -> None:
    """Latency terms: tree 2((ppn-1) intra + log2(nodes) inter); NVLS one NVLink hop; NVLSTree one
    NVLink hop + 2 log2(nodes) network hops; ring LL 2(n-1) hops, 2(nodes-1) of them network ones
    (each intra hop at least NCCL's network overhead, 2 us on AMD)."""
    lat = {(c.algo, c.proto): c.latency_ns for c in predict(H100_X4_AMD, "all_reduce", 8).candidates}
    assert lat["tree", "LL"] == pytest.approx(6800.0 + 2 * (7 * 600.0 + 2 * 5000.0))
    assert lat["tree", "Simple"] == pytest.approx(8400.0 + 2 * (7 * 4000.0 + 2 * 14000.0))
    assert lat["nvls_tree", "Simple"] == pytest.approx(25000.0 + 2 * 2 * 20900.0)
    assert lat["ring", "LL"] == pytest.approx(6600.0 + (62 - 6) * 2000.0 + 6 * 2700.0)
    one = {(c.algo, c.proto): c.latency_ns for c in predict(H100, "all_reduce", 8).candidates}
    assert one["nvls", "Simple"] == 25000.0
    assert one["ring", "LL128"] == pytest.approx(14000.0 + 14 * 1900.0)


def test_network_latency_is_added_to_every_network_hop_twice_for_simple() -> None:
    """`net_latency_ns` x (network hops), x 2 for Simple (as NCCL adds a net plugin's latency), on
    every algorithm; one node has no network hop. EFA's default is 19 us a hop on 100 Gb/s NICs (nccl_tables)."""
    assert default_params(P5_X4_EFA).net_latency_ns == 19000.0
    assert default_params(H100_X4_AMD).net_latency_ns == 0.0  # ib: NCCL's NET table alone
    q0 = default_params(H100_X4_AMD)
    q = dataclasses.replace(q0, net_latency_ns=10000.0)
    hops = {"tree": 2 * 2, "nvls_tree": 2 * 2, "ring": 2 * 3}  # 4 nodes: tree depth 2; ring 2(N-1)
    for c0, c in zip(predict(H100_X4_AMD, "all_reduce", 8, params=q0).candidates,
                     predict(H100_X4_AMD, "all_reduce", 8, params=q).candidates):  # fmt: skip
        per_hop = 10000.0 * (2 if c.proto == "Simple" else 1)
        # 8 B is below ring Simple's plateau (x1.4 only from 64 B a channel and rank on)
        assert c.latency_ns - c0.latency_ns == pytest.approx(hops[c.algo] * per_hop), c

    a2a = predict(H100_X4_AMD, "alltoall", 8, params=q).time_ns - predict(H100_X4_AMD, "alltoall", 8).time_ns
    assert a2a == pytest.approx(2 * 10000.0)  # p2p: one network hop, Simple
    one = dataclasses.replace(H100, network="efa")
    assert predict(one, "all_reduce", 8).time_ns == predict(H100, "all_reduce", 8).time_ns


def test_nvls_bandwidth_follows_the_head_count() -> None:
    """NVLS all-reduce busbw = 2(h-1)/(h+1) x B x e_link x 0.85 with h heads = GPUs per node."""
    for g in (4, 6, 8):
        system = dataclasses.replace(H100, gpus_per_node=g)
        bare = predict(system, "all_reduce", 16 * GiB, algo="nvls").time_ns
        expect = 2 * (g - 1) / (g + 1) * 450.0 * 20.6 / 25.0 * 0.85
        assert bare == pytest.approx(25000.0 + 2 * (g - 1) / g * 16 * GiB / expect, rel=1e-12)


def test_tree_and_nvls_tree_across_nodes_take_the_multi_node_curve() -> None:
    """Across nodes, tree and NVLSTree use one curve (S_half, k) for every tier; a ring keeps the
    tiers' own (none by default). Tree: t = L + per_byte·(S/f(S) + S_half^k·S^(1-k)), f its size table."""
    two = dataclasses.replace(H100, nodes=2, nics_per_node=8, nic_GBps=50.0)
    assert (default_params(two).s_half_multi_bytes, default_params(two).k_multi) == MULTI_NODE_CURVE["hopper"][:2]
    q = dataclasses.replace(default_params(two), tree_max_GBps=math.inf, e_min_multi=0.0)  # the tiers alone, pure
    sh, k = q.s_half_multi_bytes, q.k_multi
    flat = dataclasses.replace(q, s_half_multi_bytes=0.0)
    s = 64 * MiB
    curved = predict(two, "all_reduce", s, params=q, algo="tree", proto="Simple")
    plain = predict(two, "all_reduce", s, params=flat, algo="tree", proto="Simple")
    latency = next(c.latency_ns for c in plain.candidates if (c.algo, c.proto) == ("tree", "Simple"))
    per_byte = (plain.time_ns - latency) / (s / tree_factor(TREE_SIZE_FACTOR[2], s))
    extra = per_byte * sh**k * s ** (1 - k)
    assert curved.time_ns == pytest.approx(plain.time_ns + extra, rel=1e-9)
    nvls = [predict(two, "all_reduce", s, params=p, algo="nvls_tree").time_ns for p in (q, flat)]
    assert nvls[0] > nvls[1]
    ring = [predict(two, "all_reduce", s, params=p, algo="ring", proto="Simple").time_ns for p in (q, flat)]
    assert ring[0] == ring[1]
    one = predict(H100, "all_reduce", s, params=dataclasses.replace(default_params(H100), s_half_multi_bytes=1e9))
    assert one.time_ns == predict(H100, "all_reduce", s).time_ns  # one node: no multi-node algorithm


@pytest.mark.parametrize("floor", [0.002, 0.05, 0.3])
def test_the_multi_node_curves_floor_bounds_its_extra_time(floor: float) -> None:
    """With a floor f the curve's extra time is per_byte·S·(1 - f)·S_half^k / (S^k + f·S_half^k): at
    most S·(1/f - 1) bandwidth-bytes (tiny messages stay latency-bound), never above the pure curve's,
    and the same as it for S >> S_half; f = 0 is the pure curve."""
    two = dataclasses.replace(H100, nodes=2, nics_per_node=8, nic_GBps=50.0)
    q = dataclasses.replace(default_params(two), tree_max_GBps=math.inf, e_min_multi=0.0)  # the tiers alone, pure
    floored, flat = dataclasses.replace(q, e_min_multi=floor), dataclasses.replace(q, s_half_multi_bytes=0.0)
    sh, k = q.s_half_multi_bytes, q.k_multi
    for s in (8, 4 * KiB, MiB, 64 * MiB, 16 * GiB):
        times = [
            predict(two, "all_reduce", s, params=p, algo="tree", proto="Simple").time_ns for p in (q, floored, flat)
        ]
        latency = next(
            c.latency_ns
            for c in predict(two, "all_reduce", s, params=flat).candidates
            if c.algo == "tree" and c.proto == "Simple"
        )
        per_byte = (times[2] - latency) / (s / tree_factor(TREE_SIZE_FACTOR[2], s))
        extra = per_byte * s * (1 - floor) * sh**k / (s**k + floor * sh**k)
        assert times[1] == pytest.approx(times[2] + extra, rel=1e-9)
        assert times[2] <= times[1] <= times[0] * (1 + 1e-12)
        assert times[1] - times[2] <= per_byte * s * (1 / floor - 1) * (1 + 1e-9)
    big = [predict(two, "all_reduce", 1 << 40, params=p, algo="tree", proto="Simple").time_ns for p in (q, floored)]
    assert big[1] == pytest.approx(big[0], rel=3e-3)  # S = 2^14 x S_half: the curve itself adds under 1 %


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_busbw_is_algbw_times_the_nccl_tests_factor(collective: str) -> None:
    factor = {"all_reduce": 2 * 15 / 16, "broadcast": 1.0, "reduce": 1.0}.get(collective, 15 / 16)
    assert bus_factor(collective, 16) == pytest.approx(factor)
    p = predict(P5_X2, collective, 96 * MiB)
    assert p.algbw_GBps == pytest.approx(96 * MiB / p.time_ns)
    assert p.busbw_GBps == pytest.approx(p.algbw_GBps * factor)


def test_alltoall_does_not_aggregate_nics() -> None:
    """p2p all-to-all across 2 nodes: the network part is (n-ppn)/n S through one 12.5 GB/s NIC per
    GPU (p5 has 4 per GPU), not the node's 400 GB/s."""
    s = 4 * GiB
    p = predict(P5_X2, "alltoall", s)
    assert (p.algo, p.proto) == ("p2p", "Simple")
    net = 8 / 16 * s / (12.5 * 0.96)
    assert p.time_ns == pytest.approx(8400.0 + 3400.0 + 14000.0 + net, rel=1e-12)


def test_size_zero_costs_the_latency_and_ties_go_to_nccls_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """With tree and ring given equal latencies in the tuner's parameters (the defaults), a zero-byte
    all-reduce ties: NCCL keeps the first in its order (tree before ring)."""
    q = dataclasses.replace(
        default_params(A100), tree_base_ns=(6600.0, 14000.0, 8400.0), tree_intra_hop_ns=(600.0, 1900.0, 3400.0)
    )
    system = dataclasses.replace(A100)  # a new object: no plans cached for it
    monkeypatch.setattr(model, "default_params", lambda _system: q)
    p = predict(system, "all_reduce", 0, proto="Simple")
    assert (p.algo, p.time_ns) == ("tree", 8400.0 + 14 * 3400.0)
    assert p.algbw_GBps == 0.0


def test_calibrated_parameters_time_nccls_choice_but_do_not_change_it() -> None:
    """NCCL's tuner does not know a calibration: parameters that make NVLS far slower still time the
    NVLS plan the defaults choose, and forcing ring gives a faster time."""
    slow_nvls = dataclasses.replace(default_params(H100), e_nvls_intra=0.05)
    for size in (16 * MiB, GiB):
        nccl = predict(H100, "all_reduce", size)
        p = predict(H100, "all_reduce", size, params=slow_nvls)
        assert (p.algo, p.proto) == (nccl.algo, nccl.proto) == ("nvls", "Simple")
        assert predict_time(H100, "all_reduce", size, slow_nvls)[::2] == (p.time_ns, "nvls")
        assert p.time_ns > 5 * nccl.time_ns
        assert predict(H100, "all_reduce", size, params=slow_nvls, algo="ring").time_ns < p.time_ns
    # NVLS disabled (efficiency 0): NCCL's pick is the tuner's best of what runs
    no_nvls = dataclasses.replace(default_params(H100), e_nvls_intra=0.0)
    p = predict(H100, "all_reduce", GiB, params=no_nvls)
    ranked = sorted(predict(H100, "all_reduce", GiB).candidates, key=lambda c: c.time_ns)
    assert (p.algo, p.proto) == next((c.algo, c.proto) for c in ranked if c.algo != "nvls")
    ran = next(c for c in p.candidates if (c.algo, c.proto) == (p.algo, p.proto))
    assert predict_time(H100, "all_reduce", GiB, no_nvls) == (p.time_ns, ran.latency_ns, p.algo, p.proto)


def test_efficiency_curve_with_k_one_is_a_constant_extra_latency() -> None:
    """e(S) = e_max S/(S + S_half) adds exactly S_half/(B e_max) x factor to every size."""
    q = dataclasses.replace(default_params(H100), s_half_intra_bytes=4.0 * MiB)
    for s in (MiB, 64 * MiB, GiB):
        base = predict(H100, "all_gather", s, algo="ring", proto="Simple").time_ns
        curved = predict(H100, "all_gather", s, params=q, algo="ring", proto="Simple").time_ns
        assert curved - base == pytest.approx(7 / 8 * 4 * MiB / (450.0 * 20.6 / 25.0), rel=1e-9)


# --- invariants --------------------------------------------------------------------------------------


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("curved", (False, True))
def test_time_grows_with_size_and_forcing_never_beats_the_choice(system: NcclSystem, curved: bool) -> None:
    """Every candidate's time grows with size and forcing it gives that time; NCCL's choice is made
    under the defaults (its tuner), where it is the fastest candidate and grows with size; other
    parameters time the same choice."""
    params = _curved(system) if curved else default_params(system)
    for collective in COLLECTIVES:
        previous: dict[tuple[str, str], float] = {}
        last = -1.0
        for s in SIZES:
            p = predict(system, collective, s, params=params)
            nccl = predict(system, collective, s)
            assert (p.algo, p.proto) == (nccl.algo, nccl.proto)
            assert nccl.time_ns >= last
            last = nccl.time_ns
            assert all(nccl.time_ns <= c.time_ns for c in nccl.candidates)
            assert p.time_ns == next(c.time_ns for c in p.candidates if (c.algo, c.proto) == (p.algo, p.proto))
            for c in p.candidates:
                forced = predict(system, collective, s, params=params, algo=c.algo, proto=c.proto)
                assert forced.time_ns == c.time_ns
                assert c.time_ns >= previous.get((c.algo, c.proto), -1.0)
                previous[(c.algo, c.proto)] = c.time_ns


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_more_bandwidth_is_never_slower(collective: str) -> None:
    for system in (P5_X2, A100_X3, H100_X4_AMD):
        q = default_params(system)
        for field in ("nvlink_GBps", "nic_GBps", "nics_per_node"):
            value = getattr(system, field)
            faster = dataclasses.replace(system, **{field: value * 2})
            for s in SIZES:
                fast = {(c.algo, c.proto): c.time_ns for c in predict(faster, collective, s, params=q).candidates}
                assert all(
                    fast[(c.algo, c.proto)] <= c.time_ns for c in predict(system, collective, s, params=q).candidates
                )
                assert predict(faster, collective, s).time_ns <= predict(system, collective, s).time_ns


@pytest.mark.parametrize(
    "system",
    (
        A100,  # NVSwitch but Ampere
        dataclasses.replace(H100, fabric="nvlink_mesh"),  # Hopper without NVSwitch
        NcclSystem("hopper", 4, fabric="pcie", pcie_GBps=64.0),
        dataclasses.replace(H100, nvls_enabled=False),  # NCCL_NVLS_ENABLE=0
    ),
)
def test_nvls_is_refused_without_nvswitch_and_hopper(system: NcclSystem) -> None:
    with pytest.raises(
        InputError, match=r"^algo: 'nvls' cannot run all_reduce on this system \(allowed: tree, ring\)$"
    ):
        predict(system, "all_reduce", MiB, algo="nvls")
    assert all(c.algo in ("tree", "ring") for c in predict(system, "all_reduce", GiB).candidates)


def test_other_refusals_name_what_can_run() -> None:
    with pytest.raises(InputError, match=r"'nvls_tree' cannot run all_reduce.*allowed: tree, ring, nvls\)"):
        predict(H100, "all_reduce", MiB, algo="nvls_tree")  # one node
    with pytest.raises(InputError, match=r"'tree' cannot run all_gather.*allowed: ring, nvls\)"):
        predict(H100, "all_gather", MiB, algo="tree")
    with pytest.raises(InputError, match=r"'ring' cannot run alltoall.*allowed: p2p\)"):
        predict(H100, "alltoall", MiB, algo="ring")
    with pytest.raises(
        InputError, match=r"proto: 'LL128' cannot run all_reduce on this system \(allowed: LL, Simple\)"
    ):
        predict(PCIE, "all_reduce", MiB, proto="LL128")  # NCCL turns LL128 off on PCIe
    with pytest.raises(InputError, match=r"proto: 'LL' cannot run all_reduce with nvls.*allowed: Simple\)"):
        predict(H100, "all_reduce", MiB, algo="nvls", proto="LL")


@pytest.mark.parametrize(
    ("make", "field"),
    (
        (lambda: NcclSystem("pascal", 8, nvlink_GBps=1.0, nvlink_links=1), "generation"),
        (lambda: NcclSystem("hopper", 1), "gpus_per_node"),
        (lambda: NcclSystem("hopper", 8, 2, nvlink_GBps=450.0, nvlink_links=18), "nics_per_node"),
        (lambda: NcclSystem("hopper", 8, nvlink_GBps=0.0, nvlink_links=18), "nvlink_GBps"),
        (lambda: NcclSystem("hopper", 8, fabric="infinityfabric"), "fabric"),
        (lambda: NcclSystem("hopper", 8, nvlink_GBps=450.0, nvlink_links=18, network="slingshot"), "network"),
        (lambda: dataclasses.replace(default_params(H100), net_latency_ns=-1.0), "net_latency_ns"),
        (lambda: NcclSystem("hopper", 8, nvlink_GBps=math.nan, nvlink_links=18), "nvlink_GBps"),
        (lambda: dataclasses.replace(default_params(H100), k_intra=2.0), "k_intra"),
        (lambda: dataclasses.replace(default_params(H100), e_ring_intra=1.5), "e_ring_intra"),
        (lambda: dataclasses.replace(default_params(H100), ring_inter_hop_ns=(1.0, 2.0)), "ring_inter_hop_ns"),
        (lambda: predict(H100, "allreduce", 8), "collective"),
        (lambda: predict(H100, "all_reduce", -1), "size_bytes"),
        (lambda: predict(H100, "all_reduce", 8.0), "size_bytes"),  # type: ignore[arg-type]
        (lambda: predict(H100, "all_reduce", True), "size_bytes"),
        (lambda: predict(H100, "all_reduce", 8, params={}), "params"),  # type: ignore[arg-type]
    ),
)
def test_bad_input_is_one_line_naming_the_field(make: object, field: str) -> None:
    with pytest.raises(InputError) as err:
        make()  # type: ignore[operator]
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_zero_efficiency_disables_an_algorithm_like_nccls_zero_bandwidth() -> None:
    q = dataclasses.replace(default_params(H100), e_nvls_intra=0.0)
    p = predict(H100, "all_reduce", 16 * GiB, params=q)
    assert p.algo == "ring" and all(c.algo != "nvls" for c in p.candidates)


# --- sanity checks against public measurements (default parameters; not the calibrated validation) ---


def test_h100_one_node_all_reduce_plateaus() -> None:
    """Sanity check, default parameters: NVLS busbw at 4-16 GB within 10 % of the measured ~480,
    forced ring within 10 % of ~365-370."""
    # source: aws_p5_1node_allreduce_batch.txt (aws-samples/awsome-distributed-training @7217859,
    # micro-benchmarks/nccl-tests/aws-batch/README.md), out-of-place busbw at 4, 8, 16 GiB
    measured = {4 * GiB: 475.97, 8 * GiB: 480.43, 16 * GiB: 483.05}
    for s, busbw in measured.items():
        p = predict(H100, "all_reduce", s)
        assert p.algo == "nvls"
        assert p.busbw_GBps == pytest.approx(busbw, rel=0.10)
    # source: NVIDIA/nccl issue 1455 ("busbw is about 365-370 GBps" with NCCL_ALGO=RING, 2-4 GB);
    # stas00/ml-engineering network/README.md: 367.2 at 16 GiB with NCCL_NVLS_ENABLE=0 (H200)
    for s in (4 * GiB, 16 * GiB):
        assert predict(H100, "all_reduce", s, algo="ring").busbw_GBps == pytest.approx(367.5, rel=0.10)


def test_h100_algorithm_switch_point() -> None:
    """Sanity check: NCCL picks ring LL up to 1 MB and NVLS Simple from 2 MB on one 8 x H100 node."""
    # source: NVIDIA/nccl-tests issue 309 (NCCL_DEBUG on 1 node: "8B~1MB: uses Algo RING proto LL",
    # "2MB~16GB uses Algo NVLS proto SIMPLE"); stas00/ml-engineering says the same for 8 x H200.
    for s in (8, 4096, 256 * 1024, MiB):
        assert (predict(H100, "all_reduce", s).algo, predict(H100, "all_reduce", s).proto) == ("ring", "LL")
    for s in (2 * MiB, 64 * MiB, 16 * GiB):
        assert (predict(H100, "all_reduce", s).algo, predict(H100, "all_reduce", s).proto) == ("nvls", "Simple")


def test_nvls_ramp_with_gpu_count_and_other_nodes() -> None:
    """Sanity check: NVLS busbw by GPU count (H100), H800, A100 and 2- and 3-node plateaus, each
    within 10 % of the public figure."""
    # source: NVIDIA/nccl issue 1455 (NCCL_ALGO=NVLS, 2-4 GB): 5 -> 420, 6 -> 440, 7 -> 460, 8 -> 480
    for g, busbw in ((5, 420.0), (6, 440.0), (7, 460.0), (8, 480.0)):
        system = dataclasses.replace(H100, gpus_per_node=g)
        assert predict(system, "all_reduce", 4 * GiB).busbw_GBps == pytest.approx(busbw, rel=0.10)
    # source: NVIDIA/nccl issue 1374: H800 x 8 NVLS all-reduce busbw 215 GB/s (8 NVLink4 links)
    h800 = NcclSystem("hopper", 8, nvlink_GBps=200.0, nvlink_links=8)
    assert predict(h800, "all_reduce", 8 * GiB).busbw_GBps == pytest.approx(215.0, rel=0.10)
    # source: stas00/ml-engineering network/README.md, 8 x A100: busbw 234.89 at 16 GiB
    assert predict(A100, "all_reduce", 16 * GiB).busbw_GBps == pytest.approx(234.89, rel=0.10)
    # source: aws_p5_2node_allreduce.txt (aws-samples/awsome-distributed-training @7217859): 464.57 at 16 GiB
    assert predict(P5_X2, "all_reduce", 16 * GiB).busbw_GBps == pytest.approx(464.57, rel=0.10)
    # source: NVIDIA/nccl-tests issue 119 (3 x DGX-A100, 4 HDR per node): "peak performance reaches about 96GB/s"
    assert predict(A100_X3, "all_reduce", 128 * MiB).busbw_GBps == pytest.approx(96.0, rel=0.10)


def test_small_size_floor_within_a_factor_of_two() -> None:
    """Sanity check: the latency floor of the default parameters within x2 of the measured one."""
    # source: aws_p5_1node_allreduce_batch.txt: 8 B all-reduce, 12.90 us out-of-place (8 x H100)
    assert 0.5 < predict(H100, "all_reduce", 8).time_ns / 12900.0 < 2.0
    # source: redhat_dell_h200_2node_roce.txt (2 x 8 H200, 8 x 400G RoCE, NCCL 2.30.4): 1 KB, 45.06 us
    h200_x2 = NcclSystem("hopper", 8, 2, nvlink_GBps=450.0, nvlink_links=18, nics_per_node=8, nic_GBps=50.0)
    assert 0.5 < predict(h200_x2, "all_reduce", 1024).time_ns / 45060.0 < 2.0
    # source: aws_p5_2node_allreduce.txt (2 x p5, EFA): 8 B, 69.12 us; aws_p4de_2node_allreduce.txt
    # (2 x p4de, EFA v1): 164.3 us. NCCL's own table (network "ib") gives 25.2 us, below half of either.
    p5 = dataclasses.replace(P5_X2, network="efa", cpu="amd")
    assert predict(P5_X2, "all_reduce", 8).time_ns / 69120.0 < 0.5
    assert 0.5 < predict(p5, "all_reduce", 8).time_ns / 69120.0 < 2.0
    p4de = NcclSystem("ampere", 8, 2, nvlink_GBps=300.0, nvlink_links=12, nics_per_node=4, nic_GBps=12.5, network="efa")
    assert 0.25 < predict(p4de, "all_reduce", 8).time_ns / 164300.0 < 1.0  # EFA v1 is slower still


def test_tables_are_importable_from_the_model() -> None:
    """The constant tables live in nccl.tables; callers may import them from nccl.model too."""
    from dse.core import limits
    from dse.costs.nccl import model as nccl_model
    from dse.costs.nccl import tables as nccl_tables

    public = [n for n in vars(nccl_tables) if n[0].isupper() and n not in vars(limits)]
    assert {"NET_LATENCY_NS", "NETWORKS", "TREE_SIZE_FACTOR", "NVLINK_EFFECTIVE_GBps"} <= set(public)
    for name in public:
        assert getattr(nccl_model, name) is getattr(nccl_tables, name), name
    assert set(nccl_tables.NET_LATENCY_NS) == set(nccl_tables.NETWORKS)


def test_predict_time_is_predicts_choice() -> None:
    """predict_time gives predict's (time, latency, algo, proto) on every system, collective and size
    tried, with default and fitted-looking parameters; bad input is one InputError."""
    systems = (H100, H100_X4_AMD, NcclSystem("volta", 8, fabric="nvlink_mesh", nvlink_GBps=150.0, nvlink_links=6))
    for system in systems:
        q = dataclasses.replace(default_params(system), s_half_intra_bytes=3e5, k_intra=0.7, k_multi=0.8)
        for params in (None, q):
            for collective in COLLECTIVES:
                for size in [0, 1, 8, 1000, 4096, 12345] + [2**e for e in range(13, 35, 3)]:
                    p = predict(system, collective, size, params=params)
                    got = predict_time(system, collective, size, params)
                    c = next(c for c in p.candidates if (c.algo, c.proto) == (p.algo, p.proto))
                    assert got == (p.time_ns, c.latency_ns, p.algo, p.proto)
    for bad in ((H100, "gather", 8), (H100, "all_reduce", -1), (H100, "all_reduce", 1.5), ("h100", "all_reduce", 8)):
        with pytest.raises(InputError):
            predict_time(*bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [8, 4096, MiB, GiB])
def test_gpus_per_thread_adds_its_launch_latency_and_leaves_the_choice(size: int) -> None:
    """-g G adds (G - 1) x LAUNCH_PER_GPU_NS to time and latency of every candidate; NCCL's choice, and
    predict_time's numbers, follow; the default (1) adds nothing."""
    system = NcclSystem("hopper", 8, nodes=2, nvlink_GBps=450.0, nvlink_links=18, nics_per_node=8, nic_GBps=50.0)
    one, eight = predict(system, "all_reduce", size), predict(system, "all_reduce", size, gpus_per_thread=8)
    assert eight.time_ns - one.time_ns == pytest.approx(7 * LAUNCH_PER_GPU_NS)
    assert (eight.algo, eight.proto) == (one.algo, one.proto)
    for a, b in zip(one.candidates, eight.candidates):
        assert (b.time_ns - a.time_ns, b.latency_ns - a.latency_ns) == pytest.approx((7 * LAUNCH_PER_GPU_NS,) * 2)
    assert predict_time(system, "all_reduce", size, None, 8) == pytest.approx(
        (
            eight.time_ns,
            eight.candidates[[c[:2] for c in eight.candidates].index((eight.algo, eight.proto))].latency_ns,
            eight.algo,
            eight.proto,
        )
    )
    assert predict(system, "all_reduce", size, gpus_per_thread=1) == one


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, 1025])
def test_bad_gpus_per_thread_is_refused(bad: object) -> None:
    system = NcclSystem("ampere", 8, nvlink_GBps=300.0, nvlink_links=12, nvls_enabled=False)
    for call in (
        lambda: predict(system, "all_reduce", 8, gpus_per_thread=bad),
        lambda: predict_time(system, "all_reduce", 8, None, bad),
    ):  # type: ignore[arg-type]
        with pytest.raises(InputError, match="gpus_per_thread"):
            call()
    assert launch_ns(8) == 7 * LAUNCH_PER_GPU_NS and launch_ns(1) == 0.0


def test_launch_per_gpu_is_the_a100_blogs_g8_minus_g1_floor() -> None:
    """LAUNCH_PER_GPU_NS's derivation (dse/data/nccl/blog_cn_a100_8gpu_1node.txt, runs A -g 8 and B -g 1
    on one 8 x A100 node): median over 8 B-16 KiB of the out-of-place time difference, / 7, to 0.1 us."""
    a, b = read_nccl_tests("dse/data/nccl/blog_cn_a100_8gpu_1node.txt")
    assert (a.gpus_per_thread, b.gpus_per_thread) == (8, 1)
    diffs = sorted(
        ra.out_of_place.time_us - rb.out_of_place.time_us  # type: ignore[union-attr,operator]
        for ra, rb in zip(a.rows, b.rows)
        if ra.size_bytes <= 16384
    )
    assert len(diffs) == 12
    median_us = (diffs[5] + diffs[6]) / 2
    assert round(median_us / 7, 1) == LAUNCH_PER_GPU_NS / 1000
