"""Lower bounds on a collective's time and the optimality gap (docs/model.md §7).

Four bounds, each valid (no schedule beats it) and each at least the one before:

- ``ideal``: the bytes one NPU must send over Σ_d B_d: 100 % bandwidth utilisation (divided by
  the active chunks where a model runs them each at full bandwidth, congestion-unaware: ASTRA-sim's).
- ``lp`` (fluid): fractions of the chunks per dimension order, minimise the busiest dimension's
  load. Loads count exactly what the simulator counts as busy (the bandwidth term, plus the latency
  where the latency mode serialises it).
- ``ilp``: the same with whole chunks per order (PuLP; HiGHS in process, CBC as fallback), solved as
  an integer flow over dimension sets above a whole-step floor (both explained further down). From
  four dimensions up, `_floor_search` first looks for a schedule that meets the floor (then it is
  optimal and no MIP runs) or proves the floor unreachable (`dse.bounds.floorfit`). On a time limit it is
  the proven floor or the solver's proven dual bound, whichever is higher, never the incumbent.
- ``pipeline``: the ILP tightened by what every schedule must also pay (see `_solve`): a dimension
  cannot work before the first chunk can reach it (fill) nor after the last chunk that leaves it
  can finish (drain), and every order used must run end to end at least once. Its relaxation with
  the least fill and drain of any type is bounded first (fluid LP, then `_floor_search` with the
  fill), and the binary MIP runs only if that finds no schedule at the bound.

gap = T_schedule / T_bound − 1, against ``bound_ns`` (the pipeline bound, the tightest).

Chunk types: every dimension order (for all-to-all only the ascending one: order does not matter
there), per chunk size the cost model produces; for models whose baseline runs a single AR phase on
the last dimension (ASTRA-sim), that composition is one more type, so the bounds cover it too.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dse.core.collectives import ALL_REDUCE, ALL_TO_ALL, nominal_bytes_sent
from dse.core.errors import InputError
from dse.core.limits import EXACT_ORDER_TYPES, LP_ORDER_TYPES
from dse.core.topology import Topology
from dse.costs import ChunkPlan, CostModel
from dse.sim.spec import CollectiveSpec

SOLVERS = ("highs", "cbc")


@dataclass(frozen=True)
class ChunkType:
    """One way a chunk can run: its order, whether it is ASTRA-sim's baseline composition, its size,
    how many chunks of that size exist, and what one such chunk costs."""

    order: tuple[int, ...]
    ar_phase: bool
    size: float
    count: int
    load: tuple[float, ...]  # busy ns per dimension
    head: tuple[float, ...]  # ns before the chunk can first reach each dimension
    tail: tuple[float, ...]  # ns the chunk still needs after its last transfer on each dimension
    path: float  # ns of the whole chunk, end to end

    @property
    def label(self) -> str:
        s = "".join(map(str, self.order)) if len(self.order) <= 10 else ",".join(map(str, self.order))
        return s + ("/AR" if self.ar_phase else "")


@dataclass(frozen=True)
class Bounds:
    """Lower bounds on one collective's time (ns), the optimal order mix and how it was solved."""

    topology: str
    collective: str
    size_bytes: int
    chunks: int
    cost_model: str
    latency_mode: str
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

    @property
    def bound_ns(self) -> float:
        """The tightest valid bound: what gaps are measured against."""
        return self.pipeline_ns

    def gap(self, time_ns: float) -> float:
        """How far a schedule of `time_ns` is above the bound (0.05 = 5 %)."""
        return time_ns / self.bound_ns - 1.0

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["bound_ns"] = self.bound_ns
        d["notes"] = list(self.notes)
        return d


def chunk_types(spec: CollectiveSpec) -> list[ChunkType]:
    """Every chunk type of a collective (see the module docstring)."""
    plan = spec.cost_model.chunking(spec.collective, spec.size, spec.chunks, spec.topology, baseline=False)
    return types_for_plan(spec.cost_model, spec.topology, spec.collective, plan, spec.latency_mode)


def types_for_plan(
    model: CostModel, topo: Topology, coll: str, plan: ChunkPlan, latency_mode: str, *, ar_phase: bool = True
) -> list[ChunkType]:
    """The chunk types of a chunk plan; `ar_phase=False` leaves out ASTRA-sim's baseline composition."""
    sizes = Counter(plan.sizes)
    nd = topo.ndims
    if coll == ALL_TO_ALL:
        orders: list[tuple[int, ...]] = [tuple(range(nd))]
    else:
        orders = list(itertools.permutations(range(nd)))
    variants = [(o, False) for o in orders]
    if coll == ALL_REDUCE and model.baseline_ar_phase and ar_phase:
        variants.append((tuple(range(nd)), True))
    memo: dict = {}
    out = []
    for size, count in sorted(sizes.items()):
        for order, ar in variants:
            phases = model.phases(topo, coll, order, size, latency_mode=latency_mode, baseline=ar, memo=memo)
            load = [0.0] * nd
            head = [math.inf] * nd
            tail = [0.0] * nd
            t = 0.0
            for ph in phases:
                load[ph.dim] += ph.busy
                if head[ph.dim] == math.inf:
                    head[ph.dim] = t
                t += ph.busy + ph.delay
            path = t
            for d in range(nd):
                last = max(i for i, ph in enumerate(phases) if ph.dim == d)
                tail[d] = phases[last].delay + sum(ph.busy + ph.delay for ph in phases[last + 1 :])
            out.append(ChunkType(order, ar, size, count, tuple(load), tuple(head), tuple(tail), path))
    return out


