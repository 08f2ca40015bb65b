"""A Chakra trace's protobuf messages, decoded one at a time: shared by the single-rank reader
(`dse.training.chakra.read`), the rank comparison (`dse.training.chakra.digests`) and the per-rank
reader (`dse.training.chakra.rankset`).

The framing is checked first (`dse.training.chakra.frames`), then each message is decoded as it is
consumed and charged to the trace's totals (`Budget`); a damaged message is one `InputError` naming
the file and the node before it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from dse.core.errors import InputError
from dse.training.chakra import schema as cs
from dse.training.chakra.frames import Budget, Buffer, frames


def node_namer(view: memoryview) -> Callable[[int, int], str]:
    """What an error calls the node message at ``view[a:b]``: ``node ID``, or a damaged node."""

    def node_id(a: int, b: int) -> str:
        """``node ID`` of the message at ``view[a:b]``, or ``a damaged node``."""
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
    meta = decode_message(cs.GlobalMetadata, view[starts[0] : ends[0]], f"{path}: the global metadata")
    budget.take(0, len(meta.attr))
    pytorch = pytorch and any(a.name == "schema" for a in meta.attr)  # PyTorch's trace schema version
    return meta, pytorch, len(starts) - 1, _messages(view, starts, ends, budget, pytorch, path)


def _messages(
    view: memoryview, starts: array, ends: array, budget: Budget, pytorch: bool, path: str
) -> Iterator[tuple[Any, Any, Any]]:
    """The node messages of `node_messages`, one at a time, each charged to `budget` first."""
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


def decode_message(cls: Any, body: memoryview | bytes, where: str) -> Any:
    """The protobuf message `cls` in `body`; a damaged one is an `InputError` naming `where`."""
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
