"""Linking one rank's Chakra nodes by their dependencies into a workload graph.

`Linker` takes the nodes in file order (`Linker.add`: a node's graph node, its Chakra id and the
ids it depends on, data then control) and `Linker.finish` gives the graph: the nodes in id order,
an edge ``(dependency, node, 0.0)`` for each distinct dependency of a node (in the order first
named), then an ``end`` mark after every node without successors. Checks, in this order: a
duplicate id, a dependency on an id the trace does not have or on the node itself (the first in
id order, data before control within a node), a cycle.

How: every writer numbers the nodes in rising file order and makes them depend on earlier ones,
so `add` looks a node's dependencies up among the nodes added before it, once each, as it is
added; a node naming one not added yet (a later node, a missing one, itself) waits for `finish`,
which looks it up among all. Dependencies on earlier positions climb and those on later ones fall
back, so a cycle stays within one stretch of positions covered by overlapping spans (a node, its
latest dependency): only those stretches are searched for one.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain, repeat
from operator import sub
from typing import Any

from dse.core.errors import InputError
from dse.training.workload_graph import MARK, Graph, Node


class Linker:
    """One rank's nodes, added in file order (module docstring); `n` is how many there will be."""

    def __init__(self, path: str, n: int) -> None:
        self.path = path
        self.ints = list(range(n + 1))  # one int object per position, shared by the edges
        self.at: dict[int, int] = {}  # id -> file position of the nodes added so far
        self.find = self.at.get
        self.last = -1
        self.ids = array("Q")
        self.nodes: list[Any] = []
        self.src: list[int] = []  # the dependencies' file positions, node after node, each once
        self.cut = array("Q", [0])  # node k's: src[cut[k]:cut[k + 1]] (none yet if it waits)
        self.waiting = array("Q")  # the dependencies (ids) of the nodes that wait for `finish`
        self.waits = array("Q")  # per waiting node: its file position, where its data and control ones end
        self.used: set[int] = set()  # the file positions some node depends on
        self.rising = True
        #: after `finish`: the nodes' file positions in id order
        self.order: Sequence[int] = range(n)

    def add(self, node: Any, nid: int, data: Sequence[int], ctrl: Sequence[int] = ()) -> None:
        """Add a node: its graph node (anything, for `finish` to keep), its id, its data and control
        dependencies (Chakra ids)."""
        k = len(self.nodes)
        # slices: protobuf's repeated fields give them in one call, and iterate one __getitem__ at a time
        row: list[Any] = list(map(self.find, chain(data[:], ctrl[:]) if ctrl else data[:]))
        distinct = set(row)
        if None in distinct:  # names a node not added yet
            waiting = self.waiting
            waiting.extend(data)
            mid = len(waiting)
            waiting.extend(ctrl)
            self.waits.extend((k, mid, len(waiting)))
        else:
            self.used |= distinct
            self.src += row if len(distinct) == len(row) else dict.fromkeys(row)
        self.cut.append(len(self.src))
        if nid <= self.last:
            self.rising = False
        self.last = nid
        self.ids.append(nid)
        self.at[nid] = self.ints[k]
        self.nodes.append(node)

    def finish(self) -> tuple[Graph, tuple[int, ...]]:
        """The graph (module docstring) and the nodes' ids in id order; an `InputError` for a
        duplicate id, a missing or self dependency, or a cycle."""
        n, ints = len(self.nodes), self.ints
        src, counts, spans = self._linked() if self.rising else self._reordered()
        ids = self.ids if self.rising else array("Q", [self.ids[k] for k in self.order])
        self.at = {}  # every dependency is looked up: the table is freed before the edges are built
        self.find = self.at.get
        if spans:  # a dependency on a later id: the id order is not a topological order, look for a cycle
            _check_acyclic(n, src, list(accumulate(counts, initial=0)), sorted(spans), ids, self.path)
        g = Graph()
        g.nodes = self.nodes if self.rising else [self.nodes[k] for k in self.order]
        zero = 0.0
        g.edges = list(zip(src, chain.from_iterable(map(repeat, ints, counts)), repeat(zero)))
        g.end = g.add(Node(MARK, "end"))
        used = self.used
        g.edges.extend((ints[j], ints[n], zero) for j in range(n) if j not in used)
        return g, tuple(ids)

    def _waits(self, order: Sequence[int] | None = None) -> Iterator[tuple[int, array, array]]:
        """The waiting nodes (in file order, or in the order of their file positions' places in
        `order`): file position, data and control dependencies (ids)."""
        w, waiting = self.waits, self.waiting
        found = range(0, len(w), 3)
        for i in found if order is None else sorted(found, key=lambda i: order[w[i]]):
            start = w[i - 1] if i else 0
            yield w[i], waiting[start : w[i + 1]], waiting[w[i + 1] : w[i + 2]]

    def _linked(self) -> tuple[list[int], list[int], list[tuple[int, int]]]:
        """Ids rising in file order: the dependencies' positions (flat), their count per node, and
        (node, latest dependency) for the nodes depending on a later one."""
        src, cut = self.src, self.cut
        counts = list(map(sub, cut[1:], cut[:-1]))
        if not self.waits:
            return src, counts, []
        out: list[int] = []
        spans, done = [], 0
        for k, data, ctrl in self._waits():  # in file order: id order
            row = self._resolve(k, data, ctrl, self.ids[k])
            self.used.update(row)
            out += src[done : cut[k]]
            out += row
            done, counts[k] = cut[k], len(row)
            if row and (latest := max(row)) > k:
                spans.append((k, latest))
        out += src[done:]
        return out, counts, spans

    def _reordered(self) -> tuple[list[int], list[int], list[tuple[int, int]]]:
        """`_linked` for ids not rising in file order: positions in id order (`order`)."""
        n, src, cut = len(self.nodes), self.src, self.cut
        self.order = _order(self.ids, self.path)
        place = [0] * n  # file position -> position in id order
        for j, k in enumerate(self.order):
            place[k] = self.ints[j]
        rows = [list(map(place.__getitem__, src[cut[k] : cut[k + 1]])) for k in self.order]
        self.used = set(map(place.__getitem__, self.used))
        self.at = {i: place[k] for i, k in self.at.items()}
        for k, data, ctrl in self._waits(place):
            j = place[k]
            rows[j] = self._resolve(j, data, ctrl, self.ids[k])
            self.used.update(rows[j])
        spans = [(j, m) for j in range(n) if rows[j] and (m := max(rows[j])) > j]
        return list(chain.from_iterable(rows)), list(map(len, rows)), spans

    def _resolve(self, j: int, data: array, ctrl: array, nid: int) -> list[int]:
        """The distinct positions of the dependencies of the node at position `j`, looked up among
        all; a missing or self dependency is refused (the first, data before control)."""
        row: dict[Any, None] = dict.fromkeys(map(self.at.get, chain(data, ctrl)))
        if None not in row and j not in row:
            return list(row)
        for kind, deps in (("data", data), ("control", ctrl)):
            for d in deps:
                q = self.at.get(d)
                if q is None:
                    raise InputError(
                        f"{self.path}: node {nid}",
                        f"a {kind} dependency on node {d}, which the trace does not have",
                        "dependencies on nodes of the same trace",
                    )
                if q == j:
                    raise InputError(
                        f"{self.path}: node {nid}", "depends on itself (a cycle)", "a directed acyclic graph"
                    )
        raise AssertionError("no missing or self dependency found")


