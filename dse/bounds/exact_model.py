"""The CP-SAT model of an `ExactProblem`, and one solve of it (docs/model.md §12).

See `dse.bounds.exact` for the problem and the model's shape. Solves are deterministic: one
worker, a fixed seed, and a limit of CP-SAT's deterministic time (`work`, about seconds of one
core on a quiet machine); a wall-clock `time_limit` may also stop one, at the cost of the result
depending on the machine's load.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any, NamedTuple

from dse.bounds.exact import ExactProblem, Schedule, edge_table, replay_steps
from dse.bounds.exact_worker import WorkerDied, call
from dse.core.collectives import ALL_REDUCE

#: a phase's key among a chunk's start variables: its index in a route, or on the path its edge
#: (the subset done, the dimension, whether it is the all-gather phase)
PhaseKey = int | tuple[frozenset[int], int, bool]
#: subsolvers of the interleaved portfolio (they take turns on one core: `dse.bounds.exact_worker`)
PORTFOLIO = 8


class SolveResult(NamedTuple):
    """One CP-SAT solve: its status (OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN; CRASHED: the worker
    died twice, `solve`), the schedule found
    (or None), its integer time, the proven integer lower bound, and the work and wall time spent."""

    status: str
    schedule: Schedule | None
    objective: int | None
    bound: int
    work: float
    wall_s: float


class ExactModel:
    """The CP-SAT model (see `dse.bounds.exact`).

    `fixed`: a route per chunk (the job shop left once the routes are chosen); `lower` / `upper`:
    integer bounds on the time; `objective=False`: a decision problem (a schedule within `upper`?).
    """

    def __init__(
        self,
        problem: ExactProblem,
        *,
        fixed: tuple[int, ...] | None = None,
        lower: int = 0,
        upper: int | None = None,
        objective: bool = True,
    ) -> None:
        from ortools.sat.python import cp_model

        self.p = problem
        self.m = cp_model.CpModel()
        self.horizon = problem.horizon() if upper is None else min(upper, problem.horizon())
        self.mk = self.m.new_int_var(min(lower, self.horizon), self.horizon, "time")
        self.per_dim: list[list[Any]] = [[] for _ in range(problem.ndims)]
        self.load: list[list[tuple[int, Any]]] = [[] for _ in range(problem.ndims)]
        self.starts: list[
            dict[tuple[int | None, PhaseKey], tuple[Any, Any]]
        ] = []  # per chunk: (route, phase) -> (start, lit); the path's phases: (None, (subset, dim, all-gather?))
        self.lits: list[dict[int | None, Any]] = []  # per chunk: route -> literal (None: the path's edges)
        self.edges: list[dict[tuple[frozenset, int], Any]] = []
        self.codes: list[Any] = []
        for k in range(problem.nchunks):
            self.starts.append({})
            self.lits.append({})
            self.edges.append({})
            if fixed is not None:
                self._route(k, fixed[k], None)
            else:
                self._choices(k)
        for ivs in self.per_dim:
            self.m.add_no_overlap(ivs)
        self._load_cuts()
        self._symmetry(fixed)
        if objective:
            self.m.minimize(self.mk)

    # ----- the chunks' routes
    def _choices(self, k: int) -> None:
        lits = []
        for ri, r in enumerate(self.p.chunk_routes(k)):
            if not (self.p.flow and not r.ar_phase):
                lits.append(self._route(k, ri, self.m.new_bool_var(f"r{k}_{ri}")))
        if self.p.flow:
            lits.extend(self._path(k))
        self.m.add_exactly_one(lits)
        self.codes.append(self._route_code(k))

    def _route(self, k: int, ri: int, lit: Any) -> Any:
        """A route's phases as a chain of intervals (optional when `lit` is a literal)."""
        m, prev = self.m, None
        for j, (d, busy, delay) in enumerate(self.p.chunk_routes(k)[ri].steps):
            s = self._interval(d, busy, lit, k, ri, j)
            if prev is not None:
                self._when(m.add(s >= prev), lit)
            prev = s + busy + delay
        self._when(m.add(self.mk >= prev), lit)
        self.lits[k][ri] = lit
        return lit

    def _interval(self, d: int, busy: int, lit: Any, k: int, ri: int | None, j: PhaseKey) -> Any:
        s = self.m.new_int_var(0, self.horizon, "")
        if lit is None:
            iv = self.m.new_fixed_size_interval_var(s, busy, "")
        else:
            iv = self.m.new_optional_fixed_size_interval_var(s, busy, lit, "")
        self.per_dim[d].append(iv)
        self.load[d].append((busy, lit))
        self.starts[k][(ri, j)] = (s, lit)
        return s

    def _when(self, ct: Any, lit: Any) -> None:
        if lit is not None:
            ct.only_enforce_if(lit)

    def _path(self, k: int) -> list[Any]:
        """The order routes as a path over the subsets of dimensions done; returns the first edges."""
        m, h, nd = self.m, self.horizon, self.p.ndims
        table = edge_table(self.p.chunk_routes(k), nd, self.p.spec.collective)
        assert table is not None
        full = frozenset(range(nd))
        subsets = [frozenset(c) for r in range(nd + 1) for c in itertools.combinations(range(nd), r)]
        arrive = {s: m.new_int_var(0, h, "") for s in subsets}  # the first pass is done on s
        back = {s: m.new_int_var(0, h, "") for s in subsets}  # the all-gather is back down to s
        m.add(arrive[frozenset()] == 0)
        m.add(back[full] == arrive[full])
        for (done, d), steps in table.items():
            self._edge(k, done, d, steps, arrive, back)
        edges = self.edges[k]
        for s in subsets:
            if s and s != full:
                m.add(sum(edges[(s - {d}, d)] for d in s) == sum(edges[(s, d)] for d in range(nd) if d not in s))
        m.add(self.mk >= (back[frozenset()] if self.p.spec.collective == ALL_REDUCE else arrive[full]))
        self.lits[k][None] = edges
        return [edges[(frozenset(), d)] for d in range(nd)]

    def _edge(self, k: int, done: frozenset, d: int, steps: tuple, arrive: dict, back: dict) -> None:
        m, (fwd, bwd) = self.m, steps
        y = self.edges[k][(done, d)] = m.new_bool_var("")
        nxt = done | {d}
        s = self._interval(d, fwd[1], y, k, None, (done, d, False))
        m.add(s >= arrive[done]).only_enforce_if(y)
        m.add(arrive[nxt] >= s + fwd[1] + fwd[2]).only_enforce_if(y)
        if bwd is not None:
            a = self._interval(d, bwd[1], y, k, None, (done, d, True))
            m.add(a >= back[nxt]).only_enforce_if(y)
            m.add(back[done] >= a + bwd[1] + bwd[2]).only_enforce_if(y)
            m.add(a >= s + fwd[1] + fwd[2])  # the all-gather follows its reduce-scatter: always valid

    def _route_code(self, k: int) -> Any:
        """An integer naming the chunk's route: on a path, its order in base ndims, other routes
        after them (`dse.bounds.exact` builds paths up to six dimensions: 6^6 codes); without a
        path (all-to-all, of any number of dimensions), the route's index."""
        nd = self.p.ndims
        base = nd**nd if None in self.lits[k] else 0
        terms = []
        for ri, lit in self.lits[k].items():
            if ri is None:
                terms += [d * nd ** (nd - 1 - len(done)) * y for (done, d), y in lit.items()]
            else:
                terms.append((base + ri) * lit)
        v = self.m.new_int_var(0, base + len(self.p.chunk_routes(k)), "")
        self.m.add(v == sum(terms))
        return v

    # ----- cuts that every schedule satisfies
    def _load_cuts(self) -> None:
        """Each dimension serves its whole load between its earliest possible first start and the
        least tail any of its phases leaves behind."""
        head, tail = _heads_tails(self.p)
        for d, terms in enumerate(self.load):
            if terms:
                total = sum(b * (1 if lit is None else lit) for b, lit in terms if b)
                self.m.add(self.mk >= total + head[d] + tail[d])

    def _symmetry(self, fixed: tuple[int, ...] | None) -> None:
        """Chunks of one size class: routes in order, and on equal routes, starts in order."""
        p = self.p
        for k in range(p.nchunks - 1):
            if p.kinds[k] != p.kinds[k + 1]:
                continue
            if fixed is not None:
                if fixed[k] == fixed[k + 1]:
                    for key, (s, _) in self.starts[k].items():
                        self.m.add(s <= self.starts[k + 1][key][0])
                continue
            self.m.add(self.codes[k] <= self.codes[k + 1])
            eq = self.m.new_bool_var("")
            self.m.add(self.codes[k] == self.codes[k + 1]).only_enforce_if(eq)
            self.m.add(self.codes[k] < self.codes[k + 1]).only_enforce_if(~eq)
            for key, (s, lit) in self.starts[k].items():
                self.m.add(s <= self.starts[k + 1][key][0]).only_enforce_if([eq, lit])

    # ----- hints and solutions
    def hint(self, schedule: Schedule, starts: dict[tuple[int, int], int]) -> None:
        """Start the search from a known schedule (its routes and its replayed starts)."""
        for k, ri in enumerate(schedule.routes):
            for key, (s, _) in self.starts[k].items():
                on = self._key_phase(k, key, ri)
                if on is not None:
                    self.m.add_hint(s, starts[(k, on)])
            for r, lit in self.lits[k].items():
                if r is None:
                    order = self.p.chunk_routes(k)[ri].order
                    taken = {(frozenset(order[:j]), order[j]) for j in range(len(order))}
                    for e, y in lit.items():
                        self.m.add_hint(y, e in taken and not self.p.chunk_routes(k)[ri].ar_phase)
                elif lit is not None:
                    self.m.add_hint(lit, r == ri)

    def _key_phase(self, k: int, key: tuple[int | None, PhaseKey], ri: int) -> int | None:
        """The phase index of route `ri` that start variable `key` stands for (None: another route's)."""
        r, j = key
        route = self.p.chunk_routes(k)[ri]
        if isinstance(j, int):
            return j if r == ri else None
        if route.ar_phase:
            return None
        done, d, back = j
        jj = len(done)
        if frozenset(route.order[:jj]) != done or jj >= len(route.order) or route.order[jj] != d:
            return None
        return 2 * self.p.ndims - 1 - jj if back else jj

    def solution(self, solver: Any) -> Schedule:
        """The schedule of a solved model: routes, and each dimension's phases in start order."""
        routes: list[int] = []
        served: list[list[tuple[int, bool, int]]] = [[] for _ in range(self.p.ndims)]
        for k in range(self.p.nchunks):
            ri = self._chosen(k, solver)
            routes.append(ri)
            for key, (s, _) in self.starts[k].items():
                j = self._key_phase(k, key, ri)
                if j is not None:
                    d, busy, _ = self.p.chunk_routes(k)[ri].steps[j]
                    served[d].append((solver.value(s), busy > 0, k))
        return Schedule(tuple(routes), tuple(tuple(k for *_, k in sorted(seq)) for seq in served))

    def _chosen(self, k: int, solver: Any) -> int:
        routes = self.p.chunk_routes(k)
        for r, lit in self.lits[k].items():
            if r is not None and (lit is None or solver.boolean_value(lit)):
                return r
        edges, done, order = self.lits[k][None], frozenset[int](), list[int]()
        while len(order) < self.p.ndims:
            d = next(d for (s, d), y in edges.items() if s == done and solver.boolean_value(y))
            order.append(d)
            done = done | {d}
        return next(i for i, r in enumerate(routes) if r.order == tuple(order) and not r.ar_phase)


