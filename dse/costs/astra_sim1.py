"""The `astra-sim-1` cost model: ASTRA-sim 1.0, the Themis paper's own simulator, to the ns.

Replays ASTRA-sim 1.0 (@07d5d19, analytical network @d27635b, the Themis artifact's settings) as
docs/model.md §4.3 describes it, so that Themis' published numbers can be reproduced:

- Messages (§4.3): per-message rate r = (bandwidth/links)·2^30/1e9·scalar B/ns, scalar = links
  (Switch), links rounded down to even (Ring), links // (P−1) (FC); hops 2 (Switch), 1 (FC), the
  shorter ring distance (Ring); time = ⌊⌊⌊hops·lat⌋ + bytes/r⌋ + 2·nic⌋ (+ router on a switch).
- Phases (§4.3): packets released from a refill scheme, each release costing 1 ns plus, if the packet
  is reduced, proc(m) = 3·⌊m/500000⌋; ring and halving-doubling send one message at a time, direct
  sends all P−1 at once. A phase's tie key (`Phase.tie`) is its final event's registration, last
  receive and last send; with `SimRules.dim_tiebreak` the simulator then orders same-tick ends as §6.3 says.
- Chunks (§5.1): ⌊S/splits⌋ bytes each plus a true-size remainder chunk; Themis charges every chunk
  at ⌊S/splits⌋. The baseline all-reduce runs one AR phase on the last dim.
- Schedulers (§5.5, §6.2): the baseline (FIFO) and Themis' OfflineGreedy (FIFO and smallest-first,
  rule of 07d5d19) are the simulator's; `greedy_bandwidth` is links×per-link bandwidth with links
  made even (Ring) or a multiple of P−1 (FC). round_robin, random and fixed, and baseline with
  smallest-first, run on these phase times with dse's queue rules (the AR phase queued FIFO).
- `Result.time_ns` is the collective's end; ASTRA-sim 1.0 reports 5 ns more (trailing compute).

Extrapolated beyond the reference (no 1.0 data pins them): standalone reduce-scatter and
all-gather (the §4.3 phases, all-gather's `size` the input shard as in `astra-sim`, orders from the
shared OfflineGreedy, which follows ASTRA-sim 2.x for all-gather); a direct AR phase (a baseline
whose last dim is FC): one direct RS round then one unreduced direct AG round of D//P;
all-to-all: an RS-shaped exchange with no reduction; halving-doubling or direct on a Ring dim:
hops = the shorter ring distance to each peer (HD partners at P/2, P/4, … for RS, 1, 2, … for AG).
Only the serialized latency mode and one active chunk per dim exist, as in ASTRA-sim 1.0.

`evaluate_many` (and `evaluate` on a shape seen before) runs `phase_timing` and `greedy_bandwidth`
in C (dse/sim/_kernels.c, `batch_kernel`), in integers as exact as Python's up to 2^61 ns; the tests
hold both equal to the bit (tests/test_batch.py).
"""

from __future__ import annotations

import math
from functools import lru_cache

from dse.core.collectives import A2A, AG, AR, RS
from dse.core.errors import InputError
from dse.core.topology import Dim, Topology
from dse.costs.base import ChunkPlan, CostModel, Phase, SimRules, is_power_of_two, log2_int

GIB = 2**30
#: NPU memory bandwidth for the reduction's one write and two reads, B/ns
MEM_BW = 500000


