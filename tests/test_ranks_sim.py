"""The per-rank simulator (dse.training.chakra.ranks_sim) on graphs built by hand: closed forms, matching, refusals."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.costs import get_cost_model
from dse.schedulers import get_scheduler
from dse.training.chakra.ranks_costs import RankCosts
from dse.training.chakra.ranks_sim import ClassProgram, Program, simulate
from dse.training.workload_graph import ASTRA2_RULES, COMM, COMPUTE, MEM, RECV, SEND, Graph, Node

RING8 = "Ring(8, 50, 500)"
BETA = 50 * 2**30 / 1e9  # ASTRA-sim's GB/s in bytes per ns


def _costs(topology: str = RING8, groups: dict | None = None) -> RankCosts:
    return RankCosts(
        parse_topology(topology), get_cost_model("astra-sim"), get_scheduler("baseline"), "fifo", 4, 1, groups or {}
    )


def _program(graphs: list[tuple[Graph, tuple[int, ...]]], npus: int = 8) -> Program:
    """One class per rank; ranks beyond the list get an empty-ish graph (one 0 ns compute)."""
    classes = []
    for r in range(npus):
        if r < len(graphs):
            g, peers = graphs[r]
        else:
            g, peers = Graph(), ()
            g.add(Node(COMPUTE, "idle"))
        groups = tuple("" for n in g.nodes if n.kind == COMM)
        classes.append(ClassProgram((r,), g, (peers,), (groups,)))
    return Program("test", tuple(classes), tuple(range(npus)))


def _chain(*nodes: Node) -> Graph:
    g = Graph()
    prev = None
    for n in nodes:
        prev = g.add(n, (prev, 0.0))
    return g


def _t(size: int, hops: int = 1) -> float:
    return math.floor(hops * 500 + size / BETA)


def test_ping_pong_is_twice_one_message() -> None:
    size = 1 << 20
    r0 = _chain(Node(SEND, "ping", size=size, tag=1), Node(RECV, "pong", size=size, tag=2))
    r1 = _chain(Node(RECV, "ping", size=size, tag=1), Node(SEND, "pong", size=size, tag=2))
    out = simulate(_program([(r0, (1, 1)), (r1, (0, 0))]), _costs(), ASTRA2_RULES)
    assert out.finish[0] == 2 * _t(size)
    assert out.finish[1] == 2 * _t(size)
    assert out.messages == 2


def test_ring_distance_is_the_shorter_way_round() -> None:
    size = 4096
    r0 = _chain(Node(SEND, "s", size=size, tag=0))
    graphs = [(r0, (6,))] + [(_chain(Node(COMPUTE, "idle")), ())] * 5
    r6 = _chain(Node(RECV, "r", size=size, tag=0))
    graphs.append((r6, (0,)))
    out = simulate(_program(graphs), _costs(), ASTRA2_RULES)
    assert out.finish[6] == _t(size, hops=2)


def test_a_late_receive_ends_when_posted() -> None:
    size = 1024
    r0 = _chain(Node(SEND, "s", size=size, tag=0))
    r1 = _chain(Node(COMPUTE, "busy", duration=50_000.0), Node(RECV, "r", size=size, tag=0))
    out = simulate(_program([(r0, (1,)), (r1, (0,))]), _costs(), ASTRA2_RULES)
    assert out.finish[0] == _t(size)
    assert out.finish[1] == 50_000.0


def test_sends_queue_on_the_communication_slot() -> None:
    size = 1 << 20
    g = Graph()
    g.add(Node(SEND, "a", size=size, tag=0))
    g.add(Node(SEND, "b", size=size, tag=0))
    r1 = Graph()
    r1.add(Node(RECV, "a", size=size, tag=0))
    r1.add(Node(RECV, "b", size=size, tag=0))
    out = simulate(_program([(g, (1, 1)), (r1, (0, 0))]), _costs(), ASTRA2_RULES)
    assert out.finish[0] == out.finish[1] == 2 * _t(size)


def test_kth_send_matches_kth_receive_of_its_key() -> None:
    small, big = 1024, 1 << 20
    g = _chain(Node(SEND, "big", size=big, tag=7), Node(SEND, "small", size=small, tag=7))
    r1 = Graph()  # posted in the other order: still matched by key
    r1.add(Node(RECV, "small", size=small, tag=7))
    r1.add(Node(RECV, "big", size=big, tag=7))
    out = simulate(_program([(g, (1, 1)), (r1, (0, 0))]), _costs(), ASTRA2_RULES)
    assert out.finish[1] == _t(big) + _t(small)


@pytest.mark.parametrize("stages", [2, 4])
def test_pipeline_by_hand(stages: int) -> None:
    size, fwd = 1 << 16, 10_000.0
    graphs = []
    for s in range(stages):
        nodes = []
        peers: list[int] = []
        if s:
            nodes.append(Node(RECV, "act", size=size, tag=s))
            peers.append(s - 1)
        nodes.append(Node(COMPUTE, "fwd", duration=fwd))
        if s < stages - 1:
            nodes.append(Node(SEND, "act", size=size, tag=s + 1))
            peers.append(s + 1)
        graphs.append((_chain(*nodes), tuple(peers)))
    out = simulate(_program(graphs), _costs(), ASTRA2_RULES)
    assert out.finish[stages - 1] == stages * fwd + (stages - 1) * _t(size)
    assert out.compute[:stages] == [fwd] * stages


def test_a_collective_issued_apart_follows_each_members_steps() -> None:
    """Under astra-sim (ASTRA-sim's step-by-step replay), members of a ring all-reduce issued 1 us
    apart each end at their own issue plus the time alone: every member waits on its neighbour's
    steps, and the 24 ring steps of its 4 chunks bring each member's own lag back round to it."""
    costs = _costs("Ring(4, 50, 500)", {"g": (0, 1, 2, 3)})
    alone = costs.collective_ns(Node(COMM, "ar", collective="all_reduce", size=1 << 20), (0, 1, 2, 3), "g")
    graphs = []
    for r in range(4):
        g = _chain(
            Node(COMPUTE, "c", duration=1000.0 * (r + 1)),
            Node(COMM, "ar", collective="all_reduce", size=1 << 20, group="g"),
        )
        graphs.append(ClassProgram((r,), g, ((),), (("g",),)))
    out = simulate(Program("t", tuple(graphs), (0, 1, 2, 3)), costs, ASTRA2_RULES)
    assert out.finish == [1000.0 * (r + 1) + alone for r in range(4)]
    assert out.collectives == 1


def test_under_paper_a_collective_starts_when_its_last_member_issues_it() -> None:
    topo = parse_topology("Ring(4, 50, 500)")
    costs = RankCosts(topo, get_cost_model("paper"), get_scheduler("baseline"), "fifo", 4, 1, {"g": (0, 1, 2, 3)})
    alone = costs.collective_ns(Node(COMM, "ar", collective="all_reduce", size=1 << 20), (0, 1, 2, 3), "g")
    graphs = []
    for r in range(4):
        c = Node(COMPUTE, "c", duration=1000.0 * (r + 1))
        g = _chain(c, Node(COMM, "ar", collective="all_reduce", size=1 << 20, group="g"))
        graphs.append(ClassProgram((r,), g, ((),), (("g",),)))
    out = simulate(Program("t", tuple(graphs), (0, 1, 2, 3)), costs, ASTRA2_RULES)
    assert out.finish == [4000.0 + alone] * 4


def test_an_unmatched_receive_is_refused_naming_rank_and_node() -> None:
    r1 = _chain(Node(RECV, "lonely", size=64, tag=3))
    with pytest.raises(InputError, match=r"rank 1: node 0 \('lonely'\) is a receive from rank 0 \(tag 3, 64 B\)"):
        simulate(_program([(_chain(Node(COMPUTE, "c")), ()), (r1, (0,))]), _costs(), ASTRA2_RULES)


def test_a_cycle_through_messages_is_refused() -> None:
    r0 = _chain(Node(RECV, "a", size=64, tag=1), Node(SEND, "b", size=64, tag=2))
    r1 = _chain(Node(RECV, "b", size=64, tag=2), Node(SEND, "a", size=64, tag=1))
    with pytest.raises(InputError, match="never ends"):
        simulate(_program([(r0, (1, 1)), (r1, (0, 0))]), _costs(), ASTRA2_RULES)


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(2, 6), st.integers(1, 25))
def test_random_matched_dags_finish_and_respect_bounds(rng, npus: int, steps: int) -> None:
    """A global script of computes and messages, each rank's nodes chained in script order (plus random
    extra edges to earlier nodes): no deadlock; each rank's finish is at least its compute and at least
    every message it receives."""
    graphs = [Graph() for _ in range(npus)]
    peers: list[list[int]] = [[] for _ in range(npus)]
    last: list[int | None] = [None] * npus
    floor = [0.0] * npus

    def add(r: int, node: Node, peer: int | None = None) -> None:
        after = [(last[r], 0.0)]
        if len(graphs[r].nodes) > 1 and rng.random() < 0.3:
            after.append((rng.randrange(len(graphs[r].nodes)), 0.0))
        last[r] = graphs[r].add(node, *after)
        if peer is not None:
            peers[r].append(peer)

    for k in range(steps):
        a = rng.randrange(npus)
        if rng.random() < 0.5:
            d = float(rng.randrange(0, 5000))
            add(a, Node(COMPUTE, f"c{k}", duration=d))
            floor[a] += max(d, 1.0)
        else:
            b = (a + rng.randrange(1, npus)) % npus
            size = rng.choice([64, 4096, 1 << 20])
            add(a, Node(SEND, f"s{k}", size=size, tag=k))
            add(b, Node(RECV, f"r{k}", size=size, tag=k), a)
            peers[a].append(b)
            floor[b] = max(floor[b], _t(size, min((a - b) % npus, (b - a) % npus)))
    for r in range(npus):
        if not graphs[r].nodes:
            add(r, Node(COMPUTE, "idle"))
    prog = _program([(graphs[r], tuple(peers[r])) for r in range(npus)], npus)
    out = simulate(prog, _costs(f"Ring({npus}, 50, 500)"), ASTRA2_RULES)
    for r in range(npus):
        assert out.finish[r] >= floor[r] - 1e-9
    assert max(out.finish) >= _longest_path(prog, npus) - 1e-9