def distinct_types(types: list[ChunkType], *, pipeline: bool) -> list[ChunkType]:
    """One type per distinct cost: orders that cost every dimension the same (dimensions of equal
    size swapped, say) are interchangeable, and keeping one of each removes symmetric solutions the
    ILP solver would otherwise have to rule out one by one. The first order of each class names it."""
    seen: dict[tuple, ChunkType] = {}
    for t in types:
        key = (t.size, t.load) + ((t.head, t.tail, t.path) if pipeline else ())
        seen.setdefault(key, t)
    return list(seen.values())


def count_types(spec: CollectiveSpec) -> int:
    """How many chunk types (orders x chunk sizes) the LP and ILP would enumerate."""
    orders = 1 if spec.collective == ALL_TO_ALL else math.factorial(spec.topology.ndims)
    if orders > LP_ORDER_TYPES:
        return orders
    plan = spec.cost_model.chunking(spec.collective, spec.size, spec.chunks, spec.topology, baseline=False)
    return orders * len(set(plan.sizes))


def _cheaper_bounds(spec: CollectiveSpec, ntypes: int, t0: float) -> Bounds:
    """Too many orders for the exact bounds (`dse.core.limits`): the fluid LP as all three, or beyond
    `LP_ORDER_TYPES` the ideal. Both are valid lower bounds, only weaker; the notes say which."""
    slots = spec.active_chunks if not spec.cost_model.shares_bandwidth else 1
    ideal = ideal_ns(spec) / slots
    nd = spec.topology.ndims
    what = f"{ntypes:,} chunk types ({nd} dimensions: {math.factorial(nd):,} orders)"
    if ntypes > LP_ORDER_TYPES:
        bound, status, solver = ideal, "ideal_only", "none"
        note = f"{what}: more than {LP_ORDER_TYPES:,}, so no LP or ILP was solved; the bound is the ideal"
    else:
        types = chunk_types(spec)
        fluid = _fluid_highs(types, slots) if _highs_available() else None
        if fluid is None:
            fluid = _solve(types, slots, relax=True, solver="cbc", time_limit_s=60.0).bound
        bound, status, solver = max(ideal, fluid), "lp_only", "highs" if _highs_available() else "cbc"
        note = (
            f"{what}: more than the {EXACT_ORDER_TYPES:,} the ILP and pipeline bounds are solved for; "
            "both are reported as the fluid LP, valid but weaker"
        )
    return Bounds(
        topology=spec.topology.label(),
        collective=spec.collective,
        size_bytes=spec.size,
        chunks=spec.chunks,
        cost_model=spec.cost_model.name,
        latency_mode=spec.latency_mode,
        active_chunks=spec.active_chunks,
        ideal_ns=ideal,
        lp_ns=bound,
        ilp_ns=bound,
        pipeline_ns=bound,
        mix={},
        solver=solver,
        status=status,
        solve_time_s=time.perf_counter() - t0,
        order_matters=spec.collective != ALL_TO_ALL,
        notes=(note,),
    )


def ideal_ns(spec: CollectiveSpec) -> float:
    """The bytes one NPU must send over the sum of its bandwidths (100 % utilisation)."""
    model = spec.cost_model
    need = nominal_bytes_sent(spec.collective, spec.size, spec.topology.shape, ag_input_shard=model.ag_input_shard)
    return need / sum(model.bytes_per_ns(d, spec.collective) for d in spec.topology.dims)


