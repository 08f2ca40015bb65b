"""Chakra node messages to workload-graph nodes (`dse.training.workload_graph.Node`), one at a time.

`NodeConverter` turns one parsed ``ChakraProtoMsg.Node`` into a `Node` (the kinds and checks are
listed in `dse.training.chakra.read`'s docstring); what depends on the rank that runs the node (a
send's destination is not that rank, within the topology's NPUs) is `check_peer`, so that a
message's conversion can be shared by every rank file that holds the same bytes
(`dse.training.chakra.rankset`).

Choices where ASTRA-sim 2.x or the issue are silent or lenient:

- integer attributes are read from any integer type (``int32_val``, ``int64_val``, ``uint64_val``,
  ...); ``is_cpu_op`` from a bool or an integer (STAGE writes ``int32_val`` 0);
- ``comm_tag``, ``comm_src`` and ``comm_dst`` are 0 to 2^32 - 1 (ASTRA-sim reads them as uint32),
  ``comm_size`` of a send or receive 0 bytes or more; ``comm_tag`` is required (ASTRA-sim throws
  without it), as are a send's ``comm_dst`` and a receive's ``comm_src``;
- ``pg_name`` is a string or an integer (written as its decimal digits); ``""`` and ``"0"`` are
  ASTRA-sim's default group of all NPUs and become `Node.group` ``""``;
- a ``COMP_NODE`` with ``num_ops`` but no duration (``duration_micros`` 0 and no ``dse_duration_ns``)
  is untimed (`Node.timed` False, duration 0): the roofline times it; without ``num_ops`` it is a
  compute of its duration (0 ns when none: ASTRA-sim replays it for 1 ns);
- a memory node needs ``tensor_size`` (ASTRA-sim reads it);
- a process-group description in a ``METADATA_NODE`` (`process_groups`) that cannot be read is
  left out, with a note, as ASTRA-sim does.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.message import DecodeError

from dse.core.collectives import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER
from dse.core.errors import InputError
from dse.core.limits import MAX_BYTES, MAX_NS, input_limit
from dse.training.chakra import schema as cs
from dse.training.workload_graph import ALL, COMM, COMPUTE, MARK, MEM, POLICIES, RECV, REPLAY, SEND, Node

#: Chakra's collectives that run as dse collectives
SIMULATED = {
    cs.ALL_REDUCE: ALL_REDUCE,
    cs.REDUCE_SCATTER: REDUCE_SCATTER,
    cs.ALL_GATHER: ALL_GATHER,
    cs.ALL_TO_ALL: ALL_TO_ALL,
}
CHAKRA_TYPE = {v: k for k, v in SIMULATED.items()}
#: the node types dse runs
RUNS = (cs.INVALID, cs.METADATA, cs.MEM_LOAD, cs.MEM_STORE, cs.COMP, cs.COMM_SEND, cs.COMM_RECV, cs.COMM_COLL)
#: the attributes dse reads; the others are not looked at
KNOWN = frozenset(
    (
        "is_cpu_op",
        "comm_type",
        "comm_size",
        "involved_dim",
        "comm_src",
        "comm_dst",
        "comm_tag",
        "pg_name",
        "num_ops",
        "tensor_size",
        "dse_duration_ns",
        "dse_delay_ns",
        "dse_policy",
        "dse_iteration",
        "dse_layer",
        "dse_slot",
    )
)
#: the attributes a COMP_NODE reads besides ``is_cpu_op``: without them it converts by the short path
_COMP_READS = frozenset(("num_ops", "tensor_size", "dse_duration_ns", "dse_iteration", "dse_layer", "dse_slot"))
#: at most this many distinct plain compute nodes are shared (kept while a file is read: about 100
#: bytes each, which a trace of distinct nodes would spend for nothing)
PLAIN_SHARED = 2**16
MAX_RANK = 2**32 - 1
MAX_OPS = 2**64 - 1
_MEM = {cs.MEM_LOAD: "load", cs.MEM_STORE: "store"}
_P2P = {cs.COMM_SEND: ("comm_dst", "comm_src", "sends to"), cs.COMM_RECV: ("comm_src", "comm_dst", "receives from")}


class NodeConverter:
    """Chakra node messages to graph nodes (module docstring), sharing equal names, durations,
    scopes and plain compute nodes (equal nodes are one object: a `Node` is immutable). With
    `rank`, a send or receive is checked against it as it is converted (`check_peer`, without the
    topology's NPU count); `own` is the last send's ``comm_src`` (a receive's ``comm_dst``), -1
    when absent or not a send or receive."""

    def __init__(self, path: str, rank: int | None = None) -> None:
        self.path = path
        self.rank = rank
        self.own = -1
        self.names: dict[str, str] = {}
        self.scopes: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.times: dict[float, float] = {}
        self.plain: dict[tuple[str, int, bool], Node] = {}  # compute nodes by name, duration_micros, is_cpu_op
        self.flags = max(64, input_limit("dimensions"))  # involved_dim entries past these are past every topology

    def convert(self, msg: Any, nid: int) -> Node:
        """`msg` as a graph node; `own` set, a send or receive checked against `rank` (class docstring)."""
        self.own = -1
        a = {}
        for x in msg.attr[:]:  # the attributes dse reads (lists cut to `flags` entries); the others unread
            name = x.name
            if name in KNOWN and (kind := x.WhichOneof("value")) is not None:
                v = getattr(x, kind)
                a[name] = list(v.values[: self.flags]) if kind.endswith("_list") else v
        if msg.type == cs.COMP and _COMP_READS.isdisjoint(a):  # a plain compute node: the common case
            us = msg.duration_micros
            if us * 1000 <= MAX_NS:
                key = (msg.name, us, bool(a.get("is_cpu_op", False)))
                node = self.plain.get(key)
                if node is None:
                    dur = float(us * 1000)
                    name = self.names.setdefault(key[0], key[0])
                    node = Node(COMPUTE, name, self.times.setdefault(dur, dur), cpu=key[2])
                    if len(self.plain) < PLAIN_SHARED:
                        self.plain[key] = node
                return node
        return self._convert(msg, nid, a)

    def _convert(self, msg: Any, nid: int, a: dict[str, Any]) -> Node:
        """`convert` for any node, its attributes `a` read."""
        where = f"{self.path}: node {nid}"
        cpu = bool(a.get("is_cpu_op", False))
        us = msg.duration_micros
        if us * 1000 > MAX_NS:
            raise InputError(where, f"duration_micros {us} is too long", f"at most {MAX_NS / 1000:g} us")
        ns = _ns(a, "dse_duration_ns", where) if a else None
        dur = float(us * 1000) if ns is None else ns
        dur = self.times.setdefault(dur, dur)
        name = msg.name
        label: dict[str, Any] = dict(
            name=self.names.setdefault(name, name),
            iteration=_integer(a, "dse_iteration", where) or 0 if a else 0,
            slot=self.names.setdefault(slot, slot) if (slot := str(a.get("dse_slot", ""))) else "",
            layer=_integer(a, "dse_layer", where, minimum=-1) if "dse_layer" in a else -1,
        )
        t = msg.type
        if t not in RUNS:
            raise InputError(where, f"unknown node type {t} is not run by dse", ", ".join(cs.NODE_TYPES))
        if t in (cs.INVALID, cs.METADATA):
            return Node(MARK, **label)
        if t == cs.COMP:
            return self._compute(a, where, dur, cpu, ns is None and not us, label)
        if t in _MEM:
            return self._memory(a, where, t, cpu, label)
        if cpu and not (t == cs.COMM_COLL and "comm_type" not in a):
            raise InputError(
                where,
                f"a {cs.NODE_TYPES[t]} with is_cpu_op true (ASTRA-sim 2.x rejects communication on the CPU)",
                "is_cpu_op false on communication nodes; only a COMM_COLL_NODE without comm_type (PyTorch's "
                "CPU-side c10d call, replayed) may be on the CPU",
            )
        if t in _P2P:
            node = self._p2p(a, where, t, label)
            if self.rank is not None:
                check_peer(node, self.own, self.rank, None, where)
            return node
        return self._collective(a, where, dur, cpu, label)

    def _compute(self, a: dict, where: str, dur: float, cpu: bool, untimed: bool, label: dict) -> Node:
        ops = _integer(a, "num_ops", where, maximum=MAX_OPS)
        size = _integer(a, "tensor_size", where) or 0
        if ops is None:
            return Node(COMPUTE, duration=dur, cpu=cpu, tensor_bytes=size, **label)
        return Node(COMPUTE, duration=dur, cpu=cpu, flops=float(ops), tensor_bytes=size, timed=not untimed, **label)

    def _memory(self, a: dict, where: str, t: int, cpu: bool, label: dict) -> Node:
        size = _integer(a, "tensor_size", where)
        if size is None:
            raise InputError(where, f"a {cs.NODE_TYPES[t]} without tensor_size", "tensor_size in bytes")
        return Node(MEM, mem=_MEM[t], size=size, cpu=cpu, **label)

    def _p2p(self, a: dict, where: str, t: int, label: dict) -> Node:
        peer_key, own_key, _ = _P2P[t]
        values = {}
        for key in (peer_key, "comm_size", "comm_tag"):
            v = _integer(a, key, where, maximum=MAX_RANK if key != "comm_size" else MAX_BYTES)
            if v is None:
                raise InputError(
                    where, f"a {cs.NODE_TYPES[t]} without {key}", f"{peer_key}, comm_size and comm_tag (integers)"
                )
            values[key] = v
        own = _integer(a, own_key, where, maximum=MAX_RANK)
        self.own = -1 if own is None else own
        kind = SEND if t == cs.COMM_SEND else RECV
        return Node(kind, size=values["comm_size"], peer=values[peer_key], tag=values["comm_tag"], **label)

    def _collective(self, a: dict, where: str, dur: float, cpu: bool, label: dict) -> Node:
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
            raise InputError(
                where, f"a {cs.COLLECTIVE_TYPES[ctype]} without comm_size", "comm_size in bytes, at least 1"
            )
        scope: Any = ALL
        if "involved_dim" in a:
            flags = a["involved_dim"]
            if not isinstance(flags, list) or not all(isinstance(f, bool) for f in flags):
                raise InputError(
                    where, "involved_dim is not a bool list", "a bool_list, one entry per network dimension"
                )
            dims = tuple(i for i, f in enumerate(flags) if f)
            scope = self.scopes.setdefault(dims, dims)
        policy = str(a.get("dse_policy", "none"))
        if policy not in POLICIES:
            raise InputError(where, f"dse_policy {_short(policy)}", ", ".join(POLICIES))
        delay = _ns(a, "dse_delay_ns", where) or 0.0
        group = self._group(a, where)
        return Node(
            COMM,
            collective=SIMULATED[ctype],
            size=size,
            scope=scope,
            delay=delay,
            policy=policy,
            cpu=cpu,
            group=group,
            **label,
        )

    def _group(self, a: dict, where: str) -> str:
        v = a.get("pg_name")
        if v is None:
            return ""
        if isinstance(v, bool) or not isinstance(v, (str, int)) or (isinstance(v, str) and len(v) > 256):
            raise InputError(where, f"pg_name is {_short(v)}", "a communicator group's name: a string or an integer")
        name = str(v)
        return "" if name in ("", "0") else self.names.setdefault(name, name)


def check_peer(node: Node, own: int, rank: int, npus: int | None, where: str) -> None:
    """Refuse a send or receive (`node`, with its ``comm_src`` / ``comm_dst`` `own`, -1 if absent)
    that rank `rank` cannot run: another rank as its own end, itself as the peer, a peer outside
    0..`npus` - 1 (when `npus` is given)."""
    peer_key, own_key, verb = _P2P[cs.COMM_SEND if node.kind == SEND else cs.COMM_RECV]
    if own not in (-1, rank):
        raise InputError(
            where,
            f"{own_key} is {own} in rank {rank}'s trace",
            f"{own_key} {rank}, or none (ASTRA-sim runs a node on the rank whose file holds it)",
        )
    if node.peer == rank:
        raise InputError(where, f"rank {rank} {verb} itself ({peer_key} {rank})", f"{peer_key} another rank")
    if npus is not None and node.peer >= npus:
        raise InputError(
            where,
            f"rank {rank} {verb} rank {node.peer}, which the topology does not have",
            f"{peer_key} from 0 to {npus - 1} (the topology's {npus:,} NPUs)",
        )


def process_groups(msg: Any) -> list[tuple[str, list[int]]] | None:
    """The process groups a PyTorch ``process_group:init`` METADATA node describes (``pg_name`` and
    ``ranks`` of each, read from ``inputs.values`` as ASTRA-sim does; empty ranks: every NPU), [] when
    the node describes none, None when it seems to and cannot be read."""
    text = msg.inputs.values if msg.HasField("inputs") else ""
    if '"pg_name"' not in text and "'pg_name'" not in text:
        return []
    start, end = text.find("[{"), text.rfind("}]")
    try:
        items = json.loads(text[start : end + 2]) if 0 <= start < end else None
        groups = []
        for item in items or ():
            name, ranks = item["pg_name"], item.get("ranks", [])
            if not isinstance(name, (str, int)) or not isinstance(ranks, list):
                return None
            if not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
                return None
            groups.append((str(name), ranks))
        return groups if items is not None else None
    except (ValueError, TypeError, KeyError):
        return None


def _short(v: Any) -> str:
    """A value for a one-line message: its repr, cut to 60 characters."""
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _integer(attrs: dict, name: str, where: str, *, minimum: int = 0, maximum: int = MAX_BYTES) -> int | None:
    v = attrs.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum:
        raise InputError(where, f"{name} is {_short(v)}", f"an integer from {minimum} to {maximum}")
    return v


def _ns(attrs: dict, name: str, where: str) -> float | None:
    """One of dse's exact times (a double, ns), if present."""
    v = attrs.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_NS:
        raise InputError(where, f"{name} is {_short(v)}", f"ns from 0 to {MAX_NS:g}")
    return float(v)


# ----- node messages that differ only in their peers and groups ------------------------------------
#: the attributes a rank's copy of a node may change (`skeleton`): their encodings inside a Node
#: message (``attr`` is field 10: tag 0x52, a length, then ``name`` as field 1: 0x0a, a length, the name)
PER_RANK = ("comm_src", "comm_dst", "pg_name")
_PATTERNS = tuple((b"\x0a" + bytes([len(n)]) + n.encode(), n, 2 + len(n)) for n in PER_RANK)
#: the tags of the values read: int32_val, int64_val, uint32_val, uint64_val (varints), string_val
_INT_TAGS = frozenset((0x38, 0x48, 0x58, 0x68))
_STRING_TAG = b"\xea\x01"


def skeleton(b: bytes) -> tuple[tuple, tuple[bytes, ...]] | None:
    """A node message's bytes without its `PER_RANK` attributes, with where and which they were
    (the key), and their value fields' bytes; None when it has none, or not in the plain form
    (short, apart). The key of two messages is equal when they differ only in those values; whether
    the key's bytes really are the message without those attributes is `verify_skeleton`'s."""
    found = [(i, name, skip) for pattern, name, skip in _PATTERNS if (i := b.find(pattern)) >= 2]
    if not found:
        return None
    if len(found) > 1:
        found.sort()
    pieces, where, values, pos, gone = [], [], [], 0, 0
    for i, name, skip in found:
        a = i - 2
        n = b[i - 1]
        if a < pos or b[a] != 0x52 or n >= 0x80:
            return None
        pieces.append(b[pos:a])
        where.append((a - gone, name))
        pos = i + n
        values.append(b[i + skip : pos])
        gone += pos - a
    if pos > len(b):
        return None
    pieces.append(b[pos:])
    return (b"".join(pieces), tuple(where)), tuple(values)


def verify_skeleton(msg: Any, key: tuple) -> bool:
    """Do the key's bytes (`skeleton`) parse as `msg` without its `PER_RANK` attributes?"""
    names = {name for _, name in key[1]}
    try:
        bare = cs.ChakraNode.FromString(key[0])
    except DecodeError:
        return False
    full = cs.ChakraNode()
    full.CopyFrom(msg)
    kept = [a for a in full.attr if a.name not in names]
    del full.attr[:]
    full.attr.extend(kept)
    return bool(full == bare)


def rank_values(node: Node, key: tuple, values: tuple[bytes, ...]) -> tuple[int, int, str] | None:
    """The peer, own end and group (`NodeConverter`'s reading; a collective's peer and own end are
    -1) of a message whose skeleton `key` is that of `node`'s message, from its value fields; None
    if one is not a plain, valid value (the message is then converted in full, which names the
    problem)."""
    got: dict[str, int | str] = {}
    for (_, name), raw in zip(key[1], values, strict=True):
        v = _value(raw)
        if v is None or (name != "pg_name" and (not isinstance(v, int) or v > MAX_RANK)):
            return None
        got[name] = v
    if node.kind in (SEND, RECV):
        peer_key, own_key, _ = _P2P[cs.COMM_SEND if node.kind == SEND else cs.COMM_RECV]
        return int(got[peer_key]), int(got.get(own_key, -1)), ""
    if node.kind != COMM:  # the converter does not read these attributes on other nodes
        return node.peer, -1, node.group
    group = str(got.get("pg_name", ""))
    if len(group) > 256:
        return None
    return node.peer, -1, "" if group == "0" else group


def _value(raw: bytes) -> int | str | None:
    """An attribute's value field: a varint of an integer type (not negative), or a UTF-8 string."""
    if raw and raw[0] in _INT_TAGS:
        v, shift = 0, 0
        for k in range(1, len(raw)):
            c = raw[k]
            v |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                return v if k == len(raw) - 1 and v < 2**63 and (raw[0] != 0x38 or v < 2**31) else None
        return None
    if raw[:2] == _STRING_TAG and len(raw) > 2 and raw[2] < 0x80 and len(raw) == 3 + raw[2]:
        try:
            return raw[3:].decode()
        except UnicodeDecodeError:
            return None
    return None