def _longest_path(prog: Program, npus: int) -> float:
    """The longest path through every rank's graph: a compute node takes its time (at least 1 ns), a
    send its message's, and a receive ends no sooner than its send (tags are unique per message)."""
    info = []
    send_of: dict[tuple, tuple[int, int]] = {}
    for r in range(npus):
        c = prog.classes[r]
        preds: dict[int, list[int]] = {}
        for a, b, _ in c.graph.edges:
            preds.setdefault(b, []).append(a)
        p2p = [i for i, n in enumerate(c.graph.nodes) if n.kind in (SEND, RECV)]
        peer = dict(zip(p2p, c.peers[0]))
        info.append((c.graph.nodes, preds, peer))
        for i in p2p:
            n = c.graph.nodes[i]
            if n.kind == SEND:
                send_of[(r, peer[i], n.tag)] = (r, i)
    ends: dict[tuple[int, int], float] = {}
    grew = True
    while grew:  # relax until nothing grows (acyclic with the messages: each pass settles more)
        grew = False
        for r, (nodes, preds, peer) in enumerate(info):
            for i, n in enumerate(nodes):
                t = max((ends.get((r, a), 0.0) for a in preds.get(i, ())), default=0.0)
                if n.kind == COMPUTE:
                    t += max(n.duration, 1.0)
                elif n.kind == SEND:
                    t += _t(n.size, min((peer[i] - r) % npus, (r - peer[i]) % npus))
                elif n.kind == RECV:
                    t = max(t, ends.get(send_of[(peer[i], r, n.tag)], 0.0))
                if t > ends.get((r, i), -1.0):
                    ends[(r, i)] = t
                    grew = True
    return max(ends.values(), default=0.0)


