"""The latency term of each NCCL algorithm and protocol: NCCL's tuning.cc latency rules restated (a
base, hop counts times per-hop latencies, and the network's own latency per network hop; ns), with
our chain rule for broadcast and reduce. dse.costs.nccl.model adds the bandwidth terms."""

from __future__ import annotations

from dse.costs.nccl.params import NcclParams, NcclSystem

#: Protocol indices, as `NcclParams`' latency triples hold them (LL, LL128, Simple).
LL, LL128, SIMPLE = 0, 1, 2


def latency_ns(system: NcclSystem, q: NcclParams, collective: str, algo: str, p: int) -> float:
    """The latency term of `algo` with protocol `p` (an index of `LL`, `LL128`, `SIMPLE`) for
    `collective` on `system` with `q` (NCCL's tuning.cc latency rules, in ns)."""
    ppn, nodes, n = system.gpus_per_node, system.nodes, system.ranks
    depth = nodes.bit_length() - 1  # floor(log2 nodes), as NCCL's tree depth
    net = q.net_latency_ns * (2 if p == SIMPLE else 1)  # the network's own latency per hop
    if algo == "tree":
        return q.tree_base_ns[p] + 2 * ((ppn - 1) * q.tree_intra_hop_ns[p] + depth * (q.tree_inter_hop_ns[p] + net))
    if algo == "nvls":
        return q.nvls_intra_ns
    if algo == "nvls_tree":
        return q.nvls_intra_ns + 2 * depth * (q.nvls_tree_inter_ns + net)
    intra = q.ring_intra_hop_ns[p]
    inter = (q.tree_inter_hop_ns if ppn == 1 else q.ring_inter_hop_ns)[p] + net  # Tree's NET row at 1 GPU/node
    if nodes > 1:
        intra = max(intra, q.net_overhead_ns * (3 if p == SIMPLE else 1))
    if collective in ("broadcast", "reduce"):
        # Our choice: a pipelined chain of n-1 hops, nodes-1 of them across the network.
        return q.ring_base_ns[p] + (n - nodes) * intra + (nodes - 1) * inter
    steps = 2 * (n - 1) if collective == "all_reduce" else n - 1
    n_inter = (2 if collective == "all_reduce" else 1) * (nodes - 1)
    return q.ring_base_ns[p] + (steps - n_inter) * intra + n_inter * inter