def proc(m: int) -> int:
    """ns to reduce one packet of `m` bytes: a write and two reads, each truncated."""
    return 3 * (m // MEM_BW)


def rate_scalar(dim: Dim) -> int:
    """How many links' bandwidth one message gets (docs/model.md §4.3); 0 means the dim cannot be simulated."""
    links = dim.links or 0
    if dim.kind == "ring":
        return links - links % 2
    if dim.kind == "fc":
        return links // (dim.npus - 1)
    return links


def message_rate(dim: Dim) -> float:
    """Bytes per ns of one message on `dim` (per-link bandwidth × scalar, GB = 2^30 B)."""
    return dim.bandwidth / dim.links * GIB / 1e9 * rate_scalar(dim)  # type: ignore[operator]


def _hops(dim: Dim, distance: int) -> int:
    if dim.kind == "switch":
        return 2
    if dim.kind == "fc":
        return 1
    distance %= dim.npus
    return min(distance, dim.npus - distance)


@lru_cache(maxsize=1 << 16)
def phase_timing(dim: Dim, kind: str, c: int) -> tuple[int, tuple[int, int, int]]:
    """(duration, (registration, last receive, last send)) of one phase, ns from its start (docs/model.md §4.3)."""
    p, lat, nic, router = dim.npus, dim.latency, dim.nic_latency, dim.router_latency
    rate = message_rate(dim)
    switch = dim.kind == "switch"

    def msg(m: int, distance: int) -> int:
        """ns of one message of `m` bytes to the peer `distance` away, truncated as 1.0 does."""
        t = int(_hops(dim, distance) * lat)
        t = int(t + m / rate)
        t = int(t + 2 * nic)
        return int(t + router) if switch else t

    if dim.algorithm == "direct" or kind == A2A:  # all-to-all is direct on every dim (the artifact's)
        m = c if kind == AG else c // p
        cm = max(msg(m, k) for k in range(1, p // 2 + 1)) if dim.kind == "ring" else msg(m, 1)
        send, recv = 1, 1 + cm
        if kind == AR:  # extrapolated: a reduced direct RS round, then an unreduced AG round
            send = recv + 1 + proc(m)
            recv = send + cm
            return recv + 1, (recv, recv, send)
        pr = proc(m) if kind == RS else 0
        return recv + 1 + pr, (recv + (1 if pr else 0), recv, send)

    # packet-serial: ring or halving-doubling, one message in flight at a time
    if dim.algorithm == "ring":
        nz = p - 1
        sends = [(c if kind == AG else c // p, 1)] * (2 * nz if kind == AR else nz)
    else:
        steps = log2_int(p)
        nz = steps - 1
        if kind == AG:
            sends = [(c << k, 1 << k) for k in range(steps)]
        else:
            sends, m = [], c
            for k in range(1, steps + 1):
                m //= 2
                sends.append((m, p >> k))
            if kind == AR:
                sends += [(m << k, 1 << k) for k in range(steps)]
    block = nz + 1  # one refill: a zero-latency packet and nz non-zero packets
    n = len(sends)
    t = last_send = last_recv = pr = 0
    times: dict[tuple[int, int], int] = {}  # message time by (bytes, distance): rings repeat one
    for i in range(n + 1):  # release i; release n closes the phase
        m, distance = sends[i] if i < n else sends[-1]
        refill, slot = divmod(i, block)
        # slot 0 is the zero-latency packet; the others are reduced in RS, and in AR while the
        # toggle (flipped at every refill) is on, i.e. in the first refill
        reduced = slot != 0 and (kind == RS or (kind == AR and refill % 2 == 0))
        pr = proc(m) if reduced else 0
        t += 1 + pr
        if i < n:
            last_send = t
            took = times.get((m, distance))
            if took is None:
                took = times[(m, distance)] = msg(m, distance)
            t += took
            last_recv = t
    return t, (last_recv + (1 if pr else 0), last_recv, last_send)


class AstraSim1Model(CostModel):
    """ASTRA-sim 1.0's timing (module docstring); stateless, so instances are immutable."""

    name = "astra-sim-1"
    description = "ASTRA-sim 1.0 (Themis artifact), to the ns: per-link rates, packet refills, 1 ns releases"
    latency_modes = ("serialized",)
    default_latency_mode = "serialized"
    rules = SimRules(
        scf_rule="astra-sim",
        shares_bandwidth=False,
        dim_tiebreak=True,
        themis_flavor="offline_greedy",
        ag_input_shard=True,
        baseline_ar_phase=True,
        phase_ties=True,
        workload_tick=1.0,
        fixed_splits=True,
        themis_across="astra-sim-1",
        issue_priorities=True,
    )
    batch_kernel = "astra-sim-1"  # dse/sim/_kernels.c: phase_timing and greedy_bandwidth, to the bit
    shape_fields = ("links", "nic_latency", "router_latency")  # the kernel's per-dim constants

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def check(self, topology: Topology, collective: str, latency_mode: str | None, active_chunks: int) -> str:
        """As `CostModel.check`; also one active chunk per dim, the only case ASTRA-sim 1.0 pins."""
        mode = super().check(topology, collective, latency_mode, active_chunks)
        if active_chunks != 1:
            raise InputError(
                "active_chunks", f"{active_chunks} active chunks per dim are not modelled by astra-sim-1", "1"
            )
        return mode

    def _check(self, topology: Topology, collective: str) -> None:
        for i, d in enumerate(topology.dims):
            field = f"topology dim {i}"
            if d.links is None:
                example = {"ring": 2, "fc": d.npus - 1, "switch": 1}[d.kind]
                raise InputError(
                    field,
                    f"{d.notation()} has no links; the astra-sim-1 cost model needs the links per NPU",
                    f"a links= keyword, e.g. {d.notation()[:-1]},links={example})",
                )
            if rate_scalar(d) == 0:
                if d.kind == "ring":
                    why, need = "a ring message gets the links rounded down to even, here 0", "links >= 2"
                else:
                    why = "a direct message gets links // (P-1) links, here 0"
                    need = f"links >= P-1 = {d.npus - 1} (a multiple of P-1 uses them all)"
                raise InputError(field, f"{d.notation()}: in astra-sim-1 {why}", need)
            if d.algorithm == "halving_doubling" and not is_power_of_two(d.npus):
                raise InputError(
                    field,
                    f"halving-doubling on {d.npus} NPUs is not modelled by astra-sim-1",
                    "a power-of-two size, or algorithm=ring/direct",
                )

    def replay_steps(self, topology: Topology, collective: str, chunks: int) -> float:
        """`phase_timing` replays each distinct phase packet by packet (about 3 steps a packet): a
        ring of P sends 2(P-1) for an all-reduce phase, a direct phase on a ring scans P/2 peers. A
        dimension sees at most min(chunks, 2^(D-1)) distinct chunk sizes, times two sizes and kinds."""
        sizes = 4 * min(chunks, 2 ** (topology.ndims - 1))
        packets = 0
        for d in topology.dims:
            if d.algorithm == "ring":
                packets += 2 * (d.npus - 1)
            elif d.algorithm == "direct":
                packets += d.npus // 2 if d.kind == "ring" else 1
            else:
                packets += 2 * max(1, math.ceil(math.log2(d.npus)))
        return 3.0 * packets * sizes

    def _chunk_sizes(self, collective: str, size: int, chunks: int, topology: Topology, baseline: bool) -> ChunkPlan:
        r = int(size) // chunks
        if r <= 0:
            raise InputError("size", f"{size} bytes cannot be cut into {chunks} chunks", "size >= chunks")
        full, rest = divmod(int(size), r)
        sizes = (r,) * full + ((rest,) if rest else ())
        return ChunkPlan(sizes, (r,) * len(sizes))

    def _shrink(self, c: float, p: int) -> float:
        return c // p

    def greedy_bandwidth(self, dim: Dim) -> float:
        """links × per-link GB/s, links made even (Ring) or a multiple of P−1 (FC) (docs/model.md §5.5)."""
        if dim.links is None:  # not simulable (check() rejects it); schedulers may still ask
            return dim.bandwidth
        scalar = rate_scalar(dim)
        effective = scalar * (dim.npus - 1) if dim.kind == "fc" else scalar
        return effective * (dim.bandwidth / dim.links)

    def bytes_per_ns(self, dim: Dim, collective: str | None = None) -> float:
        """The greedy bandwidth (`greedy_bandwidth`) in bytes per ns."""
        return self.greedy_bandwidth(dim) * GIB / 1e9

    def bandwidth_time(self, dim: Dim, kind: str, c: float) -> float:
        """The ns Themis charges a phase of `kind` on a chunk of `c` bytes at the greedy bandwidth."""
        p = dim.npus
        sent = c * (p - 1) if kind == AG else c * (p - 1) / p * (2 if kind == AR else 1)
        return sent / self.bytes_per_ns(dim)

    def _phase_cost(self, dim: Dim, kind: str, c: float, latency_mode: str) -> tuple[float, float]:
        return float(phase_timing(dim, kind, int(c))[0]), 0.0

    def _make_phase(self, dim: Dim, d: int, kind: str, c: float, latency_mode: str) -> tuple[Phase, float]:
        c = int(c)
        p = dim.npus
        if kind == RS:
            c_out, sent = c // p, c * (p - 1) / p
        elif kind == AG:
            c_out, sent = c * p, c * (p - 1)
        elif kind == AR:
            c_out, sent = c, 2 * c * (p - 1) / p
        else:
            c_out, sent = c, c * (p - 1) / p
        end, tie = phase_timing(dim, kind, c)
        # an AR or all-to-all phase is queued by priority even under smallest-first (`insert_stream`)
        return Phase(d, kind, float(end), 0.0, max(c, c_out), sent, kind in (AR, A2A), tie), c_out
