"""dse topologies as NCCL GPU systems and back: `system_of` and `topology_of` (docs/model.md §3, §15).

A dse `Topology` (docs/model.md §3) and an `NcclSystem` describe the same machine in two ways. Here
dimension 0 is the node's GPU fabric and the outer dimensions are the network between nodes:

- dim 0 kind ``switch`` is an NVSwitch node, ``fc`` or ``ring`` an NVLink mesh (``nvlink_mesh``). A
  ring is accepted because `NcclSystem` sees a fabric only as "NVSwitch or not" and a per-GPU line
  rate: NCCL's rings need only neighbour links, and with channels both ways they reach a ring's
  per-GPU rate, so a ring and a fully connected node of the same rate give the same system (tree and
  all-to-all times on a ring fabric are then optimistic). Its `npus` is GPUs per node, its
  `bandwidth` the per-GPU NVLink line rate per direction (GB/s), its `links` the NVLink count.
- the outer dimensions (``switch`` or ``fc``; a ring of nodes is refused, NCCL's trees and the
  model's per-node NIC total assume any node reaches any other through its NICs): nodes = the
  product of their `npus`; the node's NIC total = the slowest outer dimension's per-NPU bandwidth x
  GPUs per node; its `links` per NPU, when given, is NICs per GPU.

Latencies, `algorithm` and NIC/router latencies of the dimensions are ignored: NCCL's latencies come
from its own tables (`default_params`) and the calibration (`dse.costs.nccl.fit`), not from dse's
per-step latencies. A PCIe node has no dse form (a PCIe fabric is not a dse dimension kind).
"""

from __future__ import annotations

from typing import Any, Required, TypedDict, Unpack

from dse.core.errors import InputError
from dse.core.topology import Dim, Topology
from dse.costs.nccl.model import NcclSystem
from dse.costs.nccl.tables import CPUS, GENERATIONS, NETWORKS

#: NVLinks per GPU by generation, used when neither `nvlink_links` nor dim 0's `links` says: V100
#: SXM2 6 x NVLink2, A100 SXM4 12 x NVLink3, H100/H200 SXM 18 x NVLink4, B200 18 x NVLink5 (NVIDIA's
#: V100, A100, H100 and Blackwell architecture pages).
NVLINKS_PER_GPU = {"volta": 6, "ampere": 12, "hopper": 18, "blackwell": 18}
FABRIC_OF_KIND = {"switch": "nvswitch", "fc": "nvlink_mesh", "ring": "nvlink_mesh"}
NETWORK_KINDS = ("switch", "fc")


class MachineArgs(TypedDict, total=False):
    """`system_of`'s machine keywords: what a GPU machine is beyond its dse topology (`generation`
    required; the others default as `system_of` says)."""

    generation: Required[str]
    nvls: bool
    network: str
    cpu: str
    nvlink_links: int | None
    nics_per_node: int | None
    single_gpu_nodes: bool
    nccl_version: str


#: `system_of`'s defaults for the machine keywords other than `generation`
MACHINE_DEFAULTS = {
    "nvls": True, "network": "ib", "cpu": "other", "nvlink_links": None, "nics_per_node": None,
    "single_gpu_nodes": False, "nccl_version": "",
}  # fmt: skip
#: the machine dse assumes where none is named (`nccl` without a calibration, `dse nccl-tests` and
#: `dse calibrate nccl-tests` without --generation): Hopper GPUs, the rest `MACHINE_DEFAULTS`
DEFAULT_MACHINE = MachineArgs(generation="hopper")


def system_of(
    topology: Topology,
    *,
    generation: str,
    nvls: bool = True,
    network: str = "ib",
    cpu: str = "other",
    nvlink_links: int | None = None,
    nics_per_node: int | None = None,
    single_gpu_nodes: bool = False,
    nccl_version: str = "",
) -> NcclSystem:
    """The `NcclSystem` of `topology`: dim 0 the GPU fabric, the outer dims the network (module
    docstring). GPUs per node = dim 0's npus, nodes = the product of the outer npus (a one-dimension
    topology is one node, with no NICs). With several outer dims the slowest one's per-NPU bandwidth
    sets the NIC total (bandwidth x GPUs per node); the faster ones only add nodes. NVLinks per GPU:
    `nvlink_links`, else dim 0's `links`, else the generation's count (`NVLINKS_PER_GPU`). NICs per
    node: `nics_per_node`, else that dim's `links` x GPUs per node, else GPUs per node (one per GPU).
    `nccl_version`: the NCCL release whose tuner values apply (`NcclSystem`; "" the newest restated).
    `single_gpu_nodes`: nodes of one GPU, every dimension the network (a dse topology cannot hold a
    node dimension of 1 NPU); NVLink counts do not apply. Dimension latencies are ignored. Bad
    input: `InputError` naming the field."""
    _check_choice("generation", generation, GENERATIONS)
    _check_choice("network", network, NETWORKS)
    _check_choice("cpu", cpu, CPUS)
    if not isinstance(nvls, bool):
        raise InputError("nvls", f"{nvls!r} is not a boolean", "True or False")
    if not isinstance(topology, Topology):
        raise InputError("topology", f"{type(topology).__name__} is not a Topology", "a dse Topology")
    if not isinstance(single_gpu_nodes, bool):
        raise InputError("single_gpu_nodes", f"{single_gpu_nodes!r} is not a boolean", "True or False")
    if single_gpu_nodes:
        nodes, nics, nic_GBps = _network(topology.dims, 1, nics_per_node, first=0)
        return NcclSystem(generation=generation, gpus_per_node=1, nodes=nodes, nics_per_node=nics, nic_GBps=nic_GBps,
                          nvls_enabled=nvls, cpu=cpu, network=network, nccl_version=nccl_version)  # fmt: skip
    fabric_dim = topology.dims[0]
    fabric = FABRIC_OF_KIND[fabric_dim.kind]
    gpus = fabric_dim.npus
    links = nvlink_links if nvlink_links is not None else fabric_dim.links or NVLINKS_PER_GPU[generation]
    _check_count("nvlink_links", links)
    nodes, nics, nic_GBps = _network(topology.dims[1:], gpus, nics_per_node)
    return NcclSystem(
        generation=generation,
        gpus_per_node=gpus,
        nodes=nodes,
        fabric=fabric,
        nvlink_GBps=fabric_dim.bandwidth,
        nvlink_links=links,
        nics_per_node=nics,
        nic_GBps=nic_GBps,
        nvls_enabled=nvls,
        cpu=cpu,
        network=network,
        nccl_version=nccl_version,
    )


