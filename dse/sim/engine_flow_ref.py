"""The C engine's second loop, the flow loop (`dse/sim/_flow.c`), in plain Python: the reference its
algorithm is checked against (tests/test_flow.py holds it equal to `dse.sim.engine_ref` to the bit).

It runs what the C engine gives it (docs/model.md §6.6): one collective alone, one phase
per dimension at a time, smallest-first queues (dse's rule or ASTRA-sim's), no tie keys, priorities,
lead or log. There is no global event heap. Each dimension has one pending event, its *head*: while
it serves a phase, that phase's end (a completion, or with a delay a release of the dimension, keyed
``(t, seq)`` with the release's class above every completion's); while idle, the first arrival in its
*inbox*. An arrival (a chunk reaching its next dimension a delay after its phase there ended) is made
when its phase starts and waits in that dimension's inbox, ordered by ``(t, seq)``. The loop takes the
least head:
- an idle dimension's first arrival starts at once;
- a serving dimension's event first moves every arrival earlier than it into the dimension's queue
  (in their order); a completion then moves its chunk on (after the same for the next dimension's
  inbox): into the next queue, or, if that dimension is idle, straight into service once this
  dimension has taken its next phase (or gone idle).
Event seqs count the events made, in the order the engine makes them, so equal-time ties fall as in
the engine.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections.abc import Sequence

from dse.costs.base import Phase
from dse.sim.engine_io import SCF_ASTRA, SCF_PRIORITY, EngineOutput, NetRules

RELEASE_CLASS = 1 << 58  # a release's key is above every completion's at the same time


def runs_here(net: NetRules, plans: Sequence[tuple[Phase, ...]]) -> bool:
    """Does the flow loop run this collective (the C engine's conditions, but for its size limits)?"""
    return (
        bool(plans)
        and net.policy in (SCF_PRIORITY, SCF_ASTRA)
        and net.slots == 1
        and net.tieless
        and not (net.shared or net.dim_tiebreak or net.issue_priorities or net.track_lead)
        and all(p and not x.tie for p in plans for x in p)
    )


def run(net: NetRules, plans: Sequence[tuple[Phase, ...]]) -> EngineOutput:
    """The collective whose chunks are `plans`, on the flow loop (`runs_here` must hold)."""
    if not runs_here(net, plans):
        raise ValueError("the flow loop runs one collective on servers with smallest-first queues only")
    return _Flow(net, plans).simulate()


class _Flow:
    """One run's state (module docstring): per dimension its head, the phase it serves (None: idle),
    its queue and its inbox (a heap of (t, seq, chunk))."""

    def __init__(self, net: NetRules, plans: Sequence[tuple[Phase, ...]]) -> None:
        nd = net.ndims
        if not all(0 <= x.dim < nd for p in plans for x in p):
            raise ValueError("phase dim out of range")
        self.plans, self.dse = plans, net.policy == SCF_PRIORITY
        self.pos = [0] * len(plans)
        self.chunk_end = [0.0] * len(plans)
        self.serving: list[int | None] = [None] * nd
        self.head: list[tuple[float, int]] = [(0.0, 0)] * nd
        self.queue: list[list] = [[] for _ in range(nd)]
        self.inbox: list[list] = [[] for _ in range(nd)]
        self.busy, self.sent = [0.0] * nd, [0.0] * nd
        self.bytes, self.seq, self.entries = 0.0, 0, 0

    def phase(self, c: int) -> Phase:
        """Chunk c's current phase."""
        return self.plans[c][self.pos[c]]

    def enqueue(self, d: int, c: int) -> None:
        """Chunk c's phase into d's queue: dse's rule by (key, entry order); ASTRA-sim's before the
        first waiting phase whose key is >= its own, unless it goes to the back."""
        ph, q = self.phase(c), self.queue[d]
        if self.dse:
            insort(q, (ph.key, self.entries, c))
            self.entries += 1
            return
        j = len(q)
        if not (ph.fifo_only or len(self.plans[c]) - self.pos[c] - 1 == 1):
            j = next((i for i, e in enumerate(q) if e[0] >= ph.key), len(q))
        q.insert(j, (ph.key, 0, c))

    def start(self, d: int, c: int, t: float) -> None:
        """Dim d serves chunk c's phase from t: its head is the phase's end; an arrival is made now."""
        ph = self.phase(c)
        self.busy[d] += ph.busy
        self.sent[d] += ph.sent
        self.bytes += ph.sent
        self.serving[d] = c
        end = t + ph.busy
        if ph.delay and end + ph.delay != end:  # a delay lost to rounding is none
            self.head[d] = (end, RELEASE_CLASS | self.seq)
            arrival = (end + ph.delay, self.seq + 1)
            self.seq += 2
            if self.pos[c] + 1 == len(self.plans[c]):
                self.chunk_end[c] = arrival[0]
            else:
                heapq.heappush(self.inbox[self.plans[c][self.pos[c] + 1].dim], (*arrival, c))
            return
        self.head[d] = (end, self.seq)
        self.seq += 1

    def flush(self, d: int, event: tuple[float, int]) -> None:
        """The arrivals at d earlier than `event` enter its queue, in their order."""
        box = self.inbox[d]
        while box and box[0][:2] < event:
            c = heapq.heappop(box)[2]
            self.pos[c] += 1
            self.enqueue(d, c)

    def refill(self, d: int, t: float) -> None:
        """Dim d starts its first waiting phase at `t`, or goes idle."""
        if self.queue[d]:
            self.start(d, self.queue[d].pop(0)[2], t)
        else:
            self.serving[d] = None

    def next_dim(self) -> int | None:
        """The dim whose head is least (None: no event is left)."""
        best, key = None, (float("inf"), 0)
        for d, c in enumerate(self.serving):
            h = self.head[d] if c is not None else (self.inbox[d][0][:2] if self.inbox[d] else None)
            if h is not None and h < key:
                best, key = d, h
        return best

    def step(self, d: int) -> None:
        """Handle dim d's next event: a first arrival, a completion or a release, then refill."""
        c = self.serving[d]
        if c is None:  # idle: its first arrival starts
            t, _, c = heapq.heappop(self.inbox[d])
            self.pos[c] += 1
            self.start(d, c, t)
            return
        event = self.head[d]
        t, moved = event[0], -1
        self.flush(d, event)
        if event[1] < RELEASE_CLASS:  # a completion: the chunk moves on now
            if self.pos[c] + 1 == len(self.plans[c]):
                self.chunk_end[c] = t
            else:
                self.pos[c] += 1
                moved = self.phase(c).dim
                if moved != d:
                    self.flush(moved, event)
                if moved == d or self.serving[moved] is not None:
                    self.enqueue(moved, c)
        self.refill(d, t)
        if moved >= 0 and moved != d and self.serving[moved] is None:
            self.start(moved, c, t)

    def simulate(self) -> EngineOutput:
        """Issue every chunk at 0 and run the events to the end; the engine's numbers."""
        for c, plan in enumerate(self.plans):  # issued at 0, in chunk order
            d = plan[0].dim
            if self.serving[d] is None:
                self.start(d, c, 0.0)
            else:
                self.enqueue(d, c)
        while (nxt := self.next_dim()) is not None:
            self.step(nxt)
        finish = max(self.chunk_end)
        return EngineOutput(
            finish_ns=finish,
            dim_busy=tuple(self.busy),
            dim_bytes=tuple(self.sent),
            chunk_end=tuple(self.chunk_end),
            node_start=(0.0,),
            node_end=(finish,),
            compute_ns=0.0,
            cpu_ns=0.0,
            comm_ns=finish,
            bytes_sent=self.bytes,
            log=None,
            loop="python-flow",
        )
