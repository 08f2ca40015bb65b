"""The chunk simulator (DESIGN.md §6): one representative NPU, one server per dimension.

Every chunk is a fixed list of phases (from the cost model). All chunks are issued at t = 0, in
chunk order, into the queue of their first dimension. A dimension serves up to `active_chunks`
phases at once; its queue policy picks the next waiting phase:

- ``fifo``: arrival order.
- ``scf`` with the ``priority`` rule (dse's own): smallest key (max of bytes in and out) first,
  ties by arrival.
- ``scf`` with the ``astra-sim`` rule (reference/astra-sim-themis.md §4): a phase entering its
  chunk's second-to-last step, or flagged `fifo_only`, goes to the back; otherwise it goes before
  the first waiting phase whose key is >= its own (equal keys are overtaken).

Events live in a heap of ``(time, priority, tie, counter, ...)`` so that same-time events are
processed deterministically (SimPy's scheme). A completion removes the chunk from its dimension,
queues its next phase, refills the old dimension, then the new one (ASTRA-sim's order). With an
overlapped latency (`Phase.delay` > 0) the dimension is released when the transfer ends and the
chunk arrives at its next queue `delay` later; at equal times arrivals are processed first, so a
freed dimension chooses among everything that is ready.

When phases running together share the dimension's bandwidth (`shares_bandwidth`, the `paper`
model with `active_chunks` > 1), each of the n running phases progresses at 1/n of the rate.
"""

from __future__ import annotations

import heapq
from bisect import insort
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

from .costs.base import Phase

try:  # the optional C core (setup.py); the Python loop below is the reference
    from . import _csim
except ImportError:  # pragma: no cover - depends on the build
    _csim = None

FIFO, SCF_PRIORITY, SCF_ASTRA = 0, 1, 2
_COMPLETE, _RELEASE, _ARRIVE = 0, 1, 2


class TimelineEntry(NamedTuple):
    """One phase as it ran: `start`..`end` is the whole phase, busy its server time."""

    chunk: int
    dim: int
    kind: str
    start: float
    end: float
    busy: float


@dataclass(frozen=True)
class SimOutput:
    time_ns: float
    dim_busy_ns: tuple[float, ...]
    dim_bytes: tuple[float, ...]
    chunk_end_ns: tuple[float, ...]
    timeline: tuple[TimelineEntry, ...] | None


def policy_code(queue: str, scf_rule: str) -> int:
    if queue == "fifo":
        return FIFO
    return SCF_ASTRA if scf_rule == "astra-sim" else SCF_PRIORITY


def simulate(
    plans: Sequence[Sequence[Phase]],
    ndims: int,
    *,
    queue: str = "fifo",
    scf_rule: str = "priority",
    active_chunks: int = 1,
    shares_bandwidth: bool = True,
    dim_tiebreak: bool = False,
    timeline: bool = False,
    engine: str = "auto",
) -> SimOutput:
    """Run the chunks' phase lists through the per-dimension queues; see the module docstring.

    `dim_tiebreak`: at equal times and tie keys, the lower dimension's event first (ASTRA-sim 1.0).
    `engine`: ``"auto"`` (the C loop when it is built), ``"c"`` or ``"python"``; all give the same
    numbers, the C loop about 20 times sooner.
    """
    policy = policy_code(queue, scf_rule)
    if active_chunks > 1 and shares_bandwidth:
        return _run_shared(plans, ndims, policy, active_chunks, timeline)
    if engine == "c" and _csim is None:
        raise RuntimeError("the C simulator core is not built (dse/_csim.c)")
    if engine != "python" and _csim is not None:
        return _run_c(plans, ndims, policy, active_chunks, timeline, dim_tiebreak)
    return _run_servers(plans, ndims, policy, active_chunks, timeline, dim_tiebreak)


