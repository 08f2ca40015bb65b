"""dse's own lower bounds on a collective's time (docs/model.md §7), each a relaxation of scheduling it.

`dse.bounds.api.lower_bounds` is the public entry; `bounds_for` computes these on a validated
collective. Four bounds, each valid (no schedule beats it) and each at least the one before:

- ``ideal``: the bytes one NPU must send over Σ_d B_d: 100 % bandwidth utilisation (divided by
  the active chunks where a model runs them each at full bandwidth, congestion-unaware: ASTRA-sim's).
- ``lp`` (fluid): fractions of the chunks per dimension order, minimise the busiest dimension's
  load. Loads count exactly what the simulator counts as busy (the bandwidth term, plus the latency
  where the latency mode serialises it).
- ``ilp``: the same with whole chunks per order (PuLP; HiGHS in process, CBC as fallback), solved as
  an integer flow over dimension sets (`dse.bounds.flow`) above a whole-step floor
  (`dse.bounds.grid`). From four dimensions up, `dse.bounds.floor` first looks for a schedule that
  meets the floor (then it is optimal and no MIP runs) or proves the floor unreachable. On a time
  limit it is the proven floor or the solver's proven dual bound, whichever is higher, never the
  incumbent.
- ``pipeline``: the ILP tightened by what every schedule must also pay (`dse.bounds.flow.solve_counts`):
  a dimension cannot work before the first chunk can reach it (fill) nor after the last chunk that
  leaves it can finish (drain), and every order used must run end to end at least once. Its
  relaxation with the least fill and drain of any type is bounded first (fluid LP, then the floor
  search with the fill), and the binary MIP runs only if that finds no schedule at the bound, and
  only up to `PIPELINE_MIP_TYPES` distinct chunk types (five dimensions; counted first): beyond,
  the pipeline bound is the relaxation's, and a note says so.

gap = T_schedule / T_bound − 1, against ``bound_ns`` (the pipeline bound, the tightest).

Chunk types (`dse.schedulers.order_mix`): every dimension order (for all-to-all only the ascending
one: order does not matter there), per chunk size the cost model produces; for models whose
baseline runs a single AR phase on the last dimension (ASTRA-sim), that composition is one more
type, so the bounds cover it too.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from dse.bounds.floor import floor_search
from dse.bounds.flow import Solution, distinct_types, flow_edges, fluid_highs, highs_available, solve_counts, solve_flow
from dse.bounds.grid import Grid
from dse.core.collectives import ALL_TO_ALL, nominal_bytes_sent
from dse.core.errors import InputError
from dse.core.limits import EXACT_ORDER_TYPES, LP_ORDER_TYPES
from dse.schedulers.order_mix import ChunkType, count_text, types_for_plan
from dse.sim.spec import CollectiveSpec

#: distinct chunk types (orders of distinct costs x chunk sizes) up to which the pipeline's binary
#: MIP is solved: five dimensions with two chunk sizes. Beyond it HiGHS's root alone does not close
#: in useful time, a node limit no help: the pipeline bound is then its relaxation, and a note says so
PIPELINE_MIP_TYPES = 240
RELAXED = "relaxed"  # the pipeline MIP's status when it is not solved (above)


@dataclass(frozen=True)
class CollectiveRecord:
    """What a record of one collective's analysis starts with (`Bounds`, `OptimalSchedule`)."""

    topology: str
    collective: str
    size_bytes: int
    chunks: int
    cost_model: str
    latency_mode: str

    @staticmethod
    def fields_of(spec: CollectiveSpec) -> dict[str, Any]:
        """These fields of a validated collective."""
        return {
            "topology": spec.topology.label(),
            "collective": spec.collective,
            "size_bytes": spec.size,
            "chunks": spec.chunks,
            "cost_model": spec.cost_model.name,
            "latency_mode": spec.latency_mode,
        }


