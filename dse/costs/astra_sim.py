"""The `astra-sim` cost model: ASTRA-sim 2.x's analytical congestion-unaware backend (docs/model.md §4.2).

Reproduces that simulator to the nanosecond (docs/model.md §4.2, §5.5 and §6):
GB is 2^30 bytes; every message costs hops·α + ⌊bytes/β⌋ with integer message sizes (hops = 2 on a
switch, 1 otherwise); each phase adds the endpoint delay e (10 ns); phases are always serialised and
never share bandwidth (with `active_chunks` = a, up to a phases run at once, each at full speed).

What ASTRA-sim does and this model therefore does too:
- `bandwidth` is passed through as ASTRA-sim's per-dimension bandwidth. On a fully-connected
  dimension ASTRA-sim sends the P−1 direct messages in parallel, each at that bandwidth, so there it
  acts as a per-link bandwidth (the hardware has P−1 times it in aggregate).
- Chunking: r = ⌊S/splits⌋ (for RS and AR at least the NPU count N); the ascending baseline runs
  ⌈S/r⌉ chunks all of size r, other schedulers a true-size remainder chunk.
- The baseline all-reduce runs RS on dims 0…D−2, one AR phase on the last dim, then AG back down.
- All-gather's `size` is the per-NPU input shard (the output is N times larger).
- Halving-doubling needs a power-of-two dimension size.
All-to-all (no single-collective reference data; pinned by the workload runs of
docs/model.md §11): per dimension, P(P−1)/2 messages of c/P in turn on a ring,
P−1 at once when direct (Switch dimensions run it direct, as the reference configures them).

Local reduction (`local_mem_bytes_per_s`, ASTRA-sim's ``local-mem-bw`` × 10^9): a packet bundle
that carries a reduction waits 3·⌊m/M·10^9⌋ ns after its endpoint delay (a write and two reads of
its m bytes, each truncated: `PacketBundle::call`, astra-sim/system/PacketBundle.cc). Which
bundles carry one (`insert_packet` of Ring.cc, HalvingDoubling.cc, AllToAll.cc): those of a refill
after its plain (zero-latency) ones, in a reduce-scatter, and in an all-reduce while its toggle is
on (its first refill); never in an all-gather or all-to-all. So a ring RS or AR phase carries P−1 of c/P bytes;
a direct one 1 of c/P (its P−1 run at once; a direct AR's second round starts a new refill);
halving-doubling (2^L NPUs) L−1 of c/2^(k+1) bytes, k = 1…L−1 (the bundle after step k, sized as
step k+1's message; the last step's starts a new refill). None (the default): no reduction cost,
today's numbers. The shape tables' C kernel does not cost reductions, so a model with one reports no
`batch_kernel` and is costed in Python.

Workloads (`dse.training.iteration`): Themis keeps node 0's one load state across collectives
(`SimRules.themis_across` "astra-sim-2", `dse.training.iteration_planner`), which needs the NPU that issues each
collective first (`lead_after`), and a finished collective holds its dimension until the nodes it
frees are issued (`ResourceRules.end_before_release`).
"""

from __future__ import annotations

import math

from dse.core.collectives import A2A, AG, ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, AR, RS
from dse.core.errors import InputError
from dse.core.topology import Dim, Topology
from dse.costs.base import ChunkPlan, CostModel, SimRules, is_power_of_two, log2_int

GIB = 2**30


