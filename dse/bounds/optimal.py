"""`optimal_schedule`: the best schedule of one collective, with a proven lower bound (docs/model.md §12).

The problem is `dse.bounds.exact`'s: every chunk picks a route (dimension order, or ASTRA-sim's AR
composition), every dimension the sequence in which it serves its phases (idle time allowed).
The search, all of it within one budget of CP-SAT work (deterministic, one core):

1. Seeds: lp_guided and Themis (smallest-first queue), replayed; the better is the first schedule.
2. dse's bound (`lower_bounds`: the pipeline bound) is the first lower bound. If a seed meets
   it, that seed is optimal and no solver runs. Otherwise, with more than `COARSE_CHUNKS` chunks,
   the coarse seed: the same collective solved first (this same search, on `COARSE_SHARE` of the
   budget) at the largest divisor of the chunks up to `COARSE_CHUNKS`, each of its chunks then
   split into consecutive chunks that follow its route and take its place in every dimension's
   sequence. With many chunks the pipeline bound barely moves from 16 chunks on, so the coarse
   optimum is close to the fine one, while a fine model of thousands of intervals is far harder to
   search from lp_guided's schedule.
3. A short minimisation (a twentieth of the budget): with few chunks it proves the optimum at
   once, most often above dse's bound. Short of that, what it found waits until after step 4.
4. Is there a schedule within the bound? A decision problem, started from the best schedule, on
   at most half the budget: where the bound is the optimum (most cases with many chunks) CP-SAT
   finds such a schedule far sooner than it could prove it optimal by itself. If it proves there
   is none, the bound rises.
5. The whole problem, from the best schedule, with the bound as the time's floor: CP-SAT's
   portfolio (interleaved on one core) improves the schedule and raises the bound until they meet
   or the budget runs out.

A schedule's time is its replay in the simulator (queue `fixed`), never the solver's word; the
lower bound is the highest of dse's bound and what CP-SAT proved. `status` is ``optimal`` only when
the two meet (to 1e-9, the bound's own float noise); otherwise ``feasible`` with the gap.

An exact problem too large to build (`dse.bounds.exact.exact_refusal`: seven dimensions and more,
or more phases than `dse.bounds.exact.MAX_INTERVALS`), counted before anything is enumerated,
falls back: the seeds that can run (lp_guided up to `LP_ORDER_TYPES` chunk types, Themis always)
against dse's bound (the LP or the ideal there), no solver, and a note saying so.
The seed is CP-SAT's, a 32-bit integer: 0 to `MAX_SEED`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Unpack

from dse.bounds.exact import ExactProblem, Schedule, build_problem, exact_refusal
from dse.bounds.exact_model import Job, SolveResult, solve
from dse.bounds.relaxations import CollectiveRecord, bounds_for
from dse.core.errors import InputError
from dse.core.topology import Topology
from dse.core.units import parse_int
from dse.schedulers import get_scheduler
from dse.sim.evaluate import evaluate_prepared, route_plans
from dse.sim.result import Result
from dse.sim.service_order import served_order
from dse.sim.simulate import simulate
from dse.sim.spec import CollectiveSpec, RunSpec, SpecArgs

#: the default budget: CP-SAT deterministic seconds (about seconds of one quiet core)
DEFAULT_WORK = 20.0
#: the largest seed: CP-SAT's `random_seed` is a 32-bit signed integer
MAX_SEED = 2**31 - 1
#: the bound is trusted to this relative precision (its LP's float noise)
BOUND_TOLERANCE = 1e-9
SEED_SCHEDULERS = ("lp_guided", "themis")
#: the shares of the budget (of what is left) the quick minimisation and the decision may take
QUICK_SHARE = 0.05
DECIDE_SHARE = 0.5
#: above this many chunks the search first solves the collective at (at most) this many
COARSE_CHUNKS = 16
#: the share of the budget the coarse solve may take
COARSE_SHARE = 0.5


@dataclass(frozen=True)
class OptimalSchedule(CollectiveRecord):
    """The best schedule found for one collective, its time, the best proven lower bound, and how."""

    time_ns: float
    bound_ns: float
    status: str  # optimal | feasible
    orders: tuple[tuple[int, ...], ...]
    ar_phase: tuple[bool, ...]
    service_order: tuple[tuple[int, ...], ...]
    found_by: str  # lp_guided | themis | coarse | solver
    dse_bound_ns: float
    seed_ns: dict[str, float]
    work: float
    wall_s: float
    exact_units: bool
    seed: int
    notes: tuple[str, ...] = field(default=())

    @property
    def gap(self) -> float:
        """How far the schedule may be above the optimum (0 when proven optimal)."""
        return 0.0 if self.status == "optimal" else self.time_ns / self.bound_ns - 1.0

    def replay_args(self) -> dict[str, Any]:
        """`dse.evaluate`'s keywords that replay this schedule (no AR compositions in it)."""
        if any(self.ar_phase):
            raise ValueError("a schedule with ASTRA-sim's AR composition replays with scheduler='optimal' only")
        return {
            "scheduler": "fixed",
            "orders": ";".join(",".join(map(str, o)) for o in self.orders),
            "queue": "fixed",
            "service_order": [list(s) for s in self.service_order],
        }

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready fields, with its gap, orders as digit strings and lists for tuples."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["gap"] = self.gap
        d["orders"] = ["".join(map(str, o)) if len(o) <= 10 else list(o) for o in self.orders]
        d["service_order"] = [list(s) for s in self.service_order]
        d["ar_phase"] = list(self.ar_phase)
        d["notes"] = list(self.notes)
        return d


