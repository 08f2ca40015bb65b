"""Reading Chakra execution traces (ASTRA-sim 2.x's workloads) into a workload graph.

`load_trace("trace.0.et")` (or the prefix ``trace``) reads one rank's file, gzipped or not, checks
it, and returns a `ChakraTrace` whose `graph` (`dse.training.workload_graph.Graph`) the engine runs.
Each node becomes a graph node (`dse.training.chakra.nodes`):

- ``COMP_NODE``: compute for ``duration_micros`` x 1000 ns, on the CPU if ``is_cpu_op``; its
  ``num_ops`` and ``tensor_size`` are kept (`Node.flops`, `Node.tensor_bytes`), and without a
  duration it is left for the roofline to time (`Node.timed` False);
- ``COMM_COLL_NODE`` with ``comm_type`` ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER or ALL_TO_ALL: a
  collective of ``comm_size`` bytes (ASTRA-sim's convention: an all-gather's is its input shard)
  on the dimensions ``involved_dim`` marks (all when absent; entries past the topology's last
  dimension are ignored, so a trace written for four dimensions runs on three), on the
  communicator group ``pg_name`` names (`Node.group`; "" and "0" are all NPUs, as in ASTRA-sim);
- ``BROADCAST``: replays its duration on the communication resource (ASTRA-sim 2.x does the same);
  a ``COMM_COLL_NODE`` without ``comm_type`` on the CPU (PyTorch's CPU-side c10d call) replays its
  duration on the CPU (ASTRA-sim 2.x rejects it);
- ``COMM_SEND_NODE`` (``comm_dst``, ``comm_size``, ``comm_tag``; ``comm_src``, if given, the rank
  whose file it is) and ``COMM_RECV_NODE`` (``comm_src``, ``comm_size``, ``comm_tag``; ``comm_dst``
  the own rank): a `SEND` or `RECV` node (`Node.peer`, `Node.size`, `Node.tag`);
- ``MEM_LOAD_NODE`` / ``MEM_STORE_NODE``: a `MEM` node of ``tensor_size`` bytes;
- ``METADATA_NODE`` and ``INVALID_NODE``: pass, taking no time and no resource.

A node depends on its ``data_deps`` and ``ctrl_deps`` alike. Anything else is refused with one line
naming the file, the node id and the problem: a damaged or truncated file, an unknown node type, a
collective ASTRA-sim 2.x does not simulate (REDUCE, GATHER, SCATTER, REDUCE_SCATTER_BLOCK, BARRIER)
or an unknown one, a missing ``comm_size`` (or a send's ``comm_dst``, a receive's ``comm_src``, a
``comm_tag``, a memory node's ``tensor_size``), a negative or over-large value, a communication node
with ``is_cpu_op`` (ASTRA-sim 2.x throws; the c10d case above aside), a send or receive of a file
``PREFIX.<rank>.et`` whose own end is another rank or whose peer is that rank itself, a duplicate
id, a dependency on a node the trace does not have, a cycle. One exception: in a trace converted
from PyTorch (its metadata names the PyTorch trace ``schema``) ``ctrl_deps`` hold each operator's
parent in PyTorch's call tree, not an order (in the Chakra test trace they form cycles and name
absent nodes): dse runs such a trace on its data dependencies, and `notes` says so.

Size limits (`dse.training.chakra.frames`): the decompressed bytes, the nodes, each message's
length and the totals of dependencies and attributes are bounded and checked before what they
cost is built; the messages are parsed one at a time and only what the graph needs is kept (the
attributes dse reads, names and scopes shared between nodes). Problems are found in this order:
the framing (truncation, lengths, node count), then each node in file order (damage, type,
attributes), then ids and dependencies in id order (a duplicate, a missing or self dependency),
then cycles. The dependencies become edges as each node is read (`dse.training.chakra.link`), and
the cyclic garbage collector waits while the graph is built (`dse.training.chakra.frames.gc_paused`).

Rank 0 is the representative NPU: every NPU runs its own file in ASTRA-sim, and this path models
one. When the other rank files differ from it in anything but node ids, `notes` says so
(`dse.training.chakra.digests` says which are compared, within what bounds). A trace with sends,
receives, memory nodes, communicator groups or untimed compute (`needs_ranks`), or whose ranks
differ, is for the per-rank reader (`dse.training.chakra.rankset`), which reads every rank's file. Attributes named
``dse_*`` are dse's own (written by `dse.training.chakra.write`, ignored by ASTRA-sim): exact ns,
update delays, issue policies and labels.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from dse.core.errors import InputError
from dse.training.chakra.digests import check_ranks
from dse.training.chakra.frames import Buffer, gc_paused, read_trace
from dse.training.chakra.link import Linker
from dse.training.chakra.messages import node_messages
from dse.training.chakra.nodes import CHAKRA_TYPE, SIMULATED, NodeConverter
from dse.training.workload_graph import COMM, COMPUTE, MEM, RECV, SEND, Graph

__all__ = ["CHAKRA_TYPE", "SIMULATED", "ChakraTrace", "is_trace_path", "load_trace", "needs_ranks"]
#: a rank file's name: PREFIX.<rank>.et (or .et.gz)
RANK_FILE = re.compile(r"^(?P<prefix>.*)\.(?P<rank>0|[1-9][0-9]*)\.et(?P<gz>\.gz)?$")


@dataclass(frozen=True)
class ChakraTrace:
    """One NPU's Chakra trace as a workload graph.

    `graph`: one node per trace node in id order (`ids` holds their Chakra ids), then an ``end``
    mark after every node without successors. `ranks`: rank files found beside it. `notes`: what
    a user should know (ranks that differ, dropped control dependencies)."""

    name: str
    path: str
    graph: Graph
    ids: tuple[int, ...]
    ranks: int = 1
    version: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def compute_ns(self) -> float:
        """Sum of the compute nodes' durations (GPU and CPU)."""
        return sum(n.duration for n in self.graph.nodes if n.kind == COMPUTE)