def _totals(plans: Sequence[Sequence[Phase]], nd: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-dimension busy time and bytes: fixed by the phases, whatever the timing."""
    count: dict[int, list] = {}
    for p in plans:
        e = count.get(id(p))
        if e is None:
            count[id(p)] = [p, 1]
        else:
            e[1] += 1
    busy = [0.0] * nd
    sent = [0.0] * nd
    for p, k in count.values():
        for ph in p:
            busy[ph[0]] += ph[2] * k
            sent[ph[0]] += ph[5] * k
    return tuple(busy), tuple(sent)


def _run_c(
    plans: Sequence[Sequence[Phase]], nd: int, policy: int, slots: int, record: bool, dim_tiebreak: bool
) -> SimOutput:
    finish, ends, busy, sent, log = _csim.run(
        plans if type(plans) is list else list(plans), nd, policy, slots, 1 if record else 0, 1 if dim_tiebreak else 0
    )
    entries = None
    if log is not None:
        entries = tuple(TimelineEntry(c, plans[c][k][0], plans[c][k][1], t0, t1, plans[c][k][2]) for c, k, t0, t1 in log)
    return SimOutput(finish, busy, sent, ends, entries)


def push_phase(heap: list, ph: Phase, c: int, d: int, t: float, counter: int, dim_tiebreak: bool) -> int:
    """Schedule the events of chunk `c`'s phase `ph` started on dim `d` at `t`; returns the counter.

    One completion event, or, with an overlapped latency, a release of the dimension when the
    transfer ends and the chunk's arrival `delay` later (arrivals first at equal times)."""
    end = t + ph[2]
    delay = ph[3]
    tie = ph[7]
    if tie or dim_tiebreak:
        o = tie or (0.0, 0.0, 0.0)
        tie = (t + o[0], t + o[1], t + o[2], t, d if dim_tiebreak else 0)
    if delay:
        heapq.heappush(heap, (end, 1, tie, counter, _RELEASE, c, d))
        heapq.heappush(heap, (end + delay, 0, tie, counter + 1, _ARRIVE, c, d))
        return counter + 2
    heapq.heappush(heap, (end, 0, tie, counter, _COMPLETE, c, d))
    return counter + 1


def refill_after(kind: int, d: int, d2: int, refill: Callable[[int, float], None], t: float) -> None:
    """After a phase's event on dim `d` at `t` (its chunk now queued on `d2`, -1 if none): a
    completion refills `d`, then `d2`; an arrival (overlapped latency) refills only `d2`."""
    if kind == _COMPLETE:
        refill(d, t)
        if d2 >= 0 and d2 != d:
            refill(d2, t)
    elif d2 >= 0:
        refill(d2, t)


def queue_insert(q: list, policy: int, c: int, ph: Phase, remaining_after: int, counter: int) -> int:
    """Put chunk `c`, entering phase `ph`, into a dimension's waiting list; returns the counter.

    FIFO: append. dse's SCF: by (key, arrival). ASTRA-sim's SCF: a phase with one phase after it,
    or flagged FIFO-only, goes to the back; otherwise before the first waiting key >= its own."""
    if policy == FIFO:
        q.append(c)
    elif policy == SCF_PRIORITY:
        insort(q, (ph[4], counter, c))
        counter += 1
    else:
        key = ph[4]
        if ph[6] or remaining_after == 1:
            q.append((key, c))
        else:
            j = 0
            for k, _ in q:
                if k >= key:
                    break
                j += 1
            q.insert(j, (key, c))
    return counter


def _run_servers(
    plans: Sequence[Sequence[Phase]], nd: int, policy: int, slots: int, record: bool, dim_tiebreak: bool = False
) -> SimOutput:
    """Fixed-duration phases on servers with `slots` places each: the reference loop (C mirrors it)."""
    n = len(plans)
    pos = [0] * n
    wait: list[list] = [[] for _ in range(nd)]
    running = [0] * nd
    busy = [0.0] * nd
    sent = [0.0] * nd
    started = [0.0] * n
    ends = [0.0] * n
    heap: list = []
    pop = heapq.heappop
    counter = 0
    log: list[TimelineEntry] | None = [] if record else None

    def start(c: int, d: int, t: float) -> None:
        nonlocal counter
        ph = plans[c][pos[c]]
        running[d] += 1
        busy[d] += ph[2]
        sent[d] += ph[5]
        started[c] = t
        counter = push_phase(heap, ph, c, d, t, counter, dim_tiebreak)

    def enqueue(c: int) -> int:
        nonlocal counter
        plan = plans[c]
        ph = plan[pos[c]]
        counter = queue_insert(wait[ph[0]], policy, c, ph, len(plan) - pos[c] - 1, counter)
        return ph[0]

    def refill(d: int, t: float) -> None:
        q = wait[d]
        while q and running[d] < slots:
            item = q.pop(0)
            start(item if policy == FIFO else item[-1], d, t)

    for c in range(n):
        d = enqueue(c)
        refill(d, 0.0)

    finish = 0.0
    while heap:
        t, _, _, _, kind, c, d = pop(heap)
        if kind != _ARRIVE:
            running[d] -= 1
        if kind != _RELEASE:
            plan = plans[c]
            if log is not None:
                ph = plan[pos[c]]
                log.append(TimelineEntry(c, d, ph[1], started[c], t, ph[2]))
            pos[c] += 1
            if pos[c] < len(plan):
                d2 = enqueue(c)
            else:
                d2 = -1
                ends[c] = t
                if t > finish:
                    finish = t
            refill_after(kind, d, d2, refill, t)
        else:
            refill(d, t)
    return SimOutput(finish, tuple(busy), tuple(sent), tuple(ends), tuple(log) if log is not None else None)


def _run_shared(plans: Sequence[Sequence[Phase]], nd: int, policy: int, slots: int, record: bool) -> SimOutput:
    """Processor sharing: up to `slots` phases per dimension, each at 1/n of the bandwidth.

    A phase's work is its `busy` time at full bandwidth; it completes when that work is done, then
    waits `delay` (overlapped latency) before its chunk moves on. Exact event-driven fluid model.
    """
    n = len(plans)
    pos = [0] * n
    wait: list[list] = [[] for _ in range(nd)]
    active: list[dict[int, float]] = [{} for _ in range(nd)]  # chunk -> remaining work (ns)
    busy = [0.0] * nd
    sent = [0.0] * nd
    started = [0.0] * n
    ends = [0.0] * n
    arrivals: list = []  # (time, counter, chunk)
    counter = 0
    log: list[TimelineEntry] | None = [] if record else None
    eps = 1e-9

    def enqueue(c: int) -> int:
        nonlocal counter
        plan = plans[c]
        i = pos[c]
        ph = plan[i]
        d = ph[0]
        q = wait[d]
        if policy == FIFO:
            q.append((0, counter, c))
        else:
            insort(q, (ph[4], counter, c))
        counter += 1
        return d

    def refill(d: int, t: float) -> None:
        q = wait[d]
        while q and len(active[d]) < slots:
            c = q.pop(0)[2]
            ph = plans[c][pos[c]]
            started[c] = t
            sent[d] += ph[5]
            active[d][c] = ph[2]

    for c in range(n):
        refill(enqueue(c), 0.0)

    t = 0.0
    finish = 0.0
    while True:
        # next completion on any dimension (all active phases progress at 1/k)
        best, best_d = float("inf"), -1
        for d in range(nd):
            act = active[d]
            if act:
                dt = min(act.values()) * len(act)
                if t + dt < best:
                    best, best_d = t + dt, d
        if arrivals and arrivals[0][0] <= best:
            best, best_d = arrivals[0][0], -1
        if best == float("inf"):
            break
        dt = best - t
        for d in range(nd):
            act = active[d]
            if act:
                k = len(act)
                busy[d] += dt
                for c in act:
                    act[c] -= dt / k
        t = best
        if best_d == -1:
            _, _, c = heapq.heappop(arrivals)
            _advance(plans, pos, c, t, ends, log, started)
            if pos[c] < len(plans[c]):
                refill(enqueue(c), t)
            finish = max(finish, t)
            continue
        done = sorted(c for c, w in active[best_d].items() if w <= eps * max(1.0, t))
        for c in done:
            del active[best_d][c]
            ph = plans[c][pos[c]]
            if ph[3]:
                heapq.heappush(arrivals, (t + ph[3], counter, c))
                counter += 1
            else:
                _advance(plans, pos, c, t, ends, log, started)
                finish = max(finish, t)
                if pos[c] < len(plans[c]):
                    d2 = enqueue(c)
                    refill(best_d, t)
                    refill(d2, t)
        refill(best_d, t)
    return SimOutput(finish, tuple(busy), tuple(sent), tuple(ends), tuple(log) if log is not None else None)


def _advance(plans, pos, c, t, ends, log, started) -> None:  # type: ignore[no-untyped-def]
    ph = plans[c][pos[c]]
    if log is not None:
        log.append(TimelineEntry(c, ph[0], ph[1], started[c], t, ph[2]))
    pos[c] += 1
    if pos[c] == len(plans[c]):
        ends[c] = t
