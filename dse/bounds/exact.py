"""The exact schedule problem of one collective, and its CP-SAT model (docs/model.md §12).

The problem. Every chunk picks a route: a dimension order (its reduce-scatter visits the
dimensions in that order, an all-reduce's all-gather then returns in reverse; all-to-all has the
ascending order only), or, in the ASTRA-sim models, the baseline's all-reduce composition (one AR
phase on the last dimension). A route is the cost model's phase list for that chunk: each phase
holds its dimension for `busy` ns and its chunk reaches the next phase `delay` ns later (the model's
latency mode decides which part of the latency is which). Every dimension serves one phase at a
time, in a sequence it chooses freely among the phases that have reached it or will (it may stay
idle while a phase waits). The time is when the last chunk ends. This is exactly what the
simulator runs with the `fixed` queue and `active_chunks` = 1 (`dse.sim.service_order`), so a
solution replays in it.

Times are integers of `ExactProblem.unit` ns: the largest step that divides every busy and delay
value when that step keeps the horizon under 2^40 steps (then the integer problem is the problem);
otherwise a power-of-two step with every value rounded down, so the integer optimum stays a valid
lower bound and a solution's sequences, replayed with the true values, a valid schedule
(`ExactProblem.exact` says which).

The model (`ExactModel`): for orders, per chunk a path through the subsets of dimensions already
reduced (one Boolean per (subset, next dimension) edge, an optional interval per phase on the edge:
the same edge is the same phase whatever order led to it, checked when the problem is built);
routes that are not such a path (the AR composition, or any model whose phases depend on more than
the subset) are one Boolean each with their own intervals. One no-overlap constraint per dimension;
chunks of the same size are interchangeable, so their routes are ordered and, on equal routes, so
are their phases' starts (valid: two equal chunks can always swap the later of their starts).

Its size is counted before anything is enumerated (`exact_refusal`): at most `EXACT_ORDER_TYPES`
chunk types (dimension orders x chunk sizes: six dimensions with two sizes, as for the ILP) and
`MAX_INTERVALS` phases in all (chunks x each route's phases). `build_problem` refuses a larger
one; `dse.bounds.optimal` then falls back to its seeds, `lower_bounds(exact_work=...)` to dse's
bound, each with a note. A problem restricted to given orders (`build_problem(spec, orders)`)
holds only those routes: its schedules are valid, but no bound on it bounds the whole problem.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from dse.core.collectives import ALL_REDUCE, ALL_TO_ALL
from dse.core.errors import InputError
from dse.core.limits import EXACT_ORDER_TYPES
from dse.schedulers.order_mix import count_text
from dse.sim.spec import CollectiveSpec

#: an integer problem's horizon stays under this many steps (CP-SAT's domains and linear relaxation)
MAX_STEPS = 2**40
#: the largest exact problem built: phases in all (chunks x the phases of each of their routes)
MAX_INTERVALS = 200_000


class Route(NamedTuple):
    """One way a chunk can run: its dimension order, whether it is the AR composition, its phases
    as (dim, busy steps, delay steps), and the true phases' (busy, delay) ns."""

    order: tuple[int, ...]
    ar_phase: bool
    steps: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class ExactProblem:
    """One collective as an exact scheduling problem (see the module docstring)."""

    spec: CollectiveSpec
    sizes: tuple[float, ...]
    routes: tuple[tuple[Route, ...], ...]  # per chunk, indexed like `kinds`
    kinds: tuple[int, ...]  # per chunk, the index of its size class (chunks of one class are interchangeable)
    unit: Fraction
    exact: bool
    flow: bool  # the order routes form a path model (their phases depend on the subset done only)

    @property
    def nchunks(self) -> int:
        """The number of chunks."""
        return len(self.sizes)

    @property
    def ndims(self) -> int:
        """The number of dimensions of the topology."""
        return self.spec.topology.ndims

    def chunk_routes(self, k: int) -> tuple[Route, ...]:
        """The routes chunk `k` may take (those of its size class)."""
        return self.routes[self.kinds[k]]

    def horizon(self) -> int:
        """A schedule's time can never need more steps than all chunks one after the other
        (computed once: the model asks for it often)."""
        h = self.__dict__.get("_horizon")
        if h is None:
            longest = [max(sum(b + d for _, b, d in r.steps) for r in routes) for routes in self.routes]
            h = sum(longest[c] for c in self.kinds)
            object.__setattr__(self, "_horizon", h)
        return h

    def ns(self, steps: int | float) -> float:
        """`steps` of the problem's time unit in ns (exact for a whole number of steps)."""
        return float(Fraction(steps) * self.unit) if isinstance(steps, int) else steps * float(self.unit)