def _heads_tails(p: ExactProblem) -> tuple[list[int], list[int]]:
    """Per dimension, the least time before any of its phases can start and the least time any of
    its phases leaves after it ends (its own delay and the rest of its route)."""
    nd = p.ndims
    head, tail = [p.horizon()] * nd, [p.horizon()] * nd
    for routes in p.routes:
        for r in routes:
            before, total = 0, sum(b + dl for _, b, dl in r.steps)
            for d, b, dl in r.steps:
                head[d] = min(head[d], before)
                before += b + dl
                tail[d] = min(tail[d], total - before + dl)
    return [h if h < p.horizon() else 0 for h in head], [t if t < p.horizon() else 0 for t in tail]


class Job(NamedTuple):
    """One solve, as the worker process gets it."""

    problem: ExactProblem
    fixed: tuple[int, ...] | None
    lower: int
    upper: int | None
    objective: bool
    hint: Schedule | None
    work: float
    time_limit: float | None
    seed: int
    #: CP-SAT's portfolio of subsolvers (LNS among them), interleaved deterministically on the
    #: worker's one core; else its single default search
    portfolio: bool = False


def solve(job: Job) -> SolveResult:
    """Run one solve in the CP-SAT worker process (`dse.bounds.exact_worker`: why it is apart).

    A worker that dies in the middle of a solve (OR-Tools can abort on a solve that runs cleanly
    when repeated) is replaced and the solve repeated once; if it dies again the solve is reported
    as ``CRASHED``: nothing found, nothing proven, its whole work limit spent."""
    for _ in range(2):
        try:
            return call(job)
        except WorkerDied:
            continue
    return SolveResult("CRASHED", None, None, 0, job.work, 0.0)


