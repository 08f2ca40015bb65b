"""Reading Chakra execution traces (ASTRA-sim 2.x's workloads) into a workload graph.

`load_trace("trace.0.et")` (or the prefix ``trace``) reads one rank's file, gzipped or not, checks
it, and returns a `ChakraTrace` whose `graph` (`dse.training.workload_graph.Graph`) the engine runs.
Each node becomes a graph node (`dse.training.chakra_nodes`):

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

Size limits (`dse.training.chakra_frames`): the decompressed bytes, the nodes, each message's
length and the totals of dependencies and attributes are bounded and checked before what they
cost is built; the messages are parsed one at a time and only what the graph needs is kept (the
attributes dse reads, names and scopes shared between nodes). Problems are found in this order:
the framing (truncation, lengths, node count), then each node in file order (damage, type,
attributes), then ids and dependencies in id order (a duplicate, a missing or self dependency),
then cycles.

Rank 0 is the representative NPU: every NPU runs its own file in ASTRA-sim, and this path models
one. When the other rank files differ from it in anything but node ids, `notes` says so
(`dse.training.chakra_ranks` says which are compared, within what bounds). A trace with sends,
receives, memory nodes, communicator groups or untimed compute (`needs_ranks`), or whose ranks
differ, is for the per-rank reader (`dse.training.chakra_rankset`), which reads every rank's file. Attributes named
``dse_*`` are dse's own (written by `dse.training.chakra_write`, ignored by ASTRA-sim): exact ns,
update delays, issue policies and labels.
"""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from dse.core.errors import InputError
from dse.training import chakra_schema as cs
from dse.training.chakra_frames import Budget, Buffer, frames, read_trace
from dse.training.chakra_nodes import CHAKRA_TYPE, SIMULATED, NodeConverter
from dse.training.workload_graph import COMM, COMPUTE, MARK, MEM, RECV, SEND, Graph, Node

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
    from dse.training.chakra_ranks import check_ranks  # it parses other ranks with this module

    path = Path(spec)
    if not os.path.lexists(path) and os.path.lexists(f"{spec}.0.et"):
        path = Path(f"{spec}.0.et")
    if not os.path.lexists(path):  # a link that leads nowhere is read, and named, by the reader
        raise InputError("workload", f"no such Chakra trace {str(spec)!r}", "a PREFIX.N.et file or its PREFIX")
    data = read_trace(path, "workload")
    assert data is not None  # no cap: a trace over the limit is refused
    m = RANK_FILE.match(path.name)
    parsed = parse(data, str(path), rank=int(m.group("rank")) if m else None)
    graph, ids, notes = _build(parsed, str(path))
    version = str(parsed.meta.version)
    del parsed  # its arrays, before another rank is read
    ranks, rank_notes = check_ranks(path, data)
    name = re.sub(r"\.\d+\.et(\.gz)?$", "", path.name)
    return ChakraTrace(name, str(path), graph, ids, ranks, version, notes + rank_notes)


def needs_ranks(trace: ChakraTrace) -> bool:
    """Does the trace hold nodes only the per-rank path (`dse.training.chakra_rankset`) runs: a send,
    a receive, a memory node, a collective on a communicator group (``pg_name``) or a compute node
    without a duration (``num_ops`` only)?"""
    return any(
        n.kind in (SEND, RECV, MEM) or (n.kind == COMM and n.group) or (n.kind == COMPUTE and not n.timed)
        for n in trace.graph.nodes
    )


@dataclass
class Parsed:
    """A rank's messages, parsed one at a time: its metadata, per node (in file order) the graph
    node (or, for a comparison, a digest of its content), its id and its dependencies: node k's
    data dependencies are ``deps[cut[2k]:cut[2k+1]]``, its control ones ``deps[cut[2k+1]:cut[2k+2]]``."""

    meta: Any
    pytorch: bool
    ids: array = field(default_factory=lambda: array("Q"))
    deps: array = field(default_factory=lambda: array("Q"))
    cut: array = field(default_factory=lambda: array("Q", [0]))
    nodes: list = field(default_factory=list)
    dropped: int = 0


def node_namer(view: memoryview) -> Callable[[int, int], str]:
    """What an error calls the node message at ``view[a:b]``: ``node ID``, or a damaged node."""

    def node_id(a: int, b: int) -> str:
        try:
            return f"node {cs.ChakraNode.FromString(view[a:b]).id}"
        except DecodeError:
            return "a damaged node"

    return node_id