def _network(outer: tuple[Dim, ...], gpus: int, nics_per_node: int | None, first: int = 1) -> tuple[int, int, float]:
    """Nodes, NICs per node and one NIC's GB/s of the outer dimensions (`system_of`); `first` is the
    first one's index in the topology (for errors)."""
    if not outer:
        if nics_per_node is not None:
            raise InputError(
                "nics_per_node", f"{nics_per_node!r} given for a one-node topology", "None: one node has no network"
            )
        return 1, 0, 0.0
    nodes = 1
    for i, d in enumerate(outer, start=first):
        if d.kind not in NETWORK_KINDS:
            raise InputError(
                f"topology dim {i} kind",
                f"{d.kind!r} cannot be the network between nodes (NCCL's model needs any node to reach any other)",
                "switch or fc for every dimension " + ("after the first" if first else "of a group across nodes"),
            )
        nodes *= d.npus
    slowest = min(outer, key=lambda d: d.bandwidth)
    if nics_per_node is not None:
        nics = nics_per_node
    else:
        nics = slowest.links * gpus if slowest.links is not None else gpus
    _check_count("nics_per_node", nics)
    return nodes, nics, slowest.bandwidth * gpus / nics


def network_system_of(topology: Topology, **machine: Unpack[MachineArgs]) -> NcclSystem:
    """The system of a group with one GPU a node (`system_of`'s machine keywords; NVLink and NIC
    counts are not read): every dimension of `topology` is network, and each GPU has the slowest
    dimension's per-GPU bandwidth through one NIC of its own (rail-aligned, as NCCL's rings across
    nodes run). A dimension that cannot be a network: `InputError`."""
    m: dict[str, Any] = {**MACHINE_DEFAULTS, **machine}
    return system_of(
        topology, generation=m["generation"], nvls=m["nvls"], network=m["network"], cpu=m["cpu"], nics_per_node=1,
        single_gpu_nodes=True,
    )  # fmt: skip


def topology_of(system: NcclSystem) -> Topology:
    """The dse `Topology` of `system`, the inverse of `system_of`: ``SW`` (NVSwitch) or ``FC`` (NVLink
    mesh) of GPUs per node at the NVLink rate with ``links`` = NVLinks, then, with 2 or more nodes, a
    ``SW`` of nodes at the node's NIC total / GPUs per node, with ``links`` = NICs per GPU when the
    NICs divide evenly among the GPUs (else `system_of` needs ``nics_per_node`` back). Latencies are
    0 (NCCL's come from its tables). A one-node system's NICs have no place and are dropped; PCIe
    nodes and one GPU per node cannot be written (`InputError`)."""
    if not isinstance(system, NcclSystem):
        raise InputError("system", f"{type(system).__name__} is not an NcclSystem", "an NcclSystem")
    if system.fabric == "pcie":
        raise InputError("fabric", "'pcie' has no dse dimension kind", "nvswitch (SW) or nvlink_mesh (FC)")
    g = system.gpus_per_node
    if g < 2:
        raise InputError("gpus_per_node", f"{g}: a dse topology drops dimensions of 1 NPU", "2 or more GPUs per node")
    kind = "switch" if system.fabric == "nvswitch" else "fc"
    dims = [Dim(kind, g, system.nvlink_GBps, 0.0, links=system.nvlink_links)]
    if system.nodes > 1:
        per_gpu = system.nics_per_node * system.nic_GBps / g
        nic_links = system.nics_per_node // g if system.nics_per_node % g == 0 else None
        dims.append(Dim("switch", system.nodes, per_gpu, 0.0, links=nic_links))
    return Topology(tuple(dims))


def _check_choice(field: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InputError(field, f"unknown {field} {value!r}", ", ".join(allowed))


def _check_count(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
        raise InputError(field, f"{value!r} is not a count from 1 to 1024", "a whole number from 1 to 1024")
