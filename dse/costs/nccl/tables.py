"""NCCL's constant tables for the closed-form model (`dse.costs.nccl.model`, which re-exports every
name here): the choices a system can name (generations, fabrics, CPUs, networks), NCCL 2.30.7's tuner
constants (src/graph/tuning.cc, topo.h, search.cc; numbers only, each with its source), and our
per-network latency defaults (each with the public measurement it comes from). Data only, no logic
beyond parsing the tree size table.
"""

from __future__ import annotations

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

#: Network kinds (`NcclSystem.network`): InfiniBand, RoCE (NCCL's IB verbs transport over Ethernet),
#: AWS EFA (libfabric through the aws-ofi-nccl plugin) and TCP-class transports (sockets, GCP's
#: GPUDirect-TCPX/TCPXO plugins).
NETWORKS = ("ib", "roce", "efa", "tcp")
#: The network's own latency per hop, ns (`NcclParams.net_latency_ns`): what a network hop costs
#: beyond NCCL's NET hop table, like the NIC latency NCCL's net plugins may report (graph latencyInter,
#: added once per network hop, twice for Simple). Each default is (measured 16-32 B all-reduce floor -
#: this model's floor with 0) / the network hops of that floor (tree LL: 2 log2(nodes)), rounded to
#: 1 us, from public runs that are NOT among scripts/validate_nccl.py's machines:
#: - ib 0 (NCCL's own table): 2 x 8 B200 over NDR IB floor 35.5 us vs 25.2 modelled (dstackai/dstack
#:   lambda.md @511c318: +5 us a hop) and 2 x 8 H20 over NDR IB with NVLSTree 46.3 us vs 66.8 (NVIDIA/nccl
#:   issue 1244: below the table already) bracket it, so the table stays;
#: - roce 0: as ib (NCCL's same IB verbs transport; no public floor outside the validation set);
#: - efa 14000: 16 x p5en (H200, 16 x 200G EFA v3; 16 nodes from busbw/algbw = 1.984), 167.3 us at
#:   16 B vs 55.2 modelled over 8 hops (aws-samples/awsome-distributed-training @7217859,
#:   micro-benchmarks/nccl-tests/slurm/topology-aware-nccl-tests/README.md);
#: - tcp 49000: 2 x GCP A3 Mega (H100, GPUDirect-TCPXO), 123.2 us at 16-128 B vs 25.2 over 2 hops
#:   (lessizzmore/create-a3mega-ztan-fork @346b825, ztan-NCCL-test-result.markdown).
NET_LATENCY_NS = {"ib": 0.0, "roce": 0.0, "efa": 14000.0, "tcp": 49000.0}
