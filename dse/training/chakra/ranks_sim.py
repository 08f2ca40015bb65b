"""The per-rank simulator: every rank's graph, sends matched to receives, collectives on their groups.

`simulate(program, costs, rules)` runs a `Program` (one graph per class of alike ranks, each rank
with its own peers and communicator groups) and returns every rank's finish and compute ns. One
event loop over all ranks; what a rank does follows ASTRA-sim 2.x's workload layer
(`dse.training.workload_graph.ASTRA2_RULES`, measured in ../shared/reference/astra-sim-2-p2p.md):

- **Resources per NPU**: one GPU compute slot, one CPU slot, one communication slot. A collective,
  a send and a replayed communication node hold the communication slot until they end (with
  `ResourceRules.comm_exclusive`; otherwise they take no slot and run side by side). A receive and
  a memory node hold nothing. Whenever something on an NPU ends, its ready nodes are issued in
  ascending node index (`by_id`; otherwise in the order they became ready), and at equal times a
  communication end is handled before a compute end, then by the order the events were made.
- **Messages**: the k-th send from s to d with tag t and size b matches the k-th receive on d from s
  with that tag and size, k counted in node order on each rank. A send takes `RankCosts.message_ns`
  from its issue and holds the slot that long; its receive ends at the later of its post and the
  message's arrival. Unmatched sends or receives are refused before the run.
- **Collectives**: the k-th collective a rank issues on a set of members meets the k-th of every
  other member; when the last member has issued it, `RankCosts.collective_ends` says when each
  member finishes (members that issued earlier hold their slot meanwhile): a communicator group's
  ring under ``astra-sim`` follows every member's own steps from its own issue time; any other
  collective on whole dimensions issued together takes its time alone; issued apart, under
  ``astra-sim``, ASTRA-sim's step-by-step replay (`dse.training.chakra.ranks_apart`) gives each member's
  end (a replay that never finishes, as ASTRA-sim's would not, is refused in one line naming the
  rank and node); under the other models it starts when its last member issues it.
- Compute: its duration or the roofline's (`RankCosts.compute_ns`), at least `min_ns`; memory
  nodes `RankCosts.memory_ns`; marks end when they are ready.

A run that stops with nodes left (a cycle through messages or collectives) is refused with one
line naming a rank and a node that never ran.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from dse.core.errors import InputError
from dse.core.limits import check_work
from dse.training.chakra.ranks_apart import NeverFinishes
from dse.training.chakra.ranks_classes import Compression, compress
from dse.training.chakra.ranks_costs import RankCosts
from dse.training.chakra.ranks_result import Span
from dse.training.workload_graph import COMM, COMPUTE, MARK, MEM, RECV, REPLAY, SEND, Graph, ResourceRules

GPU, CPU, NET, FREE = 0, 1, 2, 3
_END_COMM, _END_COMPUTE = 2, 3
#: engine steps per node (`check_work`)
STEPS_PER_NODE = 4


@dataclass(frozen=True)
class ClassProgram:
    """One class of alike ranks: `ranks`, their `graph` and, per rank, the peer of each send or
    receive and the group of each collective, in node order (`peers[k]`, `groups[k]` for `ranks[k]`);
    `ids`: the trace's node ids (for messages)."""

    ranks: tuple[int, ...]
    graph: Graph
    peers: tuple[tuple[int, ...], ...]
    groups: tuple[tuple[str, ...], ...]
    ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Program:
    """All ranks of a run: `classes` and `class_of` (rank -> class index); `name` for messages."""

    name: str
    classes: tuple[ClassProgram, ...]
    class_of: tuple[int, ...]


@dataclass
class SimOutput:
    """Per rank: finish ns (`finish`), GPU compute ns (`compute`); the spans of each class's first rank."""

    finish: list[float]
    compute: list[float]
    spans: list[Span] = field(default_factory=list)
    messages: int = 0
    collectives: int = 0
    by_class: bool = False
    simulated: int = 0


