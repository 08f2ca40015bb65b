"""NCCL's channel counts for a GPU system: what its topology search finds (`search_channels`).

A channel is one ring (or tree) through every GPU, run by one thread block per GPU. NCCL's search
(src/graph/search.cc, ncclTopoCompute) looks for as many channels as it can at a per-channel speed
taken from a fixed list, highest first, and keeps the solution with the most bandwidth (channels x
speed). We restate its outcome, not its path search, for the systems `NcclSystem` can describe:

- **capacity** at speed s: inside a node every channel takes s from each GPU's fabric total
  (NVLinks x NCCL's effective rate per link, or NCCL's PCIe rate); across nodes it also enters and
  leaves the node through one NIC, which holds floor(NIC rate / s) channels;
- **pass 1**: from the first speed no faster than the fastest path (a GPU's fabric total on one
  node, one NIC across nodes), take the most channels that fit (at most 32); stop when they reach
  the fabric total or the search's 32, else try the next speed while it is above 0.49 x the best
  solution's speed; keep the best channels x speed (the first on a tie);
- **duplication**: at 25 GB/s a channel or more (and, on Hopper and later, unless the speed is
  below 50 with more than 4 channels) the channels double and their speed halves;
- **pass 2**: raise the speed while that many channels still fit.

The search's count (`ring`) multiplies NCCL's per-channel caps in its tuner (`dse.costs.nccl.model`);
the collective's count (`comm`) is twice it (ncclTopoPostset duplicates every channel), doubled
again on Hopper and later across nodes when the speed is above 45 and the count below 16, at most 64.
A node with more NICs than GPUs is searched as one NIC a GPU of their summed rate: NCCL merges the
ports a GPU shares (NCCL_NET_MERGE_LEVEL) and AWS's EFA plugin groups a GPU's EFA devices. Checked
against public NCCL INFO lines (tests/test_nccl_channels.py): 24 collective channels on one H100 or
A100 node, 16 on an H800 node, 32 on a Blackwell node, 16 on two H100 nodes with 8 NDR NICs or 32
EFA NICs, 2 with one NIC a node. Our approximations: every fabric is treated as an NVSwitch (a
mesh's rings also need free neighbour links, so its count may be lower), and the GPU-NIC PCIe path
is taken as fast as the NIC.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: search.cc speed lists, GB/s a channel, inside one node and across nodes, by generation
#: (speedArrayIntra/Inter before Hopper, sm90* on Hopper, sm100* on Blackwell)
SPEEDS_INTRA = {
    "volta": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
SPEEDS_INTRA["ampere"] = SPEEDS_INTRA["volta"]
SPEEDS_INTER = {
    "volta": (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12),
    "hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
    "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0)
    + (20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
}
SPEEDS_INTER["ampere"] = SPEEDS_INTER["volta"]
#: the ring search's most channels (MAXCHANNELS / 2) and a communicator's (MAXCHANNELS; device.h)
MAX_SEARCH_CHANNELS, MAX_CHANNELS = 32, 64


@dataclass(frozen=True)
class NcclChannels:
    """NCCL's channels for a system: `ring` channels of `ring_GBps` each from the search (the count
    NCCL's tuner multiplies its per-channel caps by; trees take the same count), and `comm`, the
    channels a collective runs on (`NCCL INFO N coll channels`)."""

    ring: int
    ring_GBps: float
    comm: int


def search_channels(
    generation: str,
    gpus_per_node: int,
    nodes: int,
    fabric_GBps: float,
    nics_per_node: int = 0,
    nic_GBps: float = 0.0,
) -> NcclChannels:
    """The channels NCCL's ring search finds (module docstring): `fabric_GBps` is a GPU's fabric
    total as NCCL counts it (NVLinks x its effective rate per link, or its PCIe rate), `nic_GBps`
    one NIC's rate. One GPU on one node has one channel."""
    speeds = (SPEEDS_INTER if nodes > 1 else SPEEDS_INTRA)[generation]
    if nics_per_node > gpus_per_node:  # NICs merged to one a GPU, their rates added
        nic_GBps, nics_per_node = nic_GBps * nics_per_node / gpus_per_node, gpus_per_node
    total = fabric_GBps if gpus_per_node > 1 else math.inf
    if nodes == 1 and gpus_per_node == 1:
        return NcclChannels(1, 0.0, 2)

    def fits(s: float) -> int:
        n = math.floor(total / s + 1e-9) if total != math.inf else MAX_SEARCH_CHANNELS
        if nodes > 1:
            n = min(n, nics_per_node * math.floor(nic_GBps / s + 1e-9))
        return min(MAX_SEARCH_CHANNELS, n)

    fastest = nic_GBps if nodes > 1 else total
    i = next((j for j, s in enumerate(speeds) if s <= fastest), len(speeds) - 1)
    best_n, best_s = 0, 0.0
    while True:
        n = fits(speeds[i])
        if n * speeds[i] > best_n * best_s:
            best_n, best_s = n, speeds[i]
        if best_n == MAX_SEARCH_CHANNELS or best_n * best_s >= total or i == len(speeds) - 1:
            break
        if best_n and speeds[i + 1] / best_s <= 0.49:
            break
        i += 1
    if best_n == 0:  # NCCL falls back to one channel in simple order
        return NcclChannels(1, speeds[-1], 2)
    hopper = generation in ("hopper", "blackwell")
    if best_s >= 25.0 and not (hopper and best_s < 50.0 and best_n > 4):
        dup = min(2 * best_n, MAX_SEARCH_CHANNELS)
        best_s /= math.ceil(dup / best_n)
        best_n = dup
    j = next((k for k, s in enumerate(speeds) if s <= best_s), len(speeds) - 1)
    while j > 0 and fits(speeds[j - 1]) >= best_n:  # pass 2: a faster speed for as many channels
        j -= 1
        best_s = speeds[j]
    comm = min(MAX_CHANNELS, 2 * best_n)
    if hopper and nodes > 1 and best_s > 45.0 and comm < 16:
        comm = min(MAX_CHANNELS, 2 * comm)
    return NcclChannels(best_n, best_s, comm)
