"""Point-to-point messages, and collectives on communicator groups under `astra-sim`.

Ranks are numbered with dim 0 varying fastest: rank = c0 + P0·c1 + P0·P1·c2 + ... (`coords`).

**A message** of S bytes from `src` to `dst` (`message_ns`):

- `astra-sim` (ASTRA-sim 2.x's analytical congestion-unaware backend, to the ns): the whole message
  is charged to the lowest dimension d where the coordinates differ, T = ⌊h·α_d + S/β_d⌋ (truncated
  once), β = B·2^30/10^9 bytes per ns, h = the shorter way round a ring between the two coordinates
  on d, 1 on a fully-connected dimension, 2 on a switch; the higher dimensions cost nothing
  (`MultiDimTopology::send` and `BasicTopology::compute_communication_delay` in
  astra-network-analytical's congestion_unaware/).
- `paper` and `astra-sim-1` (dse's own rule; ASTRA-sim has none to follow): dimension-order
  routing, store-and-forward. The message crosses every dimension where the coordinates differ, in
  ascending order, whole, and the times add up. On one dimension, in the model's conventions:
  - `paper` (1 GB/s = 1 B/ns, α per algorithm step): hops·α + S/b. A ring: the shorter way round,
    on one of the NPU's two ring links, b = B/2 (a ring of 2: both links reach the peer, b = B); a
    fully-connected dimension: its direct link to the peer, 1 hop, b = B/(P−1); a switch: the NPU's
    port, one step, b = B.
  - `astra-sim-1`: ASTRA-sim 1.0's message on that dimension (docs/model.md §4.3): ⌊hops·α⌋, + S/r
    truncated, + 2·nic truncated, + router on a switch; r is 1.0's per-message rate
    (`dse.costs.astra_sim1.message_rate`), hops 2 on a switch, 1 fully connected, the shorter ring
    distance on a ring.

**A collective on a group** that is a strict subset of the NPUs, under `astra-sim`
(`group_collective_ends_ns`; ASTRA-sim 2.x, read in its source and listed here with where):

- The group runs one phase on a logical ring of its members in the order the group lists them
  (`CommunicatorGroup::get_collective_plan`: a `RingTopology` of dimension Local). On a
  one-dimensional topology the dimension's algorithm runs (ring, direct, halving-doubling; an
  all-to-all runs direct unless the dimension is a ring, as the `astra-sim` model does); on more
  dimensions always ring. Every message is a point-to-point message costed as above.
- Chunks (`Sys::determine_chunk_size`, `Sys::generate_collective`): r = ⌊S/splits⌋ bytes, raised to
  the NPU count N of the whole topology when smaller (not for all-gather; S is then splits·N);
  ⌈S/r⌉ chunks, all of r bytes. They queue on dimension 0's queue, `active_chunks` at a time per
  member; a member starts its next chunk when one of its own ends, whatever the other members do.
- Packet bundles of a Local ring wait a fixed 10 ns (`MemBus::send_from_NPU_to_MA` and
  `send_from_MA_to_NPU`, Transmition::Fast), not the endpoint delay; a bundle that carries a
  reduction then waits 3·⌊m/M·10^9⌋ ns more (`PacketBundle::call`; `AstraSimModel.reduction_ns`).
- Ring and halving-doubling (`Ring.cc`, `HalvingDoubling.cc`, one message in flight): a member
  releases a bundle (10 ns), sends step 1's message and posts its receive; each receive, which
  completes at max(posted, arrival), releases the next bundle, which sends the next step; the bundle
  after the last receive ends the phase. Ring: to the next member, from the previous one; P−1
  messages of ⌊c/P⌋ (RS), of c (AG), 2(P−1) of ⌊c/P⌋ (AR), P(P−1)/2 of ⌊c/P⌋ (all-to-all).
  Halving-doubling (P = 2^L): partner i ± o, o = 1, 2, ... (RS), P/2, P/4, ... (AG), up and down
  (AR); message sizes as ASTRA-sim truncates them. Bundles carrying a reduction: all but the first
  of each refill of P (ring) or L (halving-doubling) in an RS, those of the first refill in an AR.
- Direct (`AllToAll.cc` on a Local ring: window P−1, a refill of P−1 plain and (P−1)^2 reduced
  bundles): all P−1 messages at once; an all-reduce sends its second round once every first-round
  message has arrived, as its bundles come back. Replayed event by event (`_direct_ends`).
- A group of one member: one 10 ns bundle per chunk (ring or halving-doubling); ASTRA-sim's direct
  algorithm never finishes one (refused here).

With every member starting at once and every ring link alike, each member ends at the same time;
otherwise members end at different times (`group_collective_ends_ns` gives each one).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from dse.core.collectives import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, COLLECTIVES, REDUCE_SCATTER
from dse.core.errors import InputError
from dse.core.limits import MAX_NS, check_work
from dse.core.topology import Dim, Topology
from dse.costs.astra_sim import GIB, AstraSimModel
from dse.costs.astra_sim1 import AstraSim1Model, message_rate
from dse.costs.base import CostModel, is_power_of_two, log2_int
from dse.costs.paper import PaperModel

#: ns every packet bundle of a communicator group's (Local) ring waits in ASTRA-sim 2.x
GROUP_BUNDLE_NS = 10


def coords(topology: Topology, rank: int) -> tuple[int, ...]:
    """The coordinates of `rank`, dim 0 first (rank = c0 + P0·c1 + P0·P1·c2 + ...)."""
    _check_rank(topology, rank, "rank")
    out = []
    for p in topology.shape:
        rank, c = divmod(rank, p)
        out.append(c)
    return tuple(out)


def _check_rank(topology: Topology, rank: object, field: str) -> None:
    n = topology.npus
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < n:
        raise InputError(field, f"rank {rank!r} is not an NPU of {topology.label()}", f"0 to {n - 1}")


def _ring_hops(p: int, a: int, b: int) -> int:
    k = (b - a) % p
    return min(k, p - k)


def message_ns(model: CostModel, topology: Topology, src: int, dst: int, size: int) -> float:
    """ns of one point-to-point message of `size` bytes from rank `src` to rank `dst` (module
    docstring: `astra-sim` charges the lowest differing dimension, `paper` and `astra-sim-1` add up
    every differing dimension). `InputError` for a rank outside the topology, a message to oneself,
    a negative size, or a model with no point-to-point rule."""
    _check_rank(topology, src, "source rank")
    _check_rank(topology, dst, "destination rank")
    if src == dst:
        raise InputError("destination rank", f"a message from rank {src} to itself", "another rank")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise InputError("message size", f"{size!r} is not a byte count", "an integer from 0")
    a, b = coords(topology, src), coords(topology, dst)
    differ = [d for d in range(topology.ndims) if a[d] != b[d]]
    if isinstance(model, AstraSimModel):
        d = differ[0]
        return float(_astra2_message(topology.dims[d], a[d], b[d], size))
    if isinstance(model, AstraSim1Model):
        return float(sum(_astra1_message(topology.dims[d], d, a[d], b[d], size) for d in differ))
    if isinstance(model, PaperModel):
        return sum(_paper_message(topology.dims[d], a[d], b[d], size) for d in differ)
    if model.closed_form:
        return model.message_ns(topology, differ, size)  # type: ignore[attr-defined]
    raise InputError("cost_model", f"no point-to-point rule for {model.name!r}", "paper, astra-sim, astra-sim-1")


def _astra2_message(dim: Dim, a: int, b: int, size: int) -> int:
    """ASTRA-sim 2.x: ⌊hops·α + S/β⌋ on one dimension, in its double arithmetic."""
    hops = 2 if dim.kind == "switch" else 1 if dim.kind == "fc" else _ring_hops(dim.npus, a, b)
    return int(hops * dim.latency + size / (dim.bandwidth * GIB / 1e9))


def _paper_message(dim: Dim, a: int, b: int, size: int) -> float:
    p = dim.npus
    if dim.kind == "ring":
        return _ring_hops(p, a, b) * dim.latency + size / (dim.bandwidth if p == 2 else dim.bandwidth / 2)
    if dim.kind == "fc":
        return dim.latency + size * (p - 1) / dim.bandwidth
    return dim.latency + size / dim.bandwidth


def _astra1_message(dim: Dim, d: int, a: int, b: int, size: int) -> int:
    if dim.links is None:
        raise InputError(f"topology dim {d}", f"{dim.notation()} has no links", "links= for the astra-sim-1 model")
    hops = 2 if dim.kind == "switch" else 1 if dim.kind == "fc" else _ring_hops(dim.npus, a, b)
    t = int(hops * dim.latency)
    t = int(t + size / message_rate(dim))
    t = int(t + 2 * dim.nic_latency)
    return int(t + dim.router_latency) if dim.kind == "switch" else t


# ----- collectives on communicator groups (astra-sim) ---------------------------------------------


def group_chunks(collective: str, size: int, splits: int, npus: int) -> tuple[int, int]:
    """(bytes per chunk, chunk count) of a collective of `size` bytes cut into `splits` on a
    topology of `npus` NPUs, as ASTRA-sim 2.x cuts it (module docstring)."""
    r = size // splits
    if collective != ALL_GATHER and npus > r:
        r, size = npus, splits * npus
    if r <= 0:
        raise InputError("size", f"an all-gather of {size} bytes cannot be cut into {splits} chunks", "size >= splits")
    return r, -(-size // r)


def group_collective_ns(
    model: CostModel, topology: Topology, collective: str, size: int, members: Sequence[int], **kw: Any
) -> float:
    """ns from the moment every member issues a `collective` of `size` bytes per NPU (ASTRA-sim's
    convention: all-gather's is the input shard) on the group `members` (a strict subset of the
    NPUs, in the group file's order) until the last member has finished, under `astra-sim` (module
    docstring). `kw`: `group_collective_ends_ns`'s keywords but `starts` (``splits`` required)."""
    return max(group_collective_ends_ns(model, topology, collective, size, members, **kw))