def _order(ids: Sequence[int], path: str) -> list[int]:
    """The file positions of the nodes in id order; a duplicate id (the first in file order) is an `InputError`."""
    index: dict[int, int] = {}
    for k, i in enumerate(ids):
        if i in index:
            raise InputError(f"{path}: node {i}", "a duplicate node id", "one node per id")
        index[i] = k
    return [index[i] for i in sorted(index)]


def _check_acyclic(
    n: int, src: list[int], tgt: list[int], spans: list[tuple[int, int]], ids: Sequence[int], path: str
) -> None:
    """Refuse a cycle: Kahn's algorithm on each stretch the `spans` cover (module docstring), then,
    if one holds a cycle, on the whole graph, to name the lowest position left (a node on the
    cycle or waiting for one). The dependencies of position j are ``src[tgt[j]:tgt[j + 1]]``."""
    stretches: list[list[int]] = []
    for a, b in spans:  # rising a
        if stretches and a <= stretches[-1][1]:
            stretches[-1][1] = max(stretches[-1][1], b)
        else:
            stretches.append([a, b])
    if any(any(_left(lo, hi, src, tgt)) for lo, hi in stretches):
        need = _left(0, n - 1, src, tgt)
        first = next(j for j in range(n) if need[j])
        raise InputError(
            f"{path}: node {ids[first]}", "is on a dependency cycle (or waits for one)", "a directed acyclic graph"
        )


def _left(lo: int, hi: int, src: list[int], tgt: list[int]) -> array:
    """Kahn's algorithm on positions lo..hi and the dependencies among them (none of them on a
    position past hi): per position, how many of its dependencies are never done (all 0 when
    they hold no cycle)."""
    m = hi - lo + 1
    need, count = array("q", bytes(8 * m)), array("q", bytes(8 * (m + 1)))
    for j in range(lo, hi + 1):
        for q in src[tgt[j] : tgt[j + 1]]:
            if q >= lo:
                need[j - lo] += 1
                count[q - lo + 1] += 1
    for x in range(m):
        count[x + 1] += count[x]
    succ, fill = array("q", bytes(8 * count[m])), array("q", count)
    for j in range(lo, hi + 1):
        for q in src[tgt[j] : tgt[j + 1]]:
            if q >= lo:
                succ[fill[q - lo]] = j - lo
                fill[q - lo] += 1
    stack = [x for x in range(m) if need[x] == 0]
    while stack:
        x = stack.pop()
        for y in succ[count[x] : count[x + 1]]:
            need[y] -= 1
            if need[y] == 0:
                stack.append(y)
    return need
