"""NCCL's constant tables for the closed-form model (`dse.costs.nccl.model`, which re-exports every
name here): the choices a system can name (generations, fabrics, CPUs, networks), NCCL 2.30.7's tuner
constants (src/graph/tuning.cc, topo.h, search.cc; numbers only, each with its source), and our
per-network, launch and multi-node defaults (each with the public measurements it comes from). Logic
only to read the tables (tree size factor, launch latency) and the input checks the model's
dataclasses share.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from dse.core.errors import InputError
from dse.core.limits import MAX_NS
from dse.costs.nccl.env import allowed

GENERATIONS = ("volta", "ampere", "hopper", "blackwell")
FABRICS = ("nvswitch", "nvlink_mesh", "pcie")
CPUS = ("intel", "amd", "arm", "other")
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce")
#: NCCL's algorithm order (ties go to the first); p2p is all-to-all's grouped send/receive.
ALGORITHMS = ("tree", "ring", "nvls", "nvls_tree", "p2p")
PROTOCOLS = ("LL", "LL128", "Simple")

#: NCCL's effective NVLink rate per link and direction, GB/s (topo.h: SM70/SM80 20, SM90 20.6,
#: SM100 40.1), against line rates of 25/25/25/50 GB/s: the default ring efficiency is their ratio.
NVLINK_EFFECTIVE_GBps = {"volta": 20.0, "ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}
#: NCCL models PCIe Gen3 x16 as 12 GB/s (topo.h PCI_BW) of a 15.75 GB/s line rate.
PCIE_EFFICIENCY = 12.0 / 15.75
#: NCCL's inter-node speed lists stop just below the NIC rate (48 of NDR's 50, 24 of HDR's 25;
#: search.cc); measured IB rings reach 0.92-0.96 of the NIC (NCCL's maintainers in nccl-tests issues 267, 290).
NET_EFFICIENCY = 0.96
#: NCCL's 0.92 on every tree bandwidth (tuning.cc) and ring LL128 (from 2.23).
TREE_FACTOR = 0.92
RING_LL_FACTOR, RING_LL128_FACTOR = 0.5, 0.92
TREE_LL_FACTOR = 1 / 3.8
#: Tree LL128 share: 7/9 on one node, 120/128 across nodes (tuning.cc).
TREE_LL128_FACTOR = (7 / 9, 120 / 128)
#: NVLS efficiency (tuning.cc nvlsEfficiency): Hopper 0.85, Blackwell 0.74; none before Hopper.
NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}
#: NVLSTree per-channel cap, GB/s, at 2 and at >= 3 nodes (tuning.cc).
NVLS_TREE_MAX_PER_CHANNEL_GBps = {"hopper": (57.7, 45.5), "blackwell": (96.0, 80.0)}
#: NCCL's per-channel caps, GB/s a search channel, at 1, 2 and >= 3 nodes (tuning.cc
#: perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws); NCCL multiplies them by the search's
#: channel count (`dse.costs.nccl.channels`).
PER_CHANNEL_RING_LL128_GBps = {"volta": 20.0, "ampere": 20.0, "hopper": 36.7, "blackwell": 40.0}
PER_CHANNEL_TREE_LL128_GBps = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 29.0),
    "blackwell": (55.6, 31.67, 20.0),
}
PER_CHANNEL_TREE_GBps = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (38.7, 41.4, 36.0),
    "blackwell": (70.0, 42.8, 24.0),
}
#: NCCL's LL bandwidth cap, GB/s (tuning.cc llMaxBw): one node by generation; across nodes by CPU
#: (2 nodes, >= 3 nodes).
LL_MAX_ONE_NODE_GBps = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 282.0}
LL_MAX_MULTI_NODE_GBps = {"amd": (22.5, 19.0), "other": (39.0, 20.4)}
#: Tree all-reduce bandwidth factor by size, point i at 64·2^i bytes (tuning.cc; NCCL applies it
#: stepwise, we interpolate in log2(size) so that time grows with size).
_TREE_SIZE_TENTHS = (
    "10 10 10 10 9 8 7 7 7 7 6 5 4 4 5 6 7 8 9 10 10 10 10 10",  # LL
    "10 10 10 10 10 9 8 8 8 7 6 6 6 6 6 6 8 9 9 9 9 10 10 10",  # LL128
    "9 9 9 9 9 9 9 8 7 6 6 5 5 5 5 6 7 8 7 7 8 9 9 9",  # Simple
)
TREE_SIZE_FACTOR = tuple(tuple(int(v) / 10 for v in row.split()) for row in _TREE_SIZE_TENTHS)
#: Ring Simple all-reduce latency across nodes ("plateau effect", tuning.cc): x1.4 on SM >= 80, x1.9 before.
RING_SIMPLE_MULTINODE_LAT = {"volta": 1.9, "ampere": 1.4, "hopper": 1.4, "blackwell": 1.4}
MAX_NVLS_HEADS = 32  # NVLS channels: one per head GPU, at most 32 (search.cc)

#: NCCL releases whose tuner dse restates where it changed (tuning.cc): NVLSTree's network hop is
#: 14 us before 2.28.9 and 20.9 us from it. "" (no release named) is the newest restated, 2.30.7.
NEWEST_RELEASE = (2, 30, 7)
NVLS_TREE_NET_HOP_NS = ((2, 28, 9), 14000.0, 20900.0)  # (first release of the new value, before, from)


def nccl_release(version: str, field: str = "nccl_version") -> tuple[int, int, int]:
    """NCCL's release ("2.26.2") as a tuple, "" as the newest dse restates (`NEWEST_RELEASE`). Bad
    input: `InputError` naming `field`."""
    if version == "":
        return NEWEST_RELEASE
    parts = version.split(".") if isinstance(version, str) else []
    if len(parts) != 3 or not all(p.isdigit() and len(p) <= 4 for p in parts):
        raise InputError(field, f"{version!r} is not an NCCL release", 'major.minor.patch, as "2.26.2", or ""')
    return (int(parts[0]), int(parts[1]), int(parts[2]))


def release_name(version: str) -> str:
    """The release `version` names, as printed: itself, or the newest restated for ""."""
    return version or ".".join(map(str, NEWEST_RELEASE))


#: Network kinds (`NcclSystem.network`): InfiniBand, RoCE (NCCL's IB verbs transport over Ethernet),
#: AWS EFA (libfabric through the aws-ofi-nccl plugin) and TCP-class transports (sockets, GCP's
#: GPUDirect-TCPX/TCPXO plugins).
NETWORKS = ("ib", "roce", "efa", "tcp")
#: The NCCL transport each network kind runs on: IB and RoCE share NCCL's IB verbs transport; EFA
#: runs the aws-ofi-nccl plugin, TCP-class networks sockets or their own plugins.
NET_TRANSPORT = {"ib": "ib verbs", "roce": "ib verbs", "efa": "ofi plugin", "tcp": "sockets"}
#: The network's own latency per hop, ns (`NcclParams.net_latency_ns`): what a network hop costs
#: beyond NCCL's NET hop table, like the NIC latency NCCL's net plugins may report (graph latencyInter,
#: added once per network hop, twice for Simple). Each default is (measured 16-32 B all-reduce floor -
#: this model's floor with 0) / the network hops of that floor (tree LL: 2 log2(nodes)), rounded to
#: 1 us, from public runs that are NOT among scripts/validate_nccl.py's machines:
#: - ib 0 (NCCL's own table): 2 x 8 B200 over NDR IB floor 35.5 us vs 25.2 modelled (dstackai/dstack
#:   lambda.md @511c318: +5 us a hop) and 2 x 8 H20 over NDR IB with NVLSTree 46.3 us vs 66.8 (NVIDIA/nccl
#:   issue 1244: below the table already) bracket it, so the table stays;
#: - roce 0: as ib (NCCL's same IB verbs transport; no public floor outside the validation set);
#: - efa 19000 on 100 Gb/s devices (EFA v1 and v2: p4d/p4de, p5), 14000 from 200 Gb/s on (EFA v3:
#:   p5en; `EFA_FAST_*`, `net_latency_ns`): EFA's generations differ, and the NIC's rate tells them
#:   apart. 2 x p5 (H100, 32 x 100G EFA v2, NCCL 2.22.3), 63.4 us at 16 B vs 25.7 modelled over 2
#:   hops: 18.9 us a hop (KeitaW/p5-nccl-test-2024-07-19 @1c78584, nccl-test-output-v2.22.3-1.log;
#:   dse/data/nccl/keitaw_p5_h100_2node_allreduce.txt); 16 x p5en (H200, 16 x 200G EFA v3; 16 nodes
#:   from busbw/algbw = 1.984), 167.3 us at 16 B vs 55.7 modelled over 8 hops: 13.9 us a hop
#:   (aws-samples/awsome-distributed-training @7217859,
#:   micro-benchmarks/nccl-tests/slurm/topology-aware-nccl-tests/README.md); tests/test_nccl_defaults.py
#:   recomputes both. No outside run has EFA v1 (100 Gb/s, as v2): it takes v2's;
#: - tcp 49000: 2 x GCP A3 Mega (H100, GPUDirect-TCPXO), 123.2 us at 16-128 B vs 25.7 over 2 hops
#:   (lessizzmore/create-a3mega-ztan-fork @346b825, ztan-NCCL-test-result.markdown).
#: Rechecked against the hop count `_latency_ns` uses (tree LL floors: base + 2 x 7 fabric hops +
#: 2 log2(nodes) network hops, the net latency once each; tree LL stays NCCL's choice with it): p5en
#: 16 nodes 55.7 -> 167.7 us modelled (167.3 measured), 2 x p5 25.7 -> 63.7 (63.4), A3 Mega 25.7 -> 123.7
#: (123.2). No other public
#: out-of-set floor tightens efa or roce: aws_p5_2node_allreduce_eks has only size 0 (no network
#: transfer), stas_p5en_4node and nccl1221 (RoCE) are bandwidth prose, dstack GCP A4 (RoCE) starts at
#: 8 MB (bandwidth-bound), the MI355X RoCE run is RCCL on a GPU this model has no generation for.
NET_LATENCY_NS = {"ib": 0.0, "roce": 0.0, "efa": 19000.0, "tcp": 49000.0}
#: EFA from this NIC rate on (GB/s: 200 Gb/s, EFA v3 and later) takes this latency a hop (above).
EFA_FAST_NIC_GBps, EFA_FAST_LATENCY_NS = 25.0, 14000.0
#: Launch latency per collective for each GPU beyond the first that one nccl-tests thread drives
#: (``-g G``, the log's ``# nThread T nGpus G`` header; `predict`'s `gpus_per_thread`): one thread
#: enqueues the collective on its G GPUs in turn, so the last starts (G - 1) launches late (our linear
#: model). 2.2 us = the median over 8 B-16 KiB of (out-of-place time with -g 8 - with -g 1) on one
#: 8 x A100 node, 15.5 us, / 7 (blog_cn_a100_8gpu_1node.txt runs A and B, a calibration-only file of
#: dse/data/nccl; 2.3 us from the in-place column).
LAUNCH_PER_GPU_NS = 2200.0


def net_latency_ns(network: str, nic_GBps: float) -> float:
    """The network's own latency a hop by default (`NET_LATENCY_NS`): by its kind, and for EFA by
    its generation, told by the NIC's rate (`EFA_FAST_NIC_GBps`)."""
    if network == "efa" and nic_GBps >= EFA_FAST_NIC_GBps:
        return EFA_FAST_LATENCY_NS
    return NET_LATENCY_NS[network]


