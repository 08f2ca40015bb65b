"""The cost-model interface: what one chunk-phase costs, and how a collective becomes phases.

A cost model answers three questions for the simulator (docs/model.md §4):
how a collective of `size` bytes is cut into chunks (`chunking`), which phases one chunk runs for a
given dimension order and what each costs (`phases`), and the bandwidth-only time of a phase that
load trackers such as Themis charge (`bandwidth_time`). It also declares its latency modes and, as
one frozen `SimRules` (`CostModel.rules`), the dialect of the simulator it was calibrated against:
queue and tie rules, bandwidth sharing, the Themis flavour and the workload rules.

Subclasses implement the private hooks `_phase_cost`, `_shrink` and, where they differ,
`_chunk_sizes` and `_check`; the public methods validate once and call them.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Literal, NamedTuple

from dse.core.collectives import A2A, AG, ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, AR, COLLECTIVES, ROOTED, RS
from dse.core.errors import InputError
from dse.core.topology import Dim, Topology

LATENCY_MODES = ("overlapped", "serialized")


class Phase(NamedTuple):
    """One chunk's step on one dimension, as the simulator runs it.

    `busy`: ns the dimension's server is held; `delay`: ns after that before the chunk may move on
    (latency hidden behind the next transfer, overlapped mode); `key`: the smallest-chunk-first
    key, max(bytes in, bytes out); `sent`: bytes one NPU sends; `fifo_only`: queued FIFO even under
    smallest-first (ASTRA-sim's single AR phase); `tie`: 0, or three ns offsets (o1, o2, o3)
    from the phase's start: phases ending at the same time complete in the order of start+o1,
    start+o2, start+o3, then start (ASTRA-sim 1.0's same-tick rule); `lead`: see below.
    """

    dim: int
    kind: str
    busy: float
    delay: float
    key: float
    sent: float
    fifo_only: bool = False
    tie: tuple[float, float, float] | Literal[0] = 0
    #: who ends the phase first, as ``(stride, table)``: the NPU at flat index i (dim 0 fastest)
    #: that started it first hands over to i + (table[j] − j)·stride, j = i // stride mod len(table);
    #: None keeps it (`dse.sim.engine_ref.lead_after`, ASTRA-sim 2.x's Themis rule)
    lead: tuple[int, tuple[int, ...]] | None = None


@dataclass(frozen=True)
class ChunkPlan:
    """Chunk sizes (bytes per NPU, in the collective's size convention) and what a tracker charges."""

    sizes: tuple[float, ...]
    charges: tuple[float, ...]


@dataclass(frozen=True)
class SimRules:
    """The simulator dialect a cost model implies: how its phases queue, tie and share bandwidth, how
    its Themis and baseline run, and how a workload's collectives are issued. One frozen value per
    model (`CostModel.rules`), which the schedulers, the bounds and the iteration engine read and
    `simulate` takes whole; the defaults are the `paper` model's.

    One class rather than a `SimRules` inside a larger dialect object: every field is a rule of the
    simulator the model was calibrated against, and one value keeps them from drifting apart.
    """

    #: smallest-chunk-first rule: "priority" (ties by arrival) or "astra-sim" (docs/model.md §6.2)
    scf_rule: str = "priority"
    #: do phases running at once on one dimension share its bandwidth?
    shares_bandwidth: bool = True
    #: same-tick completions: the lower dimension first, after the phases' tie keys (ASTRA-sim 1.0)
    dim_tiebreak: bool = False
    #: Themis flavour: "load_tracker" (the paper's Algorithm 1) or "offline_greedy" (ASTRA-sim)
    themis_flavor: str = "load_tracker"
    #: all-gather `size` is the input shard (ASTRA-sim) rather than the per-NPU output (paper)
    ag_input_shard: bool = False
    #: the baseline's all-reduce runs one AR phase on the last dimension (ASTRA-sim)
    baseline_ar_phase: bool = False
    #: its phases carry tie keys (`Phase.tie`); if not, the engine keeps smaller events
    phase_ties: bool = False
    #: ns per workload state change: a compute starts this long after the previous one, or after
    #: the collective it waited for at the previous one's end (ASTRA-sim 1.0: one cycle)
    workload_tick: float = 0.0
    #: a workload's collectives always get the requested chunk count, whatever their size
    #: (ASTRA-sim's preferred-dataset-splits); otherwise no chunk is smaller than `min_chunk_bytes`
    fixed_splits: bool = False
    #: Themis loads across a workload's collectives: "carry" (one tracker for the whole run),
    #: "reset" (every collective from zero loads), "astra-sim-1" (ASTRA-sim 1.0's node-0 rule) or
    #: "astra-sim-2" (2.x's node-0 rule, decided per issue by which NPU issues first, `lead_after`)
    themis_across: str = "carry"
    #: collectives of a workload enter the dims' queues by ASTRA-sim 1.0's issue priorities
    issue_priorities: bool = False
    #: which nodes of a workload run at once on one NPU (`dse.training.workload_graph.ResourceRules`):
    #: "dse" (collectives overlap each other) or "astra-sim-2" (one collective at a time)
    workload_rules: str = "dse"


class CostModel(ABC):
    """Base class of the cost models; instances are immutable and cheap to share."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    latency_modes: ClassVar[tuple[str, ...]] = LATENCY_MODES
    default_latency_mode: ClassVar[str] = "overlapped"
    #: the simulator dialect this model implies (queue rules, tie-breaks, Themis flavour, workload rules)
    rules: ClassVar[SimRules] = SimRules()
    #: the C kernel that computes exactly what `_make_phase`, `bandwidth_time` and `greedy_bandwidth`
    #: do, for many points at once (`dse.sim.compiled`, dse/sim/_kernels.c; "paper", "astra-sim",
    #: "astra-sim-1"); None: they are called per point
    batch_kernel: ClassVar[str | None] = None
    #: Dim fields besides kind, npus and algorithm that the kernel takes from the shape table, not
    #: the point: part of a point's shape (`dse.sim.compiled.shape_key`), like the kind
    shape_fields: ClassVar[tuple[str, ...]] = ()
    #: the whole collective's time comes in closed form (`collective_time`), with no chunk phases:
    #: schedulers, queues, chunks and latency modes do not apply (`nccl`)
    closed_form: ClassVar[bool] = False
    #: broadcast and reduce (`dse.core.collectives.ROOTED`) are timed too: closed-form models only
    rooted_collectives: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @property
    def label(self) -> str:
        """How results and CSV rows name this model: its name, plus its configuration where it has one
        (``nccl:NAME``); `dse.costs.get_cost_model` takes it back."""
        return self.name

    # ----- validation -------------------------------------------------------------------
    def check(self, topology: Topology, collective: str, latency_mode: str | None, active_chunks: int) -> str:
        """Validate a configuration for this model and return the latency mode to use."""
        mode = self.default_latency_mode if latency_mode is None else str(latency_mode).strip().lower()
        if mode not in LATENCY_MODES:
            raise InputError("latency_mode", f"unknown latency mode {latency_mode!r}", ", ".join(LATENCY_MODES))
        if mode not in self.latency_modes:
            raise InputError(
                "latency_mode",
                f"the {self.name} cost model does not support {mode!r}",
                ", ".join(self.latency_modes),
            )
        if collective in ROOTED and not self.rooted_collectives:
            raise InputError(
                "collective",
                f"{collective} has no chunk phases under the {self.name} cost model",
                ", ".join(COLLECTIVES) + f"; {collective} under --cost-model nccl",
            )
        self._check(topology, collective)
        return mode

    def _check(self, topology: Topology, collective: str) -> None:  # noqa: B027 (a hook; no checks by default)
        """Model-specific validation of the topology (raise `InputError`)."""

    def replay_steps(self, topology: Topology, collective: str, chunks: int) -> float:
        """Work steps this model spends costing phases, beyond the simulation (`dse.core.limits`); none here."""
        return 0.0

    # ----- chunking ---------------------------------------------------------------------
    def chunking(self, collective: str, size: int, chunks: int, topology: Topology, *, baseline: bool) -> ChunkPlan:
        """How `size` bytes per NPU are cut into chunks (`baseline`: the ascending scheduler runs)."""
        return self._chunk_sizes(collective, size, chunks, topology, baseline)

    def _chunk_sizes(self, collective: str, size: int, chunks: int, topology: Topology, baseline: bool) -> ChunkPlan:
        c = size / chunks
        sizes = (c,) * chunks
        return ChunkPlan(sizes, sizes)

    # ----- phases -----------------------------------------------------------------------
    def start_bytes(self, collective: str, chunk: float, topology: Topology) -> float:
        """Bytes per NPU a chunk holds when its first phase starts."""
        if collective == ALL_GATHER and not self.rules.ag_input_shard:
            return chunk / topology.npus
        return chunk

    def steps(
        self, collective: str, order: tuple[int, ...], topology: Topology, *, baseline: bool
    ) -> list[tuple[int, str]]:
        """The (dim, kind) steps of one chunk with dimension order `order` (docs/model.md §5.2)."""
        if collective == ALL_REDUCE:
            if baseline and self.rules.baseline_ar_phase:
                inner = order[:-1]
                return [(d, RS) for d in inner] + [(order[-1], AR)] + [(d, AG) for d in inner[::-1]]
            return [(d, RS) for d in order] + [(d, AG) for d in order[::-1]]
        if collective == ALL_GATHER:
            return [(d, AG) for d in order]
        if collective == ALL_TO_ALL:
            return [(d, A2A) for d in order]
        return [(d, RS) for d in order]

    def phases(
        self,
        topology: Topology,
        collective: str,
        order: tuple[int, ...],
        chunk: float,
        *,
        latency_mode: str,
        baseline: bool = False,
        memo: dict | None = None,
    ) -> tuple[Phase, ...]:
        """The phases one chunk of `chunk` bytes runs with dimension order `order`.

        `memo`, a dict the caller keeps for one topology and latency mode, caches phases by
        (dim, kind, bytes): chunks with different orders share most of them.
        """
        if memo is None:
            memo = {}
        c = self.start_bytes(collective, chunk, topology)
        out = []
        get = memo.get
        for d, kind in self.steps(collective, order, topology, baseline=baseline):
            hit = get((d, kind, c))
            if hit is None:
                hit = memo[(d, kind, c)] = self._make_phase(topology.dims[d], d, kind, c, latency_mode)
            out.append(hit[0])
            c = hit[1]
        return tuple(out)

    def _make_phase(self, dim: Dim, d: int, kind: str, c: float, latency_mode: str) -> tuple[Phase, float]:
        """One phase of `kind` on dim `d` with `c` bytes in, and the bytes per NPU after it."""
        p = dim.npus
        if kind == RS:
            c_out = self._shrink(c, p)
            sent = c * (p - 1) / p
        elif kind == AG:
            c_out = c * p
            sent = c * (p - 1)
        elif kind == AR:
            c_out = c
            sent = 2 * c * (p - 1) / p
        else:
            c_out = c
            sent = c * (p - 1) / p
        busy, delay = self._phase_cost(dim, kind, c, latency_mode)
        return Phase(d, kind, busy, delay, max(c, c_out), sent, kind == AR), c_out

    def _shrink(self, c: float, p: int) -> float:
        """Bytes per NPU after a reduce-scatter over `p` NPUs."""
        return c / p

    @abstractmethod
    def _phase_cost(self, dim: Dim, kind: str, c: float, latency_mode: str) -> tuple[float, float]:
        """(busy, delay) ns of one phase of `kind` on `dim` with `c` input bytes per NPU."""

    @abstractmethod
    def bandwidth_time(self, dim: Dim, kind: str, c: float) -> float:
        """The bandwidth-only ns of a phase: what a load tracker charges."""

    def lead_after(self, dim: Dim, collective: str, kind: str, index: int) -> int:
        """The index, in `dim`, of the first NPU to finish a phase of `kind` that the NPU at `index`
        started first (all NPUs start and end a phase at the same ns; a simulator handles them in
        some order). Only ``themis_across = "astra-sim-2"`` asks; by default the order is kept."""
        return index

    def greedy_bandwidth(self, dim: Dim) -> float:
        """The bandwidth an ASTRA-sim-style OfflineGreedy tracker normalises by (GB/s)."""
        return dim.bandwidth

    @abstractmethod
    def bytes_per_ns(self, dim: Dim, collective: str | None = None) -> float:
        """The dimension's bandwidth in this model's units, bytes per ns."""


def is_power_of_two(n: int) -> bool:
    """Whether `n` is 1, 2, 4, 8, ..."""
    return n >= 1 and (n & (n - 1)) == 0


def log2_int(n: int) -> int:
    """The base-2 logarithm of `n`, rounded down (exact for a power of two)."""
    return int(math.log2(n))