def optimal_schedule(
    topology: Topology | str | CollectiveSpec,
    *,
    work: float = DEFAULT_WORK,
    time_limit: float | None = None,
    seed: int = 0,
    node_limit: int = 10_000,
    **spec_args: Unpack[SpecArgs],
) -> OptimalSchedule:
    """The best schedule of one collective within `work` (CP-SAT deterministic seconds on one core;
    the same arguments give the same answer on every machine), its time replayed in the
    simulator, and the best proven lower bound (see the module docstring).

    `topology` and `spec_args`: the collective, as `evaluate` takes it (`SpecArgs`), or a
    `CollectiveSpec`, with `active_chunks` 1. `time_limit`: also stop after this many seconds of
    wall time (then the answer may depend on the machine's load). `seed`: CP-SAT's random seed.
    `node_limit`: the nodes of each solve of dse's own bound (as `lower_bounds`)."""
    spec = CollectiveSpec.parse(topology, **spec_args)
    budget = _positive(work, "work")
    wall = None if time_limit is None else _positive(time_limit, "time_limit")
    return optimal_for(
        spec,
        work=budget,
        time_limit=wall,
        seed=parse_int(seed, "seed", minimum=0, maximum=MAX_SEED),
        node_limit=parse_int(node_limit, "node_limit", minimum=1),
    )


def optimal_for(
    spec: CollectiveSpec, *, work: float, time_limit: float | None = None, seed: int = 0, node_limit: int = 10_000
) -> OptimalSchedule:
    """`optimal_schedule` of a validated collective and validated settings (remembered when
    deterministic, that is without `time_limit`); the seed is checked here too (`MAX_SEED`: the
    `optimal` scheduler passes any evaluation's). An exact problem too large to build falls back
    to the seeds (module docstring)."""
    if spec.active_chunks != 1:
        raise InputError(
            "active_chunks", f"{spec.active_chunks}", "1: the exact problem runs one phase at a time per dimension"
        )
    seed = parse_int(seed, "seed", minimum=0, maximum=MAX_SEED)
    key: tuple[Any, ...] = (spec.topology, spec.collective, spec.size, spec.chunks, spec.cost_model.name)
    key += (spec.latency_mode, work, seed, node_limit)
    if time_limit is None and key in _SOLVED:  # deterministic: the same arguments, the same answer
        return _SOLVED[key]
    refused = exact_refusal(spec)  # counted, before any route is built
    runs = _seed_runs(spec, seed, all_seeds=refused is None)
    if refused is None:
        problem = build_problem(spec)
    else:
        problem = build_problem(spec, orders=[tuple(o) for r in runs.values() for o in r.orders])
    best = _Search(problem, work, time_limit, seed, node_limit, refused).search(runs)
    if time_limit is None:
        if len(_SOLVED) >= 64:
            _SOLVED.clear()
        _SOLVED[key] = best
    return best


#: solves of this process by their arguments (those without a wall-clock limit: deterministic)
_SOLVED: dict[tuple[Any, ...], OptimalSchedule] = {}


def _positive(v: object, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < math.inf):
        raise InputError(name, f"{v!r}", "a positive number")
    return float(v)


def _seed_runs(spec: CollectiveSpec, seed: int, *, all_seeds: bool) -> dict[str, Result]:
    """The seed schedulers' runs (step 1), with their timelines; without `all_seeds` (the fallback)
    lp_guided only where its LP over the orders is allowed (`too_many_orders`)."""
    from dse.schedulers.lp_guided import too_many_orders

    plan = spec.cost_model.chunking(spec.collective, spec.size, spec.chunks, spec.topology, baseline=False)
    runs = {}
    for name in SEED_SCHEDULERS:
        if not all_seeds and name == "lp_guided" and too_many_orders(spec.topology.ndims, len(set(plan.sizes))):
            continue
        runs[name] = evaluate_prepared(RunSpec(spec, get_scheduler(name), "scf", seed, "decimal"), timeline=True)
    return runs


