"""The validated request every layer takes: `CollectiveSpec` (one collective on one topology under
one cost model) and `RunSpec` (that collective, and how its chunks are scheduled and queued).

A collective's keywords are declared once, in `SpecArgs`; `evaluate`, `compare`, `lower_bounds`
and `evaluate_many` take them as ``**spec`` and parse them here, so a bad value gets the same
one-line message wherever it enters. Parsing also refuses a collective whose simulation would
exceed the work limit (`dse.core.limits`), before anything is allocated for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Required, TypedDict, Unpack

from dse.core.collectives import ALL_REDUCE, parse_collective
from dse.core.errors import InputError
from dse.core.limits import check_work
from dse.core.topology import Topology, parse_topology
from dse.core.units import parse_int, parse_size, size_family
from dse.costs import CostModel, get_cost_model
from dse.schedulers import Scheduler, get_scheduler, parse_queue
from dse.sim.service_order import ServiceOrder, parse_service_order

#: ASTRA-sim's smallest-first rule scans a queue for its place: about chunks^2 x phases / this.
_SCAN_DIVISOR = 1e4


class SpecArgs(TypedDict, total=False):
    """A collective's keywords, as users give them (defaults: `SPEC_DEFAULTS`).

    `collective`: all_reduce, reduce_scatter, all_gather or all_to_all. `size`: bytes per NPU (an
    int or a string such as ``"1GiB"``). `chunks`: how many chunks it is split into.
    `cost_model`: a name (`paper`, `astra-sim`, `astra-sim-1`) or a `CostModel`. `latency_mode`:
    `overlapped` or `serialized`, None for the model's default. `active_chunks`: chunks in flight."""

    collective: str
    size: Required[int | float | str]
    chunks: int
    cost_model: str | CostModel
    latency_mode: str | None
    active_chunks: int


SPEC_DEFAULTS: dict[str, Any] = {
    "collective": "all_reduce",
    "chunks": 64,
    "cost_model": "paper",
    "latency_mode": None,
    "active_chunks": 1,
}
SPEC_KEYS: tuple[str, ...] = tuple(SpecArgs.__annotations__)


class RunArgs(SpecArgs, total=False):
    """`SpecArgs`, and how the chunks run (defaults: `RUN_DEFAULTS`): `scheduler` (a name or a
    `Scheduler`; `orders` feeds `fixed`), `queue` (`fifo`, `scf`, or `fixed` with
    `service_order`), `seed`.

    `service_order` (queue `fixed` only): per dimension, the chunk ids it serves, in order (a
    sequence per dimension, or ``"0,1,1,0|1,0,0,1"``; `dse.sim.service_order`). It goes with any
    scheduler that does not simulate to choose its orders (not `lp_guided`, which times its
    candidates under the queue): the orders are the scheduler's as always (`fixed` with `orders`
    states them; the others' are in `Result.orders`), and the sequences must fit them, which is
    checked once the phases are known (a wrong count, or a deadlock, is a one-line `InputError`)."""

    scheduler: str | Scheduler
    queue: str
    seed: int
    orders: object
    service_order: object


RUN_DEFAULTS: dict[str, Any] = {"scheduler": "themis", "queue": "scf", "seed": 0, "orders": None, "service_order": None}


@dataclass(frozen=True)
class CollectiveSpec:
    """A validated collective: topology, collective name, bytes per NPU, chunks, cost model, modes."""

    topology: Topology
    collective: str
    size: int
    chunks: int
    cost_model: CostModel
    latency_mode: str
    active_chunks: int

    @classmethod
    def parse(
        cls, topology: Topology | str | CollectiveSpec, *, work_check: bool = True, **args: Unpack[SpecArgs]
    ) -> CollectiveSpec:
        """Validate everything once and check the work limit (`work_check=False`: the caller will,
        with the queue and scheduler it knows, `check_work`). A `CollectiveSpec` is taken as it is."""
        if isinstance(topology, CollectiveSpec):
            if args:
                raise TypeError(f"keywords given with a CollectiveSpec: {', '.join(sorted(args))}")
            spec = topology
        else:
            spec = cls._parse(topology, {**SPEC_DEFAULTS, **_checked(args, SPEC_KEYS, "size")})
        if work_check:
            spec.check_work()
        return spec

    @classmethod
    def _parse(cls, topology: Topology | str, a: Mapping[str, Any]) -> CollectiveSpec:
        topo = parse_topology(topology)
        coll = parse_collective(a["collective"], rooted=True)
        nbytes = parse_size(a["size"])
        nchunks = parse_int(a["chunks"], "chunks", minimum=1)
        model = get_cost_model(a["cost_model"])
        if nchunks > nbytes and not model.closed_form:  # a closed-form model has no chunks
            raise InputError(
                "chunks", f"{nchunks} chunks of a {nbytes}-byte collective", f"at most one chunk per byte, <= {nbytes}"
            )
        active = parse_int(a["active_chunks"], "active_chunks", minimum=1, maximum=2**31 - 1)
        mode = model.check(topo, coll, a["latency_mode"], active)
        return cls(topo, coll, nbytes, nchunks, model, mode, active)

    def resized(self, size: int | float | str, chunks: object = None) -> CollectiveSpec:
        """This collective at another size (and chunk count, if given), validated as `parse` validates
        them (the rest was)."""
        nbytes = parse_size(size)
        nchunks = self.chunks if chunks is None else parse_int(chunks, "chunks", minimum=1)
        if nchunks > nbytes and not self.cost_model.closed_form:
            raise InputError(
                "chunks", f"{nchunks} chunks of a {nbytes}-byte collective", f"at most one chunk per byte, <= {nbytes}"
            )
        return CollectiveSpec(
            self.topology, self.collective, nbytes, nchunks, self.cost_model, self.latency_mode, self.active_chunks
        )

    def check_work(self, *, queue: str | None = None, extra_simulations: int = 0) -> None:
        """Refuse the run if its `simulation_steps` exceed the work limit.

        `extra_simulations`: event loops a scheduler runs to choose its orders (lp_guided); each costs
        about a quarter of a whole evaluation, the C loop without the per-chunk Python around it."""
        steps, what = simulation_steps(self.topology, self.collective, self.chunks, self.cost_model, queue)
        if extra_simulations:
            steps, what = steps * (1 + 0.25 * extra_simulations), f"{what}, and {extra_simulations} trial simulations"
        check_work(steps, what)