def _check_counts(**counts: int) -> None:
    """Each of `counts` (size in bytes, splits, active chunks) is an integer of at least 1."""
    for field, v in counts.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            what = "a byte count" if field == "size" else "a count"
            raise InputError(field, f"{v!r} is not {what}", "an integer from 1")


def group_collective_ends_ns(
    model: CostModel,
    topology: Topology,
    collective: str,
    size: int,
    members: Sequence[int],
    *,
    splits: int,
    starts: Sequence[float] | None = None,
    local_mem_bytes_per_s: float | None = None,
    active_chunks: int = 1,
) -> tuple[float, ...]:
    """When each member (in `members`' order) finishes the collective, ns, when member k issues it
    at ``starts[k]`` (default all 0) with its communication slot free (as `group_collective_ns`)."""
    if not isinstance(model, AstraSimModel):
        raise InputError("cost_model", f"{model.name!r} maps a group to its dimensions instead", "astra-sim")
    members = _check_group(topology, collective, members)
    _check_counts(splits=splits, active_chunks=active_chunks, size=size)
    n = len(members)
    t0 = [0.0] * n if starts is None else [float(s) for s in starts]
    if len(t0) != n or not all(0 <= s <= MAX_NS for s in t0):
        raise InputError(
            "starts",
            f"{len(t0)} start times for {n} members, or one outside the range",
            f"{n} times, 0 to {MAX_NS:g} ns",
        )
    mem = local_mem_bytes_per_s if local_mem_bytes_per_s is not None else model.local_mem_bytes_per_s
    red = AstraSimModel(local_mem_bytes_per_s=mem).reduction_ns
    chunk, count = group_chunks(collective, size, splits, topology.npus)
    algo = _algorithm(topology, collective)
    if algo == "direct" and n == 1:
        raise InputError(
            "group",
            f"a {collective} on a group of one NPU with the direct algorithm",
            "ring or halving-doubling (ASTRA-sim never finishes it)",
        )
    check_work(
        float(n) * max(1, n) * count * (2 if collective == ALL_REDUCE else 1), f"a {collective} on a group of {n} NPUs"
    )
    cache: dict[tuple[int, int, int], int] = {}

    def tm(i: int, j: int, m: int) -> int:
        """The ns of an m-byte message from member i to member j (remembered)."""
        hit = cache.get((i, j, m))
        if hit is None:
            a, b = coords(topology, members[i]), coords(topology, members[j])
            d = next(k for k in range(len(a)) if a[k] != b[k])
            hit = cache[(i, j, m)] = _astra2_message(topology.dims[d], a[d], b[d], m)
        return hit

    one: Callable[[list[float]], list[float]]
    if algo == "direct":
        one = lambda s: _direct_ends(collective, chunk, s, tm, red)  # noqa: E731
    else:
        plan = _stepwise_plan(algo, collective, n, chunk, red)
        one = lambda s: _stepwise_ends(plan, s, tm)  # noqa: E731
    return tuple(_chunked(one, t0, count, active_chunks))


