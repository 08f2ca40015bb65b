"""Reading every rank's Chakra trace: per-rank graphs, grouped into classes of alike ranks.

ASTRA-sim 2.x runs ``PREFIX.<rank>.et`` on each NPU (rank = 0 .. NPUs - 1), so ranks may differ
(pipeline stages do). `load_rank_set(spec, npus)` reads every one of them (gzipped or not), converts
their nodes as `dse.training.chakra.read` does (the same checks, and, per rank, `check_peer`: a
send's own end is that rank, its peer another rank of the topology), and returns a `RankSet`:

- **Classes**: ranks are alike when their graphs (`dse.training.workload_graph.Graph`: nodes in id
  order, dependencies) are equal except for the peers of sends and receives and the ``pg_name`` of
  collectives. A class keeps one graph (its first rank's, with that rank's peers and groups) and,
  per rank, the peer of each send/receive and the group of each collective in graph order, so a
  simulator runs one graph per class. Classes are numbered by their first rank.
- **Process groups** from PyTorch traces: a ``METADATA_NODE`` whose ``inputs.values`` describes
  PyTorch's process groups (``## process_group:init ##``: a JSON list of ``pg_name`` / ``ranks``;
  empty ranks: every NPU), as ASTRA-sim's ``issue_pytorch_pg_metadata`` reads it, gives
  `RankSet.trace_groups`. A group listed with different ranks in two places is refused.
- **Files**: the rank files are found by name in the prefix's folder; a missing one, one past the
  topology's NPU count, or any other count is one line naming the file and what is allowed. ``spec``
  is the prefix or any ``PREFIX.<rank>.et`` (``.et.gz`` when the files are named so); a lone file not
  named like a rank file is rank 0 of a one-NPU topology.

Speed and bounds: the rank files are read one at a time, each through the bounded reader
(`dse.training.chakra.frames`: ``DSE_MAX_TRACE_BYTES`` per file, ``DSE_MAX_TRACE_NODES`` per file,
the dependency and attribute totals), after a work check for the number of files; before a file's
nodes are converted the nodes of every file read so far are checked against the work limit
(`READ_STEPS_PER_NODE` steps each). A file whose bytes equal an earlier one's (a digest) is not
parsed again; within different files, a node message whose bytes were seen before reuses that
conversion (most nodes of the ranks of a pipeline stage are byte for byte alike); a message that
differs from an earlier one only in the values of its ``comm_src``, ``comm_dst`` or ``pg_name``
attributes (`dse.training.chakra.nodes.skeleton`: the earlier one's bytes without them were checked
to parse as it without them) reuses its conversion with its own values; and a rank whose node
sequence matches an earlier rank's up to peers and groups reuses its graph. So the work grows with
the distinct node messages and the distinct graphs, plus a dictionary look-up per node.

Choices: ranks are alike only when their node names, ids aside, are equal too (a name shows in a
timeline); a class's `RankClassGraph.ids` are its first rank's (alike ranks may number their nodes
differently); the number of rank files must be the topology's NPU count (ASTRA-sim
reads the first NPU-count files and ignores the others); a rank file in the folder named
``PREFIX.<rank>.et`` with a leading zero (``PREFIX.01.et``) is no rank file (ASTRA-sim opens
``PREFIX.1.et``).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.files import read_bytes
from dse.core.limits import check_work
from dse.training.chakra import schema as cs
from dse.training.chakra.frames import GZIP_MAGIC, Budget, frames, gunzip
from dse.training.chakra.link import Linker
from dse.training.chakra.messages import decode_message, node_namer
from dse.training.chakra.nodes import NodeConverter, check_peer, process_groups, rank_values, skeleton, verify_skeleton
from dse.training.chakra.read import RANK_FILE, dropped_note, rank_numbers
from dse.training.workload_graph import COMM, RECV, SEND, Graph, Node

#: work steps (`check_work`) per node of a rank file that is parsed, and per rank file
READ_STEPS_PER_NODE = 5
STEPS_PER_FILE = 100


@dataclass(frozen=True)
class RankClassGraph:
    """One class of alike ranks (module docstring): `ranks` (rising), the `graph` of its first rank
    and that rank's Chakra node `ids` (one per graph node but the end mark), and per rank of
    `ranks`, in the same order, `peers[k]`: the peer of each SEND/RECV node in graph order, and
    `groups[k]`: the group of each COMM node in graph order (``""``: its scope, all NPUs)."""

    ranks: tuple[int, ...]
    graph: Graph
    ids: tuple[int, ...]
    peers: tuple[tuple[int, ...], ...]
    groups: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class RankSet:
    """Every rank's trace (module docstring). `class_of[r]`: rank r's index in `classes`.
    `trace_groups`: the process groups the traces themselves describe (``pg_name`` -> ranks).
    `prefix`: the files' path without ``.<rank>.et``; `version`: rank 0's schema version."""

    name: str
    prefix: str
    npus: int
    class_of: tuple[int, ...]
    classes: tuple[RankClassGraph, ...]
    trace_groups: dict[str, tuple[int, ...]] = field(default_factory=dict)
    version: str = ""
    notes: tuple[str, ...] = ()

    def graph_of(self, rank: int) -> Graph:
        """The graph rank `rank` runs (its class's, whose peers and groups are the class's first rank's)."""
        return self.classes[self.class_of[rank]].graph


def _split(spec: str | Path) -> tuple[str, str, Path | None]:
    """The prefix and suffix (``.et`` or ``.et.gz``) of the rank files `spec` names, and the lone
    file, when `spec` is a file not named like a rank file."""
    s = str(spec)
    m = RANK_FILE.match(os.path.basename(s))
    if m:
        prefix = os.path.join(os.path.dirname(s), m.group("prefix"))
        if os.path.lexists(s) or rank_numbers(prefix):  # a missing rank file among others: named later
            return prefix, ".et" + (m.group("gz") or ""), None
    for suffix in (".et", ".et.gz"):
        if os.path.lexists(f"{s}.0{suffix}"):
            return s, suffix, None
    if os.path.lexists(s) and not os.path.isdir(s):
        return s, "", Path(s)
    others = rank_numbers(s)  # rank 0's file missing, others there: rank_files names it
    if others:
        return s, others[min(others)], None
    raise InputError("workload", f"no such Chakra trace {s!r}", "a PREFIX.N.et file or its PREFIX")


def is_rank_set(spec: str | Path) -> bool:
    """Does `spec` name per-rank traces: a ``PREFIX.<rank>.et`` file (``.et.gz`` alike) of a rank other
    than 0 exists, or rank 0's is missing while another's exists? False for anything else (a lone
    ``PREFIX.0.et``, a missing trace)."""
    try:
        prefix, _suffix, lone = _split(spec)
    except InputError:
        return False
    if lone is not None:
        return False
    ranks = rank_numbers(prefix)
    return bool(ranks) and set(ranks) != {0}


def rank_files(spec: str | Path, npus: int) -> tuple[str, list[Path]]:
    """The prefix and the file of each rank 0 .. `npus` - 1; a missing file or one past `npus` is
    one `InputError` naming it."""
    check_work(npus * STEPS_PER_FILE, f"reading {npus:,} rank files")
    prefix, suffix, lone = _split(spec)
    if lone is not None:
        if npus != 1:
            raise InputError(
                f"workload {str(lone)!r}",
                f"one trace file for a topology of {npus:,} NPUs",
                f"one file per NPU, named PREFIX.0.et to PREFIX.{npus - 1}.et",
            )
        return str(lone), [lone]
    folder, base = os.path.split(prefix)
    pattern = re.compile(re.escape(base) + r"\.(0|[1-9][0-9]*)" + re.escape(suffix) + "$")
    found: set[int] = set()
    with os.scandir(folder or ".") as it:
        for entry in it:
            m = pattern.match(entry.name)
            if m:
                found.add(int(m.group(1)))
    allowed = f"one file per NPU: {base}.0{suffix} to {base}.{npus - 1}{suffix} (the topology has {npus:,} NPUs)"
    missing = next((r for r in range(npus) if r not in found), None)
    if missing is not None:
        n = len(found)
        raise InputError(
            f"{prefix}.{missing}{suffix}", f"no such rank file ({n:,} rank file{'s' * (n != 1)} found)", allowed
        )
    extra = sorted(r for r in found if r >= npus)
    if extra:
        raise InputError(
            f"{prefix}.{extra[0]}{suffix}",
            f"a rank file past the topology's NPUs ({len(found):,} rank files for {npus:,} NPUs)",
            allowed,
        )
    return prefix, [Path(f"{prefix}.{r}{suffix}") for r in range(npus)]


def load_rank_set(spec: str | Path, npus: int) -> RankSet:
    """Read every rank file of `spec` for a topology of `npus` NPUs (module docstring)."""
    prefix, paths = rank_files(spec, npus)
    reader = _Reader(npus)
    for r, path in enumerate(paths):
        reader.add(r, path)
    return reader.result(prefix)


class _Entry:
    """One distinct node message: its graph node, id, dependencies, attribute count, own end (a
    send's ``comm_src``, -1 if none), whether it is a METADATA node and the process groups it
    describes, and its form: equal for messages whose nodes are equal but for peers and groups
    (`norm`: with the id, the dependencies and the METADATA flag too)."""

    __slots__ = ("node", "nid", "data", "ctrl", "deps", "all_deps", "attrs", "own", "meta", "groups", "norm", "form")

    def __init__(self, node: Node, nid: int, msg: Any, own: int) -> None:
        self.node, self.nid, self.own = node, nid, own
        self.data, self.ctrl, self.attrs = tuple(msg.data_deps), tuple(msg.ctrl_deps), len(msg.attr)
        self.deps, self.all_deps = len(self.data), len(self.data) + len(self.ctrl)
        self.meta = msg.type == cs.METADATA
        self.groups = process_groups(msg) if self.meta else []
        self.norm = self.form = 0


class _Shape:
    """What ranks with one node sequence share: their class, and the file positions (in graph
    order) of their sends/receives and collectives, and of their METADATA nodes."""

    __slots__ = ("cls", "p2p", "coll", "meta")

    def __init__(self, cls: int, p2p: tuple[int, ...], coll: tuple[int, ...], meta: tuple[int, ...]) -> None:
        self.cls, self.p2p, self.coll, self.meta = cls, p2p, coll, meta


#: a rank file read: its shape, per send/receive (graph order) the entry, peer and own end, the
#: group of each collective, the METADATA entries
_File = tuple[_Shape, tuple[tuple[_Entry, int, int], ...], tuple[str, ...], tuple[_Entry, ...]]


class _Reader:
    """The rank files, added in rank order (module docstring)."""

    def __init__(self, npus: int) -> None:
        self.npus = npus
        self.convert = NodeConverter("")
        self.entries: dict[bytes, _Entry] = {}
        self.templates: dict[tuple, _Entry] = {}
        self.values: dict[tuple, Any] = {}
        self.norms: dict[tuple, int] = {}
        self.forms: dict[Node, int] = {}
        self.shapes: dict[tuple, _Shape] = {}
        self.canon: dict[tuple, int] = {}
        self.files: dict[bytes, _File] = {}
        self.metas: dict[bytes, tuple[Any, bool]] = {}
        self.tuples: dict[tuple, tuple] = {}
        self.graphs: list[tuple[Graph, tuple[int, ...]]] = []
        self.members: list[tuple[list[int], list[tuple], list[tuple]]] = []
        self.class_of: list[int] = []
        self.groups: dict[str, tuple[tuple[int, ...], str]] = {}
        self.notes: dict[str, None] = {}
        self.nodes = self.parsed = 0
        self.version = ""

    def add(self, r: int, path: Path) -> None:
        """Read rank `r`'s file and place the rank in its class."""
        where = f"{path} (rank {r})"
        raw = read_bytes(path, where, limit="trace_bytes")
        data = gunzip(raw, where) if raw[:2] == GZIP_MAGIC else raw
        assert data is not None  # no cap: a trace over the limit is refused
        digest = hashlib.blake2b(data, digest_size=20).digest()
        hit = self.files.get(digest)
        if hit is None:
            del raw
            hit = self.files[digest] = self._read(bytes(data) if isinstance(data, bytearray) else data, where, r)
        self._place(r, where, *hit)

    def _read(self, data: bytes, where: str, r: int) -> _File:
        """Parse a file not seen before: its entries, shape and per-rank values."""
        seq, over, pytorch, meta = self._messages(data, where)
        if r == 0:
            self.version = str(meta.version)
        key = (pytorch, tuple(e.norm for e in seq))
        shape = self.shapes.get(key)
        if shape is None:
            shape = self.shapes[key] = self._shape(seq, over, pytorch, where)
        p2p = []
        for k in shape.p2p:
            e = seq[k]
            v = over.get(k)
            p2p.append((e, e.node.peer, e.own) if v is None else (e, v[0], v[1]))
        groups = tuple(seq[k].node.group if k not in over else over[k][2] for k in shape.coll)
        return shape, tuple(p2p), groups, tuple(seq[k] for k in shape.meta)

    def _messages(self, data: bytes, where: str) -> tuple[list[_Entry], dict, bool, Any]:
        """The entries of a file's nodes in file order, the per-rank values of those that share a
        skeleton with an earlier message (by position), whether it is PyTorch's, its metadata."""
        view = memoryview(data)
        starts, ends = frames(data, where, node_namer(view))
        self.nodes += len(starts) - 1
        self.parsed += 1
        check_work(self.nodes * READ_STEPS_PER_NODE, f"reading {self.nodes:,} nodes in {self.parsed:,} rank files")
        head = data[starts[0] : ends[0]]
        if head not in self.metas:
            meta = decode_message(cs.GlobalMetadata, head, f"{where}: the global metadata")
            self.metas[head] = (meta, any(a.name == "schema" for a in meta.attr))  # as `messages.node_messages`
        meta, pytorch = self.metas[head]
        budget = Budget(where)
        budget.take(0, len(meta.attr))
        self.convert.path = where
        entries, seq, over, prev = self.entries, [], {}, None
        deps = attrs = 0  # of the messages seen before, counted at the end: they build nothing new
        for k in range(1, len(starts)):
            b = data[starts[k] : ends[k]]
            e = entries.get(b)
            if e is None:
                e, v = self._novel(b, where, prev, budget, pytorch)
                if v is not None:
                    over[k - 1] = v
            else:
                deps += e.deps if pytorch else e.all_deps
                attrs += e.attrs
            seq.append(e)
            prev = e
        budget.take(deps, attrs)
        return seq, over, pytorch, meta

    def _novel(
        self, b: bytes, where: str, prev: _Entry | None, budget: Budget, pytorch: bool
    ) -> tuple[_Entry, tuple | None]:
        """A message not seen before: an earlier one with its skeleton and its own peer, own end and
        group; or converted in full (its dependencies counted first), and kept."""
        sk = skeleton(b)
        if sk is not None:
            t = self.templates.get(sk[0])
            if t is not None:
                seen = (t.node.kind, sk[0][1], sk[1])  # the values' meaning: the node kind, the names
                v = self.values.get(seen, False)
                if v is False:
                    v = self.values[seen] = rank_values(t.node, sk[0], sk[1])
                if v is not None:
                    budget.take(t.deps if pytorch else t.all_deps, t.attrs)
                    return t, v
        after = f"{where}: the node after {'the metadata' if prev is None else f'node {prev.nid}'}"
        msg = decode_message(cs.ChakraNode, b, after)
        budget.take(len(msg.data_deps) + (0 if pytorch else len(msg.ctrl_deps)), len(msg.attr))
        node = self.convert.convert(msg, msg.id)
        e = _Entry(node, msg.id, msg, self.convert.own)
        bare = replace(node, peer=-1, group="") if node.kind in (SEND, RECV, COMM) else node
        e.form = self.forms.setdefault(bare, len(self.forms))
        e.norm = self.norms.setdefault((e.form, e.nid, e.data, e.ctrl, e.meta), len(self.norms))
        self.entries[b] = e
        if sk is not None and sk[0] not in self.templates and verify_skeleton(msg, sk[0]):
            self.templates[sk[0]] = e
        return e, None

    def _shape(self, seq: list[_Entry], over: dict, pytorch: bool, where: str) -> _Shape:
        """Build the graph of a new node sequence (checking ids and dependencies) and find its class."""
        link = Linker(where, len(seq))
        dropped = 0
        for k, e in enumerate(seq):
            v = over.get(k)
            node = e.node if v is None else replace(e.node, peer=v[0], group=v[2])
            if pytorch:
                dropped += len(e.ctrl)
                link.add(node, e.nid, e.data)
            else:
                link.add(node, e.nid, e.data, e.ctrl)
        graph, gids = link.finish()
        self.notes.update(dict.fromkeys(dropped_note(dropped)))
        order = link.order
        canon = (tuple(seq[k].form for k in order), tuple(graph.edges))
        cls = self.canon.get(canon)
        if cls is None:
            cls = self.canon[canon] = len(self.graphs)
            self.graphs.append((graph, gids))
            self.members.append(([], [], []))
        kinds = [(k, seq[k].node.kind) for k in order]
        return _Shape(
            cls,
            tuple(k for k, kind in kinds if kind in (SEND, RECV)),
            tuple(k for k, kind in kinds if kind == COMM),
            tuple(k for k, e in enumerate(seq) if e.meta),
        )

    def _place(self, r: int, where: str, shape: _Shape, p2p: tuple, groups: tuple, meta: tuple) -> None:
        """Rank `r` joins its class with its own peers and groups (checked against `r`)."""
        npus = self.npus
        for e, peer, own in p2p:
            if own not in (-1, r) or peer == r or peer >= npus:
                check_peer(replace(e.node, peer=peer), own, r, npus, f"{where}: node {e.nid}")
        peers = tuple(peer for _, peer, _ in p2p)
        ranks, rank_peers, rank_groups = self.members[shape.cls]
        ranks.append(r)
        rank_peers.append(self.tuples.setdefault(peers, peers))
        rank_groups.append(self.tuples.setdefault(groups, groups))
        self.class_of.append(shape.cls)
        for e in meta:
            if e.groups != []:
                self._groups(e, where)

    def _groups(self, e: _Entry, where: str) -> None:
        """Merge the process groups a METADATA node describes into `trace_groups`."""
        at = f"{where}: node {e.nid}"
        if e.groups is None:
            self.notes[f"{at}: a process-group description dse cannot read is left out (ASTRA-sim skips it too)"] = None
            return
        for name, listed in e.groups:
            ranks = tuple(listed) or tuple(range(self.npus))
            bad = next((x for x in ranks if not 0 <= x < self.npus), None)
            if bad is not None or len(set(ranks)) != len(ranks):
                what = f"rank {bad}, which the topology does not have" if bad is not None else "a rank twice"
                raise InputError(at, f"process group {name!r} lists {what}", f"ranks from 0 to {self.npus - 1}, once")
            seen = self.groups.setdefault(name, (ranks, at))
            if seen[0] != ranks:
                raise InputError(
                    at,
                    f"process group {name!r} has ranks {_few(ranks)} here and {_few(seen[0])} in {seen[1]}",
                    "one membership per process group",
                )

    def result(self, prefix: str) -> RankSet:
        """The `RankSet` of the files added so far, its classes of alike ranks in first-seen order."""
        classes = tuple(
            RankClassGraph(tuple(ranks), graph, ids, tuple(peers), tuple(groups))
            for (graph, ids), (ranks, peers, groups) in zip(self.graphs, self.members, strict=True)
        )
        notes = list(self.notes)
        if len(classes) > 1:
            notes.append(
                f"{self.npus:,} rank files, {len(classes):,} classes of alike ranks "
                f"({self.parsed:,} distinct files parsed)"
            )
        return RankSet(
            name=os.path.basename(prefix),
            prefix=prefix,
            npus=self.npus,
            class_of=tuple(self.class_of),
            classes=classes,
            trace_groups={name: ranks for name, (ranks, _) in self.groups.items()},
            version=self.version,
            notes=tuple(notes),
        )


def _few(ranks: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, ranks[:8])) + (", ...]" if len(ranks) > 8 else "]")
