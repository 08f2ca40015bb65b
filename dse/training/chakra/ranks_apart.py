"""A collective on whole dimensions whose members issue it at different times, under ``astra-sim``.

`apart_ends(costs, node, members, starts)` says when each member finishes when member k issues the
collective at ``starts[k]`` with its communication slot free. It replays ASTRA-sim 2.x's system
layer rank by rank (read in its source at 518bd51; file names below are under astra-sim/system/):

- **Chunks and their phases** are dse's own (`dse.training.iteration_planner.Planner.plans`, the
  same as for the collective's time alone): the chunk sizes, the scheduler's dimension orders, each
  phase's dimension, kind and smallest-first key. The bytes a phase starts with follow from the
  chunk: ÷P after a reduce-scatter phase, ×P after an all-gather phase.
- **Per rank, per dimension, one queue** (`Sys::insert_stream`, `SchedulerUnit::notify_stream_added`
  / `notify_stream_removed`): a rank issues its chunks in order, each into the queue of its first
  phase; one phase runs at a time per queue (``active-chunks-per-dimension`` 1), the others wait
  first-in-first-out, or by ASTRA-sim's smallest-first rule under ``scf`` (a phase with one phase
  after it, or an all-reduce or all-to-all phase, goes to the back; any other before the first
  waiting phase whose key is at least its own). When a phase ends (`Sys::proceed_to_next_vnet_baseline`)
  the chunk leaves its queue, enters its next phase's queue, then the old queue starts its next
  waiting phase, then the new one. A member is done when its last chunk is.
- **A phase** is an exchange among the ranks that differ from the rank only in that dimension's
  coordinate, run by the dimension's algorithm as ASTRA-sim's state machines run it (`Ring.cc`,
  `HalvingDoubling.cc`, `AllToAll.cc` under collective_algorithm/): packets are inserted, each
  releases a packet bundle that waits the endpoint delay (`MemBus::send_from_NPU_to_MA`, Usual
  transmission), then its reduction if it carries one (`PacketBundle::call`); a bundle's return
  lets the algorithm send its next message and post the matching receive; a received message
  inserts the next packet. Ring: to the next rank of the ring, from the previous one (the other
  way round for an all-reduce's all-gather phases, which ASTRA-sim puts on the queue's
  anticlockwise half); halving-doubling: to the partner i ± 2^k; direct: to every other rank at
  once (window P−1), an all-reduce's second round once all P−1 first-round messages are in.
- **Messages** (the analytical backend's `sim_send` / `sim_recv`, common/CallbackTracker.cc): the
  k-th send with key (chunk, source, destination, bytes) matches the k-th receive with that key; it
  arrives `dse.costs.p2p.message_ns` after it is sent; a receive completes at the later of its
  posting and the arrival.
- **Same-tick order**: one global event queue, first-in-first-out within a tick, and per rank one
  list of callbacks per tick that runs when its first entry's event comes (`Sys::try_register_event`,
  `Sys::call_events`), as ASTRA-sim orders them. Members issue at their start, in member order.

With every member starting together the members end together, at dse's time alone for the
collective (the tests check it on 1-, 2- and 3-dimensional topologies, baseline and Themis, FIFO and
smallest-first). Issued apart, a member's steps wait for its ring neighbours' or partners'
messages, so early members finish before the latest one.

**Never finishes.** A baseline all-reduce on three dimensions or more sends each chunk through a
middle dimension twice (reduce-scatter on the way up, all-gather on the way down), and with one
queue per dimension both phases share that queue (`Sys::generate_collective` halves a dimension's
queues between them only when it has two or more; its comment cites the deadlock, ASTRA-sim issue
#137). Which chunk a rank's middle queue takes next then depends on when that rank got there: with
rank 0 of Ring(2)^3 100 µs late, rank 0 runs chunk 0's all-gather on dimension 1 while its
dimension-1 partner, rank 2, runs chunk 1's reduce-scatter there, and each waits for a message the
other sends only after its own phase. ASTRA-sim then drains its event queue with no rank finished
(../shared/reference/astra-sim-2-p2p.md: "never completes"; the p2p_sendvscoll_16MiB_R4_FC4_SW2
run); this replay meets the same stall and refuses the collective with one line (`NeverFinishes`,
an `InputError`, naming the ranks left waiting). On two dimensions with the baseline and FIFO
queues the first one's queue gets every reduce-scatter phase at the issue, before any all-gather
returns, and the last one runs only all-reduce phases, so every rank serves its queues in one
order; a lag of 1 ns changes no order. Themis (reduce-scatter and all-gather on every dimension)
or smallest-first (an all-gather overtakes waiting reduce-scatters) lets the orders differ on two
dimensions too: the replay stalls on Ring(4)×Switch(4) with rank 0 100 µs late; no reference run
checks those.

Choices where ASTRA-sim's behaviour is not pinned by reference runs: one queue per dimension and
one active chunk per queue (dse's engine has the same); Themis orders are those of the collective
issued by all members together (ASTRA-sim computes one schedule for all NPUs). Same-tick events
reach ranks in different orders even when all members start together (a message's arrival is
handled first at the rank whose sender sent first); where dimensions are exact copies of each
other (Ring(2)^3 under Themis and smallest-first, say) that alone can order a queue's chunks
differently on two ranks, and this replay then stalls as ASTRA-sim would; no reference run checks
that case, and `RankCosts` keeps the time alone for members that issue together.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

from dse.core.collectives import A2A, AG, ALL_REDUCE, AR, RS
from dse.core.errors import InputError
from dse.core.limits import check_work
from dse.core.topology import Topology
from dse.costs import CostModel
from dse.costs.p2p import message_ns
from dse.schedulers import Scheduler
from dse.training.iteration_planner import Planner
from dse.training.workload_graph import Node
from dse.training.workloads import ALL

#: event kinds of the global queue: a rank's callbacks of a tick, a message's arrival, a receive's
#: callback, a member's issue
_CALLS, _ARRIVE, _RECEIVED, _ISSUE = range(4)
#: estimated engine steps per message (`check_work`)
_STEPS_PER_MESSAGE = 6


class CollectiveSetup(Protocol):
    """What the replay needs of a run: the network, the cost model, the scheduler, the queue rule
    (``fifo`` or ``scf``), the chunks per collective and their smallest size, and the NPU count
    (`dse.training.chakra.ranks_costs.RankCosts` is one)."""

    topology: Topology
    model: CostModel
    scheduler: Scheduler
    queue: str
    chunks: int
    min_chunk_bytes: int
    npus: int


class NeverFinishes(InputError):
    """The collective never finishes (module docstring); `ranks` are the members left waiting."""

    def __init__(self, problem: str, allowed: str, ranks: tuple[int, ...]) -> None:
        super().__init__("workload", problem, allowed)
        self.ranks = ranks


def apart_ends(costs: CollectiveSetup, node: Node, members: tuple[int, ...], starts: Sequence[float]) -> list[float]:
    """When each member (in `members`' order) finishes the collective `node` on whole dimensions
    (its ``scope``, or every dimension when `members` are all the NPUs) when member k issues it at
    ``starts[k]`` ns with its communication slot free, under the ``astra-sim`` model (module
    docstring). `NeverFinishes` (an `InputError`) if the replay stalls, as ASTRA-sim does on such a
    run; `InputError` if it needs more work than the limit or `starts` does not match `members`."""
    if len(starts) != len(members):
        raise InputError("starts", f"{len(starts)} start times for {len(members)} members", "one per member")
    if len(members) <= 1:
        return [float(s) for s in starts]
    scope = ALL if len(members) == costs.npus else node.scope
    plans = _chunk_plans(costs, str(node.collective), node.size, scope)
    if not plans:
        return [float(s) for s in starts]
    msgs = sum(_messages(costs.topology, ph) for plan in plans for ph in plan)
    check_work(
        float(msgs) * len(members) * _STEPS_PER_MESSAGE,
        f"{node.collective} on {len(members)} NPUs replayed rank by rank",
    )
    return _Replay(costs, str(node.collective), members, plans, starts).member_ends(node)


def _chunk_plans(costs: CollectiveSetup, coll: str, size: int, scope: Any) -> list[list[tuple[Any, int]]]:
    """Each chunk's phases as (`Phase`, bytes per NPU at the phase's start), dse's plans for the
    collective issued by all members together."""
    model = costs.model
    planner = Planner(costs.topology, 0, model, costs.scheduler, costs.queue, costs.chunks, costs.min_chunk_bytes)
    plans, _dims = planner.plans(coll, size, scope, 0.0, 0)
    _, sub, _ = planner.scope(scope)
    if sub is None:
        return []
    sizes = model.chunking(coll, size, planner.nchunks(size), sub, baseline=costs.scheduler.is_baseline).sizes
    out = []
    for plan, chunk in zip(plans, sizes):
        c = int(model.start_bytes(coll, chunk, sub))
        phases = []
        for ph in plan:
            phases.append((ph, c))
            p = costs.topology.dims[ph.dim].npus
            c = c // p if ph.kind == RS else c * p if ph.kind == AG else c
        out.append(phases)
    return out


def _messages(topology: Topology, phase: tuple[Any, int]) -> int:
    """Messages one rank sends in a phase (for the work estimate)."""
    ph, _ = phase
    p = topology.dims[ph.dim].npus
    return p * p if ph.kind == A2A else 2 * p


class _Algo:
    """One rank's state machine for one phase of one chunk: the counters of ASTRA-sim's `Ring`,
    `HalvingDoubling` and `AllToAll` (module docstring), in their names."""

    def __init__(self, rp: _Replay, m: int, ch: int, ph: Any, c: int) -> None:
        self.rp, self.m, self.ch = rp, m, ch
        dim = rp.topology.dims[ph.dim]
        p = self.p = dim.npus
        self.stride = math.prod(d.npus for d in rp.topology.dims[: ph.dim])
        rank = rp.members[m]
        self.idx = rank // self.stride % p
        self.base = rank - self.idx * self.stride
        self.kind = kind = ph.kind
        algo = dim.algorithm
        self.mode = "direct" if kind == A2A and algo != "ring" else algo
        self.free = self.received = self.zero = self.nonzero = 0
        self.toggle = False
        self.packets: deque[tuple[int, int, int]] = deque()
        self.step = -1 if rp.coll == ALL_REDUCE and kind == AG else 1  # anticlockwise: the queue's last half
        if self.mode == "halving_doubling":
            levels = int(math.log2(p))
            self.window, self.nz = 1, levels - 1
            self.count = 2 * levels if kind == AR else levels
            self.msg = c if kind == AG else c // 2
            self.offset: int = p // 2 if kind == AG else 1
            self.mult = 0.5 if kind == AG else 2.0
            self._partner()
            return
        self.count = {AR: 2 * (p - 1), A2A: p * (p - 1) // 2}.get(kind, p - 1)
        self.msg = c if kind == AG else c // p
        self.to, self.frm = (self.idx + self.step) % p, (self.idx - self.step) % p
        self.window, self.nz = 1, p - 1
        if self.mode == "direct":
            self.window = self.nz = p - 1
            if kind == A2A:
                self.count = p - 1

    def _partner(self) -> None:
        o = self.offset
        self.to = self.frm = (self.idx + o) % self.p if o == 0 or (self.idx // o) % 2 == 0 else (self.idx - o) % self.p

    def rank_at(self, idx: int) -> int:
        """The rank at position `idx` of this phase's ring or group."""
        return self.base + idx * self.stride

    def init(self) -> None:
        """Start the phase: insert a window's worth of packets."""
        for _ in range(self.window):
            self.insert()

    def insert(self) -> None:
        """`insert_packet`: a packet (from, to, bytes) and the bundle it releases at once."""
        if self.zero == 0 and self.nonzero == 0:
            self.zero, self.nonzero, self.toggle = self.window, self.nz, not self.toggle
        if self.zero > 0:
            processed = False
            self.zero -= 1
        elif self.nonzero > 0:
            processed = self.kind == RS or (self.kind == AR and self.toggle)
            self.nonzero -= 1
        else:
            raise AssertionError("a packet inserted with none left (ASTRA-sim panics)")
        self.packets.append((self.frm, self.to, self.msg))
        self.rp.register(self.m, self.rp.delay, [processed, self.msg, self])
        self._advance()

    def _advance(self) -> None:
        """`process_max_count`'s update after a release: the next partner (halving-doubling) or peer (direct)."""
        if self.mode == "halving_doubling":
            self.offset = int(self.offset * self.mult)
            self.msg = int(self.msg / self.mult)
            if self.offset == self.p and self.kind == AR:
                self.mult = 0.5
                self.offset = int(self.offset * self.mult)
                self.msg = int(self.msg / self.mult)
            self._partner()
        elif self.mode == "direct":
            p, s = self.p, self.step
            self.to = (self.to + s) % p
            if self.to == self.idx:
                self.to = (self.to + s) % p
            self.frm = (self.frm - s) % p
            if self.frm == self.idx:
                self.frm = (self.frm - s) % p

    def ready(self) -> None:
        """Send the front packet's message and post its receive, if a packet, a message and a bundle are free."""
        if not self.packets or self.count == 0 or self.free == 0:
            return
        frm, to, size = self.packets.popleft()
        self.rp.send(self, self.rank_at(to), size)
        self.rp.post(self, self.rank_at(frm), size)
        self.count -= 1
        self.free -= 1

    def general(self) -> None:
        """A bundle came back (`run(General)`): send what can go, end the phase when all is done."""
        self.free += 1
        if self.mode == "direct" and self.kind == AR and self.count <= self.p - 1:
            if self.received < self.p - 1:
                return
            for _ in range(self.window):
                self.ready()
        else:
            self.ready()
        if self.count == 0 and self.free == self.window:
            self.rp.proceed(self.m, self.ch)

    def got(self) -> None:
        """A message was received (`run(PacketReceived)`)."""
        self.received += 1
        self.insert()


