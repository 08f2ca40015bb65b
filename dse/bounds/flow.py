"""The LP and ILP models behind the bounds (PuLP; HiGHS in process, CBC as fallback) and how a
solution becomes a proven lower bound.

`solve_counts` counts chunks per type on the count model of `dse.schedulers.order_mix` (with the
pipeline's fill, drain and path rows when asked). The load-only ILP runs instead as a flow over
dimension sets (`solve_flow`) where `flow_edges` allows it:

A chunk's order is a path through the subsets of dimensions (the dimensions it has still to visit
after each step), and in every cost model here the load a chunk puts on dimension d depends only
on the set of dimensions that come after d in its order. So the ILP can choose integer flows on
the D·2^(D-1) edges of that lattice instead of counts of D! orders: the same optimum (an integer
flow splits into whole paths), far fewer variables and none of the orders' symmetry. The flow is
used whenever `flow_edges` can check that property on the chunk types; otherwise the ILP counts
orders.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dse.schedulers.order_mix import SCALE, ChunkType, CountModel, run_model

Edges = dict[float, dict[tuple[int, int], float]]  # per chunk size: (set after d, d) -> busy ns on d


@dataclass(frozen=True)
class Solution:
    """A solve's outcome: a proven lower bound (ns), the solver's status, the order mix and counts per type."""

    bound: float  # a proven lower bound on the optimum (ns)
    status: str  # "optimal", "time_limit", ...
    mix: dict[str, int]  # order label -> chunks (the incumbent's)
    counts: tuple[float, ...]  # per chunk type
    searched: bool = False  # found by `floor_search` (a schedule at the floor), not by the MIP solver


def highs_available() -> bool:
    """Whether highspy (HiGHS in process) can be imported."""
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


def distinct_types(types: list[ChunkType], *, pipeline: bool) -> list[ChunkType]:
    """One type per distinct cost: orders that cost every dimension the same (dimensions of equal
    size swapped, say) are interchangeable, and keeping one of each removes symmetric solutions the
    ILP solver would otherwise have to rule out one by one. The first order of each class names it."""
    seen: dict[tuple, ChunkType] = {}
    for t in types:
        key = (t.size, t.load) + ((t.head, t.tail, t.path) if pipeline else ())
        seen.setdefault(key, t)
    return list(seen.values())


def objective_value(types: list[ChunkType], counts: list[float], slots: int, pipeline: bool) -> float:
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


def mix_of(types: list[ChunkType], counts: list[float]) -> dict[str, int]:
    """Order label -> whole chunks, for the types with any."""
    mix: dict[str, int] = {}
    for t, c in zip(types, counts):
        if c > 0:
            mix[t.label] = mix.get(t.label, 0) + int(c)
    return mix


def solve_counts(
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
) -> Solution:
    """Minimise the busiest dimension (plus, with `pipeline`, fill, drain and paths) over chunk counts.

    `lower`: a proven lower bound on the optimum (ns), given to the solver as T's lower bound. The
    load-only ILP runs as a flow over dimension sets where `flow_edges` allows it (and `flow`)."""
    if flow and not relax and not pipeline:
        edges = flow_edges(types)
        if edges is not None:
            return solve_flow(
                types, edges, slots, solver=solver, time_limit_s=time_limit_s, node_limit=node_limit, lower=lower
            )
    model = CountModel.build(types, slots, relax=relax, lower=lower)
    model.add_load_rows(types, slots, _pipeline_rows(model, types) if pipeline else None)
    counts = run_model(
        model.prob, model.counts, relax=relax, solver=solver, time_limit_s=time_limit_s, node_limit=node_limit, gap=0.0
    )
    mix = {} if relax else mix_of(types, [round(c) for c in counts])
    return _read_solution(model.prob, types, counts, slots, relax, pipeline, solver, mix)


def _pipeline_rows(model: CountModel, types: list[ChunkType]) -> list[list[Any]]:
    """What the pipeline bound adds to the count model: a used type's path fits under T, and per
    dimension the least fill (head) and drain (tail) of the used types, as expressions to add to
    the dimension's load (returned, [fill, drain] per dimension)."""
    import pulp

    prob, T, k = model.prob, model.T, model.counts
    y = [prob.add_variable(f"y{i}", lowBound=0, upBound=1, cat="Binary") for i in range(len(types))]
    for i, t in enumerate(types):
        prob += pulp.LpAffineExpression([(k[i], 1.0), (y[i], -float(t.count))]) <= 0  # k > 0 only if used
        prob += pulp.LpAffineExpression([(y[i], 1.0), (k[i], -1.0)]) <= 0  # used only if k > 0
        prob += pulp.LpAffineExpression([(T, 1.0), (y[i], -t.path * SCALE)]) >= 0  # a used path runs
    return [[_least_used(prob, types, y, what, d) for what in ("head", "tail")] for d in range(len(types[0].load))]


