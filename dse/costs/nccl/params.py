"""The `nccl` model's inputs: the GPU system (`NcclSystem`), the model's parameters (`NcclParams`),
NCCL's own values for them (`default_params`) and NCCL's channels on a system (`channels`).
`dse.costs.nccl.model` re-exports every public name here and predicts with them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache

from dse.core.errors import InputError
from dse.core.limits import MAX_BANDWIDTH, MAX_BYTES, MAX_NPUS, MAX_NS
from dse.costs.nccl import tables
from dse.costs.nccl.channels import NcclChannels, search_channels
from dse.costs.nccl.tables import check_choice, check_integer, check_lat3, check_number

Lat3 = tuple[float, float, float]


@dataclass(frozen=True)
class NcclSystem:
    """A GPU system as NCCL sees it. Bandwidths are line rates per direction, GB/s (1e9 B/s):
    `nvlink_GBps` is one GPU's NVLink total over `nvlink_links` links (H100: 450 over 18),
    `pcie_GBps` one GPU's PCIe rate (used when `fabric` is "pcie"), `nic_GBps` one NIC (NDR 400
    Gb/s = 50). NVLS runs only when `nvls_enabled` and the GPU is Hopper or later on an NVSwitch
    (NCCL_NVLS_ENABLE and the hardware). `cpu` sets NCCL's network overhead and LL cap; `network`
    (ib, roce, efa, tcp) the network's default latency per crossing (`tables.net_latency_ns`);
    `nccl_version` the NCCL release whose tuner values apply ("2.26.2"; "" the newest restated,
    `tables.nccl_release`). Bad values: `InputError`."""

    generation: str
    gpus_per_node: int
    nodes: int = 1
    fabric: str = "nvswitch"
    nvlink_GBps: float = 0.0
    nvlink_links: int = 0
    pcie_GBps: float = 0.0
    nics_per_node: int = 0
    nic_GBps: float = 0.0
    nvls_enabled: bool = True
    cpu: str = "intel"
    network: str = "ib"
    nccl_version: str = ""

    def __post_init__(self) -> None:
        check_choice("generation", self.generation, tables.GENERATIONS)
        check_choice("network", self.network, tables.NETWORKS)
        check_choice("fabric", self.fabric, tables.FABRICS)
        check_choice("cpu", self.cpu, tables.CPUS)
        tables.nccl_release(self.nccl_version)
        check_integer("gpus_per_node", self.gpus_per_node, 1, 1024)
        check_integer("nodes", self.nodes, 1, MAX_NPUS)
        if self.gpus_per_node * self.nodes < 2:
            raise InputError("gpus_per_node", "a collective needs at least 2 GPUs in all", "gpus_per_node x nodes >= 2")
        if not isinstance(self.nvls_enabled, bool):
            raise InputError("nvls_enabled", f"{self.nvls_enabled!r} is not a boolean", "true or false")
        intra = self.gpus_per_node > 1
        if self.fabric == "pcie":
            check_number("pcie_GBps", self.pcie_GBps, 1e-9 if intra else 0.0, MAX_BANDWIDTH)
        else:
            check_number("nvlink_GBps", self.nvlink_GBps, 1e-9 if intra else 0.0, MAX_BANDWIDTH)
            check_integer("nvlink_links", self.nvlink_links, 1 if intra else 0, 1024)
        inter = self.nodes > 1
        check_integer("nics_per_node", self.nics_per_node, 1 if inter else 0, 1024)
        check_number("nic_GBps", self.nic_GBps, 1e-9 if inter else 0.0, MAX_BANDWIDTH)

    @property
    def ranks(self) -> int:
        """GPUs in all (nccl-tests' n)."""
        return self.gpus_per_node * self.nodes

    @property
    def has_nvls(self) -> bool:
        """True when NVLS can run: enabled, Hopper or later, NVSwitch, 2+ GPUs per node."""
        hopper = self.generation in ("hopper", "blackwell")
        return self.nvls_enabled and hopper and self.fabric == "nvswitch" and self.gpus_per_node >= 2


@dataclass(frozen=True)
class NcclParams:
    """The model's parameters (ns, GB/s, bytes); `default_params` gives NCCL's values for a system.
    Per-hop latencies are (LL, LL128, Simple). Efficiencies e_* are fractions of a tier's line rate
    (0 disables that algorithm, as a zero bandwidth does in NCCL); the s_half_*/k_* pair shapes each
    tier's efficiency curve e(S) = e_max·S^k/(S^k + S_half^k), 0 < k <= 1 (k > 1 would make small
    messages slower than larger ones). `net_latency_ns` is the network's own latency, added to every
    network hop (twice for Simple, as NCCL adds a net plugin's reported latency). Calibrated: the hop
    latencies, `net_latency_ns`, the e_*, s_half_* and k_*; the bases, NVLS latencies, caps and
    overhead are NCCL's constants, kept as fields to override."""

    ring_intra_hop_ns: Lat3
    ring_inter_hop_ns: Lat3
    tree_intra_hop_ns: Lat3
    tree_inter_hop_ns: Lat3
    e_ring_intra: float
    e_ring_inter: float
    e_tree_intra: float
    e_tree_inter: float
    e_nvls_intra: float
    e_nvls_inter: float
    ring_base_ns: Lat3 = (6600.0, 14000.0, 8400.0)  # tuning.cc base latency, Ring
    tree_base_ns: Lat3 = (6800.0, 14000.0, 8400.0)  # tuning.cc base latency, Tree
    nvls_intra_ns: float = 25000.0  # tuning.cc NVLS NVLink hop (replaces the base)
    nvls_inter_ns: float = 18000.0  # tuning.cc NVLS NET hop
    nvls_tree_inter_ns: float = 20900.0  # tuning.cc NVLSTree NET hop (2.28.9 on)
    net_overhead_ns: float = 1000.0  # tuning.cc: 1 us Intel/other, 2 us AMD
    net_latency_ns: float = 0.0  # per network hop, beyond tuning.cc's NET row (tables.net_latency_ns)
    ll_max_GBps: float = 141.0  # tuning.cc llMaxBw (see default_params)
    nvls_tree_max_GBps: float = math.inf  # NVLSTree per-channel cap x channels
    ring_ll128_max_GBps: float = math.inf  # ring LL128 per-channel cap x channels (see default_params)
    tree_max_GBps: float = math.inf  # tree Simple per-channel cap x channels
    tree_ll128_max_GBps: float = math.inf  # tree LL128 per-channel cap x channels
    s_half_intra_bytes: float = 0.0  # 0: NCCL's tuner (no size-dependent efficiency)
    s_half_inter_bytes: float = 0.0
    k_intra: float = 1.0
    k_inter: float = 1.0
    s_half_multi_bytes: float = tables.MULTI_NODE_CURVE["blackwell"].s_half_bytes  # tree / NVLSTree across nodes
    k_multi: float = tables.MULTI_NODE_CURVE["blackwell"].k
    e_min_multi: float = tables.MULTI_NODE_CURVE["blackwell"].floor  # its floor (x e_max; 0: none; fitted)

    def __post_init__(self) -> None:
        for f in fields(self):
            name, value = f.name, getattr(self, f.name)
            if f.type == "Lat3":
                check_lat3(name, value)
            elif name.startswith(("e_", "k_")):
                check_number(name, value, 1e-3 if name.startswith("k_") else 0.0, 1.0)
            elif name.endswith("_GBps") and value != math.inf:
                check_number(name, value, 1e-9, MAX_BANDWIDTH)
            elif not name.endswith("_GBps"):
                check_number(name, value, 0.0, MAX_BYTES if name.endswith("_bytes") else MAX_NS)


@lru_cache(maxsize=256)
def channels(system: NcclSystem) -> NcclChannels:
    """NCCL's channels on `system` (`dse.costs.nccl.channels.search_channels`): the fabric total as
    NCCL counts it is NVLinks x its effective rate per link, or the PCIe rate x `tables.PCIE_EFFICIENCY`."""
    if system.fabric == "pcie":
        fabric = system.pcie_GBps * tables.PCIE_EFFICIENCY
    else:
        fabric = system.nvlink_links * tables.NVLINK_EFFECTIVE_GBps[system.generation]
    return search_channels(
        system.generation, system.gpus_per_node, system.nodes, fabric, system.nics_per_node, system.nic_GBps
    )


@lru_cache(maxsize=256)
def default_params(system: NcclSystem) -> NcclParams:
    """NCCL's values for `system`: NVLink or PCI hop latencies by fabric, the NET ones, efficiencies
    from NCCL's effective link rates, the LL cap and network overhead by generation, nodes and CPU;
    the network's latency per hop by its kind (`tables.net_latency_ns`, ours: NCCL's table fits IB)
    and the multi-node curve by generation (`tables.MULTI_NODE_CURVE`, ours)."""
    nvlink = system.fabric != "pcie"
    if nvlink:
        per_link = system.nvlink_GBps / system.nvlink_links if system.nvlink_links else 0.0
        e0 = min(1.0, tables.NVLINK_EFFECTIVE_GBps[system.generation] / per_link) if per_link else 1.0
    else:
        e0 = tables.PCIE_EFFICIENCY
    cpu = "amd" if system.cpu == "amd" else "other"
    if system.nodes == 1:
        ll_max = tables.LL_MAX_ONE_NODE_GBps[system.generation]
    else:
        ll_max = tables.LL_MAX_MULTI_NODE_GBps[cpu][0 if system.nodes == 2 else 1]
    per_ch = tables.NVLS_TREE_MAX_PER_CHANNEL_GBps.get(system.generation)
    heads = min(tables.MAX_NVLS_HEADS, system.gpus_per_node)
    release = tables.nccl_release(system.nccl_version)
    nvls_tree_max = per_ch[0 if system.nodes <= 2 else 1] * heads if per_ch else math.inf
    since, before, after = tables.NVLS_TREE_NET_HOP_NS
    ch, by_nodes = channels(system).ring, min(system.nodes, 3) - 1
    curve = tables.MULTI_NODE_CURVE[system.generation]
    return NcclParams(
        # tuning.cc hardware latency, Ring and Tree rows: NVLink or PCI column by fabric, NET column.
        ring_intra_hop_ns=(600.0, 1900.0, 3400.0) if nvlink else (1000.0, 2500.0, 5700.0),
        ring_inter_hop_ns=(2700.0, 4000.0, 14000.0),
        tree_intra_hop_ns=(600.0, 1250.0, 4000.0) if nvlink else (1000.0, 1900.0, 4000.0),
        tree_inter_hop_ns=(5000.0, 8500.0, 14000.0),
        e_ring_intra=e0,
        e_ring_inter=tables.NET_EFFICIENCY,
        e_tree_intra=tables.TREE_FACTOR * e0,
        e_tree_inter=tables.TREE_FACTOR * tables.NET_EFFICIENCY,
        e_nvls_intra=e0 * tables.NVLS_EFFICIENCY[system.generation],
        e_nvls_inter=tables.NET_EFFICIENCY,
        net_overhead_ns=2000.0 if system.cpu == "amd" else 1000.0,
        net_latency_ns=tables.net_latency_ns(system.network, system.nic_GBps),
        ll_max_GBps=ll_max,
        nvls_tree_max_GBps=nvls_tree_max,
        nvls_tree_inter_ns=before if release < since else after,
        ring_ll128_max_GBps=ch * tables.PER_CHANNEL_RING_LL128_GBps[system.generation],
        tree_max_GBps=ch * tables.PER_CHANNEL_TREE_GBps[system.generation][by_nodes],
        tree_ll128_max_GBps=ch * tables.PER_CHANNEL_TREE_LL128_GBps[system.generation][by_nodes],
        s_half_multi_bytes=curve.s_half_bytes,
        k_multi=curve.k,
        e_min_multi=curve.floor,
    )