def exact_refusal(spec: CollectiveSpec) -> InputError | None:
    """Why the exact problem of `spec` is too large to build (module docstring), or None; counted
    from the topology and the chunk plan, without enumerating any route."""
    nd, coll, model = spec.topology.ndims, spec.collective, spec.cost_model
    orders = 1 if coll == ALL_TO_ALL else math.factorial(nd)
    if orders > EXACT_ORDER_TYPES:
        return InputError(
            "topology",
            f"{nd} dimensions have {count_text(orders)} dimension orders, more than the "
            f"{EXACT_ORDER_TYPES:,} chunk types the exact problem is built for",
            "at most 6 dimensions (all-to-all: any)",
        )
    plan = model.chunking(coll, spec.size, spec.chunks, spec.topology, baseline=False)
    counts: dict[float, int] = {}
    for size in plan.sizes:
        counts[size] = counts.get(size, 0) + 1
    if orders * len(counts) > EXACT_ORDER_TYPES:
        return InputError(
            "chunks",
            f"{orders:,} dimension orders x {len(counts)} chunk sizes make {orders * len(counts):,} chunk types, "
            f"more than the {EXACT_ORDER_TYPES:,} the exact problem is built for",
            "chunk counts that divide the size evenly, or fewer dimensions",
        )
    phases = sum(n * _route_phases(spec, size, orders) for size, n in counts.items())
    if phases > MAX_INTERVALS:
        return InputError(
            "chunks", f"{spec.chunks} chunks make an exact model of {phases:,} phases", f"at most {MAX_INTERVALS:,}"
        )
    return None


def _route_phases(spec: CollectiveSpec, size: float, orders: int) -> int:
    """The phases of all the routes of one chunk of `size` bytes: `orders` orders of as many phases
    as the ascending one, and ASTRA-sim's AR composition where the model has it."""
    topo, coll, model, mode = spec.topology, spec.collective, spec.cost_model, spec.latency_mode
    ascending = tuple(range(topo.ndims))
    total = orders * len(model.phases(topo, coll, ascending, size, latency_mode=mode))
    if coll == ALL_REDUCE and model.rules.baseline_ar_phase:
        total += len(model.phases(topo, coll, ascending, size, latency_mode=mode, baseline=True))
    return total


def build_problem(spec: CollectiveSpec, orders: list[tuple[int, ...]] | None = None) -> ExactProblem:
    """The exact problem of a validated collective (`active_chunks` must be 1: the caller checks),
    refused (`exact_refusal`) before any route is built if it is too large; with `orders`, the
    problem restricted to those dimension orders (module docstring), which is never refused."""
    if orders is None and (refused := exact_refusal(spec)) is not None:
        raise refused
    model, topo = spec.cost_model, spec.topology
    plan = model.chunking(spec.collective, spec.size, spec.chunks, topo, baseline=False)
    classes = sorted(set(plan.sizes))
    kinds = tuple(classes.index(s) for s in plan.sizes)
    memo: dict = {}
    true_routes = [_true_routes(spec, size, memo, orders) for size in classes]
    values = {v for routes in true_routes for _, _, phases in routes for ph in phases for v in (ph.busy, ph.delay)}
    horizon_ns = sum(max(sum(ph.busy + ph.delay for ph in r[2]) for r in true_routes[c]) for c in kinds)
    unit, exact = _unit(values, horizon_ns)
    routes = tuple(
        tuple(
            Route(o, ar, tuple((ph.dim, _steps(ph.busy, unit), _steps(ph.delay, unit)) for ph in phases))
            for o, ar, phases in rs
        )
        for rs in true_routes
    )
    flow = (
        orders is None
        and spec.collective != ALL_TO_ALL
        and all(edge_table(r, topo.ndims, spec.collective) is not None for r in routes)
    )
    return ExactProblem(spec, tuple(plan.sizes), routes, kinds, unit, exact, flow)