def _least_used(prob: Any, types: list[ChunkType], y: list[Any], what: str, d: int) -> Any:
    """The least head (or tail) on d of the used types, as a lower-bounding expression: with the types
    sorted by that value v_1 <= v_2 <= ..., min >= v_1 + Σ_j (v_{j+1} - v_j)·z_j where
    z_j >= 1 - Σ_{first j types} y (z_j = 1 when none of the j smallest is used)."""
    import pulp

    vals = sorted((getattr(t, what)[d], i) for i, t in enumerate(types))
    terms = []
    for j in range(len(vals) - 1):
        step = vals[j + 1][0] - vals[j][0]
        if step <= 0:
            continue
        z = prob.add_variable(f"z{what}{d}_{j}", lowBound=0, upBound=1)
        prob += pulp.LpAffineExpression([(z, 1.0)] + [(y[i], 1.0) for _, i in vals[: j + 1]]) >= 1
        terms.append((z, step * SCALE))
    return pulp.LpAffineExpression(terms, constant=vals[0][0] * SCALE)


@dataclass(frozen=True)
class _SizeFlow:
    """One chunk size's part of the flow model: its chunks, its edges' keys (their variables come
    first, in this order) and the variables of its types that are not orders (by type index)."""

    size: float
    n: int
    keys: list[tuple[int, int]]
    extra: dict[int, Any]


def solve_flow(
    types: list[ChunkType],
    edges: Edges,
    slots: int,
    *,
    solver: str,
    time_limit_s: float,
    node_limit: int | None,
    lower: float,
) -> Solution:
    """The load-only ILP as integer flows over dimension sets, one per chunk size (see `flow_edges`)."""
    prob, flows, variables = _flow_model(types, edges, slots, lower)
    values = iter(
        run_model(
            prob, variables, relax=False, solver=solver, time_limit_s=time_limit_s, node_limit=node_limit, gap=1e-9
        )
    )
    nd = len(types[0].order)
    counts = [0.0] * len(types)
    mix: dict[str, int] = {}
    for part in flows:
        flow = {e: int(round(next(values))) for e in part.keys}
        placed = 0
        for i in part.extra:
            counts[i] = float(round(next(values)))
            placed += int(counts[i])
        if placed + sum(flow[(0, d)] for d in range(nd)) != part.n:
            continue  # no solution to read (a limit hit before any was found)
        index = {t.order: i for i, t in enumerate(types) if t.size == part.size and not t.ar_phase}
        for order, amount in flow_paths(flow, nd):
            counts[index[order]] += amount
        for i in list(part.extra) + list(index.values()):
            if counts[i] > 0:
                mix[types[i].label] = mix.get(types[i].label, 0) + int(counts[i])
    return _read_solution(prob, types, counts, slots, False, False, solver, mix)


def _flow_model(types: list[ChunkType], edges: Edges, slots: int, lower: float) -> tuple[Any, list[_SizeFlow], list]:
    """The flow ILP: (the PuLP problem, its parts per chunk size, its variables in reading order)."""
    import pulp

    nd = len(types[0].order)
    full = (1 << nd) - 1
    prob = pulp.LpProblem("dse_bound_flow", pulp.LpMinimize)
    T = prob.add_variable("T", lowBound=max(0.0, lower) * SCALE)
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
            load_terms[d] += [(f[e], sized[e] * SCALE / slots) for e in keys if e[1] == d and sized[e]]
            load_terms[d] += [(v, types[i].load[d] * SCALE / slots) for i, v in x.items() if types[i].load[d]]
        flows.append(_SizeFlow(size, n, keys, x))
        variables += [f[e] for e in keys] + list(x.values())
    for d in range(nd):
        prob += pulp.LpAffineExpression(load_terms[d] + [(T, -1.0)]) <= 0
    return prob, flows, variables


