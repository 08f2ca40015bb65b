"""Linking a Chakra trace's nodes (`dse.training.chakra.link.Linker`) and its short paths.

The linker looks dependencies up as nodes are added and searches for cycles only where one can be;
here it is held equal, graph for graph and error for error, to a plain reference written below
(every dependency looked up after all ids are known, Kahn's algorithm over the whole graph) on
random traces: ids rising, shuffled or repeated, dependencies earlier, later, missing, on the node
itself or named twice, control dependencies kept or dropped. The converter's short path for plain
compute nodes is held equal to its full one, and the whole reader to the plain one on the real
PyTorch trace.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.core.errors import InputError
from dse.training.chakra import schema as cs
from dse.training.chakra.frames import frames, gc_paused
from dse.training.chakra.link import Linker
from dse.training.chakra.nodes import NodeConverter
from dse.training.chakra.read import load_trace
from dse.training.workload_graph import MARK, Graph, Node

from .conftest import SHARED

PYTORCH = SHARED / "workloads" / "chakra" / "chakra-tests" / "pytorch_trace.0.et"
Trace = list[tuple[int, list[int], list[int]]]  # per node in file order: id, data and control dependencies


def reference(trace: Trace, path: str = "t") -> tuple[list[tuple[int, int, float]], tuple[int, ...], list[int]]:
    """The graph's edges, the ids in id order and the nodes' file positions in id order, checked in
    the linker's order: a duplicate id, a missing or self dependency (in id order), a cycle."""
    seen: set[int] = set()
    for i, _, _ in trace:
        if i in seen:
            raise InputError(f"{path}: node {i}", "a duplicate node id", "one node per id")
        seen.add(i)
    order = sorted(range(len(trace)), key=lambda k: trace[k][0])
    pos = {trace[k][0]: j for j, k in enumerate(order)}
    preds = []
    for j, k in enumerate(order):
        nid, data, ctrl = trace[k]
        row: dict[int, None] = {}
        for kind, deps in (("data", data), ("control", ctrl)):
            for d in deps:
                if d not in pos:
                    raise InputError(
                        f"{path}: node {nid}",
                        f"a {kind} dependency on node {d}, which the trace does not have",
                        "dependencies on nodes of the same trace",
                    )
                if pos[d] == j:
                    raise InputError(f"{path}: node {nid}", "depends on itself (a cycle)", "a directed acyclic graph")
                row[pos[d]] = None
        preds.append(list(row))
    n = len(trace)
    need = [len(p) for p in preds]
    succ: list[list[int]] = [[] for _ in range(n)]
    for j, p in enumerate(preds):
        for q in p:
            succ[q].append(j)
    stack = [j for j in range(n) if need[j] == 0]
    while stack:
        for y in succ[stack.pop()]:
            need[y] -= 1
            if need[y] == 0:
                stack.append(y)
    if any(need):
        first = next(j for j in range(n) if need[j])
        raise InputError(
            f"{path}: node {trace[order[first]][0]}",
            "is on a dependency cycle (or waits for one)",
            "a directed acyclic graph",
        )
    edges = [(q, j, 0.0) for j in range(n) for q in preds[j]]
    edges += [(j, n, 0.0) for j in range(n) if not succ[j]]
    return edges, tuple(trace[k][0] for k in order), order