def launch_ns(gpus_per_thread: int) -> float:
    """The extra launch latency of one collective when one nccl-tests thread drives `gpus_per_thread`
    GPUs (``-g``): `LAUNCH_PER_GPU_NS` x (gpus_per_thread - 1), 0 for one GPU per thread. Not a whole
    number from 1 to 1024: `InputError`."""
    if gpus_per_thread == 1 and type(gpus_per_thread) is int:
        return 0.0
    check_integer("gpus_per_thread", gpus_per_thread, 1, 1024)
    return LAUNCH_PER_GPU_NS * (gpus_per_thread - 1)


def tree_factor(table: tuple[float, ...], s: float) -> float:
    """NCCL's tree size factor for `s` bytes, interpolated linearly in log2(s/64) between its points
    (point i at 64·2^i bytes), 1 below 64 B, ramping to 1 one octave past the last point."""
    if s < 64:
        return 1.0
    x = math.log2(s / 64)
    i = int(x)
    if i >= len(table):
        return 1.0
    after = table[i + 1] if i + 1 < len(table) else 1.0
    return table[i] + (after - table[i]) * (x - i)


# --- input checks shared by the model's dataclasses (one InputError each) ------------------------
def check_forced(plans: tuple[tuple[object, ...], ...], collective: str, algo: str | None, proto: str | None) -> None:
    """`InputError` for forced algorithms or protocols (canonical NCCL_ALGO / NCCL_PROTO values,
    `dse.costs.nccl.env.allowed`) no plan offers, naming the ones that are available."""
    if not plans:
        raise InputError("params", f"no algorithm has a nonzero bandwidth for {collective}", "an efficiency above 0")
    algos = [a for a in ALGORITHMS if any(p[0] == a for p in plans)]
    wanted, wanted_protos = allowed(algo, collective), allowed(proto, collective)
    if wanted is not None and not wanted & set(algos):
        raise InputError("algo", f"{algo!r} cannot run {collective} on this system", ", ".join(algos))
    matching = [p for p in plans if wanted is None or p[0] in wanted]
    protos = [pr for pr in PROTOCOLS if any(p[1] == pr for p in matching)]
    if wanted_protos is not None and not wanted_protos & set(protos):
        what = f"{collective} with {algo}" if algo else collective
        raise InputError("proto", f"{proto!r} cannot run {what} on this system", ", ".join(protos))


