"""dse's event engine in pure Python: the reference that the C engine (`dse/sim/_engine.c`) mirrors step
for step, and the engine used when the C one is not built. `dse.sim.engine.run` chooses.

One event heap of ``(time, class, tie, counter, kind, a, b)`` (SimPy's scheme): at equal times
the network's events come first (a phase's completion or arrival, a processor-sharing completion,
then a dimension's release), then collectives counted done, then computes ending, then dependency
lags ending; `tie` orders same-time network events by ASTRA-sim 1.0's rule (`Phase.tie`,
`NetRules.dim_tiebreak`), and the counter breaks every remaining tie in the order events were made.

Network. A collective's chunks enter the queues of their first dimensions in chunk order (each
enqueue followed by a refill of that dimension). A dimension serves up to `slots` phases:
- Servers (`shared` off): a phase holds a slot for its `busy` ns. Without a `delay` its end is one
  completion event; with one (latency overlapped), a release of the slot at the end and the
  chunk's arrival `delay` later (a delay lost to rounding, end + delay == end, is none). A
  completion moves the chunk to its next queue, then refills the old dimension, then the new one
  (ASTRA-sim's order); an arrival refills only the new one.
- Processor sharing (`shared`): the k running phases each progress at 1/k of the rate. A
  dimension keeps a virtual time V that grows at 1/k; a phase started at V with work w ends when
  V reaches V + w (its tag). One pending event per dimension, for its smallest tag, made again
  (the old one skipped) whenever k changes. At that event every phase with the smallest tag ends,
  in start order; each then moves on as a completion does, or, with a delay, arrives later.
Queue policies: FIFO appends; dse's smallest-first inserts by (key, arrival); ASTRA-sim's puts a
phase with one phase after it, or flagged `fifo_only`, at the back and any other before the first
waiting phase whose key is >= its own. With `issue_priorities` a phase entering a FIFO queue (or a
`fifo_only` one) goes behind the waiting phases of equal or higher priority (ASTRA-sim 1.0).
A fixed service order (`FIXED_SEQ`, `NetRules.service_order`, priorities ignored) gives each
dimension the sequence of chunks it serves: a dimension starts its next entry as soon as that
chunk's phase waits there and a slot is free, and stays idle meanwhile, whatever else waits (a
chunk's k-th entry is its k-th phase there, as entries are only ever taken in order). A sequence
left unfinished, or a chunk left waiting, when no event remains raises `ServiceStall` (the first
chunk left waiting where no entry is left, else the first dimension stopped short), before the
graph's own stall check.

Graph. A node is ready when every dependency is done and its lag has passed. One GPU compute node
and one CPU node run at a time (a replay node holds the CPU or the communication resource), never
preempted; a freed resource takes the ready node that became ready first or, with `by_id`, the one
of lowest index. A collective is issued at once, or with `comm_exclusive` when no other is in
flight; a mark is done at once. A collective ends when its last chunk does and counts as done its
`delay` later; with `end_before_release` its end is handled before its last phase frees the
dimension. A node resumed by a collective (its last dependency, strictly after every other) is
reported to `IssueHooks.resumed`. With `track_lead` every event carries the first NPU to handle
it: a phase ends first at its `Phase.lead` map of the NPU that started it first, and whatever an
event starts or issues starts first at that NPU.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections.abc import Sequence

from dse.costs.base import Phase
from dse.sim.engine_io import (
    CPU,
    FIFO,
    FIXED_SEQ,
    GPU,
    N_COMM,
    N_COMPUTE,
    NET,
    SCF_PRIORITY,
    EngineGraph,
    EngineOutput,
    IssueHooks,
    LogEntry,
    NetRules,
    ServiceStall,
)

COMPLETE, RELEASE, ARRIVE, COMM_DONE, COMPUTE_DONE, LAG, SHARE_DONE = range(7)
NO_TIE = (0.0, 0.0, 0.0, 0.0, 0)
NAN = float("nan")


def lead_after(lead: int, ph: Phase) -> int:
    """The first NPU to end phase `ph` that NPU `lead` started first (`Phase.lead`: None keeps it)."""
    m = ph.lead
    if m is None:
        return lead
    stride, table = m
    p = len(table)
    c = lead // stride % p
    return lead + (table[c] - c) * stride


class _FixedPlans:
    """The hooks of a single collective: its plans, issued once at t = 0."""

    def __init__(self, plans: Sequence[tuple[Phase, ...]]) -> None:
        self.plans = plans

    def issue(self, node: int, t: float, lead: int) -> tuple[Sequence[tuple[Phase, ...]], int]:
        """The plans, at priority 0, whatever the node."""
        return self.plans, 0

    def resumed(self) -> None:  # pragma: no cover - a one-node graph resumes nothing
        """Nothing to do: a single collective resumes no node."""


SINGLE = EngineGraph(kinds=(N_COMM,), resources=(NET,), durations=(0.0,), delays=(0.0,), succ=((),), end=0)


def run(
    net: NetRules,
    graph: EngineGraph | None,
    hooks: IssueHooks | None,
    *,
    plans: Sequence[tuple[Phase, ...]] | None = None,
    record: bool = False,
) -> EngineOutput:
    """Run `graph` with `hooks` (or, `graph` None, the single collective of `plans`)."""
    if graph is None:
        graph, hooks = SINGLE, _FixedPlans(plans or [])
    assert hooks is not None
    return _EngineRun(net, graph, hooks, record).simulate()


class _EngineRun:
    """The state of one run; `go` is the event loop (module docstring)."""

    def __init__(self, net: NetRules, graph: EngineGraph, hooks: IssueHooks, record: bool) -> None:
        self.net, self.g, self.hooks = net, graph, hooks
        nd, n = net.ndims, len(graph.kinds)
        self.heap: list = []
        self.counter = 0
        # chunks
        self.plans: list[tuple[Phase, ...]] = []
        self.pos: list[int] = []
        self.owner: list[int] = []
        self.prio: list[int] = []
        self.started: list[float] = []
        self.chunk_end: list[float] = []
        self.phase_lead: list[int] = []
        # dimensions
        self.wait: list[list] = [[] for _ in range(nd)]
        self.running = [0] * nd
        self.busy = [0.0] * nd
        self.sent = [0.0] * nd
        self.vtime = [0.0] * nd  # processor sharing: virtual time, its last update, the live event
        self.vlast = [0.0] * nd
        self.gen = [0] * nd
        self.active: list[list] = [[] for _ in range(nd)]  # (tag, counter, chunk) heaps
        self.seq = net.service_order  # a fixed service order: its next entry per dim, each chunk's dim
        self.next = [0] * nd
        self.at: list[int] = []  # (-1: not waiting)
        # nodes
        self.need = [0] * n
        for s in graph.succ:
            for x, _ in s:
                self.need[x] += 1
        self.start = [NAN] * n
        self.end = [NAN] * n
        self.comm_rel = [-1.0] * n
        self.other_rel = [-1.0] * n
        self.by_comm = [False] * n
        self.remaining = [0] * n
        self.node_lead = [0] * n
        self.lag_lead: dict[int, int] = {}
        self.ready: list[list] = [[], [], []]
        self.taken = [False, False, False]
        self.exclusive = (True, True, graph.comm_exclusive)
        self.lead = 0
        self.in_flight = 0
        self.comm_since = 0.0
        self.comm_ns = 0.0
        self.compute_ns = 0.0
        self.cpu_ns = 0.0
        self.bytes_sent = 0.0
        self.log: list[LogEntry] | None = [] if record else None

    # ----- the network -------------------------------------------------------------------------
    def push(self, t: float, cls: int, tie: tuple, kind: int, a: int, b: int) -> None:
        """Schedule an event at `t`, ordered by (t, class, tie key, insertion)."""
        heapq.heappush(self.heap, (t, cls, tie, self.counter, kind, a, b))
        self.counter += 1

    def enqueue(self, c: int) -> int:
        """Queue chunk c's next phase at its dimension (module docstring); returns the dimension."""
        plan = self.plans[c]
        ph = plan[self.pos[c]]
        q = self.wait[ph.dim]
        policy = self.net.policy
        if policy == FIXED_SEQ:
            self.at[c] = ph.dim
        elif self.net.issue_priorities and (policy == FIFO or ph.fifo_only):
            p, prio = self.prio[c], self.prio
            j = len(q)
            if j and prio[q[-1][2]] < p:
                j = 0
                while prio[q[j][2]] >= p:
                    j += 1
            q.insert(j, (ph.key, 0, c))
        elif policy == FIFO:
            q.append((ph.key, 0, c))
        elif policy == SCF_PRIORITY:
            insort(q, (ph.key, self.counter, c))
            self.counter += 1
        elif ph.fifo_only or len(plan) - self.pos[c] - 1 == 1:
            q.append((ph.key, 0, c))
        else:
            j = 0
            for item in q:
                if item[0] >= ph.key:
                    break
                j += 1
            q.insert(j, (ph.key, 0, c))
        return ph.dim

    def refill(self, d: int, t: float) -> None:
        """Start waiting phases on dimension d at `t` while it has free slots (by its service order if fixed)."""
        if self.seq is not None:
            self.refill_fixed(d, t)
            return
        q = self.wait[d]
        while q and self.running[d] < self.net.slots:
            self.start_phase(q.pop(0)[2], d, t)

    def refill_fixed(self, d: int, t: float) -> None:
        """Start dimension d's next entries of its service order while their phases wait and slots are free."""
        seq, at = self.seq[d], self.at  # type: ignore[index]
        while self.next[d] < len(seq) and self.running[d] < self.net.slots:
            c = seq[self.next[d]]
            if c >= len(at) or at[c] != d:
                return
            at[c] = -1
            self.next[d] += 1
            self.start_phase(c, d, t)

    def check_served(self) -> None:
        """Raise `ServiceStall` if a fixed service order was not followed to its end (module docstring)."""
        assert self.seq is not None
        for c, d in enumerate(self.at):
            if d >= 0 and self.next[d] == len(self.seq[d]):
                raise ServiceStall(d, self.next[d], c)
        for d, seq in enumerate(self.seq):
            if self.next[d] < len(seq):
                raise ServiceStall(d, self.next[d], seq[self.next[d]])

    def start_phase(self, c: int, d: int, t: float) -> None:
        """Dimension d starts chunk c's current phase at `t`: its busy time, bytes and end event."""
        ph = self.plans[c][self.pos[c]]
        self.running[d] += 1
        self.busy[d] += ph.busy
        self.sent[d] += ph.sent
        self.bytes_sent += ph.sent
        self.started[c] = t
        if self.net.track_lead:
            self.phase_lead[c] = self.lead
        if self.net.shared:
            self.share_update(d, t)
            heapq.heappush(self.active[d], (self.vtime[d] + ph.busy, self.counter, c))
            self.counter += 1
            self.share_schedule(d)
            return
        tie = NO_TIE
        if ph.tie or self.net.dim_tiebreak:
            o = ph.tie or (0.0, 0.0, 0.0)
            tie = (t + o[0], t + o[1], t + o[2], t, d if self.net.dim_tiebreak else 0)
        end = t + ph.busy
        if ph.delay and end + ph.delay != end:  # a delay lost to rounding is none
            self.push(end, 1, tie, RELEASE, c, d)
            self.push(end + ph.delay, 0, tie, ARRIVE, c, d)
        else:
            self.push(end, 0, tie, COMPLETE, c, d)

    def share_update(self, d: int, t: float) -> None:
        """Advance dimension d's virtual time to t."""
        k = len(self.active[d])
        if k:
            self.vtime[d] += (t - self.vlast[d]) / k
        self.vlast[d] = t

    def share_schedule(self, d: int) -> None:
        """(Re)make dimension d's one pending completion event, for its smallest tag."""
        self.gen[d] += 1
        act = self.active[d]
        if act:
            dt = (act[0][0] - self.vtime[d]) * len(act)
            self.push(self.vlast[d] + dt if dt > 0.0 else self.vlast[d], 0, NO_TIE, SHARE_DONE, d, self.gen[d])

    def share_done(self, d: int, t: float) -> None:
        """The phases of dimension d with the smallest tag end at t, in start order."""
        act = self.active[d]
        tag = act[0][0]
        self.vtime[d], self.vlast[d] = tag, t
        done = []
        while act and act[0][0] == tag:
            done.append(heapq.heappop(act)[2])
        self.running[d] -= len(done)
        self.share_schedule(d)
        for c in done:
            ph = self.plans[c][self.pos[c]]
            if self.net.track_lead:
                self.lead = lead_after(self.phase_lead[c], ph)
            if ph.delay:
                self.push(t + ph.delay, 0, NO_TIE, ARRIVE, c, d)
                self.refill(d, t)
            else:
                self.phase_end(COMPLETE, c, d, t, freed=True)

    def phase_end(self, ev: int, c: int, d: int, t: float, freed: bool = False) -> None:
        """Chunk c's phase on d ended at t (a completion, or an arrival after the latency)."""
        plan = self.plans[c]
        if self.log is not None:
            self.log.append(LogEntry(c, self.pos[c], self.started[c], t))
        self.pos[c] += 1
        done = -1
        d2 = -1
        if self.pos[c] < len(plan):
            d2 = self.enqueue(c)
        else:
            self.chunk_end[c] = t
            o = self.owner[c]
            self.remaining[o] -= 1
            if self.remaining[o] == 0:
                done = o
        if done >= 0 and self.g.end_before_release:  # the collective's end first, its dim freed after
            self.network_end(done, t)
            self.dispatch(t)
            done = -1
        if ev == COMPLETE:
            if not freed:
                self.running[d] -= 1
            self.refill(d, t)
            if d2 >= 0 and d2 != d:
                self.refill(d2, t)
        elif d2 >= 0:
            self.refill(d2, t)
        if done >= 0:
            self.network_end(done, t)
            self.dispatch(t)

    # ----- the graph ---------------------------------------------------------------------------
    def release(self, s: int, t: float) -> None:
        """Node s is done at t: count its successors' dependencies (after their lags)."""
        for x, lag in self.g.succ[s]:
            if lag:
                if self.net.track_lead:
                    self.lag_lead[self.counter] = self.lead
                self.push(t + lag, 4, NO_TIE, LAG, s, x)
            else:
                self.arrive(s, x, t)

    def arrive(self, s: int, x: int, t: float) -> None:
        """A dependency of node x (on node s) is met at t."""
        g = self.g
        if g.kinds[s] == N_COMM or self.by_comm[s]:
            if t > self.comm_rel[x]:
                self.comm_rel[x] = t
        elif t > self.other_rel[x]:
            self.other_rel[x] = t
        self.need[x] -= 1
        if self.need[x]:
            return
        if self.comm_rel[x] > self.other_rel[x]:
            self.by_comm[x] = True
            if g.kinds[x] != N_COMM:
                self.hooks.resumed()
        r = g.resources[x]
        if r < 0:
            self.start[x] = self.end[x] = t
            self.release(x, t)
        elif r == NET and not self.exclusive[NET] and g.kinds[x] == N_COMM:
            self.issue(x, t)
        else:
            heapq.heappush(self.ready[r], (x if g.by_id else t, self.counter, x))
            self.counter += 1

    def issue(self, i: int, t: float) -> None:
        """Collective i is issued at t: its chunks enter their first queues."""
        self.start[i] = t
        self.node_lead[i] = self.lead
        if self.in_flight == 0:
            self.comm_since = t
        self.in_flight += 1
        if self.g.ideal is not None:
            self.push(t + self.g.ideal[i], 2, NO_TIE, COMM_DONE, i, 0)
            return
        plans, prio = self.hooks.issue(i, t, self.lead)
        if not plans:
            self.push(t, 2, NO_TIE, COMM_DONE, i, 0)
            return
        self.remaining[i] = len(plans)
        first = len(self.plans)
        nd = self.net.ndims
        for p in plans:
            if not p:
                raise ValueError("a chunk has no phases")
            if not all(isinstance(ph.dim, int) and 0 <= ph.dim < nd for ph in p):
                raise ValueError("phase dim out of range")
            self.plans.append(p)
            self.pos.append(0)
            self.owner.append(i)
            self.prio.append(prio)
            self.started.append(0.0)
            self.chunk_end.append(0.0)
            self.phase_lead.append(self.lead)
            self.at.append(-1)
        for c in range(first, len(self.plans)):
            self.refill(self.enqueue(c), t)

    def network_end(self, i: int, t: float) -> None:
        """Collective i's last chunk ended at t: it is done after its delay."""
        if self.exclusive[NET]:
            self.taken[NET] = False
        self.in_flight -= 1
        if self.in_flight == 0:
            self.comm_ns += t - self.comm_since
        self.end[i] = t
        self.node_lead[i] = self.lead
        delay = self.g.delays[i]
        if delay:
            self.push(t + delay, 2, NO_TIE, COMM_DONE, i, 1)
        else:
            self.release(i, t)

    def dispatch(self, t: float) -> None:
        """Start what the free resources can take."""
        g = self.g
        for r in (GPU, CPU, NET):
            q = self.ready[r]
            while q and not self.taken[r]:
                s = heapq.heappop(q)[2]
                self.taken[r] = self.exclusive[r]
                if g.kinds[s] == N_COMM:
                    self.issue(s, t)
                    continue
                dur = g.durations[s]
                if g.kinds[s] == N_COMPUTE:  # the compute as given: a 0-ns node's minimum is time, not compute
                    if r == GPU:
                        self.compute_ns += dur
                    else:
                        self.cpu_ns += dur
                if dur < g.min_ns:
                    dur = g.min_ns
                self.start[s] = t
                self.node_lead[s] = self.lead
                self.push(t + dur, 3, NO_TIE, COMPUTE_DONE, s, r)

    def simulate(self) -> EngineOutput:
        """Run the graph (or the single collective) to its end and return its numbers."""
        n = len(self.g.kinds)
        for i in [i for i in range(n) if self.need[i] == 0]:  # the roots, fixed before any is released
            self.need[i] = 1
            self.arrive(i, i, 0.0)
        self.dispatch(0.0)
        track = self.net.track_lead
        heap, pop = self.heap, heapq.heappop
        while heap:
            t, _, _, seq, ev, a, b = pop(heap)
            if ev == SHARE_DONE:
                if b == self.gen[a]:
                    self.share_done(a, t)
                continue
            if track:
                if ev == LAG:
                    self.lead = self.lag_lead.pop(seq)
                elif ev >= COMM_DONE:
                    self.lead = self.node_lead[a]
                else:
                    self.lead = lead_after(self.phase_lead[a], self.plans[a][self.pos[a]])
            if ev == COMPUTE_DONE:
                self.taken[b] = False
                self.end[a] = t
                self.release(a, t)
                self.dispatch(t)
            elif ev == LAG:
                self.arrive(a, b, t)
                self.dispatch(t)
            elif ev == COMM_DONE:
                if b == 0:  # ideal or empty: the network part ends now
                    self.network_end(a, t)
                else:
                    self.release(a, t)
                self.dispatch(t)
            elif ev == RELEASE:
                self.running[b] -= 1
                self.refill(b, t)
            else:
                self.phase_end(ev, a, b, t)
        if self.seq is not None:
            self.check_served()
        if any(self.need) or any(self.ready) or any(self.taken):
            raise RuntimeError("engine stalled (a dependency cycle)")
        return EngineOutput(
            finish_ns=max(self.chunk_end, default=0.0),
            dim_busy=tuple(self.busy),
            dim_bytes=tuple(self.sent),
            chunk_end=tuple(self.chunk_end),
            node_start=tuple(self.start),
            node_end=tuple(self.end),
            compute_ns=self.compute_ns,
            cpu_ns=self.cpu_ns,
            comm_ns=self.comm_ns,
            bytes_sent=self.bytes_sent,
            log=tuple(self.log) if self.log is not None else None,
            loop="python",
        )
