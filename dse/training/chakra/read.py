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
the cyclic garbage collector waits while the graph is built (`chakra_frames.gc_paused`).

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
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from dse.core.errors import InputError
from dse.training.chakra import schema as cs
from dse.training.chakra.frames import Budget, Buffer, frames, gc_paused, read_trace
from dse.training.chakra.link import Linker
from dse.training.chakra.nodes import CHAKRA_TYPE, SIMULATED, NodeConverter
from dse.training.workload_graph import COMM, COMPUTE, MEM, RECV, SEND, Graph

__all__ = ["CHAKRA_TYPE", "SIMULATED", "ChakraTrace", "is_trace_path", "load_trace", "needs_ranks", "parse"]
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
    from dse.training.chakra.digests import check_ranks  # it parses other ranks with this module

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


def node_namer(view: memoryview) -> Callable[[int, int], str]:
    """What an error calls the node message at ``view[a:b]``: ``node ID``, or a damaged node."""

    def node_id(a: int, b: int) -> str:
        try:
            return f"node {cs.ChakraNode.FromString(view[a:b]).id}"
        except DecodeError:
            return "a damaged node"

    return node_id


def node_messages(data: Buffer, path: str, pytorch: bool) -> tuple[Any, bool, int, Iterator[tuple[Any, Any, Any]]]:
    """A trace's metadata, whether it is a PyTorch trace (its metadata names PyTorch's ``schema``;
    only asked when `pytorch`), its node count, and its node messages parsed one at a time (each
    with its data and control dependencies), each counted against the totals (`Budget`: its
    control dependencies only when not a PyTorch trace) before it is yielded. The framing and the
    metadata are checked first."""
    view = memoryview(data)
    starts, ends = frames(data, path, node_namer(view))
    budget = Budget(path)
    meta = _message(cs.GlobalMetadata, view[starts[0] : ends[0]], f"{path}: the global metadata")
    budget.take(0, len(meta.attr))
    pytorch = pytorch and any(a.name == "schema" for a in meta.attr)  # PyTorch's trace schema version
    return meta, pytorch, len(starts) - 1, _messages(view, starts, ends, budget, pytorch, path)


def _messages(
    view: memoryview, starts: array, ends: array, budget: Budget, pytorch: bool, path: str
) -> Iterator[tuple[Any, Any, Any]]:
    new, take, msg = cs.ChakraNode.FromString, budget.take, None
    for k in range(1, len(starts)):
        try:
            msg = new(view[starts[k] : ends[k]])
        except DecodeError as e:
            prev = "the metadata" if msg is None else f"node {msg.id}"
            raise InputError(f"{path}: the node after {prev}", f"a damaged message ({e})", "a Chakra trace") from None
        data, ctrl = msg.data_deps, msg.ctrl_deps
        take(len(data) + (0 if pytorch else len(ctrl)), len(msg.attr))
        yield msg, data, ctrl


@dataclass
class Parsed:
    """A rank's messages, parsed one at a time for a comparison (`parse`): its metadata, per node
    (in file order) a digest of its content, its id and its dependencies: node k's data
    dependencies are ``deps[cut[2k]:cut[2k+1]]``, its control ones ``deps[cut[2k+1]:cut[2k+2]]``."""

    meta: Any
    ids: array = field(default_factory=lambda: array("Q"))
    deps: array = field(default_factory=lambda: array("Q"))
    cut: array = field(default_factory=lambda: array("Q", [0]))
    nodes: list = field(default_factory=list)


def parse(data: Buffer, path: str, content: Callable[[Any, int], Any]) -> Parsed:
    """Parse a trace's bytes for a comparison: `content(msg, id)` per node (a digest), its id and
    every dependency (control ones too, as in any trace), checked as `read_graph` checks them."""
    meta, _, _, messages = node_messages(data, path, pytorch=False)
    out = Parsed(meta)
    ids, deps, cut, nodes = out.ids, out.deps, out.cut, out.nodes
    for msg, data, ctrl in messages:
        deps.extend(data)
        cut.append(len(deps))
        deps.extend(ctrl)
        cut.append(len(deps))
        nid = msg.id
        ids.append(nid)
        nodes.append(content(msg, nid))
    return out


def _message(cls: Any, body: memoryview | bytes, where: str) -> Any:
    try:
        return cls.FromString(body)
    except DecodeError as e:
        raise InputError(where, f"a damaged message ({e})", "a Chakra trace") from None


def positions(ids: array, path: str) -> tuple[Any, Any]:
    """The nodes' order by id (file positions) and a function from an id to its place in that
    order (None for an id the trace does not have); a duplicate id is an `InputError`."""
    n = len(ids)
    if all(a < b for a, b in zip(ids, ids[1:])):  # ids rising in file order (every writer's)
        if n and ids[-1] - ids[0] == n - 1:  # and consecutive: no table needed
            base = ids[0]
            return range(n), lambda d: d - base if 0 <= d - base < n else None
        return range(n), {i: j for j, i in enumerate(ids)}.get
    index: dict[int, int] = {}
    for k, i in enumerate(ids):
        if i in index:
            raise InputError(f"{path}: node {i}", "a duplicate node id", "one node per id")
        index[i] = k
    order = sorted(index)
    where = {i: j for j, i in enumerate(order)}
    return [index[i] for i in order], where.get