def check_choice(field: str, value: object, allowed: tuple[str, ...]) -> None:
    """`InputError` unless `value` is one of `allowed`."""
    if value not in allowed:
        raise InputError(field, f"{value!r} is not known", ", ".join(allowed))


def check_integer(field: str, value: object, lo: int, hi: int) -> None:
    """`InputError` unless `value` is an int (not a bool) from `lo` to `hi`."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(field, f"{value!r} is not an integer in range", f"{lo} to {hi}")


def check_number(field: str, value: object, lo: float, hi: float) -> None:
    """`InputError` unless `value` is an int or float (not a bool) from `lo` to `hi`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise InputError(field, f"{value!r} is out of range", f"a number from {lo:g} to {hi:g}")


def check_lat3(field: str, value: object) -> None:
    """`InputError` unless `value` is a tuple of three latencies from 0 to MAX_NS."""
    if not (isinstance(value, tuple) and len(value) == 3):
        raise InputError(field, f"{value!r} is not three latencies", "(LL, LL128, Simple) in ns")
    for v in value:
        check_number(field, v, 0.0, MAX_NS)


#: Tree and NVLSTree across nodes ramp up far more slowly than one node's or the network's own curve:
#: one curve e(S) = S^k/(S^k + S_half^k), never below floor x e_max, replaces every tier's for them
#: (`NcclParams.s_half_multi_bytes`, `k_multi`, `e_min_multi`; ours, not NCCL's), by GPU generation,
#: each the best of a grid (S_half 2^16..2^29 B x k 0.3..1.0 in 0.1 x MULTI_NODE_FLOORS) on public
#: all-reduce runs, the rest NCCL's values:
#: - Blackwell: on 2 x 8 B200 over RoCE, 8 MB-8 GB (GCP A4; dstackai/dstack @511c318
#:   mkdocs/docs/examples/clusters/gcp.md), with 3 x 8 A100 with 4 HDR NICs a node, 22-86 MB
#:   (NVIDIA/nccl-tests issue 119; it runs ring there, so it does not move the grid): mean |log error|
#:   21.1 -> 12.0 %. Runs outside the validation. They start at 8 MB, above where a floor acts, and no
#:   floor improves them: none.
#: - Hopper: on 12 multi-node H100/H200 runs, each weighing the same (scripts/nccl_hopper_curve.py):
#:   five outside the validation (a p5 pair over EFA, issue 319's HGX
#:   pair at 16 B-64 KB, 10 x 8 H100, a CoreWeave H200 pair with NVLS on and off) and the seven
#:   machines the validation predicts from one node, each timed as its scale case is. 11.9 % with the
#:   curve it replaced (64 MiB, k 0.9, floor 0.01, chosen on the outside runs alone), 10.0 % with this one. With
#:   any one of the seven left out the grid's best is the same, so `dse validate nccl` reports each
#:   machine as a curve chosen without its data predicts it.
#: - Volta and Ampere: no outside run has tree at the sizes the curve acts on; they take Blackwell's.
#: tests/test_nccl_defaults.py recomputes every value.
MULTI_NODE_FLOORS = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)


class MultiNodeCurve(NamedTuple):
    """One generation's multi-node curve: half-efficiency size, exponent, floor (x e_max; 0 none)."""

    s_half_bytes: float
    k: float
    floor: float


MULTI_NODE_CURVE: dict[str, MultiNodeCurve] = {
    "volta": MultiNodeCurve(64 * 1024.0 * 1024.0, 0.5, 0.0),
    "ampere": MultiNodeCurve(64 * 1024.0 * 1024.0, 0.5, 0.0),
    "hopper": MultiNodeCurve(32 * 1024.0 * 1024.0, 0.5, 0.0),
    "blackwell": MultiNodeCurve(64 * 1024.0 * 1024.0, 0.5, 0.0),
}
