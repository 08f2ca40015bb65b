"""The `optimal` scheduler: `optimal_schedule`'s schedule, replayed by `dse.evaluate`.

``dse.evaluate(..., scheduler="optimal")`` solves the collective (`dse.bounds.optimal`) and runs
its schedule: each chunk's order (or ASTRA-sim's AR composition) and each dimension's service
sequence, with the `fixed` queue whatever queue was asked for (`Result.queue` says ``fixed``).
`optimal_schedule` remembers its solves in this process, so the same evaluation twice (or after
`dse optimal`'s own solve) solves once.
"""

from __future__ import annotations

from dse.bounds.optimal import DEFAULT_WORK, OptimalSchedule, optimal_for
from dse.core.errors import InputError
from dse.schedulers import ChunkSchedule, Order, ScheduleProblem, Scheduler, register_scheduler
from dse.sim.spec import CollectiveSpec


@register_scheduler
class OptimalScheduler(Scheduler):
    """The best schedule CP-SAT finds within `work`, proven optimal where it can be (`dse optimal`)."""

    name = "optimal"
    description = "the exact optimum (CP-SAT): each chunk's order and each dimension's service sequence"
    serves_own_order = True

    def __init__(self, work: float = DEFAULT_WORK) -> None:
        self.work = work

    def __repr__(self) -> str:
        return f"OptimalScheduler(work={self.work!r})"

    def schedule(self, problem: ScheduleProblem) -> ChunkSchedule:
        """The solved schedule as chunk orders, AR flags and per-dimension service order (`solve`)."""
        best = self.solve(problem)
        return ChunkSchedule(list(best.orders), best.ar_phase, best.service_order)

    def solve(self, problem: ScheduleProblem) -> OptimalSchedule:
        """`optimal_schedule` of the problem's collective (remembered)."""
        if not problem.size_bytes or not problem.requested_chunks:
            raise InputError(
                "scheduler",
                "optimal solves one collective at a time, not inside a workload",
                "optimal with dse evaluate or dse optimal; another scheduler here",
            )
        spec = CollectiveSpec(
            problem.topology,
            problem.collective,
            problem.size_bytes,
            problem.requested_chunks,
            problem.cost_model,
            problem.latency_mode or problem.cost_model.default_latency_mode,
            problem.active_chunks,
        )
        return optimal_for(spec, work=self.work, seed=problem.seed)

    def _orders(self, problem: ScheduleProblem) -> list[Order]:
        return list(self.schedule(problem).orders)