def _check_group(topology: Topology, collective: str, members: Sequence[int]) -> list[int]:
    if collective not in COLLECTIVES:
        raise InputError("collective", f"unknown collective {collective!r}", ", ".join(COLLECTIVES))
    out = list(members)
    if not out:
        raise InputError("group", "no members", "one rank or more")
    for r in out:
        _check_rank(topology, r, "group")
    if len(set(out)) != len(out):
        raise InputError("group", f"a rank listed twice in {out[:16]}", "distinct ranks")
    if len(out) == topology.npus:
        raise InputError("group", "every NPU: an ordinary collective, not a group's", "a strict subset of the NPUs")
    return out


def _algorithm(topology: Topology, collective: str) -> str:
    """The algorithm a group runs: ring on more than one dimension, else the dimension's (direct
    for an all-to-all off a ring, as `AstraSimModel` runs it)."""
    if topology.ndims > 1:
        return "ring"
    algo = topology.dims[0].algorithm
    if collective == ALL_TO_ALL and algo != "ring":
        return "direct"
    return str(algo)


def _chunked(one: Callable[[list[float]], list[float]], starts: list[float], count: int, active: int) -> list[float]:
    """Members' ends after `count` chunks, `active` at a time per member, each chunk on member k
    starting when that member has a free slot (FIFO), `one` giving one chunk's ends from its starts."""
    slots = [[s] * active for s in starts]
    last = list(starts)
    for _ in range(count):
        begin = [heapq.heappop(q) for q in slots]
        ends = one(begin)
        for k, e in enumerate(ends):
            heapq.heappush(slots[k], e)
            last[k] = max(last[k], e)
    return last


