"""Reading Chakra execution traces (ASTRA-sim 2.x's workloads) into a workload graph.

`load_trace("trace.0.et")` (or the prefix ``trace``) reads one rank's file, gzipped or not, checks
it, and returns a `ChakraTrace` whose `graph` (`dse.training.workload_graph.Graph`) the engine runs:

- ``COMP_NODE``: compute for ``duration_micros`` x 1000 ns, on the CPU if ``is_cpu_op``;
- ``COMM_COLL_NODE`` with ``comm_type`` ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER or ALL_TO_ALL: a
  collective of ``comm_size`` bytes (ASTRA-sim's convention: an all-gather's is its input shard)
  on the dimensions ``involved_dim`` marks (all when absent; entries past the topology's last
  dimension are ignored, so a trace written for four dimensions runs on three);
- ``BROADCAST``: replays its duration on the communication resource (ASTRA-sim 2.x does the same);
  a ``COMM_COLL_NODE`` without ``comm_type`` on the CPU (PyTorch's CPU-side c10d call) replays its
  duration on the CPU (ASTRA-sim 2.x rejects it);
- ``METADATA_NODE`` and ``INVALID_NODE``: pass, taking no time and no resource.

A node depends on its ``data_deps`` and ``ctrl_deps`` alike. Anything else is refused with one line
naming the file, the node id and the problem: a damaged or truncated file, a node type dse does
not run (memory and point-to-point nodes), a collective ASTRA-sim 2.x does not simulate (REDUCE,
GATHER, SCATTER, REDUCE_SCATTER_BLOCK, BARRIER) or an unknown one, a missing ``comm_size``, a
duplicate id, a dependency on a node the trace does not have, a cycle. One exception: in a trace
converted from PyTorch (its metadata names the PyTorch trace ``schema``) ``ctrl_deps`` hold each
operator's parent in PyTorch's call tree, not an order (in the Chakra test trace they form cycles
and name absent nodes): dse runs such a trace on its data dependencies, and `notes` says so.

Rank 0 is the representative NPU: every NPU runs its own file in ASTRA-sim, and dse models one.
When the other rank files differ from it in anything but node ids (the first `CHECK_RANKS` of
them are checked), `notes` says so. Attributes named ``dse_*`` are dse's own (written by
`dse.training.chakra_write`, ignored by ASTRA-sim): exact ns, update delays, issue policies and labels.
"""

from __future__ import annotations

import glob
import gzip
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from dse.core.collectives import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER
from dse.core.errors import InputError
from dse.core.limits import MAX_BYTES, MAX_NS
from dse.training import chakra_schema as cs
from dse.training.workload_graph import ALL, COMM, COMPUTE, MARK, POLICIES, REPLAY, Graph, Node

#: Chakra's collectives that run as dse collectives
SIMULATED = {
    cs.ALL_REDUCE: ALL_REDUCE,
    cs.REDUCE_SCATTER: REDUCE_SCATTER,
    cs.ALL_GATHER: ALL_GATHER,
    cs.ALL_TO_ALL: ALL_TO_ALL,
}
CHAKRA_TYPE = {v: k for k, v in SIMULATED.items()}
CHECK_RANKS = 64
_RANK_FILE = re.compile(r"^(?P<prefix>.*)\.(?P<rank>\d+)\.et$")
_RUNS = (cs.INVALID, cs.METADATA, cs.COMP, cs.COMM_COLL)


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
    """Does `spec` name a Chakra trace: a ``.et`` file, or a prefix with a ``.0.et`` file?"""
    s = str(spec)
    return s.endswith(".et") or s.endswith(".et.gz") or (not Path(s).exists() and Path(s + ".0.et").is_file())


def load_trace(spec: str | Path) -> ChakraTrace:
    """Read a Chakra trace (module docstring): a rank's ``.et`` file or the prefix of its rank files."""
    path = Path(spec)
    if not path.exists() and Path(str(spec) + ".0.et").is_file():
        path = Path(str(spec) + ".0.et")
    if not path.is_file():
        raise InputError("workload", f"no such Chakra trace {str(spec)!r}", "a PREFIX.N.et file or its PREFIX")
    data = _read_bytes(path)
    meta, raw = _messages(data, str(path))
    pytorch = any(a.name == "schema" for a in meta.attr)  # PyTorch's execution-trace schema version
    graph, ids, notes = _build(raw, str(path), pytorch)
    ranks, rank_notes = _check_ranks(path, data)
    name = re.sub(r"\.\d+\.et(\.gz)?$", "", path.name)
    return ChakraTrace(name, str(path), graph, ids, ranks, meta.version, notes + rank_notes)