def test_a_memory_node_holds_the_communication_slot() -> None:
    """A local-memory load of S bytes takes floor(S / M x 1e9) ns on the communication slot: a send
    ready with it waits for it (node order)."""
    from dse.core.remote_memory import LocalMemory

    costs = _costs()
    costs.memory = LocalMemory(900e9)
    g = Graph()
    g.add(Node(MEM, "load", size=9 << 20, mem="load"))
    g.add(Node(SEND, "s", size=1024, tag=0))
    r1 = _chain(Node(RECV, "r", size=1024, tag=0))
    out = simulate(_program([(g, (1,)), (r1, (0,))]), costs, ASTRA2_RULES)
    load = math.floor((9 << 20) / 900e9 * 1e9)
    assert out.finish[0] == out.finish[1] == load + _t(1024)


def test_a_per_node_memory_serves_one_request_at_a_time() -> None:
    """PER_NODE_MEMORY_EXPANSION, 2 NPUs a node: ranks 0 and 1 share one server, rank 2 has its own."""
    from dse.core.remote_memory import PER_NODE, RemoteMemory

    costs = _costs()
    costs.memory = RemoteMemory("m.json", PER_NODE, latency_ns=500, bandwidth=50, num_nodes=4, npus_per_node=2)
    graphs = [(_chain(Node(MEM, "load", size=1 << 20, mem="load")), ()) for _ in range(3)]
    out = simulate(_program(graphs), costs, ASTRA2_RULES, classes=False)
    one = 500 + (1 << 20) // 50
    assert sorted(out.finish[:3]) == [one, one, 2 * one]


def test_members_issuing_different_collectives_are_refused_naming_both() -> None:
    costs = _costs("Ring(2, 50, 500)", {"g": (0, 1)})
    graphs = []
    for r, size in enumerate((1 << 20, 1 << 21)):
        g = _chain(Node(COMM, "ar", collective="all_reduce", size=size, group="g"))
        graphs.append(ClassProgram((r,), g, ((),), (("g",),)))
    with pytest.raises(InputError, match=r"rank 1: node 0 \('ar'\) runs all_reduce on 2,097,152 B where rank 0's"):
        simulate(Program("t", tuple(graphs), (0, 1)), costs, ASTRA2_RULES)