def _stepwise_plan(
    algo: str, collective: str, p: int, c: int, red: Callable[[int], int]
) -> list[tuple[list[int], int, int]]:
    """Ring or halving-doubling, one chunk of `c` bytes: per step k = 1..n, (who each member
    receives from, message bytes, the ns of the bundle that follows the receive), after a first
    entry (-, -, the first bundle's ns)."""
    if algo == "ring":
        src = [(i - 1) % p for i in range(p)]
        if collective == ALL_GATHER:
            sizes = [c] * (p - 1)
        else:
            n = {REDUCE_SCATTER: p - 1, ALL_REDUCE: 2 * (p - 1), ALL_TO_ALL: p * (p - 1) // 2}[collective]
            sizes = [c // p] * n
        block = p
        steps = [(src, m) for m in sizes]
    else:
        if not is_power_of_two(p):
            raise InputError(
                "group", f"halving-doubling on a group of {p} NPUs", "a power-of-two group, or ring/direct"
            )
        steps, block = _hd_steps(collective, p, c), max(1, log2_int(p))
    nxt = [m for _, m in steps[1:]] + [steps[-1][1] if steps else c]  # the bundle's packet: next message's size
    plan: list[tuple[list[int], int, int]] = [([], 0, GROUP_BUNDLE_NS)]
    for j, (src_k, m) in enumerate(steps, 1):
        reduced = j % block != 0 and (
            collective == REDUCE_SCATTER or (collective == ALL_REDUCE and (j // block) % 2 == 0)
        )
        plan.append((src_k, m, GROUP_BUNDLE_NS + (red(nxt[j - 1]) if reduced else 0)))
    return plan


def _hd_steps(collective: str, p: int, c: int) -> list[tuple[list[int], int]]:
    """Halving-doubling's steps on a group of p = 2^L members (`HalvingDoubling.cc`): per step, who
    each member exchanges with (i + o if ⌊i/o⌋ is even, else i − o) and the message's bytes, the
    offset o and the size updated after each step as ASTRA-sim does (`process_max_count`)."""
    levels = log2_int(p)
    if collective == ALL_GATHER:
        offset, msg, mult = p // 2, c, 0.5
    else:
        offset, msg, mult = 1, c // 2, 2.0
    out = []
    for _ in range(2 * levels if collective == ALL_REDUCE else levels):
        out.append(([(i + offset) % p if (i // offset) % 2 == 0 else (i - offset) % p for i in range(p)], msg))
        offset, msg = int(offset * mult), int(msg / mult)
        if collective == ALL_REDUCE and offset == p:  # the turn: back down, the size doubled again
            mult = 0.5
            offset, msg = int(offset * mult), int(msg / mult)
    return out


def _stepwise_ends(
    plan: list[tuple[list[int], int, int]], starts: list[float], tm: Callable[[int, int, int], int]
) -> list[float]:
    """One chunk of ring or halving-doubling: each member sends step k at S (its bundle's end),
    receives at R = max(S, S_partner + T) and sends step k+1 at R + the next bundle."""
    first = plan[0][2]
    s = [t + first for t in starts]
    for src, m, rel in plan[1:]:
        s = [max(s[i], s[j] + tm(j, i, m)) + rel for i, j in enumerate(src)]
    return s


def _direct_ends(
    collective: str, c: int, starts: list[float], tm: Callable[[int, int, int], int], red: Callable[[int], int]
) -> list[float]:
    """One chunk of the direct algorithm on a group (`AllToAll.cc` over a Local ring), replayed
    event by event: each member's bundles, sends, posted receives and their matching."""
    return _DirectReplay(collective, c, starts, tm, red).replay()


class _DirectState:
    """One member's state in `_DirectReplay` (the fields of ASTRA-sim's `AllToAll` it reads)."""

    __slots__ = ("left", "free", "received", "zero", "nonzero", "toggle", "released", "packets")

    def __init__(self, left: int) -> None:
        self.left, self.free, self.received = left, 0, 0
        self.zero, self.nonzero, self.toggle, self.released = 0, 0, False, 0
        self.packets: deque[tuple[int, int]] = deque()


class _DirectReplay:
    """`_direct_ends`' events: (time, order, what, who); what 0 = a bundle ended (ASTRA-sim's
    General event), 1 = a receive completed, 2 = a message arrived (who = dst·P + src)."""

    def __init__(
        self,
        collective: str,
        c: int,
        starts: list[float],
        tm: Callable[[int, int, int], int],
        red: Callable[[int], int],
    ) -> None:
        p = self.p = len(starts)
        self.n = p - 1
        self.m = c if collective == ALL_GATHER else c // p
        self.ar = collective == ALL_REDUCE
        self.proc = red(self.m) if collective in (REDUCE_SCATTER, ALL_REDUCE) else 0
        self.starts, self.tm = starts, tm
        self.st = [_DirectState(2 * self.n if self.ar else self.n) for _ in range(p)]
        self.ends = [math.nan] * p
        self.heap: list[tuple[float, int, int, int]] = []
        self.arrived: dict[tuple[int, int], deque[float]] = {}
        self.posted: dict[tuple[int, int], deque[float]] = {}
        self.order = 0

    def push(self, t: float, what: int, who: int) -> None:
        """Schedule event `what` of member `who` at `t`, after those already at `t`."""
        self.order += 1
        heapq.heappush(self.heap, (t, self.order, what, who))

    def insert(self, i: int, t: float) -> None:
        """A packet and its bundle (`Ring::insert_packet`): a refill gives P−1 plain bundles and
        (P−1)^2 others, which reduce in an RS, and in an AR while the toggle is on."""
        s, n = self.st[i], self.n
        if s.zero == 0 and s.nonzero == 0:
            s.zero, s.nonzero, s.toggle = n, n * n, not s.toggle
        extra = 0
        if s.zero > 0:
            s.zero -= 1
        else:
            s.nonzero -= 1
            extra = self.proc if not self.ar or s.toggle else 0
        k = s.released % n
        s.packets.append(((i + 1 + k) % self.p, (i - 1 - k) % self.p))
        s.released += 1
        self.push(t + GROUP_BUNDLE_NS + extra, 0, i)

    def ready(self, i: int, t: float) -> None:
        """Send the next packet and post its receive, if a packet, a message and a bundle are free."""
        s = self.st[i]
        if not s.packets or s.left == 0 or s.free == 0:
            return
        dst, src = s.packets.popleft()
        s.left -= 1
        s.free -= 1
        self.push(t + self.tm(i, dst, self.m), 2, dst * self.p + i)
        waiting = self.arrived.get((src, i))
        if waiting:
            waiting.popleft()
            self.push(t, 1, i)
        else:
            self.posted.setdefault((src, i), deque()).append(t)

    def general(self, i: int, t: float) -> None:
        """A bundle ended (`AllToAll::run`, General): an AR's second round waits for every first-round message."""
        s, n = self.st[i], self.n
        s.free += 1
        if self.ar and s.left <= n:
            if s.received < n:
                return
            for _ in range(n):
                self.ready(i, t)
        else:
            self.ready(i, t)
        if s.left == 0 and s.free == n and math.isnan(self.ends[i]):
            self.ends[i] = t

    def replay(self) -> list[float]:
        """Every member's end (ns), replaying the messages' events in time order."""
        for i, t in enumerate(self.starts):
            for _ in range(self.n):
                self.insert(i, t)
        heap, p = self.heap, self.p
        while heap:
            t, _, what, who = heapq.heappop(heap)
            if what == 0:
                self.general(who, t)
            elif what == 1:
                self.st[who].received += 1
                self.insert(who, t)
            else:
                dst, src = divmod(who, p)
                waiting = self.posted.get((src, dst))
                if waiting:
                    waiting.popleft()
                    self.push(t, 1, dst)
                else:
                    self.arrived.setdefault((src, dst), deque()).append(t)
        assert not any(math.isnan(e) for e in self.ends), "every member ends: each message is received"
        return self.ends