def _read_bytes(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError("workload", f"cannot read {str(path)!r}: {e.strerror or e}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise InputError(f"{path}", f"a damaged gzip stream ({e})", "a Chakra trace, gzipped or not") from None
    return data


def _varint(data: bytes, pos: int, where: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise InputError(where, "truncated: the file ends inside a length prefix", "a whole Chakra trace")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise InputError(where, "damaged: a length prefix longer than 10 bytes", "a Chakra trace")


def _messages(data: bytes, path: str) -> tuple[Any, list[Any]]:
    """The `GlobalMetadata` and the parsed `Node` messages, in file order."""
    if not data:
        raise InputError(path, "an empty file", "a Chakra trace: a GlobalMetadata message, then Node messages")
    meta = cs.GlobalMetadata()
    pos = _parse(meta, data, 0, f"{path}: the global metadata")
    nodes: list[Any] = []
    while pos < len(data):
        node = cs.ChakraNode()
        pos = _parse(node, data, pos, f"{path}: the node after {f'node {nodes[-1].id}' if nodes else 'the metadata'}")
        nodes.append(node)
    return meta, nodes


def _parse(msg: Any, data: bytes, pos: int, where: str) -> int:
    """Parse the length-prefixed message at `pos` into `msg`; returns the position after it."""
    n, pos = _varint(data, pos, where)
    if pos + n > len(data):
        raise InputError(
            where, f"truncated: the message needs {n} bytes, {len(data) - pos} remain", "a whole Chakra trace"
        )
    try:
        msg.ParseFromString(data[pos : pos + n])
    except DecodeError as e:
        raise InputError(where, f"a damaged message ({e})", "a Chakra trace") from None
    return pos + n


def _attrs(node: Any) -> dict[str, Any]:
    out = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        if kind is None:
            continue
        v = getattr(a, kind)
        out[a.name] = list(v.values) if kind.endswith("_list") else v
    return out


def _integer(attrs: dict, name: str, where: str, *, minimum: int = 0, maximum: int = MAX_BYTES) -> int | None:
    v = attrs.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum:
        raise InputError(where, f"{name} is {v!r}", f"an integer from {minimum} to {maximum}")
    return v


def _ns(attrs: dict, name: str, where: str) -> float | None:
    """One of dse's exact times (a double, ns), if present."""
    v = attrs.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_NS:
        raise InputError(where, f"{name} is {v!r}", f"ns from 0 to {MAX_NS:g}")
    return float(v)


def _node(msg: Any, where: str) -> Node:
    """One Chakra node as a graph node (module docstring)."""
    a = _attrs(msg)
    cpu = bool(a.get("is_cpu_op", False))
    if msg.duration_micros * 1000 > MAX_NS:
        raise InputError(where, f"duration_micros {msg.duration_micros} is too long", f"at most {MAX_NS / 1000:g} us")
    ns = _ns(a, "dse_duration_ns", where)
    dur = float(msg.duration_micros * 1000) if ns is None else ns
    label = dict(
        name=msg.name,
        iteration=_integer(a, "dse_iteration", where) or 0,
        slot=str(a.get("dse_slot", "")),
        layer=_integer(a, "dse_layer", where, minimum=-1) if "dse_layer" in a else -1,
    )
    t = msg.type
    if t not in _RUNS:
        what = f"node type {cs.NODE_TYPES[t]}" if t < len(cs.NODE_TYPES) else f"unknown node type {t}"
        raise InputError(where, f"{what} is not run by dse", "COMP_NODE, COMM_COLL_NODE, METADATA_NODE, INVALID_NODE")
    if t in (cs.INVALID, cs.METADATA):
        return Node(MARK, **label)
    if t == cs.COMP:
        return Node(COMPUTE, duration=dur, cpu=cpu, **label)
    ctype = _integer(a, "comm_type", where, maximum=2**31)
    if ctype is None:
        if cpu:  # PyTorch's CPU-side collective call: its duration on the CPU
            return Node(REPLAY, duration=dur, cpu=True, **label)
        raise InputError(
            where,
            "a COMM_COLL_NODE without comm_type",
            "comm_type ALL_REDUCE (0), ALL_GATHER (2), BROADCAST (5), ALL_TO_ALL (6) or REDUCE_SCATTER (7)",
        )
    if ctype == cs.BROADCAST:
        return Node(REPLAY, duration=dur, cpu=cpu, **label)
    if ctype not in SIMULATED:
        what = (
            f"collective {cs.COLLECTIVE_TYPES[ctype]}"
            if ctype < len(cs.COLLECTIVE_TYPES)
            else f"unknown comm_type {ctype}"
        )
        raise InputError(
            where,
            f"{what} is not simulated (nor by ASTRA-sim 2.x)",
            "ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, or BROADCAST (replayed)",
        )
    size = _integer(a, "comm_size", where, minimum=1)
    if size is None:
        raise InputError(where, f"a {cs.COLLECTIVE_TYPES[ctype]} without comm_size", "comm_size in bytes, at least 1")
    scope: Any = ALL
    if "involved_dim" in a:
        flags = a["involved_dim"]
        if not isinstance(flags, list) or not all(isinstance(f, bool) for f in flags):
            raise InputError(where, "involved_dim is not a bool list", "a bool_list, one entry per network dimension")
        scope = tuple(i for i, f in enumerate(flags) if f)
    policy = str(a.get("dse_policy", "none"))
    if policy not in POLICIES:
        raise InputError(where, f"dse_policy {policy!r}", ", ".join(POLICIES))
    delay = _ns(a, "dse_delay_ns", where) or 0.0
    return Node(COMM, collective=SIMULATED[ctype], size=size, scope=scope, delay=delay, policy=policy, cpu=cpu, **label)


def _build(raw: list[Any], path: str, pytorch: bool) -> tuple[Graph, tuple[int, ...], tuple[str, ...]]:
    """Check ids and dependencies, order by id, and link the graph (with its end mark)."""
    index: dict[int, int] = {}
    for k, msg in enumerate(raw):
        if msg.id in index:
            raise InputError(f"{path}: node {msg.id}", "a duplicate node id", "one node per id")
        index[msg.id] = k
    order = sorted(index)
    pos = {i: j for j, i in enumerate(order)}
    g = Graph()
    dropped = 0
    for i in order:
        msg = raw[index[i]]
        g.nodes.append(_node(msg, f"{path}: node {i}"))
    for j, i in enumerate(order):
        msg = raw[index[i]]
        deps: dict[int, None] = {}
        for kind, lst in (("data", msg.data_deps), ("control", msg.ctrl_deps)):
            if kind == "control" and pytorch:
                dropped += len(lst)
                continue
            for d in lst:
                if d in pos:
                    deps[pos[d]] = None
                else:
                    raise InputError(
                        f"{path}: node {i}",
                        f"a {kind} dependency on node {d}, which the trace does not have",
                        "dependencies on nodes of the same trace",
                    )
        g.edges.extend((d, j, 0.0) for d in deps)
    _check_acyclic(g, order, path)
    has_succ = {a for a, _, _ in g.edges}
    sinks = [j for j in range(len(order)) if j not in has_succ]
    g.end = g.add(Node(MARK, "end"), *((j, 0.0) for j in sinks))
    notes: tuple[str, ...] = ()
    if dropped:
        notes = (
            f"a trace converted from PyTorch: its {dropped:,} control dependencies (each operator's parent "
            "in PyTorch's call tree, not an order) are left out; its data dependencies order it",
        )
    return g, tuple(order), notes


def _check_acyclic(g: Graph, ids: list[int], path: str) -> None:
    n = len(g.nodes)
    need = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b, _ in g.edges:
        if a == b:
            raise InputError(f"{path}: node {ids[a]}", "depends on itself (a cycle)", "a directed acyclic graph")
        succ[a].append(b)
        need[b] += 1
    stack = [i for i in range(n) if need[i] == 0]
    seen = 0
    while stack:
        x = stack.pop()
        seen += 1
        for y in succ[x]:
            need[y] -= 1
            if need[y] == 0:
                stack.append(y)
    if seen < n:
        first = min(i for i in range(n) if need[i])
        raise InputError(
            f"{path}: node {ids[first]}", "is on a dependency cycle (or waits for one)", "a directed acyclic graph"
        )


def _check_ranks(path: Path, data0: bytes) -> tuple[int, tuple[str, ...]]:
    """How many rank files share the prefix, and a note if any differs from this one."""
    m = _RANK_FILE.match(path.name)
    if not m:
        return 1, ()
    prefix = m.group("prefix")
    files = []
    for p in path.parent.glob(f"{glob.escape(prefix)}.*.et"):
        mm = _RANK_FILE.match(p.name)
        if mm and mm.group("prefix") == prefix:
            files.append((int(mm.group("rank")), p))
    files.sort()
    differ: list[int] = []
    checked = 0
    sig0: tuple | None = None
    for r, p in files:
        if p == path or r in differ or checked >= CHECK_RANKS:
            continue
        checked += 1
        data = _read_bytes(p)
        if data == data0:
            continue
        if sig0 is None:
            sig0 = _signature(_messages(data0, str(path))[1])
        try:
            same = _signature(_messages(data, str(p))[1]) == sig0
        except InputError:
            same = False
        if not same:
            differ.append(r)
    if not differ:
        return len(files), ()
    differ.sort()
    shown = ", ".join(map(str, differ[:8])) + (", ..." if len(differ) > 8 else "")
    return len(files), (
        f"rank {m.group('rank')} is the representative NPU; {len(differ)} of the {len(files)} rank "
        f"files differ from it (ranks {shown})",
    )


def _signature(raw: list[Any]) -> tuple:
    """A trace's nodes in id order with dependencies as positions: equal for ranks that differ only in ids."""
    order = sorted(range(len(raw)), key=lambda k: raw[k].id)
    pos = {raw[k].id: j for j, k in enumerate(order)}
    out = []
    for k in order:
        m = raw[k]
        deps = tuple(sorted(pos.get(d, -1) for d in (*m.data_deps, *m.ctrl_deps)))
        attrs = tuple(sorted((a.name, a.SerializeToString(deterministic=True)) for a in m.attr))
        out.append((m.type, m.name, m.duration_micros, deps, attrs))
    return tuple(out)