def run_job(job: Job) -> SolveResult:
    """In the worker: build the model, start it from the hint, solve on one core."""
    import sys

    if "highspy" in sys.modules:
        raise RuntimeError("CP-SAT must not share a process with highspy (see dse.bounds.exact_worker)")
    from ortools.sat.python import cp_model

    model = ExactModel(job.problem, fixed=job.fixed, lower=job.lower, upper=job.upper, objective=job.objective)
    if job.hint is not None and (rp := replay_steps(job.problem, job.hint)) is not None:
        model.hint(job.hint, rp[1])
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = PORTFOLIO if job.portfolio else 1
    prm.interleave_search = job.portfolio
    prm.random_seed = int(job.seed)
    prm.max_deterministic_time = float(job.work)
    prm.max_time_in_seconds = float(job.time_limit) if job.time_limit else 1e9
    t0 = time.perf_counter()
    code = solver.solve(model.m)
    wall = time.perf_counter() - t0
    found = code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    schedule = model.solution(solver) if found else None
    objective = int(solver.value(model.mk)) if found else None
    if code == cp_model.INFEASIBLE:
        bound = model.horizon + 1
    elif code == cp_model.OPTIMAL and objective is not None and job.objective:
        bound = objective
    elif job.objective:
        bound = max(job.lower, math.ceil(solver.best_objective_bound - 1e-6))
    else:
        bound = job.lower
    return SolveResult(solver.status_name(code), schedule, objective, bound, float(solver.deterministic_time), wall)