@dataclass(frozen=True)
class Bounds(CollectiveRecord):
    """Lower bounds on one collective's time (ns), the optimal order mix and how it was solved."""

    active_chunks: int
    ideal_ns: float
    lp_ns: float
    ilp_ns: float
    pipeline_ns: float
    mix: dict[str, int]
    solver: str
    status: str
    solve_time_s: float
    order_matters: bool
    notes: tuple[str, ...] = field(default=())
    #: the exact problem's proven lower bound (`dse.bounds.optimal`; 0: not solved) and its status:
    #: ``optimal`` (then it is the optimum itself) or ``feasible`` (a bound, the optimum above it)
    exact_ns: float = 0.0
    exact_status: str = ""

    @property
    def bound_ns(self) -> float:
        """The tightest valid bound: what gaps are measured against."""
        return max(self.pipeline_ns, self.exact_ns)

    def gap(self, time_ns: float) -> float:
        """How far a schedule of `time_ns` is above the bound (0.05 = 5 %)."""
        return time_ns / self.bound_ns - 1.0

    def to_dict(self) -> dict[str, Any]:
        """The bounds as JSON-ready fields, with `bound_ns` and the notes as a list."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["bound_ns"] = self.bound_ns
        d["notes"] = list(self.notes)
        return d


def chunk_types(spec: CollectiveSpec) -> list[ChunkType]:
    """Every chunk type of a collective (see the module docstring)."""
    plan = spec.cost_model.chunking(spec.collective, spec.size, spec.chunks, spec.topology, baseline=False)
    return types_for_plan(spec.cost_model, spec.topology, spec.collective, plan, spec.latency_mode)


def count_types(spec: CollectiveSpec) -> int:
    """How many chunk types (orders x chunk sizes) the LP and ILP would enumerate."""
    orders = 1 if spec.collective == ALL_TO_ALL else math.factorial(spec.topology.ndims)
    if orders > LP_ORDER_TYPES:
        return orders
    plan = spec.cost_model.chunking(spec.collective, spec.size, spec.chunks, spec.topology, baseline=False)
    return orders * len(set(plan.sizes))


def refuse_closed_form(spec: CollectiveSpec) -> None:
    """Bounds are on chunk schedules: a closed-form cost model (`nccl`) has none to bound, and its
    NVLS reduces inside the switches, beyond what the bounds let endpoints do: one `InputError`."""
    if spec.cost_model.closed_form:
        raise InputError(
            "cost_model",
            f"{spec.cost_model.label} is closed form: dse's bounds are on chunk schedules, and NVLS reduces in the "
            "switches, beyond them",
            "paper, astra-sim or astra-sim-1 for bounds, gaps and optimal schedules",
        )


def fluid_bound_ns(spec: CollectiveSpec, *, time_limit_s: float = 5.0) -> float:
    """The fluid LP's bound with one slot, or the ideal where that is higher; beyond
    `LP_ORDER_TYPES` chunk types (counted first, `count_types`) the ideal alone, as `bounds_for`
    falls back. What a study records per trial (`dse.explore.study.trials.fluid_bound`)."""
    refuse_closed_form(spec)
    ideal = ideal_ns(spec)
    if count_types(spec) > LP_ORDER_TYPES:
        return ideal
    return max(ideal, lp_bound(chunk_types(spec), 1, solver="highs", time_limit_s=time_limit_s))


def ideal_ns(spec: CollectiveSpec) -> float:
    """The bytes one NPU must send over the sum of its bandwidths (100 % utilisation)."""
    model, rules = spec.cost_model, spec.cost_model.rules
    need = nominal_bytes_sent(spec.collective, spec.size, spec.topology.shape, ag_input_shard=rules.ag_input_shard)
    return need / sum(model.bytes_per_ns(d, spec.collective) for d in spec.topology.dims)


def bounds_for(
    spec: CollectiveSpec,
    *,
    time_limit_s: float = 10.0,
    solver: str = "highs",
    pipeline: bool = True,
    node_limit: int | None = None,
) -> Bounds:
    """`lower_bounds` on an already validated `CollectiveSpec`."""
    t0 = time.perf_counter()
    ntypes = count_types(spec)
    if ntypes > EXACT_ORDER_TYPES:
        return _cheaper_bounds(spec, ntypes, t0)
    types = chunk_types(spec)
    slots = spec.active_chunks if not spec.cost_model.rules.shares_bandwidth else 1
    ideal = ideal_ns(spec) / slots  # a dimension that runs `slots` phases at full speed at once
    notes: list[str] = []
    solver_used = solver
    if solver == "highs" and not highs_available():
        solver_used = "cbc"
        notes.append("HiGHS is not installed: solved with CBC")
    bw = [spec.cost_model.bytes_per_ns(d, spec.collective) for d in spec.topology.dims]
    lp, floor, res = ilp_bound(
        types, slots, bw, start=ideal, solver=solver_used, time_limit_s=time_limit_s, node_limit=node_limit
    )
    # a schedule found at the floor has its objective within 1e-9 of the proven floor: report the floor
    ilp = floor if res.searched else max(floor, res.bound)
    if res.searched:
        notes.append("a schedule meets the whole-step floor: the ILP is solved without branch and bound")
    elif floor > lp * (1 + 1e-9):
        notes.append(f"whole grid steps put the ILP at or above {floor / 1e6:.4f} ms before the solver ran")
    status = res.status
    if res.status != "optimal":
        notes.append(f"ILP stopped ({res.status}): its bound is the solver's proven dual bound")
    tight = ilp
    if pipeline:
        pres, tight = _pipeline_bound(types, slots, bw, ilp, solver_used, time_limit_s, node_limit)
        if pres.status == RELAXED:
            notes.append(
                f"more than {PIPELINE_MIP_TYPES:,} distinct chunk types: the pipeline MIP is not solved; "
                "its bound is the relaxation's (fluid LP with fill and drain, the whole-step floor), valid but weaker"
            )
        elif pres.status != "optimal":
            notes.append(f"pipeline ILP stopped ({pres.status}): its bound is the solver's proven dual bound")
            status = pres.status if status == "optimal" else status
    if spec.collective == ALL_TO_ALL:
        notes.append("all-to-all runs every chunk in ascending order: the order does not matter")
    return _bounds(spec, t0, (ideal, lp, ilp, tight), res.mix, solver_used, status, notes)


def _pipeline_bound(
    types: list[ChunkType],
    slots: int,
    bytes_per_ns: list[float],
    ilp: float,
    solver: str,
    time_limit_s: float,
    node_limit: int | None,
) -> tuple[Solution, float]:
    """The pipeline bound above the ILP's `ilp`: (its solution, the bound).

    Every schedule's fill and drain on d are at least the least head and tail of any type: the fluid
    LP with those added is a lower bound of its own, handed to the solver. From four dimensions up,
    as for the ILP, a schedule at the (fill-shifted) floor settles it. The walk must start from a
    bound on its own relaxation (loads plus fills), the fluid one: the ILP and the shortest path
    bound the pipeline, not that relaxation."""
    nd = len(types[0].load)
    fill = [min(t.head[d] for t in types) + min(t.tail[d] for t in types) for d in range(nd)]
    fluid = fluid_highs(types, slots, fill) if solver == "highs" else None
    lower = max(ilp, fluid or 0.0, min(t.path for t in types))
    grid, edges = Grid.from_types(types, slots, bytes_per_ns), flow_edges(types)
    if grid is not None and edges is not None and nd >= 4 and fluid is not None:
        proven, found = floor_search(types, edges, grid, slots, fluid, fill=fill, at_least=lower)
        lower = max(lower, proven)
        if found is not None:
            return found, lower
    distinct = distinct_types(types, pipeline=True)
    if len(distinct) > PIPELINE_MIP_TYPES:  # counted before the binary model is built
        return Solution(lower, RELAXED, {}, ()), lower
    pres = solve_counts(
        distinct,
        slots,
        relax=False,
        solver=solver,
        time_limit_s=time_limit_s,
        pipeline=True,
        node_limit=node_limit,
        lower=lower,
    )
    return pres, max(lower, pres.bound)


def _cheaper_bounds(spec: CollectiveSpec, ntypes: int, t0: float) -> Bounds:
    """Too many orders for the exact bounds (`dse.core.limits`): the fluid LP as all three, or beyond
    `LP_ORDER_TYPES` the ideal. Both are valid lower bounds, only weaker; the notes say which."""
    slots = spec.active_chunks if not spec.cost_model.rules.shares_bandwidth else 1
    ideal = ideal_ns(spec) / slots
    nd = spec.topology.ndims
    what = f"{count_text(ntypes)} chunk types ({nd} dimensions: {count_text(math.factorial(nd))} orders)"
    if ntypes > LP_ORDER_TYPES:
        bound, status, solver = ideal, "ideal_only", "none"
        note = f"{what}: more than {LP_ORDER_TYPES:,}, so no LP or ILP was solved; the bound is the ideal"
    else:
        types = chunk_types(spec)
        fluid = fluid_highs(types, slots) if highs_available() else None
        if fluid is None:
            fluid = lp_bound(types, slots, solver="cbc", time_limit_s=60.0)
        bound, status, solver = max(ideal, fluid), "lp_only", "highs" if highs_available() else "cbc"
        note = (
            f"{what}: more than the {EXACT_ORDER_TYPES:,} the ILP and pipeline bounds are solved for; "
            "both are reported as the fluid LP, valid but weaker"
        )
    return _bounds(spec, t0, (ideal, bound, bound, bound), {}, solver, status, [note])


def _bounds(
    spec: CollectiveSpec,
    t0: float,
    values: tuple[float, float, float, float],
    mix: dict[str, int],
    solver: str,
    status: str,
    notes: list[str],
) -> Bounds:
    """The `Bounds` of `spec` from its (ideal, LP, ILP, pipeline) values, timed from `t0`."""
    ideal, lp, ilp, pipeline = values
    return Bounds(
        **CollectiveRecord.fields_of(spec),
        active_chunks=spec.active_chunks,
        ideal_ns=ideal,
        lp_ns=lp,
        ilp_ns=ilp,
        pipeline_ns=pipeline,
        mix=mix,
        solver=solver,
        status=status,
        solve_time_s=time.perf_counter() - t0,
        order_matters=spec.collective != ALL_TO_ALL,
        notes=tuple(notes),
    )


def lp_bound(types: list[ChunkType], slots: int, *, solver: str = "highs", time_limit_s: float = 10.0) -> float:
    """The fluid LP's bound (ns) over `types` as PuLP solves it (`solver`: ``highs`` or ``cbc``);
    `slots`: the phases a dimension runs at once at full speed."""
    return solve_counts(types, slots, relax=True, solver=solver, time_limit_s=time_limit_s).bound


def ilp_bound(
    types: list[ChunkType],
    slots: int,
    bytes_per_ns: list[float],
    *,
    start: float = 0.0,
    solver: str = "highs",
    time_limit_s: float = 10.0,
    node_limit: int | None = None,
) -> tuple[float, float, Solution]:
    """The load-only ILP as `lower_bounds` solves it: the fluid LP (at least `start`), the whole-step
    floor above it, a search for a schedule that meets the floor (from four dimensions up, see
    `floor_search`), then, if that finds none, the MIP given the floor. Returns (LP bound, floor,
    ILP solution); the floor is a proven lower bound (arithmetic, or an exhaustive search)."""
    fluid = fluid_highs(types, slots) if solver == "highs" and highs_available() else None
    if fluid is None:
        fluid = lp_bound(types, slots, solver=solver, time_limit_s=time_limit_s)
    lp = max(start, fluid)
    grid = Grid.from_types(types, slots, bytes_per_ns)
    edges = flow_edges(types)
    floor = proven = grid.floor(lp) if grid is not None else lp
    # at two or three dimensions the MIP has at most 12 edge variables and HiGHS solves it in a few
    # milliseconds, faster than the search; from four up the search usually saves it all
    if grid is not None and edges is not None and len(types[0].order) >= 4:
        proven, found = floor_search(types, edges, grid, slots, lp)
        if found is not None:
            return lp, proven, found
    if edges is not None:
        res = solve_flow(
            types, edges, slots, solver=solver, time_limit_s=time_limit_s, node_limit=node_limit, lower=floor
        )
    else:
        res = solve_counts(
            distinct_types(types, pipeline=False),
            slots,
            relax=False,
            solver=solver,
            time_limit_s=time_limit_s,
            node_limit=node_limit,
            lower=floor,
        )
    # the solver is given the arithmetic floor, not the searched one: a higher lower bound changes
    # HiGHS's path, not always for the better; the caller takes the larger
    return lp, proven, res