def linked(trace: Trace, path: str = "t") -> tuple[Graph, tuple[int, ...], Linker]:
    link = Linker(path, len(trace))
    for k, (nid, data, ctrl) in enumerate(trace):
        link.add(k, nid, data, ctrl)
    graph, ids = link.finish()
    return graph, ids, link


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    """A random trace's ids and dependencies (module docstring)."""
    n = draw(st.integers(0, 24))
    if draw(st.booleans()):
        start = draw(st.integers(0, 3))
        ids = list(range(start, start + n))
    else:  # now and then an id twice
        ids = draw(st.lists(st.integers(0, 60), min_size=n, max_size=n, unique=draw(st.integers(0, 9)) > 0))
    if draw(st.booleans()):
        ids = draw(st.permutations(ids))
    later = draw(st.sampled_from((0.0, 0.05, 0.3)))  # how often a dependency may name any node, not only earlier ones
    bad = draw(st.sampled_from((-1, -1, -1, 0, 1)))  # the dependencies (data, control) that may be missing or self
    out: Trace = []
    for k, nid in enumerate(ids):
        deps: list[list[int]] = [[], []]
        for c in range(2):
            for _ in range(draw(st.integers(0, 4 if c == 0 else 2))):
                roll = draw(st.floats(0, 1))
                pool = [i for i in ids if i != nid] if roll < later else ids[:k]
                if bad == c and roll > 0.9:
                    deps[c].append(draw(st.sampled_from((nid, 61, 99))))
                elif pool:
                    deps[c].append(draw(st.sampled_from(pool)))
        out.append((nid, deps[0], deps[1]))
    return out


def outcome(f: Callable[..., Any], *args: Any) -> Any:
    """`f(*args)`, or its `InputError`'s line."""
    try:
        return f(*args)
    except InputError as e:
        return str(e)


@settings(max_examples=400, deadline=None)
@given(traces())
def test_linker_equals_the_plain_reference(trace: Trace) -> None:
    want = outcome(reference, trace)
    got = outcome(linked, trace)
    if isinstance(want, str):
        assert got == want
        return
    edges, ids, order = want
    graph, got_ids, link = got
    assert graph.edges == edges
    assert got_ids == ids
    assert list(link.order) == order
    assert graph.nodes[:-1] == order  # the nodes added (their file positions) in id order
    assert graph.nodes[-1] == Node(MARK, "end") and graph.end == len(trace)


def test_linker_shares_one_int_per_position() -> None:
    graph, _, _ = linked([(i, list(range(i)), []) for i in range(6)])
    assert all(a is graph.edges[0][0] for a, _, _ in graph.edges if a == 0)


@pytest.mark.parametrize("cpu", [None, False, True])
@pytest.mark.parametrize("us", [0, 7])
def test_plain_compute_short_path_equals_the_full_one(cpu: bool | None, us: int) -> None:
    m = cs.ChakraNode(id=3, name="aten::mm", type=cs.COMP, duration_micros=us)
    m.attr.add(name="tid", int64_val=1)
    if cpu is not None:
        m.attr.add(name="is_cpu_op", bool_val=cpu)
    m.attr.add(name="comm_size", int64_val=5)  # read by collectives only
    conv = NodeConverter("t")
    short = conv.convert(m, 3)
    attrs: dict[str, Any] = {"comm_size": 5} if cpu is None else {"is_cpu_op": cpu, "comm_size": 5}
    assert short == conv._convert(m, 3, attrs)
    assert conv.convert(m, 3) is short  # equal plain compute nodes are one object


def test_gc_paused_restores_the_collector_and_thaws_nothing() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        built = [(1, 2, 0.0)]
    assert gc.isenabled() and gc.is_tracked(built) and gc.get_freeze_count() == 0
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    gc.freeze()  # someone else's frozen objects stay frozen
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            pass
        assert gc.get_freeze_count() == frozen > 0
    finally:
        gc.unfreeze()


def test_pytorch_trace_forward_dependencies_linked() -> None:
    """The real PyTorch trace names later nodes (53 dependencies): linked as the reference links it."""
    if not PYTORCH.exists():
        pytest.skip(f"shared Chakra traces not found at {PYTORCH}")
    t = load_trace(PYTORCH)
    data = PYTORCH.read_bytes()
    starts, ends = frames(data, str(PYTORCH))
    msgs = [cs.ChakraNode.FromString(data[a:b]) for a, b in list(zip(starts, ends))[1:]]  # after the metadata
    edges, ids, _ = reference([(m.id, list(m.data_deps), []) for m in msgs])  # control dependencies dropped
    assert t.graph.edges == edges and t.ids == ids
    assert sum(1 for a, b, _ in edges if a > b) == 53