def lower_bounds(
    topology: Topology | str,
    *,
    collective: str = "all_reduce",
    size: int | float | str,
    chunks: int = 64,
    cost_model: str | CostModel = "paper",
    latency_mode: str | None = None,
    active_chunks: int = 1,
    time_limit_s: float = 10.0,
    solver: str = "highs",
    pipeline: bool = True,
    node_limit: int | None = None,
) -> Bounds:
    """Ideal, fluid-LP, ILP and pipeline bounds of one collective (see the module docstring).

    `solver`: ``highs`` (in process, the default) or ``cbc`` (PuLP's bundled binary; used
    automatically when HiGHS is missing). `time_limit_s` bounds each solve (``math.inf``: no time
    limit, only `node_limit`'s); a solve cut short reports the solver's proven dual bound and says
    so in `status`. `pipeline=False` skips the tightened ILP (then `pipeline_ns` equals `ilp_ns`).
    `node_limit` caps each HiGHS solve's branch-and-bound nodes: a limit of work rather than of
    time, so a cut-short bound is the same on every run and every machine (sweeps, reproductions
    and `dse compare` use one).
    """
    spec = CollectiveSpec.parse(
        topology,
        collective=collective,
        size=size,
        chunks=chunks,
        cost_model=cost_model,
        latency_mode=latency_mode,
        active_chunks=active_chunks,
    )
    if solver not in SOLVERS:
        raise InputError("solver", f"unknown solver {solver!r}", ", ".join(SOLVERS))
    if not (isinstance(time_limit_s, (int, float)) and time_limit_s > 0):
        raise InputError("time_limit_s", f"{time_limit_s!r} is not a positive number of seconds")
    if node_limit is not None and (isinstance(node_limit, bool) or not isinstance(node_limit, int) or node_limit < 1):
        raise InputError("node_limit", f"{node_limit!r} is not a positive integer")
    return bounds_for(spec, time_limit_s=float(time_limit_s), solver=solver, pipeline=pipeline, node_limit=node_limit)


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
    slots = spec.active_chunks if not spec.cost_model.shares_bandwidth else 1
    ideal = ideal_ns(spec) / slots  # a dimension that runs `slots` phases at full speed at once
    notes: list[str] = []
    solver_used = solver
    if solver == "highs" and not _highs_available():
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
    mix = res.mix
    if res.status != "optimal":
        notes.append(f"ILP stopped ({res.status}): its bound is the solver's proven dual bound")
    tight = ilp
    if pipeline:
        # every schedule's fill and drain on d are at least the least head and tail of any type: the
        # fluid LP with those added is a lower bound of its own, handed to the solver
        nd = len(types[0].load)
        fill = [min(t.head[d] for t in types) + min(t.tail[d] for t in types) for d in range(nd)]
        fluid = _fluid_highs(types, slots, fill) if solver_used == "highs" else None
        lower = max(ilp, fluid or 0.0, min(t.path for t in types))
        # from four dimensions up, as for the ILP: a schedule at the (fill-shifted) floor settles it.
        # The walk must start from a bound on its own relaxation (loads plus fills), the fluid one:
        # the ILP and the shortest path bound the pipeline, not that relaxation.
        grid, edges = _Grid.of(types, slots, bw), _flow_edges(types)
        found = None
        if grid is not None and edges is not None and nd >= 4 and fluid is not None:
            proven, found = _floor_search(types, edges, grid, slots, fluid, fill=fill, at_least=lower)
            lower = max(lower, proven)
        if found is not None:
            pres, tight = found, lower
        else:
            pres = _solve(
                distinct_types(types, pipeline=True),
                slots,
                relax=False,
                solver=solver_used,
                time_limit_s=time_limit_s,
                pipeline=True,
                node_limit=node_limit,
                lower=lower,
            )
            tight = max(lower, pres.bound)
        if pres.status != "optimal":
            notes.append(f"pipeline ILP stopped ({pres.status}): its bound is the solver's proven dual bound")
            status = pres.status if status == "optimal" else status
    if spec.collective == ALL_TO_ALL:
        notes.append("all-to-all runs every chunk in ascending order: the order does not matter")
    return Bounds(
        topology=spec.topology.label(),
        collective=spec.collective,
        size_bytes=spec.size,
        chunks=spec.chunks,
        cost_model=spec.cost_model.name,
        latency_mode=spec.latency_mode,
        active_chunks=spec.active_chunks,
        ideal_ns=ideal,
        lp_ns=lp,
        ilp_ns=ilp,
        pipeline_ns=tight,
        mix=mix,
        solver=solver_used,
        status=status,
        solve_time_s=time.perf_counter() - t0,
        order_matters=spec.collective != ALL_TO_ALL,
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class _Solution:
    bound: float  # a proven lower bound on the optimum (ns)
    status: str  # "optimal", "time_limit", ...
    mix: dict[str, int]  # order label -> chunks (the incumbent's)
    counts: tuple[float, ...]  # per chunk type
    searched: bool = False  # found by `_floor_search` (a schedule at the floor), not by the MIP solver


def _highs_available() -> bool:
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


def _cbc(**options: Any) -> Any:
    """CBC: a `cbc` on the PATH through COIN_CMD (PuLP 4's way), else PuLP 3's bundled binary."""
    import warnings

    import pulp

    coin = pulp.COIN_CMD(**options)
    if coin.available():
        return coin
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pulp.PULP_CBC_CMD(**options)


def _objective(types: list[ChunkType], counts: list[float], slots: int, pipeline: bool) -> float:
    """The (pipeline) bound's objective for given whole or fractional counts: used to check a solution."""
    nd = len(types[0].load)
    loads = [sum(k * t.load[d] for k, t in zip(counts, types)) / slots for d in range(nd)]
    if not pipeline:
        return max(loads)
    used = [t for k, t in zip(counts, types) if k > 0.5]
    best = max(t.path for t in used)
    for d in range(nd):
        best = max(best, loads[d] + min(t.head[d] for t in used) + min(t.tail[d] for t in used))
    return best


def _solve(
    types: list[ChunkType],
    slots: int,
    *,
    relax: bool,
    solver: str,
    time_limit_s: float,
    pipeline: bool = False,
    node_limit: int | None = None,
    lower: float = 0.0,
    flow: bool = True,
) -> _Solution:
    """Minimise the busiest dimension (plus, with `pipeline`, fill, drain and paths) over chunk counts.

    `lower`: a proven lower bound on the optimum (ns), given to the solver as T's lower bound. The
    load-only ILP runs as a flow over dimension sets where `_flow_edges` allows it (and `flow`)."""
    import pulp

    if flow and not relax and not pipeline:
        edges = _flow_edges(types)
        if edges is not None:
            return _solve_flow(
                types, edges, slots, solver=solver, time_limit_s=time_limit_s, node_limit=node_limit, lower=lower
            )
    nd = len(types[0].load)
    scale = 1e-3  # solve in microseconds: keeps the coefficients near 1
    prob = pulp.LpProblem("dse_bound", pulp.LpMinimize)
    T = prob.add_variable("T", lowBound=max(0.0, lower) * scale)
    cat = "Continuous" if relax else "Integer"
    k = [prob.add_variable(f"k{i}", lowBound=0, upBound=t.count, cat=cat) for i, t in enumerate(types)]
    prob.setObjective(pulp.LpAffineExpression([(T, 1.0)]))
    for size in sorted({t.size for t in types}):
        members = [(k[i], 1.0) for i, t in enumerate(types) if t.size == size]
        count = next(t.count for t in types if t.size == size)
        prob += pulp.LpConstraint(pulp.LpAffineExpression(members), pulp.LpConstraintEQ, rhs=count)
    fill_drain: list[tuple[pulp.LpAffineExpression, pulp.LpAffineExpression]] = []
    if pipeline:
        y = [prob.add_variable(f"y{i}", lowBound=0, upBound=1, cat="Binary") for i in range(len(types))]
        for i, t in enumerate(types):
            prob += pulp.LpAffineExpression([(k[i], 1.0), (y[i], -float(t.count))]) <= 0  # k > 0 only if used
            prob += pulp.LpAffineExpression([(y[i], 1.0), (k[i], -1.0)]) <= 0  # used only if k > 0
            prob += pulp.LpAffineExpression([(T, 1.0), (y[i], -t.path * scale)]) >= 0  # a used path runs
        for d in range(nd):
            exprs = []
            for what in ("head", "tail"):
                # min over the used types of their head (tail) on d, as a lower bound: with the types
                # sorted by that value v_1 <= v_2 <= ..., min >= v_1 + Σ_j (v_{j+1} - v_j)·z_j where
                # z_j >= 1 - Σ_{first j types} y (z_j = 1 when none of the j smallest is used).
                vals = sorted((getattr(t, what)[d], i) for i, t in enumerate(types))
                terms = []
                for j in range(len(vals) - 1):
                    step = vals[j + 1][0] - vals[j][0]
                    if step <= 0:
                        continue
                    z = prob.add_variable(f"z{what}{d}_{j}", lowBound=0, upBound=1)
                    prob += pulp.LpAffineExpression([(z, 1.0)] + [(y[i], 1.0) for _, i in vals[: j + 1]]) >= 1
                    terms.append((z, step * scale))
                exprs.append(pulp.LpAffineExpression(terms, constant=vals[0][0] * scale))
            fill_drain.append((exprs[0], exprs[1]))
    for d in range(nd):
        terms = [(k[i], t.load[d] * scale / slots) for i, t in enumerate(types) if t.load[d]]
        expr = pulp.LpAffineExpression(terms + [(T, -1.0)])
        if pipeline:
            expr = expr + fill_drain[d][0] + fill_drain[d][1]
        prob += expr <= 0
    counts = _run(prob, k, relax=relax, solver=solver, time_limit_s=time_limit_s, node_limit=node_limit, gap=0.0)
    mix: dict[str, int] = {}
    if not relax:
        for t, c in zip(types, counts):
            if round(c) > 0:
                mix[t.label] = mix.get(t.label, 0) + int(round(c))
    return _read_solution(prob, types, counts, slots, relax, pipeline, solver, scale, mix)


def _run(
    prob: Any, variables: list, *, relax: bool, solver: str, time_limit_s: float, node_limit: int | None, gap: float
) -> list[float]:
    """Solve `prob` and return the values of `variables` (0 where the solver left none)."""
    import pulp

    if solver == "highs":
        extra = {"mip_max_nodes": int(node_limit)} if node_limit and not relax else {}
        cmd = pulp.HiGHS(
            mip=not relax,
            msg=False,
            timeLimit=time_limit_s,
            gapRel=gap,
            gapAbs=0.0,
            mip_heuristic_run_feasibility_jump=False,
            **extra,
        )
    else:
        cmd = _cbc(mip=not relax, msg=False, timeLimit=time_limit_s, gapRel=gap)
    values = _solve_with(prob, cmd, variables)
    if solver == "highs" and not relax:
        import highspy

        if prob.solverModel.getModelStatus() == highspy.HighsModelStatus.kSolveError:
            # HiGHS 1.15 can find the optimum, then reject it for a 1e-6 row violation (seen on a
            # seven-chunk 3D order model): solve once more with a tighter feasibility tolerance
            cmd = pulp.HiGHS(
                mip=True,
                msg=False,
                timeLimit=time_limit_s,
                gapRel=gap,
                gapAbs=0.0,
                mip_heuristic_run_feasibility_jump=False,
                mip_feasibility_tolerance=1e-9,
                primal_feasibility_tolerance=1e-9,
                **extra,
            )
            values = _solve_with(prob, cmd, variables)
    return values


def _solve_with(prob: Any, cmd: Any, variables: list) -> list[float]:
    """The variables' values after the solve; a value the solver leaves undefined (None, NaN) is 0."""
    try:
        prob.solve(cmd)
        values = [v.value() for v in variables]
    except KeyError:  # PuLP 3 has no name for HiGHS's node-limit status: read the solver directly
        col = prob.solverModel.getSolution().col_value
        values = [col[v.index] if len(col) > v.index else 0.0 for v in variables]
    return [x if x is not None and math.isfinite(x) else 0.0 for x in values]


def _solve_flow(
    types: list[ChunkType],
    edges: dict[float, dict[tuple[int, int], float]],
    slots: int,
    *,
    solver: str,
    time_limit_s: float,
    node_limit: int | None,
    lower: float,
) -> _Solution:
    """The load-only ILP as integer flows over dimension sets, one per chunk size (see `_flow_edges`)."""
    import pulp

    nd = len(types[0].order)
    full = (1 << nd) - 1
    scale = 1e-3
    prob = pulp.LpProblem("dse_bound_flow", pulp.LpMinimize)
    T = prob.add_variable("T", lowBound=max(0.0, lower) * scale)
    prob.setObjective(pulp.LpAffineExpression([(T, 1.0)]))
    load_terms: list[list[tuple[Any, float]]] = [[] for _ in range(nd)]
    flows, variables = [], []
    for c, (size, sized) in enumerate(sorted(edges.items())):
        n = next(t.count for t in types if t.size == size)
        keys = sorted(sized)
        f = {e: prob.add_variable(f"f{c}_{e[0]}_{e[1]}", lowBound=0, upBound=n, cat="Integer") for e in keys}
        extra = [i for i, t in enumerate(types) if t.ar_phase and t.size == size]
        x = {i: prob.add_variable(f"x{i}", lowBound=0, upBound=n, cat="Integer") for i in extra}
        for node in range(full):
            out = [(f[(node, d)], 1.0) for d in range(nd) if not node >> d & 1]
            into = [(f[(node ^ (1 << d), d)], -1.0) for d in range(nd) if node >> d & 1]
            if node == 0:  # every chunk runs an order (a path) or is an extra type
                out += [(v, 1.0) for v in x.values()]
            prob += pulp.LpConstraint(
                pulp.LpAffineExpression(out + into), pulp.LpConstraintEQ, rhs=n if node == 0 else 0
            )
        for d in range(nd):
            load_terms[d] += [(f[e], sized[e] * scale / slots) for e in keys if e[1] == d and sized[e]]
            load_terms[d] += [(v, types[i].load[d] * scale / slots) for i, v in x.items() if types[i].load[d]]
        flows.append((size, n, keys, x))
        variables += [f[e] for e in keys] + list(x.values())
    for d in range(nd):
        prob += pulp.LpAffineExpression(load_terms[d] + [(T, -1.0)]) <= 0
    values = iter(
        _run(prob, variables, relax=False, solver=solver, time_limit_s=time_limit_s, node_limit=node_limit, gap=1e-9)
    )
    counts = [0.0] * len(types)
    mix: dict[str, int] = {}
    for size, n, keys, x in flows:
        flow = {e: int(round(next(values))) for e in keys}
        placed = 0
        for i in x:
            counts[i] = float(round(next(values)))
            placed += int(counts[i])
        if placed + sum(flow[(0, d)] for d in range(nd)) != n:
            continue  # no solution to read (a limit hit before any was found)
        index = {t.order: i for i, t in enumerate(types) if t.size == size and not t.ar_phase}
        for order, amount in _paths(flow, nd):
            counts[index[order]] += amount
        for i in list(x) + list(index.values()):
            if counts[i] > 0:
                mix[types[i].label] = mix.get(types[i].label, 0) + int(counts[i])
    return _read_solution(prob, types, counts, slots, False, False, solver, scale, mix)


def ilp_bound(
    types: list[ChunkType],
    slots: int,
    bytes_per_ns: list[float],
    *,
    start: float = 0.0,
    solver: str = "highs",
    time_limit_s: float = 10.0,
    node_limit: int | None = None,
) -> tuple[float, float, _Solution]:
    """The load-only ILP as `lower_bounds` solves it: the fluid LP (at least `start`), the whole-step
    floor above it, a search for a schedule that meets the floor (from four dimensions up, see
    `_floor_search`), then, if that finds none, the MIP given the floor. Returns (LP bound, floor,
    ILP solution); the floor is a proven lower bound (arithmetic, or an exhaustive search)."""
    fluid = _fluid_highs(types, slots) if solver == "highs" and _highs_available() else None
    if fluid is None:
        fluid = _solve(types, slots, relax=True, solver=solver, time_limit_s=time_limit_s).bound
    lp = max(start, fluid)
    grid = _Grid.of(types, slots, bytes_per_ns)
    edges = _flow_edges(types)
    floor = proven = grid.floor(lp) if grid is not None else lp
    # at two or three dimensions the MIP has at most 12 edge variables and HiGHS solves it in a few
    # milliseconds, faster than the search; from four up the search usually saves it all
    if grid is not None and edges is not None and len(types[0].order) >= 4:
        proven, found = _floor_search(types, edges, grid, slots, lp)
        if found is not None:
            return lp, proven, found
    if edges is not None:
        res = _solve_flow(
            types, edges, slots, solver=solver, time_limit_s=time_limit_s, node_limit=node_limit, lower=floor
        )
    else:
        res = _solve(
            distinct_types(types, pipeline=False),
            slots,
            relax=False,
            solver=solver,
            time_limit_s=time_limit_s,
            node_limit=node_limit,
            lower=floor,
        )
    # the solver is given the arithmetic floor, not the searched one: a higher lower bound changes
    # HiGHS's path, not always for the better (seen 0.3 s -> 0.9 s); the caller takes the larger
    return lp, proven, res


def _fluid_highs(types: list[ChunkType], slots: int, extra: list[float] | None = None) -> float | None:
    """The fluid LP's value straight through highspy (the PuLP model of `_solve` costs ~1 ms more
    to build than HiGHS takes to solve it); None if HiGHS does not call it optimal. `extra`: ns
    added to each dimension's load (fill and drain, for the pipeline bound)."""
    import numpy as np

    from dse.bounds.floorfit import highs_lp

    types = distinct_types(types, pipeline=False)
    nd, P = len(types[0].load), len(types)
    sizes = sorted({t.size for t in types})
    scale = 1e-3  # microseconds, as `_solve`
    # columns: one count per type, then T; rows: the chunks of each size, then each dimension's load
    A = np.zeros((len(sizes) + nd, P + 1))
    for i, t in enumerate(types):
        A[sizes.index(t.size), i] = 1.0
        A[len(sizes) :, i] = np.asarray(t.load) * scale / slots
    A[len(sizes) :, P] = -1.0
    counts = [next(t.count for t in types if t.size == z) for z in sizes]
    fill = -np.asarray(extra or [0.0] * nd) * scale
    h = highs_lp(
        A,
        np.r_[np.zeros(P), 1.0],
        np.zeros(P + 1),
        np.r_[[float(t.count) for t in types], np.inf],
        np.r_[counts, np.full(nd, -np.inf)],
        np.r_[counts, fill],
    )
    if h is None:
        return None
    return h.getInfo().objective_function_value / scale


def _edge_steps(
    edges: dict[float, dict[tuple[int, int], float]], grid: _Grid, slots: int
) -> dict[tuple[int, int], int] | None:
    """Each flow edge's load in whole grid steps above its dimension's base (0 where a dimension has
    no steps), or None when there is more than one chunk size, no dimension with steps, or a load
    off the grid."""
    if not grid.live or len(edges) != 1:
        return None
    steps: dict[tuple[int, int], int] = {}
    for (after, d), load in next(iter(edges.values())).items():
        if grid.unit[d] <= 0:
            steps[(after, d)] = 0
            continue
        k = round((load / slots - grid.base[d]) / grid.unit[d])
        if abs(grid.base[d] + k * grid.unit[d] - load / slots) > 1e-9 * max(abs(load / slots), 1.0):
            return None
        steps[(after, d)] = k
    return steps


def _floor_search(
    types: list[ChunkType],
    edges: dict[float, dict[tuple[int, int], float]],
    grid: _Grid,
    slots: int,
    start: float,
    *,
    fill: list[float] | None = None,
    at_least: float = 0.0,
    max_targets: int = 64,
    proof_budget: int = 20_000,
) -> tuple[float, _Solution | None]:
    """The load-only ILP without a MIP solver, when it can be had cheaply (`dse.bounds.floorfit`).

    At the first candidate T of the whole-step walk from `start` (the floor): quick guided searches
    for a schedule whose steps meet T exactly; if they find none, exhaustive searches over every
    step vector T allows, which either find one or prove that T (and every time below the next
    candidate) is impossible. Returns (T, solution): T is a proven lower bound (the floor, or the
    next candidate after a proof); the solution, when there is one, is an optimal schedule at T.
    It is None when a search gave up (too many step vectors, a node budget spent) or after a proof;
    the caller's MIP then starts from T.

    `fill` (ns per dimension): the pipeline bound's version. Each dimension's load plus its fill
    (the least head plus the least tail of any type) must fit under T, which makes T a lower bound
    on the pipeline objective; a schedule counts as found only if its whole pipeline objective
    (`_objective`, the fill and drain of the types it uses and their paths) is at T too.

    `start` must be a lower bound on the problem walked (the loads, plus `fill` if given): the walk
    only checks candidate times from there. `at_least`: another proven lower bound on the
    objective (for the pipeline, the ILP and the shortest path); a schedule whose objective is at
    or below max(T, at_least) is optimal.
    """
    from dse.bounds.floorfit import Lattice, OutOfBudget, targets

    nd = len(types[0].order)
    steps = _edge_steps(edges, grid, slots)
    if fill is not None:  # the walk's loads include the fill: shift each dimension's base by it
        grid = dataclasses.replace(grid, base=tuple(b + f / grid.n for b, f in zip(grid.base, fill)))
    walk = grid.walk(start)
    first, caps, slack = next(walk)
    if steps is None:
        return first, None
    # the searches fix large steps first and let small ones below correct them: they want a chunk's
    # steps on d to grow with the set after d. Where they shrink (all-gather: the first dimension
    # of an order moves the least data) the orders are searched reversed: the set after d becomes
    # the set before it, which the loads depend on just as well
    full_set = (1 << nd) - 1
    flip = sum(steps[(full_set ^ (1 << d), d)] - steps[(0, d)] for d in range(nd)) < 0
    if flip:
        steps = {(full_set ^ after ^ (1 << d), d): v for (after, d), v in steps.items()}
    index = {t.order: i for i, t in enumerate(types) if not t.ar_phase}
    lattice = Lattice(steps, nd, list(grid.live))
    live = list(grid.live)

    def solution(flow: dict[tuple[int, int], int]) -> _Solution | None:
        counts = [0.0] * len(types)
        for order, amount in _paths(flow, nd):
            counts[index[order[::-1] if flip else order]] += amount
        value = _objective(types, counts, slots, fill is not None)
        if sum(counts) != grid.n or value > max(first, at_least) * (1 + 1e-9):
            return None  # a pipeline whose fill, drain or paths exceed T (load-only: cannot happen)
        mix: dict[str, int] = {}
        for t, c in zip(types, counts):
            if c:
                mix[t.label] = mix.get(t.label, 0) + int(c)
        return _Solution(value, "optimal", mix, tuple(counts), searched=True)

    def exhaust(aims: list[list[int]], how: str | None, budget: int) -> tuple[_Solution | None, bool]:
        """An exhaustive search over every step vector in `aims`: (solution, proven none)."""
        left = [budget]  # shared by every step vector
        try:
            for target in aims:
                # (a guide that cannot be built leaves the middle-first order: the proof never
                # rests on an LP's "infeasible")
                guide = None if how is None else lattice.guide(grid.n, target, how)
                full = [0] * nd
                for j, d in enumerate(live):
                    full[d] = target[j]
                flow = lattice.exhaustive(grid.n, full, budget=left, guide=guide)
                if flow is not None:
                    return solution(flow), False  # (None, False) when its pipeline exceeds T
        except OutOfBudget:
            return None, False
        return None, True

    def guided(aims: list[list[int]], hows: list, budget: int) -> _Solution | None:
        for target, how in itertools.product(aims[:2], hows):
            flow = lattice.find(grid.n, target, how, budget=budget)
            found = None if flow is None else solution(flow)
            if found is not None:
                return found
        return None

    def search(aims: list[list[int]]) -> tuple[_Solution | None, bool]:
        """Cheapest first: two guided searches (they find most schedules that meet the floor), a
        small exhaustive one (it proves most floors that no schedule meets), guided searches from
        sixteen perturbed guides, then larger exhaustive ones."""
        found = guided(aims, ["projection", "central"], 150)
        if found is not None:
            return found, False
        found, proven = exhaust(aims, None, 2_000)
        if found is not None or proven:
            return found, proven
        found = guided(aims, list(range(16)), 300)
        if found is not None:
            return found, False
        # the central guide gets five times the budget: it is the one that finds schedules for
        # the hardest cases seen (several dimensions of 16 at five dimensions)
        stages = [("central", 5 * proof_budget), ("projection", proof_budget)] if len(aims) <= 4 else []
        for how, budget in stages + [(None, proof_budget)]:
            found, proven = exhaust(aims, how, budget)
            if found is not None or proven:
                return found, proven
        return None, False

    if caps is None:
        return first, None  # the walk gave up: `first` is still proven
    aims = targets(list(grid.wt), caps, slack, limit=max_targets + 1)
    if aims is None or len(aims) > max_targets:
        return first, None  # too many step vectors to search each one
    found, proven = search(aims)
    if found is not None or not proven:
        return first, found
    # no schedule meets the floor: every time below the walk's next candidate is impossible (higher
    # candidates are not searched: the optimum is usually many steps up, where HiGHS is faster)
    return next(walk)[0], None


def _read_solution(prob, types, counts, slots, relax, pipeline, solver, scale, mix) -> _Solution:  # type: ignore[no-untyped-def]
    """A proven lower bound from the solve: exact when optimal, the dual bound when cut short."""
    import pulp

    if solver == "highs":
        import highspy

        h = prob.solverModel
        ms = h.getModelStatus()
        info = h.getInfo()
        if ms == highspy.HighsModelStatus.kOptimal:
            if relax:
                return _Solution(info.objective_function_value / scale, "optimal", mix, tuple(counts))
            exact = _objective(types, [round(c) for c in counts], slots, pipeline)
            dual = info.mip_dual_bound / scale
            return _Solution(min(exact, max(dual, 0.0)), "optimal", mix, tuple(counts))
        status = {
            highspy.HighsModelStatus.kTimeLimit: "time_limit",
            highspy.HighsModelStatus.kSolutionLimit: "node_limit",
        }.get(ms, str(ms).rsplit(".", 1)[-1].lstrip("k").lower())
        dual = info.mip_dual_bound / scale if not relax else 0.0
        return _Solution(dual if math.isfinite(dual) else 0.0, status, mix, tuple(counts))
    # CBC through PuLP: no dual bound is exposed; a proven optimum, else nothing beyond the LP
    if prob.sol_status == pulp.LpSolutionOptimal:
        value = _objective(types, counts if relax else [round(c) for c in counts], slots, pipeline)
        return _Solution(value, "optimal", mix, tuple(counts))
    return _Solution(0.0, pulp.LpSolution.get(prob.sol_status, "unknown").lower().replace(" ", "_"), mix, tuple(counts))


# --- The load-only ILP: a flow over dimension sets, with a whole-number floor ---------------------
#
# A chunk's order is a path through the subsets of dimensions (the dimensions it has still to visit
# after each step), and in every cost model here the load a chunk puts on dimension d depends only
# on the set of dimensions that come after d in its order. So the ILP can choose integer flows on
# the D·2^(D-1) edges of that lattice instead of counts of D! orders: the same optimum (an integer
# flow splits into whole paths), far fewer variables and none of the orders' symmetry. The flow is
# used whenever `_flow_edges` can check that property on the chunk types; otherwise the ILP counts
# orders.
#
# `_grid_floor` adds a valid lower bound the solver cannot see on its own. Each dimension's load is
# its floor plus a whole number of grid steps (in the paper model a step is one chunk's
# smallest transfer there), and the bytes a chunk sends do not depend on its order, so a weighted
# sum of the step counts is the same for every schedule. The smallest T for which whole step counts
# under T can meet that sum is a lower bound; with it, HiGHS stops as soon as it finds a schedule
# that reaches it, instead of branching for thousands of nodes to prove what arithmetic proves.


def _float_gcd(values: list[float], rel: float = 1e-9) -> float:
    """The largest step of which every value is a whole multiple (within `rel`)."""
    g = values[0]
    for v in values[1:]:
        a, b = max(g, v), min(g, v)
        while b > a * rel:
            a, b = b, math.fmod(a, b)
            if a - b <= a * rel:
                b = 0.0
        g = a
    return g


@dataclass(frozen=True)
class _Grid:
    """Whole grid steps of one chunk size (see above): dimension d's load is n·base_d + unit_d·m_d
    with a whole m_d, and Σ wt_d·m_d = need in every schedule."""

    n: int
    base: tuple[float, ...]
    unit: tuple[float, ...]  # 0 where every order loads the dimension alike
    live: tuple[int, ...]  # the dimensions with steps
    wt: tuple[int, ...]  # per live dimension
    need: int
    top: tuple[int, ...]  # most steps per live dimension (every chunk at its most)

    @classmethod
    def of(cls, types: list[ChunkType], slots: int, bytes_per_ns: list[float]) -> _Grid | None:
        """The grid of `types`, or None when their loads are not whole steps with a fixed weighted sum."""
        if not types or len({t.size for t in types}) != 1:
            return None
        n = types[0].count
        nd = len(types[0].load)
        loads = [[x / slots for x in t.load] for t in types]
        base, unit, grid = [], [], []
        for d in range(nd):
            col = [row[d] for row in loads]
            lo = min(col)
            diffs = sorted({v - lo for v in col if v - lo > 1e-12 * max(col)})
            base.append(lo)
            if not diffs:
                unit.append(0.0)
                grid.append([0] * len(col))
                continue
            u = _float_gcd(diffs)
            w = [round((v - lo) / u) for v in col]
            if u <= 0 or max(w) > 10**9 or any(abs(lo + k * u - v) > 1e-9 * max(col) for k, v in zip(w, col)):
                return None
            unit.append(u)
            grid.append(w)
        live = [d for d in range(nd) if unit[d] > 0]
        if not live:
            return cls(n, tuple(base), tuple(unit), (), (), 0, ())
        # integer weights: bytes per grid step, as small whole numbers; the weighted sum must be exact
        raw = [bytes_per_ns[d] * unit[d] for d in live]
        fr = [Fraction(r / min(raw)).limit_denominator(10**6) for r in raw]
        if any(abs(float(f) - r / min(raw)) > 1e-9 * (r / min(raw)) for f, r in zip(fr, raw)):
            return None
        den = math.lcm(*(f.denominator for f in fr))
        wt = [int(f * den) for f in fr]
        per_chunk = {sum(w * grid[d][i] for w, d in zip(wt, live)) for i in range(len(types))}
        if len(per_chunk) != 1:
            return None
        top = tuple(n * max(grid[d]) for d in live)
        return cls(n, tuple(base), tuple(unit), tuple(live), tuple(wt), n * per_chunk.pop(), top)

    def caps(self, t: float) -> list[int]:
        """The most whole steps per live dimension whose load stays at or under `t`."""
        n = self.n
        return [
            min(self.top[i], math.floor((t - n * self.base[d]) / self.unit[d] * (1 + 1e-12) + 1e-9))
            for i, d in enumerate(self.live)
        ]

    def walk(self, start: float, *, max_steps: int = 100_000) -> Iterator[tuple[float, list[int] | None, int]]:
        """Candidate times T >= `start` in increasing order (loads some schedule could have), each
        with the most steps per live dimension under T and the slack of the weighted sum; every T
        skipped is proven infeasible by arithmetic (the coin check). When the walk gives up it
        yields a last (T, None, 0): T is still a valid, weaker, bound."""
        n, base, unit, live = self.n, self.base, self.unit, self.live
        floor_t = max(start, max(n * b for b in base))
        if not live:
            yield floor_t, [], 0
            return
        heap = []
        for j, d in enumerate(live):
            k = max(0, math.ceil((floor_t - n * base[d]) / unit[d] * (1 - 1e-12) - 1e-9))
            heap.append((n * base[d] + k * unit[d], j, k))
        heapq.heapify(heap)
        last = -math.inf
        for _ in range(max_steps):
            if not heap:
                break
            t, j, k = heapq.heappop(heap)
            if k + 1 <= self.top[j]:
                heapq.heappush(heap, (n * base[live[j]] + (k + 1) * unit[live[j]], j, k + 1))
            if t <= last:
                continue
            last = t
            if t < floor_t * (1 - 1e-12):
                continue
            steps = self.caps(t)
            if min(steps) < 0:
                continue
            slack = sum(w * m for w, m in zip(self.wt, steps)) - self.need
            if slack < 0 or not _sum_reachable(slack, list(self.wt), steps):
                continue
            yield max(start, t), steps, slack
        yield max(floor_t, last), None, 0

    def floor(self, start: float) -> float:
        """The first candidate of `walk`: every T below it is proven infeasible by arithmetic."""
        return next(self.walk(start))[0]


def _grid_floor(types: list[ChunkType], slots: int, bytes_per_ns: list[float], start: float) -> float:
    """A lower bound >= `start` on the load-only ILP from whole grid steps (see above).

    Every candidate T below the returned value is proven infeasible by exact integer arithmetic; a
    check that cannot decide quickly answers "maybe", which only makes the bound weaker, never
    invalid. Applies to one chunk size (otherwise returns `start`); ASTRA-sim's AR composition is
    one more row, kept when it passes the same checks.
    """
    grid = _Grid.of(types, slots, bytes_per_ns)
    if grid is None:
        return start
    return grid.floor(start)


def _sum_reachable(target: int, weights: list[int], caps: list[int], *, limit: int = 1 << 18) -> bool:
    """Whether target = Σ w_i·x_i with whole 0 <= x_i <= caps_i; True when too large to check."""
    if target > limit:
        return True
    reach = 1  # bit s set: sum s reachable
    mask = (1 << (target + 1)) - 1
    for w, cap in zip(weights, caps):
        cap = min(cap, target // w)
        k = 1
        while cap > 0:  # binary split of the bounded multiplicity
            take = min(k, cap)
            reach = (reach | (reach << (take * w))) & mask
            cap -= take
            k <<= 1
    return bool(reach >> target & 1)


def _flow_edges(types: list[ChunkType]) -> dict[float, dict[tuple[int, int], float]] | None:
    """Per chunk size, edge loads (set of dimensions after d as a bit mask, d) -> busy ns on d, when
    every order's load on d depends only on that set and every order is present; else None (see
    above). Types that are not orders (ASTRA-sim's AR composition) become variables of their own."""
    nd = len(types[0].order)
    if nd < 2:
        return None
    out: dict[float, dict[tuple[int, int], float]] = {}
    for size in sorted({t.size for t in types}):
        paths = [t for t in types if t.size == size and not t.ar_phase]
        if len({t.order for t in paths}) != math.factorial(nd):
            return None
        edges = out.setdefault(size, {})
        for t in paths:
            after = 0
            for d in reversed(t.order):
                v = t.load[d]
                old = edges.setdefault((after, d), v)
                if abs(old - v) > 1e-12 * max(abs(old), abs(v), 1.0):
                    return None
                after |= 1 << d
    return out


def _paths(flow: dict[tuple[int, int], int], nd: int) -> list[tuple[tuple[int, ...], int]]:
    """Split an integer flow into whole paths: (order, chunks), lowest dimensions first."""
    flow = dict(flow)
    full = (1 << nd) - 1
    out: list[tuple[tuple[int, ...], int]] = []
    while True:
        after, rev, amount = 0, [], math.inf
        while after != full:
            d = next((d for d in range(nd) if not after >> d & 1 and flow.get((after, d), 0) > 0), None)
            if d is None:
                break
            rev.append((after, d))
            amount = min(amount, flow[(after, d)])
            after |= 1 << d
        if after != full or not rev:
            return out
        for e in rev:
            flow[e] -= amount
        out.append((tuple(d for _, d in reversed(rev)), int(amount)))