@dataclass(frozen=True)
class RunSpec:
    """One evaluation, validated: the collective, its scheduler, queue and seed, the unit family
    its size was given in (`Result.size_unit`), and the service order of queue `fixed`."""

    spec: CollectiveSpec
    sched: Scheduler
    queue: str
    seed: int
    size_unit: str
    service_order: ServiceOrder | None = None

    @classmethod
    def parse(cls, topology: Topology | str | CollectiveSpec, **args: Unpack[RunArgs]) -> RunSpec:
        """Validate a run's keywords (`RunArgs`) once; the caller checks the work limit (`check_work`)."""
        a = {**RUN_DEFAULTS, **_checked(args, SPEC_KEYS + tuple(RUN_DEFAULTS), None)}
        spec_args = {k: a[k] for k in SPEC_KEYS if k in a}
        spec = CollectiveSpec.parse(topology, work_check=False, **spec_args)
        sched = get_scheduler(a["scheduler"], orders=a["orders"])
        queue = parse_queue(a["queue"], fixed=True)
        seed = parse_int(a["seed"], "seed", minimum=0)
        unit = size_family(a["size"]) if "size" in a else "decimal"
        if sched.serves_own_order:  # its own sequences, run with the fixed queue (`Scheduler.schedule`)
            if a["service_order"] is not None:
                raise InputError(
                    "service_order",
                    f"given with the {sched.name} scheduler, which sequences the dimensions itself",
                    "a service order with another scheduler (fixed, themis, ...)",
                )
            return cls(spec, sched, "fixed", seed, unit, None)
        if queue == "fixed" and sched.simulations():
            raise InputError(
                "queue",
                f"fixed with the {sched.name} scheduler, which times its candidate orders under the queue",
                "fifo or scf with it; fixed with a scheduler that does not simulate, such as fixed",
            )
        service = parse_service_order(a["service_order"], spec.topology.ndims, queue)
        return cls(spec, sched, queue, seed, unit, service)

    def resized(self, size: int | float | str, chunks: object = None) -> RunSpec:
        """This run at another size and chunk count (`CollectiveSpec.resized`), its unit family that size's."""
        spec = self.spec.resized(size, chunks)
        return RunSpec(spec, self.sched, self.queue, self.seed, size_family(size), self.service_order)

    def check_work(self) -> None:
        """Refuse the run if it would exceed the work limit (its scheduler's trial runs included)."""
        self.spec.check_work(queue=self.queue, extra_simulations=self.sched.simulations())


def _checked(args: Mapping[str, Any], allowed: tuple[str, ...], required: str | None) -> Mapping[str, Any]:
    """`args` if every keyword is known (and `required` is there): Python's own TypeErrors otherwise."""
    unknown = [k for k in args if k not in allowed]
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
    if required is not None and required not in args:
        raise TypeError(f"missing keyword argument {required!r}")
    return args


def simulation_steps(
    topology: Topology, collective: str, chunks: int, model: CostModel, queue: str | None = None
) -> tuple[float, str]:
    """Estimated steps of one simulation, and where they come from (see `dse.core.limits`).

    Chunk-phases, plus the packets the cost model replays, plus (with ASTRA-sim's smallest-first
    rule, `queue` "scf") the queue scans that grow with the square of the chunks."""
    phases = 2 * topology.ndims if collective == ALL_REDUCE else topology.ndims
    steps = float(chunks) * phases
    what = [f"{chunks:,} chunks x {phases} phases"]
    if queue == "scf" and model.rules.scf_rule == "astra-sim":
        scan = float(chunks) ** 2 * phases / _SCAN_DIVISOR
        steps += scan
        if scan >= 0.1 * steps:
            what.append("the smallest-first queue scans of ASTRA-sim's rule")
    replay = model.replay_steps(topology, collective, chunks)
    if replay:
        steps += replay
        if replay >= 0.1 * steps:
            what.append(f"{model.name}'s packet replays")
    return steps, ", ".join(what)
