"""Chunk types and the LP over how many chunks run each dimension order (the order mix).

A chunk type is one way a chunk can run (its order, its size, what it costs each dimension). The
fluid LP spreads the chunks over the types so that the busiest dimension is as idle as it can be:
`lp_guided` realises its mix, and the lower bounds (`dse.bounds`) build their LP and ILP models on
the same count model. Solving runs through PuLP: HiGHS in process, CBC as the fallback.

`types_for_plan` counts the types before it builds any (orders x chunk sizes) and refuses more
than `LP_ORDER_TYPES` (nine dimensions and more) in one line: its callers that can do without the
LP (the bounds, `dse compare`) check the count first and fall back; any other is refused rather
than left to enumerate 9! or 40! orders.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dse.core.collectives import ALL_REDUCE, ALL_TO_ALL
from dse.core.errors import InputError
from dse.core.limits import LP_ORDER_TYPES
from dse.core.topology import Topology
from dse.costs.base import ChunkPlan, CostModel, Phase

#: the models are solved in microseconds: keeps the coefficients near 1
SCALE = 1e-3


def count_text(n: int) -> str:
    """A count of orders or types for a message: 40,320, or from 10^12 up 8.2e+47 (40! orders)."""
    return f"{n:,}" if n < 10**12 else f"{n:.2g}"


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
        """The order as digits (comma-separated beyond ten dimensions), ``/AR`` for the AR composition."""
        s = "".join(map(str, self.order)) if len(self.order) <= 10 else ",".join(map(str, self.order))
        return s + ("/AR" if self.ar_phase else "")


def types_for_plan(
    model: CostModel, topo: Topology, coll: str, plan: ChunkPlan, latency_mode: str, *, ar_phase: bool = True
) -> list[ChunkType]:
    """The chunk types of a chunk plan: every dimension order (for all-to-all only the ascending
    one), per chunk size; `ar_phase=False` leaves out ASTRA-sim's baseline composition. More than
    `LP_ORDER_TYPES` types are refused, counted before any is built (module docstring)."""
    nd = topo.ndims
    count = (1 if coll == ALL_TO_ALL else math.factorial(nd)) * len(set(plan.sizes))
    if count > LP_ORDER_TYPES:
        raise InputError(
            "topology",
            f"{nd} dimensions make {count_text(count)} chunk types (dimension orders x chunk sizes), more than the "
            f"{LP_ORDER_TYPES:,} an LP over the orders is built for",
            "at most 8 dimensions here",
        )
    if coll == ALL_TO_ALL:
        orders: list[tuple[int, ...]] = [tuple(range(nd))]
    else:
        orders = list(itertools.permutations(range(nd)))
    variants = [(o, False) for o in orders]
    if coll == ALL_REDUCE and model.rules.baseline_ar_phase and ar_phase:
        variants.append((tuple(range(nd)), True))
    memo: dict = {}
    out = []
    for size, count in sorted(Counter(plan.sizes).items()):
        for order, ar in variants:
            phases = model.phases(topo, coll, order, size, latency_mode=latency_mode, baseline=ar, memo=memo)
            out.append(_chunk_type(order, ar, size, count, phases, nd))
    return out


def _chunk_type(
    order: tuple[int, ...], ar: bool, size: float, count: int, phases: Sequence[Phase], nd: int
) -> ChunkType:
    """One chunk type from its phases: the load, head and tail per dimension and the whole path."""
    load = [0.0] * nd
    head = [math.inf] * nd
    tail = [0.0] * nd
    t = 0.0
    for ph in phases:
        load[ph.dim] += ph.busy
        if head[ph.dim] == math.inf:
            head[ph.dim] = t
        t += ph.busy + ph.delay
    for d in range(nd):
        last = max(i for i, ph in enumerate(phases) if ph.dim == d)
        tail[d] = phases[last].delay + sum(ph.busy + ph.delay for ph in phases[last + 1 :])
    return ChunkType(order, ar, size, count, tuple(load), tuple(head), tuple(tail), t)


def fluid_mix(types: list[ChunkType], slots: int, *, time_limit_s: float = 10.0) -> tuple[float, ...]:
    """The fluid LP's chunks per type (fractions; HiGHS): a mix that balances the dimensions' loads
    best. `slots`: phases a dimension runs at once at full speed."""
    model = CountModel.build(types, slots, relax=True)
    model.add_load_rows(types, slots)
    return tuple(run_model(model.prob, model.counts, relax=True, solver="highs", time_limit_s=time_limit_s, gap=0.0))


@dataclass(frozen=True)
class CountModel:
    """A PuLP model over chunk counts per type: minimise T, the busiest dimension's load (ns x
    `SCALE`), with every chunk of each size given a type. Rows on T come from `add_load_rows`."""

    prob: Any  # pulp.LpProblem
    T: Any  # pulp.LpVariable
    counts: list[Any]  # one pulp.LpVariable per chunk type

    @classmethod
    def build(cls, types: list[ChunkType], slots: int, *, relax: bool, lower: float = 0.0) -> CountModel:
        """The variables, the objective and one row per chunk size; `lower` (ns) bounds T below."""
        import pulp

        prob = pulp.LpProblem("dse_bound", pulp.LpMinimize)
        T = prob.add_variable("T", lowBound=max(0.0, lower) * SCALE)
        cat = "Continuous" if relax else "Integer"
        k = [prob.add_variable(f"k{i}", lowBound=0, upBound=t.count, cat=cat) for i, t in enumerate(types)]
        prob.setObjective(pulp.LpAffineExpression([(T, 1.0)]))
        for size in sorted({t.size for t in types}):
            members = [(k[i], 1.0) for i, t in enumerate(types) if t.size == size]
            count = next(t.count for t in types if t.size == size)
            prob += pulp.LpConstraint(pulp.LpAffineExpression(members), pulp.LpConstraintEQ, rhs=count)
        return cls(prob, T, k)

    def add_load_rows(self, types: list[ChunkType], slots: int, extra: list[list[Any]] | None = None) -> None:
        """Each dimension's load, plus its `extra` expressions (the pipeline's fill and drain), <= T."""
        import pulp

        prob, k = self.prob, self.counts
        for d in range(len(types[0].load)):
            terms = [(k[i], t.load[d] * SCALE / slots) for i, t in enumerate(types) if t.load[d]]
            expr = pulp.LpAffineExpression(terms + [(self.T, -1.0)])
            for more in extra[d] if extra is not None else ():
                expr = expr + more
            prob += expr <= 0


def run_model(
    prob: Any,
    variables: list,
    *,
    relax: bool,
    solver: str,
    time_limit_s: float,
    node_limit: int | None = None,
    gap: float,
) -> list[float]:
    """Solve `prob` (HiGHS or CBC) and return the values of `variables` (0 where the solver left none).
    `node_limit` caps HiGHS's branch-and-bound nodes; `gap` is the relative gap it may stop at."""
    if solver == "highs":
        extra = {"mip_max_nodes": int(node_limit)} if node_limit and not relax else {}
        values = _solve_with(prob, _highs(not relax, time_limit_s, gap, extra), variables)
    else:
        values = _solve_with(prob, _cbc(mip=not relax, msg=False, timeLimit=time_limit_s, gapRel=gap), variables)
    if solver == "highs" and not relax:
        import highspy

        if prob.solverModel.getModelStatus() == highspy.HighsModelStatus.kSolveError:
            # HiGHS can find the optimum, then reject it for a 1e-6 row violation: solve once more
            # with a tighter feasibility tolerance
            tight = {"mip_feasibility_tolerance": 1e-9, "primal_feasibility_tolerance": 1e-9}
            values = _solve_with(prob, _highs(True, time_limit_s, gap, {**tight, **extra}), variables)
    return values


def _highs(mip: bool, time_limit_s: float, gap: float, options: dict[str, Any]) -> Any:
    """PuLP's in-process HiGHS, quiet, with no feasibility-jump heuristic, plus `options`."""
    import pulp

    return pulp.HiGHS(
        mip=mip,
        msg=False,
        timeLimit=time_limit_s,
        gapRel=gap,
        gapAbs=0.0,
        mip_heuristic_run_feasibility_jump=False,
        **options,
    )


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


def _solve_with(prob: Any, cmd: Any, variables: list) -> list[float]:
    """The variables' values after the solve; a value the solver leaves undefined (None, NaN) is 0."""
    try:
        prob.solve(cmd)
        values = [v.value() for v in variables]
    except KeyError:  # PuLP 3 has no name for HiGHS's node-limit status: read the solver directly
        col = prob.solverModel.getSolution().col_value
        values = [col[v.index] if len(col) > v.index else 0.0 for v in variables]
    return [x if x is not None and math.isfinite(x) else 0.0 for x in values]