class _Static:
    """What a class's graph gives once: successors, indegrees, resources, and per node its index among
    the peers (sends/receives) and the groups (collectives)."""

    def __init__(self, graph: Graph) -> None:
        n = len(graph.nodes)
        self.succ: list[list[int]] = [[] for _ in range(n)]
        self.indeg = [0] * n
        for a, b, _lag in graph.edges:
            self.succ[a].append(b)
            self.indeg[b] += 1
        self.peer_at = [-1] * n
        self.group_at = [-1] * n
        p = g = 0
        for i, node in enumerate(graph.nodes):
            if node.kind in (SEND, RECV):
                self.peer_at[i] = p
                p += 1
            elif node.kind == COMM:
                self.group_at[i] = g
                g += 1


def _resource(kind: str, cpu: bool) -> int:
    if kind == COMPUTE:
        return CPU if cpu else GPU
    if kind in (REPLAY, MEM):
        return CPU if cpu else NET
    if kind in (COMM, SEND):
        return NET
    return FREE


class Simulator:
    """One run (module docstring); `simulate()` returns a `SimOutput`."""

    def __init__(
        self, program: Program, costs: RankCosts, rules: ResourceRules, spans: bool = False, classes: bool = True
    ) -> None:
        self.p, self.costs, self.rules = program, costs, rules
        self.static = [_Static(c.graph) for c in program.classes]
        self.slot_of = [0] * len(program.class_of)
        for c in program.classes:
            for k, r in enumerate(c.ranks):
                self.slot_of[r] = k
        self.use_classes = classes
        self.compressed: Compression | None = None
        self.stands_for: dict[int, int] = {}
        npus = len(program.class_of)
        self.need: list = [None] * npus
        self.end: list = [None] * npus
        self.start: list = [None] * npus
        self.ready: list = [None] * npus
        self.taken: list = [None] * npus
        self.exclusive = (True, True, rules.comm_exclusive)
        self.heap: list = []
        self.counter = 0
        self.compute = [0.0] * npus
        self.finish = [0.0] * npus
        self.want_spans = spans
        self.spans: list[Span] = []
        self.match: dict[tuple[int, int], tuple[int, int]] = {}
        self.arrival: dict[tuple[int, int], float] = {}
        self.posted: dict[tuple[int, int], float] = {}
        self.coll_seen: list[dict] = [{} for _ in range(npus)]
        self.meet: dict[tuple, list] = {}
        self.messages = 0
        self.collectives = 0

    # ----- set-up ----------------------------------------------------------------------------------
    def node(self, r: int, i: int):  # noqa: ANN201 - a Node
        """Node i of rank r's graph (its class's)."""
        return self.p.classes[self.p.class_of[r]].graph.nodes[i]

    def peer(self, r: int, i: int) -> int:
        """The other end of send or receive node i on rank r."""
        c = self.p.class_of[r]
        return self.p.classes[c].peers[self.slot_of[r]][self.static[c].peer_at[i]]

    def group(self, r: int, i: int) -> str:
        """The communicator group of collective node i on rank r ("": none)."""
        c = self.p.class_of[r]
        groups = self.p.classes[c].groups
        return groups[self.slot_of[r]][self.static[c].group_at[i]] if groups else ""

    def node_label(self, r: int, i: int) -> str:
        """What an error calls node i of rank r: its trace id and name."""
        cls = self.p.classes[self.p.class_of[r]]
        nid = cls.ids[i] if i < len(cls.ids) else i
        return f"node {nid} ({cls.graph.nodes[i].name!r})"

    def pair_messages(self) -> None:
        """Match every send to its receive (module docstring); refuse what stays unmatched."""
        sends: dict[tuple, list] = {}
        recvs: dict[tuple, list] = {}
        for r, c in enumerate(self.p.class_of):
            nodes = self.p.classes[c].graph.nodes
            for i, node in enumerate(nodes):
                if node.kind == SEND:
                    sends.setdefault((r, self.peer(r, i), node.tag, node.size), []).append((r, i))
                elif node.kind == RECV:
                    recvs.setdefault((self.peer(r, i), r, node.tag, node.size), []).append((r, i))
        for key in sorted(set(sends) | set(recvs)):
            s, v = sends.get(key, []), recvs.get(key, [])
            for a, b in zip(s, v):
                self.match[a] = b
                self.match[b] = a
            if len(s) != len(v):
                self._unmatched(key, s, v)

    def _unmatched(self, key: tuple, s: list, v: list) -> None:
        src, dst, tag, size = key
        if len(v) > len(s):
            r, i = v[len(s)]
            what = f"receive from rank {src} (tag {tag}, {size:,} B) that no send matches"
            allowed = "a send on the source rank with the same destination, tag and size for every receive"
        else:
            r, i = s[len(v)]
            what = f"send to rank {dst} (tag {tag}, {size:,} B) that no receive takes"
            allowed = "a receive on the destination rank with the same source, tag and size for every send"
        raise InputError(self.p.name, f"rank {r}: {self.node_label(r, i)} is a {what}", allowed)

    def prepare(self) -> list[int]:
        """Match the messages, decide whether one rank per class stands for all (`ranks_classes`),
        check the work and set up the state of the ranks that run; returns them."""
        self.pair_messages()
        if self.use_classes:
            self.compressed = compress(self)
        active = list(self.compressed.reps) if self.compressed else list(range(len(self.p.class_of)))
        if self.compressed is not None:
            self.stands_for = {ranks[0]: len(ranks) for ranks in self.compressed.members}
        total = sum(len(self.static[self.p.class_of[r]].indeg) for r in active)
        check_work(total * STEPS_PER_NODE, f"simulating {total:,} nodes on {len(active):,} ranks")
        for r in active:
            indeg = self.static[self.p.class_of[r]].indeg
            self.need[r] = list(indeg)
            self.end[r] = [-1.0] * len(indeg)
            self.start[r] = [-1.0] * len(indeg)
            self.ready[r] = [[], [], [], []]
            self.taken[r] = [False, False, False]
        return active

    # ----- the loop --------------------------------------------------------------------------------
    def push(self, t: float, cls: int, r: int, i: int, res: int) -> None:
        """Schedule the end of node i on rank r at `t`; ties go by `cls`, then by the order pushed."""
        heapq.heappush(self.heap, (t, cls, self.counter, r, i, res))
        self.counter += 1

    def arrive(self, r: int, x: int, t: float) -> None:
        """A dependency of node x on rank r is met at t; a node without work ends at once."""
        need = self.need[r]
        stack = [x]
        while stack:
            x = stack.pop()
            need[x] -= 1
            if need[x]:
                continue
            node = self.node(r, x)
            if node.kind == MARK:
                self.start[r][x] = self.end[r][x] = t
                stack.extend(self.static[self.p.class_of[r]].succ[x])
                continue
            res = _resource(node.kind, node.cpu)
            key = x if self.rules.by_id else self.counter
            heapq.heappush(self.ready[r][res], (key, self.counter, x))
            self.counter += 1

    def dispatch(self, r: int, t: float) -> None:
        """Start what rank r's free resources can take, lowest index first."""
        ready, taken = self.ready[r], self.taken[r]
        for res in (GPU, CPU, NET):
            q = ready[res]
            while q and not taken[res]:
                i = heapq.heappop(q)[2]
                taken[res] = self.exclusive[res]
                self.begin(r, i, res, t)
        q = ready[FREE]
        while q:
            self.begin(r, heapq.heappop(q)[2], FREE, t)

    def begin(self, r: int, i: int, res: int, t: float) -> None:
        """Start node i on rank r at `t` on resource `res`, and schedule its end (or its meeting)."""
        node = self.node(r, i)
        self.start[r][i] = t
        kind = node.kind
        if kind == COMM:
            self.join(r, i, t)
        elif kind == SEND:
            self.send(r, i, t)
        elif kind == RECV:
            self.post(r, i, t)
        elif kind == MEM:
            self.push(self.costs.memory_end(r, t, node), _END_COMM, r, i, res)
        else:
            dur = self.costs.compute_ns(node) if kind == COMPUTE else node.duration
            if kind == COMPUTE and res == GPU:
                self.compute[r] += dur
            self.push(t + max(dur, self.rules.min_ns), _END_COMPUTE, r, i, res)

    def send(self, r: int, i: int, t: float) -> None:
        """Send node i of rank r at `t`: it ends, and its message reaches its receive, `message_ns` later."""
        node = self.node(r, i)
        dst = self.peer(r, i)
        arrive = t + self.costs.message_ns(r, dst, node.size)
        self.push(arrive, _END_COMM, r, i, NET)
        if self.compressed is None:
            self.messages += 1
            self.deliver(self.match[(r, i)], arrive)
        else:
            self.messages += self.stands_for[r]
            for b, j, ns in self.compressed.listeners.get((r, i), ()):
                self.deliver((b, j), t + ns)
        if self.want_spans and self._first(r):
            d = self.costs.message_dim(r, dst)
            self.spans.append(Span(self.p.class_of[r], f"dim{d}", f"send {node.name}", t, arrive))

    def deliver(self, other: tuple[int, int], arrive: float) -> None:
        """A message for receive node `other` (rank, node) arrives at `arrive`."""
        post = self.posted.pop(other, None)
        if post is None:
            self.arrival[other] = arrive
        else:
            self.push(max(post, arrive), _END_COMM, other[0], other[1], FREE)

    def post(self, r: int, i: int, t: float) -> None:
        """Post receive node i of rank r at `t`: it ends at the later of `t` and its message's arrival."""
        arrive = self.arrival.pop((r, i), None)
        if arrive is None:
            self.posted[(r, i)] = t
        else:
            self.push(max(t, arrive), _END_COMM, r, i, FREE)

    def join(self, r: int, i: int, t: float) -> None:
        """Rank r issues collective node i: it meets the same collective of every other member."""
        node, group = self.node(r, i), self.group(r, i)
        members = self.costs.members(r, node, group)
        where = {m: k for k, m in enumerate(members)}
        if self.compressed is not None:  # every member is in r's class and issues it now, as r does
            self.collectives += self.stands_for[r] // len(members)  # the instances of its class's members
            ends = self.costs.collective_ends(node, members, group, [t] * len(members))
            self.push(max(t, ends[where[r]]), _END_COMM, r, i, NET)
            self._collective_spans(node, members, [(r, i)], t, ends)
            return
        seen = self.coll_seen[r]
        k = seen.get(members, 0)
        seen[members] = k + 1
        key = (members, k)
        waiting = self.meet.setdefault(key, [])
        if waiting:
            self._check_same(r, i, waiting[0], node)
        waiting.append((r, i))
        if len(waiting) < len(members):
            return
        del self.meet[key]
        self.collectives += 1
        starts = [0.0] * len(members)
        for m, j in waiting:
            starts[where[m]] = self.start[m][j]
        try:
            ends = self.costs.collective_ends(node, members, group, starts)
        except NeverFinishes as e:
            raise InputError(self.p.name, f"rank {r}: {self.node_label(r, i)}: {e.problem}", e.allowed) from None
        for m, j in waiting:
            self.push(max(t, ends[where[m]]), _END_COMM, m, j, NET)
        self._collective_spans(node, members, waiting, t, ends)

    def _collective_spans(self, node, members: tuple[int, ...], ranks: list, t: float, ends: list) -> None:  # noqa: ANN001
        if not self.want_spans:
            return
        where = {m: k for k, m in enumerate(members)}
        for m, _j in ranks:
            if self._first(m):
                cls = self.p.class_of[m]
                for d in self.costs.dims_of(members):
                    self.spans.append(Span(cls, f"dim{d}", f"{node.collective} {node.name}", t, ends[where[m]]))

    def _check_same(self, r: int, i: int, first: tuple[int, int], node) -> None:  # noqa: ANN001
        other = self.node(*first)
        if (other.collective, other.size) != (node.collective, node.size):
            raise InputError(
                self.p.name,
                f"rank {r}: {self.node_label(r, i)} runs {node.collective} on {node.size:,} B where rank "
                f"{first[0]}'s {self.node_label(*first)} on the same group runs {other.collective} on {other.size:,} B",
                "the same collective, in the same order, on every member of a group",
            )

    def _first(self, r: int) -> bool:
        return self.p.classes[self.p.class_of[r]].ranks[0] == r

    def simulate(self) -> SimOutput:
        """Run every rank from time 0 to the end; refuses a run that stops with nodes left."""
        active = self.prepare()
        for r in active:
            need = self.need[r]
            for x in [x for x, n in enumerate(need) if n == 0]:
                need[x] = 1
                self.arrive(r, x, 0.0)
        for r in active:
            self.dispatch(r, 0.0)
        heap, pop = self.heap, heapq.heappop
        while heap:
            t, _cls, _n, r, i, res = pop(heap)
            if res < FREE:
                self.taken[r][res] = False
            self.end[r][i] = t
            if self.want_spans and self._first(r):
                self._span(r, i, res)
            if t > self.finish[r]:
                self.finish[r] = t
            st = self.static[self.p.class_of[r]].succ[i]
            for x in st:
                self.arrive(r, x, t)
            self.dispatch(r, t)
        self._check_done()
        if self.compressed is not None:  # every rank as its class's representative
            for ranks in self.compressed.members:
                for r in ranks[1:]:
                    self.finish[r], self.compute[r] = self.finish[ranks[0]], self.compute[ranks[0]]
        n = len(self.compressed.reps) if self.compressed else len(self.finish)
        by_class = self.compressed is not None
        return SimOutput(self.finish, self.compute, self.spans, self.messages, self.collectives, by_class, n)

    def _span(self, r: int, i: int, res: int) -> None:
        node = self.node(r, i)
        lane = {GPU: "compute", CPU: "cpu", NET: "comm"}.get(res)
        if lane is None:
            lane = "recv" if node.kind == RECV else "mem"
        self.spans.append(Span(self.p.class_of[r], lane, node.name, self.start[r][i], self.end[r][i]))

    def _check_done(self) -> None:
        for r, ends in enumerate(self.end):
            for i, e in enumerate(ends or ()):
                if e < 0:
                    self._stalled(r, i)

    def _stalled(self, r: int, i: int) -> None:
        node = self.node(r, i)
        if self.start[r][i] >= 0 and node.kind == COMM:
            why = "its collective waits for group members that never issue it"
        elif self.start[r][i] >= 0 and node.kind == RECV:
            why = f"its receive from rank {self.peer(r, i)} waits for a send that never runs"
        else:
            why = "it waits for a node that never ends (a cycle through messages or collectives)"
        raise InputError(
            self.p.name,
            f"rank {r}: {self.node_label(r, i)} never ends: {why}",
            "traces whose sends, receives and collectives can all complete",
        )


def simulate(
    program: Program, costs: RankCosts, rules: ResourceRules, *, spans: bool = False, classes: bool = True
) -> SimOutput:
    """Run `program` (module docstring): one rank per class where that is exact (`ranks_classes`)
    and `classes` allows it, else every rank; the same numbers either way."""
    return Simulator(program, costs, rules, spans, classes).simulate()


def ranks_by_class(program: Program, values: Sequence[float]) -> list[float]:
    """The largest value among each class's ranks."""
    return [max(values[r] for r in c.ranks) for c in program.classes]