def is_trace_path(spec: str | Path) -> bool:
    """Does `spec` name a Chakra trace: a ``.et`` file, or a prefix with a ``PREFIX.<rank>.et`` file
    (rank 0's or any other's: a set missing rank 0 is still a trace, whose missing file is named)?"""
    s = str(spec)
    if s.endswith(".et") or s.endswith(".et.gz"):
        return True
    return not os.path.lexists(s) and (os.path.lexists(s + ".0.et") or bool(rank_numbers(s)))


def rank_numbers(prefix: str) -> dict[int, str]:
    """The ranks of the files ``PREFIX.<rank>.et`` (or ``.et.gz``) beside `prefix`, each with its suffix."""
    folder, base = os.path.split(prefix)
    if not base:
        return {}
    pattern = re.compile(re.escape(base) + r"\.(0|[1-9][0-9]*)(\.et(?:\.gz)?)$")
    out: dict[int, str] = {}
    try:
        with os.scandir(folder or ".") as it:
            for entry in it:
                m = pattern.match(entry.name)
                if m:
                    out.setdefault(int(m.group(1)), m.group(2))
    except OSError:
        return {}
    return out


def load_trace(spec: str | Path) -> ChakraTrace:
    """Read a Chakra trace (module docstring): a rank's ``.et`` file or the prefix of its rank files.

    A FIFO, a device or a socket (as the file or a rank file beside it) is one `InputError`."""
    path = Path(spec)
    if not os.path.lexists(path) and os.path.lexists(f"{spec}.0.et"):
        path = Path(f"{spec}.0.et")
    if not os.path.lexists(path):  # a link that leads nowhere is read, and named, by the reader
        raise InputError("workload", f"no such Chakra trace {str(spec)!r}", "a PREFIX.N.et file or its PREFIX")
    data = read_trace(path, "workload")
    assert data is not None  # no cap: a trace over the limit is refused
    m = RANK_FILE.match(path.name)
    with gc_paused():
        graph, ids, notes, version = read_graph(data, str(path), rank=int(m.group("rank")) if m else None)
    ranks, rank_notes = check_ranks(path, data)
    name = re.sub(r"\.\d+\.et(\.gz)?$", "", path.name)
    return ChakraTrace(name, str(path), graph, ids, ranks, version, notes + rank_notes)


def needs_ranks(trace: ChakraTrace) -> bool:
    """Does the trace hold nodes only the per-rank path (`dse.training.chakra.rankset`) runs: a send,
    a receive, a memory node, a collective on a communicator group (``pg_name``) or a compute node
    without a duration (``num_ops`` only)?"""
    return any(
        n.kind in (SEND, RECV, MEM) or (n.kind == COMM and n.group) or (n.kind == COMPUTE and not n.timed)
        for n in trace.graph.nodes
    )


def read_graph(data: Buffer, path: str, rank: int | None = None) -> tuple[Graph, tuple[int, ...], tuple[str, ...], str]:
    """A trace's bytes as a workload graph (module docstring): the graph, the nodes' ids in id
    order, the notes (dropped control dependencies) and the schema version. `rank`: the rank whose
    file it is, against which sends and receives are checked (if given)."""
    meta, pytorch, n, messages = node_messages(data, path, pytorch=True)
    convert, link = NodeConverter(path, rank).convert, Linker(path, n)
    add = link.add
    dropped = 0
    for msg, deps, ctrl in messages:
        nid = msg.id
        if pytorch:
            dropped += len(ctrl)
            add(convert(msg, nid), nid, deps)
        else:
            add(convert(msg, nid), nid, deps, ctrl)
    del convert  # the converter's tables are freed before the edges are built
    graph, ids = link.finish()
    return graph, ids, dropped_note(dropped), str(meta.version)


def dropped_note(dropped: int) -> tuple[str, ...]:
    """The note on a PyTorch trace's `dropped` control dependencies (none if 0)."""
    if not dropped:
        return ()
    return (
        f"a trace converted from PyTorch: its {dropped:,} control dependencies (each operator's parent "
        "in PyTorch's call tree, not an order) are left out; its data dependencies order it",
    )