def _true_routes(
    spec: CollectiveSpec, size: float, memo: dict, only: list[tuple[int, ...]] | None = None
) -> list[tuple[tuple[int, ...], bool, tuple]]:
    model, topo, coll = spec.cost_model, spec.topology, spec.collective
    nd = topo.ndims
    if only is not None:
        orders = list(dict.fromkeys(tuple(o) for o in only))
    else:
        orders = [tuple(range(nd))] if coll == ALL_TO_ALL else list(itertools.permutations(range(nd)))
    variants = [(o, False) for o in orders]
    if coll == ALL_REDUCE and model.rules.baseline_ar_phase and only is None:
        variants.append((tuple(range(nd)), True))
    return [
        (o, ar, model.phases(topo, coll, o, size, latency_mode=spec.latency_mode, baseline=ar, memo=memo))
        for o, ar in variants
    ]


def _unit(values: set[float], horizon_ns: float) -> tuple[Fraction, bool]:
    """The step (ns) of the integer problem, and whether every value is a whole number of steps."""
    fr = [Fraction(v) for v in values if v]
    if not fr:
        return Fraction(1), True
    den = math.lcm(*(f.denominator for f in fr))
    g = Fraction(math.gcd(*(int(f * den) for f in fr)), den)
    if horizon_ns / g < MAX_STEPS:
        return g, True
    step = Fraction(2) ** math.floor(math.log2(horizon_ns / MAX_STEPS) + 1)
    return step, all(f % step == 0 for f in fr)


def _steps(v: float, unit: Fraction) -> int:
    return math.floor(Fraction(v) / unit)


def edge_table(routes: tuple[Route, ...], nd: int, coll: str) -> dict | None:
    """(subset done, dim) -> (first-pass step, all-gather step or None), if the order routes'
    phases depend only on that (None otherwise)."""
    table: dict[tuple[frozenset, int], tuple] = {}
    for r in routes:
        if r.ar_phase:
            continue
        for j, d in enumerate(r.order):
            back = r.steps[2 * nd - 1 - j] if coll == ALL_REDUCE else None
            val = (r.steps[j], back)
            if r.steps[j][0] != d or (back is not None and back[0] != d):
                return None
            if table.setdefault((frozenset(r.order[:j]), d), val) != val:
                return None
    return table


class Schedule(NamedTuple):
    """A schedule of an `ExactProblem`: the route index of each chunk, and per dimension the
    chunk ids it serves in order (the `fixed` queue's service order)."""

    routes: tuple[int, ...]
    service: tuple[tuple[int, ...], ...]


def replay_steps(problem: ExactProblem, schedule: Schedule) -> tuple[int, dict[tuple[int, int], int]] | None:
    """The integer time of a schedule (every phase as early as its sequence allows) and each
    phase's start, by (chunk, phase index); None if the sequences deadlock."""
    nd, n = problem.ndims, problem.nchunks
    plans = [problem.chunk_routes(k)[schedule.routes[k]].steps for k in range(n)]
    pos, free, nxt, ready = [0] * nd, [0] * nd, [0] * n, [0] * n
    starts: dict[tuple[int, int], int] = {}
    left, end = sum(len(s) for s in schedule.service), 0
    moved = True
    while left and moved:
        moved = False
        for d in range(nd):
            seq = schedule.service[d]
            while pos[d] < len(seq):
                k = seq[pos[d]]
                j = nxt[k]
                if j >= len(plans[k]) or plans[k][j][0] != d:
                    break
                _, busy, delay = plans[k][j]
                t = max(free[d], ready[k])
                starts[(k, j)] = t
                free[d] = t + busy
                ready[k] = t + busy + delay
                nxt[k] = j + 1
                end = max(end, ready[k]) if nxt[k] == len(plans[k]) else end
                pos[d] += 1
                left -= 1
                moved = True
    return None if left else (end, starts)