def _read_solution(
    prob: Any,
    types: list[ChunkType],
    counts: list[float],
    slots: int,
    relax: bool,
    pipeline: bool,
    solver: str,
    mix: dict[str, int],
) -> Solution:
    """A proven lower bound from the solve: exact when optimal, the dual bound when cut short."""
    import pulp

    if solver == "highs":
        return _read_highs(prob.solverModel, types, counts, slots, relax, pipeline, mix)
    # CBC through PuLP: no dual bound is exposed; a proven optimum, else nothing beyond the LP
    if prob.sol_status == pulp.LpSolutionOptimal:
        value = objective_value(types, counts if relax else [round(c) for c in counts], slots, pipeline)
        return Solution(value, "optimal", mix, tuple(counts))
    return Solution(0.0, pulp.LpSolution.get(prob.sol_status, "unknown").lower().replace(" ", "_"), mix, tuple(counts))


def _read_highs(
    h: Any, types: list[ChunkType], counts: list[float], slots: int, relax: bool, pipeline: bool, mix: dict[str, int]
) -> Solution:
    """`_read_solution` from HiGHS's own model status, objective and dual bound."""
    import highspy

    ms = h.getModelStatus()
    info = h.getInfo()
    if ms == highspy.HighsModelStatus.kOptimal:
        if relax:
            return Solution(info.objective_function_value / SCALE, "optimal", mix, tuple(counts))
        exact = objective_value(types, [round(c) for c in counts], slots, pipeline)
        dual = info.mip_dual_bound / SCALE
        return Solution(min(exact, max(dual, 0.0)), "optimal", mix, tuple(counts))
    status = {
        highspy.HighsModelStatus.kTimeLimit: "time_limit",
        highspy.HighsModelStatus.kSolutionLimit: "node_limit",
    }.get(ms, str(ms).rsplit(".", 1)[-1].lstrip("k").lower())
    dual = info.mip_dual_bound / SCALE if not relax else 0.0
    return Solution(dual if math.isfinite(dual) else 0.0, status, mix, tuple(counts))


def flow_edges(types: list[ChunkType]) -> Edges | None:
    """Per chunk size, edge loads (set of dimensions after d as a bit mask, d) -> busy ns on d, when
    every order's load on d depends only on that set and every order is present; else None (see
    the module docstring). Types that are not orders (ASTRA-sim's AR composition) become variables
    of their own."""
    nd = len(types[0].order)
    if nd < 2:
        return None
    out: Edges = {}
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


def flow_paths(flow: dict[tuple[int, int], int], nd: int) -> list[tuple[tuple[int, ...], int]]:
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
            flow[e] -= int(amount)
        out.append((tuple(d for _, d in reversed(rev)), int(amount)))


def fluid_highs(types: list[ChunkType], slots: int, extra: list[float] | None = None) -> float | None:
    """The fluid LP's value straight through highspy, or None if HiGHS does not call it optimal.
    `extra`: ns added to each dimension's load (fill and drain, for the pipeline bound). Building the
    PuLP model of `solve_counts` costs more than HiGHS takes to solve this small LP."""
    import numpy as np

    from dse.bounds.lattice import highs_lp

    types = distinct_types(types, pipeline=False)
    nd, P = len(types[0].load), len(types)
    sizes = sorted({t.size for t in types})
    # columns: one count per type, then T; rows: the chunks of each size, then each dimension's load
    A = np.zeros((len(sizes) + nd, P + 1))
    for i, t in enumerate(types):
        A[sizes.index(t.size), i] = 1.0
        A[len(sizes) :, i] = np.asarray(t.load) * SCALE / slots
    A[len(sizes) :, P] = -1.0
    counts = [next(t.count for t in types if t.size == z) for z in sizes]
    fill = -np.asarray(extra or [0.0] * nd) * SCALE
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
    return h.getInfo().objective_function_value / SCALE
