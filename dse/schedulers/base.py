"""The scheduler interface: given a topology, a collective and its chunks, one order per chunk.

An order is a permutation of the dimension indices: the order in which a chunk's reduce-scatter
visits the dimensions (an all-reduce's all-gather then runs in the reverse order); for a
standalone all-gather it is the all-gather's own visiting order (docs/model.md §5.2). All-to-all always
runs in ascending order; no scheduler reorders it.

`Scheduler.orders` validates the hook's answer once; subclasses implement `_orders` only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from dse.core.collectives import ALL_GATHER, ALL_TO_ALL
from dse.core.topology import Topology
from dse.costs.base import ChunkPlan, CostModel, Phase

Order = tuple[int, ...]
#: a simulator for schedulers that time candidate orders: the time (ns) of chunks with these phase
#: lists, issued in this order and run as the problem says (queue, active chunks, the model's rules)
Simulate = Callable[["ScheduleProblem", Sequence[Sequence[Phase]]], float]


@dataclass(frozen=True)
class ScheduleProblem:
    """What a scheduler may look at: the topology, the collective, the chunks, the cost model, and
    how the chunks will run (queue policy, latency mode, active chunks, the simulator), for
    schedulers that simulate candidate orders."""

    topology: Topology
    collective: str
    chunks: ChunkPlan
    cost_model: CostModel
    seed: int = 0
    queue: str = "scf"
    latency_mode: str | None = None
    active_chunks: int = 1
    #: the collective's bytes per NPU and chunk count as requested (for schedulers that restate the
    #: whole collective, such as `optimal`; 0 where the caller does not say)
    size_bytes: int = 0
    requested_chunks: int = 0
    #: the simulator, supplied by the layer that runs the schedule (`dse.sim.simulate.schedule_time`)
    simulate: Simulate | None = field(default=None, compare=False, repr=False)

    def simulator(self) -> Simulate:
        """The simulator to time candidate orders with (a scheduler that needs one calls this)."""
        if self.simulate is None:
            raise RuntimeError(
                "this scheduler times candidate orders: build the ScheduleProblem with "
                "simulate=dse.sim.simulate.schedule_time (or a simulator of your own)"
            )
        return self.simulate

    @property
    def ndims(self) -> int:
        """The number of dimensions of the topology."""
        return self.topology.ndims

    @property
    def nchunks(self) -> int:
        """The number of chunks to schedule."""
        return len(self.chunks.sizes)


def ascending(ndims: int) -> Order:
    """The order 0, 1, ..., ndims - 1 (innermost dimension first)."""
    return tuple(range(ndims))


def baseline_order(collective: str, ndims: int) -> Order:
    """The hierarchical order: ascending, except a standalone all-gather, which descends."""
    if collective == ALL_GATHER:
        return tuple(range(ndims - 1, -1, -1))
    return ascending(ndims)


class ChunkSchedule(NamedTuple):
    """What a scheduler that also sequences the dimensions returns (`Scheduler.schedule`): one
    order per chunk, which chunks run ASTRA-sim's AR composition instead, and per dimension the
    chunk ids it serves in order (run with the `fixed` queue)."""

    orders: list[Order]
    ar_phase: tuple[bool, ...]
    service_order: tuple[tuple[int, ...], ...]


class Scheduler(ABC):
    """Base class of the inter-dimension schedulers (strategies are passed as instances)."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: the ascending hierarchical baseline (cost models may compose its phases differently)
    is_baseline: ClassVar[bool] = False
    #: the orders depend only on the shape (collective, chunk count, dimension sizes, the seed and
    #: the scheduler's own settings, which its repr shows), not on sizes, bandwidths or latencies,
    #: and those of n chunks are the first n of those of more, so `dse.sim.compiled` computes them
    #: once for many points
    shape_only: ClassVar[bool] = False
    #: the scheduler also fixes each dimension's service sequence (`schedule`): its runs use the
    #: `fixed` queue with that sequence, whatever queue was asked for
    serves_own_order: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def simulations(self) -> int:
        """Simulations this scheduler runs to choose its orders (the work estimate counts them)."""
        return 0

    def orders(self, problem: ScheduleProblem) -> list[Order]:
        """One dimension order per chunk, validated."""
        n, ndims = problem.nchunks, problem.ndims
        if problem.collective == ALL_TO_ALL:
            return [ascending(ndims)] * n
        result = [o if type(o) is tuple else tuple(int(d) for d in o) for o in self._orders(problem)]
        if len(result) != n:
            raise RuntimeError(f"{self!r} returned {len(result)} orders for {n} chunks")
        want = set(range(ndims))
        for o in set(result):
            if len(o) != ndims or set(o) != want or not all(type(d) is int for d in o):
                raise RuntimeError(f"{self!r} returned {o}, not a permutation of {sorted(want)}")
        return result

    def schedule(self, problem: ScheduleProblem) -> ChunkSchedule:
        """Orders, AR compositions and service sequences (schedulers with `serves_own_order`)."""
        raise NotImplementedError(f"{self!r} does not sequence the dimensions (serves_own_order is False)")

    @abstractmethod
    def _orders(self, problem: ScheduleProblem) -> list[Order]:
        """One order per chunk, in issue order."""
