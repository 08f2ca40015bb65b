"""Running one rank per class of alike ranks, where that is exact (`dse.training.chakra.ranks_sim`).

Ranks of one class run the same graph; they do the same thing at the same times, and one of them
(the class's first rank, its representative) can stand for all, when what each of them meets is
the same too. `compress` checks that, from the static matching of sends to receives and the
collectives' members, before anything runs:

- every send node costs every member of its class the same message time;
- every receive node of a class is matched, on every member, to the same send node of one and the
  same class, with the same message time (so the representative's receive can take its arrival
  from the sending class's representative);
- every collective node's members all belong to the node's class, each member names the same
  members, and under `RankCosts.collective_ends` all of them, issuing together, end together, at
  the same time for every member of the class;
- no memory server (per node, pool) is shared between ranks.

Any check that fails makes the simulator run every rank; the result is the same either way (the
tests run both). `Compression.listeners` says, for each send node of a representative, which
representatives' receive nodes take its message and after how many ns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dse.training.workload_graph import COMM, MEM, RECV, SEND


@dataclass(frozen=True)
class Compression:
    """`reps`: the rank that stands for each (refined) class, `members` its ranks;
    `listeners[(rep, send node)]`: the ``(rep, receive node, message ns)`` its message reaches."""

    reps: tuple[int, ...]
    listeners: dict[tuple[int, int], list[tuple[int, int, float]]]
    members: tuple[tuple[int, ...], ...] = ()


def compress(sim: Any) -> Compression | None:
    """The representatives of `sim`'s program and their messages, or None when running one rank per
    class would not be exact (module docstring). `sim` is a `ranks_sim.Simulator` whose messages are
    matched (`pair_messages`). The program's classes are first split until every member of a class
    hears from the same classes (`refine`)."""
    p = sim.p
    if all(len(c.ranks) == 1 for c in p.classes) or _shared_memory(p, sim.costs):
        return None
    label = refine(sim)
    groups: dict[int, list[int]] = {}
    for r, k in enumerate(label):
        groups.setdefault(k, []).append(r)
    if len(groups) == len(label):
        return None
    reps = tuple(ranks[0] for ranks in groups.values())
    listeners: dict[tuple[int, int], list[tuple[int, int, float]]] = {}
    for ranks in groups.values():
        rep = ranks[0]
        for i, node in enumerate(p.classes[p.class_of[rep]].graph.nodes):
            if node.kind == RECV:
                s, j = sim.match[(rep, i)]
                rs = groups[label[s]][0]
                listeners.setdefault((rs, j), []).append((rep, i, float(sim.costs.message_ns(s, rep, node.size))))
            if node.kind == COMM and not _lockstep(sim, label, ranks, i):
                return None
    return Compression(reps, listeners, tuple(tuple(g) for g in groups.values()))


def refine(sim: Any) -> list[int]:
    """Each rank's class, split from the program's until every member of a class sends with the
    same message times and receives, node for node, from the same send node of one class after
    the same time. Classes are numbered by their first rank."""
    p = sim.p
    label = list(p.class_of)
    while True:
        sigs: dict[tuple, int] = {}
        new = []
        for r, k in enumerate(label):
            sig = (k, _signature(sim, label, r))
            new.append(sigs.setdefault(sig, len(sigs)))
        if len(sigs) == len(set(label)):
            return new
        label = new


def _signature(sim: Any, label: list[int], r: int) -> tuple:
    out: list[Any] = []
    for i, node in enumerate(sim.p.classes[sim.p.class_of[r]].graph.nodes):
        if node.kind == SEND:
            out.append(_send_ns(sim, r, i))
        elif node.kind == RECV:
            s, j = sim.match[(r, i)]
            out.append((label[s], j, float(sim.costs.message_ns(s, r, node.size))))
    return tuple(out)


def _send_ns(sim: Any, r: int, i: int) -> float:
    return float(sim.costs.message_ns(r, sim.peer(r, i), sim.node(r, i).size))


def _lockstep(sim: Any, label: list[int], ranks: list[int], i: int) -> bool:
    """Collective node i of a class: every member in the class, the members' sets the same for each
    of them, and all members, issuing together, ending together, at one time for the whole class."""
    costs = sim.costs
    node = sim.node(ranks[0], i)
    k = label[ranks[0]]
    sets = {r: costs.members(r, node, sim.group(r, i)) for r in ranks}
    end = None
    for members in {id(m): m for m in sets.values()}.values():
        if any(label[m] != k or sets.get(m) != members for m in members):
            return False
        ends = costs.collective_ends(node, members, sim.group(members[0], i), [0.0] * len(members))
        if len(set(ends)) != 1 or (end is not None and ends[0] != end):
            return False
        end = ends[0]
    return True


def _shared_memory(p: Any, costs: Any) -> bool:
    """Whether memory nodes run against a server more than one rank uses."""
    if not any(n.kind == MEM for c in p.classes for n in c.graph.nodes):
        return False
    server = getattr(costs.memory, "server", None)
    return server is not None and any(server(r) is not None for r in range(len(p.class_of)))