class _Search:
    """One run of the search in the module docstring (with `refused`, the fallback: seeds only)."""

    def __init__(
        self,
        problem: ExactProblem,
        work: float,
        wall: float | None,
        seed: int,
        node_limit: int,
        refused: InputError | None = None,
    ) -> None:
        self.p, self.left, self.wall, self.seed = problem, work, wall, seed
        self.refused = refused
        self.t0 = time.perf_counter()
        self.node_limit = node_limit
        self.best: Schedule | None = None
        self.best_ns = math.inf
        self.found_by = ""
        self.lower = 0
        self.seed_ns: dict[str, float] = {}
        self.notes: list[str] = []
        if not problem.exact:
            self.notes.append(
                f"costs are not whole steps of any step fine enough: rounded down to {float(problem.unit):g} ns "
                "(the bound stays valid; the schedule is timed with the true costs)"
            )
        self.spent = 0.0
        self.dse_bound = 0.0

    def search(self, runs: dict[str, Result]) -> OptimalSchedule:
        """The search's steps 1 to 5 (module docstring) from the seeds' `runs`, and its record."""
        for name, res in runs.items():
            self._seed(name, res)
        bounds = bounds_for(self.p.spec, node_limit=self.node_limit, time_limit_s=math.inf)
        self.dse_bound = bounds.bound_ns
        self.lower = max(0, math.ceil(bounds.bound_ns * (1 - BOUND_TOLERANCE) / float(self.p.unit)))
        if self.refused is not None:  # the fallback: the restricted problem's steps bound nothing
            self.lower = 0
            self.notes = [n for n in self.notes if not n.startswith("costs are not whole steps")]
            self.notes.append(
                f"the exact problem was not solved: {self.refused.problem}; the schedule is the best seed's "
                f"({', '.join(runs)}), the bound dse's ({bounds.status})"
            )
            self.notes += [n for n in bounds.notes if bounds.status in ("lp_only", "ideal_only")]
            return self._result()
        if not self._done():
            self._coarse()
        held = self._quick() if not self._done() else None
        if not self._done():
            self._at_bound()
        if held is not None:  # what the quick solve found, kept aside so as not to steer the decision
            if held.schedule is not None:
                self._offer(held.schedule, "solver")
            self.lower = max(self.lower, held.bound)
        if not self._done():
            self._whole(1.0, portfolio=True)
        return self._result()

    def _done(self) -> bool:
        return self.best_ns <= self._bound_ns() * (1 + BOUND_TOLERANCE) or self.left <= 0 or self._out_of_time()

    def _out_of_time(self) -> bool:
        return self.wall is not None and time.perf_counter() - self.t0 >= self.wall

    def _bound_ns(self) -> float:
        return max(self.dse_bound, self.p.ns(self.lower))

    def _seed(self, name: str, res: Result) -> None:
        self.seed_ns[name] = res.time_ns
        schedule = _from_timeline(self.p, res.orders, res.timeline or ())
        self._offer(schedule, name)

    def _coarse(self) -> None:
        """The coarse seed (step 2): the collective at fewer chunks, each chunk then split."""
        spec = self.p.spec
        fewer = coarse_chunks(spec.chunks)
        if fewer is None:
            return
        wall = None if self.wall is None else max(0.01, self.wall - (time.perf_counter() - self.t0))
        coarse = optimal_for(
            replace(spec, chunks=fewer),
            work=self.left * COARSE_SHARE,
            time_limit=wall,
            seed=self.seed,
            node_limit=self.node_limit,
        )
        self.left -= coarse.work
        self.spent += coarse.work
        schedule = split_schedule(self.p, coarse.orders, coarse.ar_phase, coarse.service_order)
        if schedule is not None:
            self._offer(schedule, "coarse")

    def _offer(self, schedule: Schedule, who: str) -> None:
        """Keep `schedule` if its simulated time beats the best so far."""
        t = replay_ns(self.p, schedule)
        if t < self.best_ns:
            self.best, self.best_ns, self.found_by = schedule, t, who

    def _quick(self) -> SolveResult | None:
        """A short minimisation (CP-SAT's default search): with few chunks it proves the optimum
        at once. Anything short of that is returned, to be used after the decision."""
        upper = math.floor(self.best_ns / float(self.p.unit)) if self.p.exact else None
        r = self._solve(Job(self.p, None, self.lower, upper, True, self.best, 0, None, self.seed), share=QUICK_SHARE)
        if r.status != "OPTIMAL":
            return r
        if r.schedule is not None:
            self._offer(r.schedule, "solver")
        self.lower = max(self.lower, r.bound)
        return None

    def _at_bound(self) -> None:
        """Is there a schedule within the bound? (a decision problem, from the best schedule)"""
        upper = math.floor(self._bound_ns() * (1 + BOUND_TOLERANCE) / float(self.p.unit))
        r = self._solve(Job(self.p, None, self.lower, upper, False, self.best, 0, None, self.seed), share=DECIDE_SHARE)
        if r.schedule is not None:
            self._offer(r.schedule, "solver")
        elif r.status == "INFEASIBLE":
            self.lower = max(self.lower, upper + 1)

    def _whole(self, share: float, *, portfolio: bool) -> None:
        """Minimise the time from the best schedule, the bound as its floor: improve both."""
        upper = math.floor(self.best_ns / float(self.p.unit)) if self.p.exact else None
        job = Job(self.p, None, self.lower, upper, True, self.best, 0, None, self.seed, portfolio=portfolio)
        r = self._solve(job, share=share)
        if r.schedule is not None:
            self._offer(r.schedule, "solver")
        self.lower = max(self.lower, r.bound)

    def _solve(self, job: Job, share: float) -> SolveResult:
        wall = None if self.wall is None else max(0.01, self.wall - (time.perf_counter() - self.t0))
        r = solve(job._replace(work=max(0.01, self.left * share), time_limit=wall))
        if r.status == "CRASHED":
            self.notes.append("CP-SAT's worker died twice in one solve: that step was skipped")
        self.left -= r.work
        self.spent += r.work
        return r

    def _result(self) -> OptimalSchedule:
        p, spec = self.p, self.p.spec
        assert self.best is not None
        bound = self._bound_ns()
        optimal = self.best_ns <= bound * (1 + BOUND_TOLERANCE)
        routes = [p.chunk_routes(k)[ri] for k, ri in enumerate(self.best.routes)]
        return OptimalSchedule(
            **CollectiveRecord.fields_of(spec),
            time_ns=self.best_ns,
            bound_ns=min(bound, self.best_ns),
            status="optimal" if optimal else "feasible",
            orders=tuple(r.order for r in routes),
            ar_phase=tuple(r.ar_phase for r in routes),
            service_order=self.best.service,
            found_by=self.found_by,
            dse_bound_ns=self.dse_bound,
            seed_ns=self.seed_ns,
            work=round(self.spent, 3),
            wall_s=time.perf_counter() - self.t0,
            exact_units=p.exact,
            seed=self.seed,
            notes=tuple(self.notes),
        )