class _Replay:
    """The event loop of `apart_ends` (module docstring)."""

    def __init__(
        self, costs: CollectiveSetup, coll: str, members: tuple[int, ...], plans: list, starts: Sequence[float]
    ) -> None:
        self.costs, self.topology, self.coll, self.members = costs, costs.topology, coll, members
        self.plans = plans
        self.starts = [float(s) for s in starts]
        self.delay = float(getattr(costs.model, "endpoint_delay_ns", 10))
        red = getattr(costs.model, "reduction_ns", None)
        self.red = red if red is not None else (lambda m: 0)
        self.scf = costs.queue == "scf"
        n, nd = len(members), self.topology.ndims
        self.heap: list[tuple[float, int, int, Any]] = []
        self.seq = 0
        self.now = 0.0
        self.calls: dict[tuple[int, float], list] = {}
        self.counts: dict[tuple, int] = {}
        self.track: dict[tuple, list] = {}
        self.cost: dict[tuple[int, int, int], float] = {}
        self.pos = [[-1] * len(plans) for _ in range(n)]
        self.algo: list[list[_Algo | None]] = [[None] * len(plans) for _ in range(n)]
        self.started = [[False] * len(plans) for _ in range(n)]
        self.queues: list[list[list[int]]] = [[[] for _ in range(nd)] for _ in range(n)]
        self.running = [[0] * nd for _ in range(n)]
        self.left = [len(plans)] * n
        self.ends = [math.nan] * n

    # ----- ASTRA-sim's event machinery -----------------------------------------------------------
    def push(self, t: float, kind: int, arg: Any) -> None:
        """Schedule an event of `kind` at `t`; events of one tick run in the order pushed."""
        heapq.heappush(self.heap, (t, self.seq, kind, arg))
        self.seq += 1

    def register(self, m: int, delay: float, item: list) -> None:
        """`Sys::try_register_event`: add to member m's callbacks of the tick, scheduling them once."""
        key = (m, self.now + delay)
        calls = self.calls.get(key)
        if calls is None:
            self.calls[key] = [item]
            self.push(key[1], _CALLS, m)
        else:
            calls.append(item)

    def call_events(self, m: int) -> None:
        """`Sys::call_events`: member m's callbacks of this tick, those added meanwhile included."""
        key = (m, self.now)
        calls = self.calls[key]
        i = 0
        while i < len(calls):
            bundle = calls[i]
            i += 1
            if bundle[0]:  # `PacketBundle::call`: its reduction first
                bundle[0] = False
                self.register(m, self.red(bundle[1]), bundle)
            else:
                bundle[2].general()
        del self.calls[key]

    def send(self, algo: _Algo, dst: int, size: int) -> None:
        """`sim_send`: the k-th message (chunk, source, `dst`, `size`) arrives `message_ns` later."""
        src = self.members[algo.m]
        key = (algo.ch, src, dst, size)
        k = self.counts[("s", *key)] = self.counts.get(("s", *key), 0) + 1
        entry = self.track.setdefault((*key, k), [None, False])
        t = self.cost.get((src, dst, size))
        if t is None:
            t = self.cost[(src, dst, size)] = message_ns(self.costs.model, self.topology, src, dst, size)
        self.push(self.now + t, _ARRIVE, ((*key, k), entry))

    def post(self, algo: _Algo, src: int, size: int) -> None:
        """`sim_recv`: the k-th receive of its key completes at once if its message is in, else on arrival."""
        key = (algo.ch, src, self.members[algo.m], size)
        k = self.counts[("r", *key)] = self.counts.get(("r", *key), 0) + 1
        entry = self.track.get((*key, k))
        if entry is not None and entry[1]:
            del self.track[(*key, k)]
            self.push(self.now, _RECEIVED, algo)
        elif entry is not None:
            entry[0] = algo
        else:
            self.track[(*key, k)] = [algo, False]

    def arrive(self, key: tuple, entry: list) -> None:
        """A message arrives: its posted receive completes, or it waits for one."""
        if entry[0] is not None:
            del self.track[key]
            entry[0].got()
        else:
            entry[1] = True

    # ----- streams and queues (Sys.cc) -----------------------------------------------------------
    def issue(self, m: int) -> None:
        """Member m issues the collective: each chunk enters its first phase's queue, in order."""
        for ch in range(len(self.plans)):
            self.proceed(m, ch)

    def proceed(self, m: int, ch: int) -> None:
        """`Sys::proceed_to_next_vnet_baseline`: chunk ch leaves its phase on member m for the next."""
        pos, plan = self.pos[m], self.plans[ch]
        prev = plan[pos[ch]][0].dim if pos[ch] >= 0 else -1
        if prev >= 0:
            self.queues[m][prev].remove(ch)
        pos[ch] += 1
        if pos[ch] == len(plan):
            self.left[m] -= 1
            if self.left[m] == 0:
                self.ends[m] = self.now
            self.removed(m, prev)
            return
        ph, c = plan[pos[ch]]
        self.algo[m][ch] = _Algo(self, m, ch, ph, c)
        self.started[m][ch] = False
        self.enqueue(m, ch, ph, len(plan) - pos[ch] - 1)
        if prev >= 0:
            self.removed(m, prev)
        self.refill(m, ph.dim)

    def enqueue(self, m: int, ch: int, ph: Any, after: int) -> None:
        """`Sys::insert_stream`: FIFO, or ASTRA-sim's smallest-first (module docstring)."""
        q = self.queues[m][ph.dim]
        at = len(q)
        if self.scf and not (after == 1 or ph.fifo_only or ph.kind in (AR, A2A)):
            at = 0
            while at < len(q) and (self.started[m][q[at]] or self._key(m, q[at]) < ph.key):
                at += 1
        q.insert(at, ch)

    def _key(self, m: int, ch: int) -> float:
        return float(self.plans[ch][self.pos[m][ch]][0].key)

    def removed(self, m: int, d: int) -> None:
        """A phase left member m's queue of dimension d: its slot is free for the next."""
        self.running[m][d] -= 1
        self.refill(m, d)

    def refill(self, m: int, d: int) -> None:
        """`notify_stream_added` / `_removed`: start waiting phases while the queue has a free slot."""
        q, running = self.queues[m][d], self.running[m]
        while running[d] < 1 and running[d] < len(q):
            ch = q[running[d]]
            running[d] += 1
            self.started[m][ch] = True
            algo = self.algo[m][ch]
            assert algo is not None
            algo.init()

    def member_ends(self, node: Node) -> list[float]:
        """Run the events to the end; each member's end, in member order. `NeverFinishes` if some never end."""
        for m, t in enumerate(self.starts):
            self.push(t, _ISSUE, m)
        while self.heap:
            t, _, kind, arg = heapq.heappop(self.heap)
            self.now = t
            if kind == _CALLS:
                self.call_events(arg)
            elif kind == _ARRIVE:
                self.arrive(*arg)
            elif kind == _RECEIVED:
                arg.got()
            else:
                self.issue(arg)
        stuck = [r for r, e in zip(self.members, self.ends) if math.isnan(e)]
        if stuck:
            raise NeverFinishes(
                f"the {node.collective} {node.name!r} on {len(self.members)} NPUs, issued apart (from "
                f"{min(self.starts):,.0f} to {max(self.starts):,.0f} ns), never finishes: ranks "
                f"{', '.join(map(str, stuck[:8]))}{' ...' if len(stuck) > 8 else ''} wait for messages "
                "their neighbours' queues never send, as in ASTRA-sim 2.x",
                "members that issue it together, or a collective whose chunks meet every queue in the same order",
                tuple(stuck),
            )
        return self.ends