class AstraSimModel(CostModel):
    """ASTRA-sim 2.x's analytical network backend, reproduced to the ns (module docstring)."""

    name = "astra-sim"
    description = "ASTRA-sim 2.x analytical backend, to the ns (GB = 2^30 B, 10 ns endpoint delay)"
    latency_modes = ("serialized",)
    default_latency_mode = "serialized"
    rules = SimRules(
        scf_rule="astra-sim",
        shares_bandwidth=False,
        themis_flavor="offline_greedy",
        ag_input_shard=True,
        baseline_ar_phase=True,
        fixed_splits=True,
        themis_across="astra-sim-2",
        workload_rules="astra-sim-2",
    )
    batch_kernel = "astra-sim"

    def __init__(self, endpoint_delay_ns: int = 10, local_mem_bytes_per_s: float | None = None) -> None:
        if local_mem_bytes_per_s is not None and not 0 < local_mem_bytes_per_s < math.inf:
            raise InputError(
                "local-mem-bw", f"{local_mem_bytes_per_s!r} bytes/s is not a bandwidth", "a positive finite number"
            )
        self.endpoint_delay_ns = endpoint_delay_ns
        self.local_mem_bytes_per_s = local_mem_bytes_per_s
        if local_mem_bytes_per_s is not None:  # the C kernel has no reduction cost: phases costed in Python
            object.__setattr__(self, "batch_kernel", None)

    def __repr__(self) -> str:
        if self.local_mem_bytes_per_s is None:
            return f"AstraSimModel(endpoint_delay_ns={self.endpoint_delay_ns})"
        return (
            f"AstraSimModel(endpoint_delay_ns={self.endpoint_delay_ns}, "
            f"local_mem_bytes_per_s={self.local_mem_bytes_per_s!r})"
        )

    def reduction_ns(self, m: int) -> int:
        """ns one bundle of `m` bytes waits for its reduction: 3·⌊m/M·10^9⌋ (0 without `local_mem_bytes_per_s`)."""
        mem = self.local_mem_bytes_per_s
        return 0 if mem is None else 3 * int(m / mem * 1e9)

    def phase_reduction_ns(self, dim: Dim, kind: str, c: int) -> int:
        """ns a phase of `kind` on `dim` with `c` input bytes per NPU spends reducing (module docstring)."""
        if self.local_mem_bytes_per_s is None or (kind != RS and kind != AR):
            return 0
        p, red = dim.npus, self.reduction_ns
        if dim.algorithm == "ring":
            return (p - 1) * red(c // p)
        if dim.algorithm == "direct":
            return red(c // p)
        return sum([red(c // 2 ** (k + 1)) for k in range(1, log2_int(p))])

    def _check(self, topology: Topology, collective: str) -> None:
        for i, d in enumerate(topology.dims):
            if d.algorithm == "halving_doubling" and not is_power_of_two(d.npus):
                raise InputError(
                    f"topology dim {i}",
                    f"halving-doubling on {d.npus} NPUs is not modelled by astra-sim",
                    "a power-of-two size, or algorithm=ring/direct",
                )

    def _chunk_sizes(self, collective: str, size: int, chunks: int, topology: Topology, baseline: bool) -> ChunkPlan:
        r = size // chunks
        total = size
        if collective != ALL_GATHER and collective != ALL_TO_ALL and topology.npus > r:
            r = topology.npus
            total = chunks * r
        if r <= 0:
            raise InputError("size", f"{size} bytes cannot be cut into {chunks} chunks", "size >= chunks")
        if baseline:
            n = math.ceil(total / r)
            sizes = (r,) * n
        else:
            sizes_l, left = [], total
            while left > 0:
                c = min(left, r)
                sizes_l.append(c)
                left -= c
            sizes = tuple(sizes_l)
        return ChunkPlan(sizes, (r,) * len(sizes))

    def _shrink(self, c: float, p: int) -> float:
        return c // p

    def bytes_per_ns(self, dim: Dim, collective: str | None = None) -> float:
        """ASTRA-sim's GB is 2^30 B; a direct (FC) dimension sends its P−1 messages in parallel, and
        so does an all-to-all on a Switch (run direct there)."""
        beta = dim.bandwidth * GIB / 1e9
        direct = dim.algorithm == "direct" or (collective == ALL_TO_ALL and dim.kind == "switch")
        return beta * (dim.npus - 1) if direct else beta

    def lead_after(self, dim: Dim, collective: str, kind: str, index: int) -> int:
        """Which NPU of the dimension ends a phase first, from the one that started it first.

        ASTRA-sim handles same-tick events in the order they were scheduled, and a message's
        arrival is handled first at the NPU whose sender sent first: one step passes the lead
        to the next NPU of the ring (or the first destination of a direct send), in the
        algorithm's direction, and a halving-doubling step to the partner (index XOR 2^k).
        Read off instrumented 2.x runs: a ring reduce-scatter or all-gather moves the lead
        P−1 places on (an all-reduce's all-gather runs the other way), a direct one 1 place,
        halving-doubling mirrors it (P−1−i), an all-to-all moves it P(P−1)/2 places on a ring
        and 1 place when direct. The baseline's single AR phase keeps it (halving-doubling:
        traced; ring and direct: not traced, and the baseline never reads the lead)."""
        p = dim.npus
        if p <= 1:
            return index
        if kind == A2A:
            hops = p * (p - 1) // 2 if dim.algorithm == "ring" else 1
            return (index + hops) % p
        if kind == AR:
            return index
        if dim.algorithm == "halving_doubling":
            return p - 1 - index
        hops = p - 1 if dim.algorithm == "ring" else 1
        if collective == ALL_REDUCE and kind == AG:
            hops = -hops
        return (index + hops) % p

    def bandwidth_time(self, dim: Dim, kind: str, c: float) -> float:
        """The ns OfflineGreedy charges a phase of `kind` on a chunk of `c` bytes: the bytes it sends
        over the dimension's bandwidth."""
        p = dim.npus
        sent = c * (p - 1) if kind == AG else c * (p - 1) / p * (2 if kind == AR else 1)
        return sent / (dim.bandwidth * GIB / 1e9)  # the OfflineGreedy tracker ignores the parallel messages

    def _phase_cost(self, dim: Dim, kind: str, c: float, latency_mode: str) -> tuple[float, float]:
        c = int(c)
        return float(self.phase_ns(dim, kind, c) + self.phase_reduction_ns(dim, kind, c)), 0.0

    def phase_ns(self, dim: Dim, kind: str, c: int) -> float:
        """Duration of one phase in whole ns without reductions (docs/model.md §4.2, the table of
        formulas); `_phase_cost` adds `phase_reduction_ns`."""
        p, e = dim.npus, self.endpoint_delay_ns
        beta = dim.bandwidth * GIB / 1e9
        hop = (2 if dim.kind == "switch" else 1) * dim.latency
        floor = math.floor
        algo = dim.algorithm
        if kind == A2A:  # ring: P(P-1)/2 messages in turn; direct, and Switch (run direct): P-1 at once
            if algo == "ring":
                s = p * (p - 1) // 2
                return s * (hop + floor((c // p) / beta)) + e * (s + 1)
            return hop + floor((c // p) / beta) + 2 * e
        if algo == "ring":
            if kind == AG:
                return (p - 1) * (hop + floor(c / beta)) + e * p
            if kind == AR:
                return 2 * (p - 1) * (hop + floor((c // p) / beta)) + e * (2 * p - 1)
            return (p - 1) * (hop + floor((c // p) / beta)) + e * p
        if algo == "direct":
            if kind == AG:
                return hop + floor(c / beta) + 2 * e
            if kind == AR:
                return 2 * hop + 2 * floor((c // p) / beta) + 3 * e
            return hop + floor((c // p) / beta) + 2 * e
        steps = log2_int(p)
        if kind == AG:
            return steps * hop + sum([floor(c * 2**k / beta) for k in range(steps)]) + e * (steps + 1)
        rs = steps * hop + sum([floor((c // 2**k) / beta) for k in range(1, steps + 1)])
        if kind == AR:
            q = c // p
            return rs + steps * hop + sum([floor(q * 2**k / beta) for k in range(steps)]) + e * (2 * steps + 1)
        return rs + e * (steps + 1)