def coarse_chunks(chunks: int) -> int | None:
    """The chunk count of the coarse seed: the largest divisor of `chunks` up to `COARSE_CHUNKS`
    (None when `chunks` is not above it, or has no such divisor but 1)."""
    if chunks <= COARSE_CHUNKS:
        return None
    fewer = max(d for d in range(1, COARSE_CHUNKS + 1) if chunks % d == 0)
    return fewer if fewer > 1 else None


def split_schedule(
    p: ExactProblem,
    orders: Sequence[tuple[int, ...]],
    ar_phase: Sequence[bool],
    service_order: Sequence[Sequence[int]],
) -> Schedule | None:
    """A coarse schedule (per coarse chunk its order and AR flag, per dimension its sequence) on
    `p`'s chunks: chunk k follows coarse chunk k // m's route, and each coarse chunk's place in a
    dimension's sequence becomes its m chunks' places, in turn. None when `p`'s chunks are not m
    times the coarse ones or lack one of their routes."""
    m, rest = divmod(p.nchunks, len(orders))
    if rest or m < 1:
        return None
    routes = []
    for k in range(p.nchunks):
        want = (tuple(orders[k // m]), ar_phase[k // m])
        found = [i for i, r in enumerate(p.chunk_routes(k)) if (r.order, r.ar_phase) == want]
        if not found:
            return None
        routes.append(found[0])
    service = tuple(tuple(c * m + j for c in seq for j in range(m)) for seq in service_order)
    return Schedule(tuple(routes), service)


def _from_timeline(p: ExactProblem, orders: Any, timeline: Any) -> Schedule:
    """A simulated run as a `Schedule`: its orders as routes, the service order its timeline shows."""
    routes = []
    for k, o in enumerate(orders):
        routes.append(next(i for i, r in enumerate(p.chunk_routes(k)) if r.order == tuple(o) and not r.ar_phase))
    return Schedule(tuple(routes), served_order(timeline, p.ndims))


def replay_ns(p: ExactProblem, schedule: Schedule) -> float:
    """A schedule's time as the simulator runs it (queue `fixed`, the true costs)."""
    spec = p.spec
    routes = [p.chunk_routes(k)[ri] for k, ri in enumerate(schedule.routes)]
    plans = route_plans(
        spec.cost_model,
        spec.topology,
        spec.collective,
        [r.order for r in routes],
        p.sizes,
        spec.latency_mode,
        [r.ar_phase for r in routes],
    )
    out = simulate(plans, p.ndims, queue="fixed", rules=spec.cost_model.rules, service_order=schedule.service)
    return out.time_ns