def parse(data: Buffer, path: str, content: Any = None, rank: int | None = None) -> Parsed:
    """Parse a trace's bytes (module docstring). `content(msg, id)`, if given, replaces the conversion
    to a graph node (the rank comparison keeps a digest), and control dependencies are all kept.
    `rank`: the rank whose file it is, against which sends and receives are checked (if given)."""
    view = memoryview(data)
    starts, ends = frames(data, path, node_namer(view))
    budget = Budget(path)
    meta = _message(cs.GlobalMetadata, view[starts[0] : ends[0]], f"{path}: the global metadata")
    budget.take(0, len(meta.attr))
    pytorch = content is None and any(a.name == "schema" for a in meta.attr)  # PyTorch's trace schema version
    out = Parsed(meta, pytorch)
    make = content or NodeConverter(path, rank)
    new, ids, deps, cut = cs.ChakraNode.FromString, out.ids, out.deps, out.cut
    prev = "the metadata"
    for k in range(1, len(starts)):
        try:
            msg = new(view[starts[k] : ends[k]])
        except DecodeError as e:
            raise InputError(f"{path}: the node after {prev}", f"a damaged message ({e})", "a Chakra trace") from None
        data_deps, ctrl_deps = msg.data_deps, msg.ctrl_deps
        nd, nc = len(data_deps), len(ctrl_deps)
        budget.take(nd + (0 if pytorch else nc), len(msg.attr))
        if nd:
            deps.extend(data_deps)
        cut.append(len(deps))
        if pytorch:
            out.dropped += nc
        elif nc:
            deps.extend(ctrl_deps)
        cut.append(len(deps))
        nid = msg.id
        ids.append(nid)
        out.nodes.append(make(msg, nid))
        prev = f"node {nid}"
    return out


def _message(cls: Any, body: memoryview | bytes, where: str) -> Any:
    try:
        return cls.FromString(body)
    except DecodeError as e:
        raise InputError(where, f"a damaged message ({e})", "a Chakra trace") from None


def _build(p: Parsed, path: str) -> tuple[Graph, tuple[int, ...], tuple[str, ...]]:
    """Check ids and dependencies, order by id, and link the graph (with its end mark)."""
    n = len(p.ids)
    order, pos = positions(p.ids, path)
    ids = p.ids
    src, tgt = array("q"), array("Q", [0])  # the dependencies of node j (by position) are src[tgt[j]:tgt[j+1]]
    forward = False
    cut, deps = p.cut, p.deps
    for j in range(n):
        k = order[j]
        deps_j: dict[int, None] = {}
        for kind, lo, hi in (("data", cut[2 * k], cut[2 * k + 1]), ("control", cut[2 * k + 1], cut[2 * k + 2])):
            for d in deps[lo:hi]:
                q = pos(d)
                if q is None:
                    raise InputError(
                        f"{path}: node {ids[k]}",
                        f"a {kind} dependency on node {d}, which the trace does not have",
                        "dependencies on nodes of the same trace",
                    )
                if q == j:
                    raise InputError(
                        f"{path}: node {ids[k]}", "depends on itself (a cycle)", "a directed acyclic graph"
                    )
                deps_j[q] = None
        if deps_j:
            src.extend(deps_j)
            forward = forward or max(deps_j) > j
        tgt.append(len(src))
    if forward:  # a dependency on a later id: the id order is not a topological order, look for a cycle
        _check_acyclic(n, src, tgt, lambda j: ids[order[j]], path)
    g = Graph()
    g.nodes = p.nodes if isinstance(order, range) else [p.nodes[k] for k in order]
    ints, zero = list(range(n + 1)), 0.0  # one int object per position, shared by the edges
    g.edges = [(ints[q], ints[j], zero) for j in range(n) for q in src[tgt[j] : tgt[j + 1]]]
    has_succ = bytearray(n)
    for q in src:
        has_succ[q] = 1
    g.end = g.add(Node(MARK, "end"))
    g.edges.extend((ints[j], ints[n], zero) for j in range(n) if not has_succ[j])
    notes: tuple[str, ...] = ()
    if p.dropped:
        notes = (
            f"a trace converted from PyTorch: its {p.dropped:,} control dependencies (each operator's parent "
            "in PyTorch's call tree, not an order) are left out; its data dependencies order it",
        )
    return g, tuple(ids[k] for k in order), notes


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


def _check_acyclic(n: int, src: array, tgt: array, node_id: Any, path: str) -> None:
    """Refuse a cycle (Kahn's algorithm on arrays); the error names the lowest position left."""
    need = array("q", (tgt[j + 1] - tgt[j] for j in range(n)))
    count = array("q", bytes(8 * (n + 1)))
    for q in src:
        count[q + 1] += 1
    for j in range(n):
        count[j + 1] += count[j]
    succ, fill = array("q", bytes(8 * len(src))), array("q", count)
    for j in range(n):
        for q in src[tgt[j] : tgt[j + 1]]:
            succ[fill[q]] = j
            fill[q] += 1
    stack = [j for j in range(n) if need[j] == 0]
    seen = 0
    while stack:
        x = stack.pop()
        seen += 1
        for y in succ[count[x] : count[x + 1]]:
            need[y] -= 1
            if need[y] == 0:
                stack.append(y)
    if seen < n:
        first = next(j for j in range(n) if need[j])
        raise InputError(
            f"{path}: node {node_id(first)}", "is on a dependency cycle (or waits for one)", "a directed acyclic graph"
        )
