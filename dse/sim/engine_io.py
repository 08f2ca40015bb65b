"""What dse's one event engine takes and returns (`dse.sim.engine` runs it, in C or in Python).

The engine runs a graph of nodes on one representative NPU: `compute` and `replay` nodes hold a
resource (GPU, CPU, or the NPU's communication) for a duration, `comm` nodes are collectives whose
chunks run their phases through the network's per-dimension queues, `mark` nodes join. A single
collective is the one-node graph (`EngineGraph` None): its chunks are issued at t = 0.

`NetRules` say how a dimension serves its queue: the policy (FIFO, dse's smallest-first by
priority, ASTRA-sim's smallest-first insertion rule, or a fixed service order: `FIXED_SEQ` with
`service_order`), how many phases it serves at once (`slots`),
whether those share its bandwidth (`shared`, processor sharing) or each run at full speed, and the
same-tick rules of ASTRA-sim 1.0 (`dim_tiebreak`, `issue_priorities`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from dse.costs.base import Phase

#: queue policies
FIFO, SCF_PRIORITY, SCF_ASTRA, FIXED_SEQ = 0, 1, 2, 3
#: node kinds, as the engine numbers them
N_COMPUTE, N_COMM, N_MARK, N_REPLAY = 0, 1, 2, 3
#: the NPU's resources (a mark holds none: -1)
GPU, CPU, NET = 0, 1, 2


def policy_code(queue: str, scf_rule: str) -> int:
    """The engine's policy number of a queue name (`fifo`, `scf`, `fixed`) under a model's smallest-first rule."""
    if queue == "fifo":
        return FIFO
    if queue == "fixed":
        return FIXED_SEQ
    return SCF_ASTRA if scf_rule == "astra-sim" else SCF_PRIORITY


@dataclass(frozen=True)
class NetRules:
    """How the dimensions serve their queues (module docstring)."""

    ndims: int
    policy: int = FIFO
    slots: int = 1
    shared: bool = False
    dim_tiebreak: bool = False
    issue_priorities: bool = False
    #: carry, for every event, the first NPU to handle it (`Phase.lead`, ASTRA-sim 2.x's Themis rule)
    track_lead: bool = False
    #: no phase has tie keys (`Phase.tie`): the C engine then keeps smaller events (same order)
    tieless: bool = False
    #: `FIXED_SEQ` only: per dimension, the chunks (engine chunk ids, in issue order) whose phases it
    #: serves, in that order; a chunk's k-th entry in a dim's sequence is its k-th phase there
    service_order: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        if self.ndims < 1:
            raise ValueError(f"ndims must be >= 1, not {self.ndims}")
        if self.policy not in (FIFO, SCF_PRIORITY, SCF_ASTRA, FIXED_SEQ):
            raise ValueError(f"unknown queue policy {self.policy}")
        if self.slots < 1:
            raise ValueError(f"slots must be >= 1, not {self.slots}")
        seq = self.service_order
        if (self.policy == FIXED_SEQ) != (seq is not None):
            raise ValueError("a service order goes with the FIXED_SEQ policy, and only with it")
        if seq is not None:
            if len(seq) != self.ndims or not all(type(c) is int and 0 <= c < 2**31 for s in seq for c in s):
                raise ValueError("a service order needs one sequence of chunk ids >= 0 per dimension")


class ServiceStall(RuntimeError):
    """A fixed service order (`NetRules.service_order`) that the run could not follow to its end:
    chunk `chunk` waits at dimension `dim` whose sequence has no entry left (`entry` its length); or
    `dim` waits at entry `entry` of its sequence for chunk `chunk`, whose phase there never comes (a
    deadlock, or an entry too many). The engine names the first chunk of the first case, else the
    first dimension of the second."""

    def __init__(self, dim: int, entry: int, chunk: int) -> None:
        self.dim, self.entry, self.chunk = dim, entry, chunk
        super().__init__(dim, entry, chunk)

    def __str__(self) -> str:
        return f"service order stalled at dim {self.dim}, entry {self.entry}, chunk {self.chunk}"


@dataclass(frozen=True)
class EngineGraph:
    """A workload graph in the engine's terms: per node its kind (`N_*`), resource (`GPU`, `CPU`,
    `NET`, -1), duration (compute or replay ns), delay (a collective counts as done this long
    after its end); `succ[i]`: the (successor, lag ns) pairs of node i; `end`: the node whose end is
    the run's time. The resource rules come from `dse.training.workload_graph.ResourceRules`. `ideal`: per
    node, the network ns of a collective run ideally (no queues), or None to queue its chunks."""

    kinds: tuple[int, ...]
    resources: tuple[int, ...]
    durations: tuple[float, ...]
    delays: tuple[float, ...]
    succ: tuple[tuple[tuple[int, float], ...], ...]
    end: int
    comm_exclusive: bool = False
    by_id: bool = False
    min_ns: float = 0.0
    end_before_release: bool = False
    ideal: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        n = len(self.kinds)
        if not (len(self.resources) == len(self.durations) == len(self.delays) == len(self.succ) == n):
            raise ValueError("every node needs a kind, resource, duration, delay and successor list")
        if not 0 <= self.end < n:
            raise ValueError(f"end node {self.end} is not a node (0..{n - 1})")
        if self.ideal is not None and len(self.ideal) != n:
            raise ValueError("ideal needs one value per node")


class IssueHooks(Protocol):
    """What the engine asks its caller while a graph runs."""

    def issue(self, node: int, t: float, lead: int) -> tuple[Sequence[tuple[Phase, ...]], int]:
        """The chunk phase lists of collective `node` issued at `t` (first by NPU `lead`) and their
        queue priority."""

    def resumed(self) -> None:
        """A node was resumed by a collective (its last dependency, strictly after every other)."""


class TimelineEntry(NamedTuple):
    """One phase as it ran: `start`..`end` is the whole phase, busy its server time."""

    chunk: int
    dim: int
    kind: str
    start: float
    end: float
    busy: float


class LogEntry(NamedTuple):
    """One phase as it ran: chunk, its step index, start, and end (when the chunk moved on)."""

    chunk: int
    step: int
    start: float
    end: float


@dataclass(frozen=True)
class EngineOutput:
    """A run's numbers. `finish_ns`: the last chunk's end; per dimension the busy ns and bytes of
    the phases started on it; per chunk its end; per node its start and end (NaN: never ran);
    GPU and CPU compute, the time at least one collective was in flight, the bytes one NPU sent;
    `log`: every phase as it ran, when asked for; `loop`: the event loop that ran (the C engine's:
    ``generic``, ``compact_dse``, ``tied_astra``, ``flow_dse_4d``, ... (`dse.sim._engine.LOOPS`), or
    ``python``, the reference). Every loop gives the same numbers; `==` compares the numbers."""

    finish_ns: float
    dim_busy: tuple[float, ...]
    dim_bytes: tuple[float, ...]
    chunk_end: tuple[float, ...]
    node_start: tuple[float, ...]
    node_end: tuple[float, ...]
    compute_ns: float
    cpu_ns: float
    comm_ns: float
    bytes_sent: float
    log: tuple[LogEntry, ...] | None
    loop: str = field(default="python", compare=False)  # not a number: == compares the numbers only
