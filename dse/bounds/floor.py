"""The load-only ILP settled at its whole-step floor (`dse.bounds.grid`) without a MIP solver.

`floor_search` takes the first time the floor's walk allows and runs the searches of
`dse.bounds.floorfit` on the flow's lattice in grid steps: guided ones that usually find a schedule
whose busiest dimension is at that time (then it is optimal), and exhaustive ones that either find
one or prove that no schedule meets it. Both are bounded by node budgets; when they give up, the
caller's MIP starts from the proven floor.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING

from dse.bounds.flow import Edges, Solution, flow_paths, mix_of, objective_value
from dse.bounds.grid import Grid
from dse.schedulers.order_mix import ChunkType

if TYPE_CHECKING:
    from dse.bounds.lattice import Edge, Lattice


def _edge_steps(edges: Edges, grid: Grid, slots: int) -> dict[tuple[int, int], int] | None:
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


def floor_search(
    types: list[ChunkType],
    edges: Edges,
    grid: Grid,
    slots: int,
    start: float,
    *,
    fill: list[float] | None = None,
    at_least: float = 0.0,
    max_targets: int = 64,
    proof_budget: int = 20_000,
) -> tuple[float, Solution | None]:
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
    (`objective_value`, the fill and drain of the types it uses and their paths) is at T too.

    `start` must be a lower bound on the problem walked (the loads, plus `fill` if given): the walk
    only checks candidate times from there. `at_least`: another proven lower bound on the
    objective (for the pipeline, the ILP and the shortest path); a schedule whose objective is at
    or below max(T, at_least) is optimal.
    """
    from dse.bounds.floorfit import targets
    from dse.bounds.lattice import Lattice

    nd = len(types[0].order)
    steps = _edge_steps(edges, grid, slots)
    if fill is not None:  # the walk's loads include the fill: shift each dimension's base by it
        grid = dataclasses.replace(grid, base=tuple(b + f / grid.n for b, f in zip(grid.base, fill)))
    walk = grid.walk(start)
    first, caps, slack = next(walk)
    if steps is None or caps is None:
        return first, None  # (no caps: the walk gave up, `first` is still proven)
    steps, flip = _oriented(steps, nd)
    lattice = Lattice(steps, nd, list(grid.live))
    fit = _FloorFit(types, lattice, grid.n, slots, flip, fill is not None, max(first, at_least))
    aims = targets(list(grid.wt), caps, slack, limit=max_targets + 1)
    if aims is None or len(aims) > max_targets:
        return first, None  # too many step vectors to search each one
    found, proven = fit.search(aims, proof_budget)
    if found is not None or not proven:
        return first, found
    # no schedule meets the floor: every time below the walk's next candidate is impossible (higher
    # candidates are not searched: the optimum is usually many steps up, where HiGHS is faster)
    return next(walk)[0], None


def _oriented(steps: dict[Edge, int], nd: int) -> tuple[dict[Edge, int], bool]:
    """The steps the searches work on, and whether the orders are reversed for them.

    The searches fix large steps first and let small ones below correct them: they want a chunk's
    steps on d to grow with the set after d. Where they shrink (all-gather: the first dimension of
    an order moves the least data) the orders are searched reversed: the set after d becomes the
    set before it, which the loads depend on just as well."""
    full_set = (1 << nd) - 1
    flip = sum(steps[(full_set ^ (1 << d), d)] - steps[(0, d)] for d in range(nd)) < 0
    if flip:
        steps = {(full_set ^ after ^ (1 << d), d): v for (after, d), v in steps.items()}
    return steps, flip


class _FloorFit:
    """The searches `floor_search` runs for one floor: the lattice, and how a flow found on it
    becomes a solution (orders un-flipped, checked against the time `limit` to meet)."""

    def __init__(
        self, types: list[ChunkType], lattice: Lattice, n: int, slots: int, flip: bool, pipeline: bool, limit: float
    ) -> None:
        self.types, self.lattice, self.n, self.slots = types, lattice, n, slots
        self.flip, self.pipeline, self.limit = flip, pipeline, limit
        self.index = {t.order: i for i, t in enumerate(types) if not t.ar_phase}

    def search(self, aims: list[list[int]], proof_budget: int) -> tuple[Solution | None, bool]:
        """Cheapest first: two guided searches (they find most schedules that meet the floor), a
        small exhaustive one (it proves most floors that no schedule meets), guided searches from
        sixteen perturbed guides, then larger exhaustive ones. Returns (solution, proven none)."""
        found = self.guided(aims, ["projection", "central"], 150)
        if found is not None:
            return found, False
        found, proven = self.exhaust(aims, None, 2_000)
        if found is not None or proven:
            return found, proven
        found = self.guided(aims, list(range(16)), 300)
        if found is not None:
            return found, False
        # the central guide gets five times the budget: it is the one that finds schedules for
        # the hardest cases seen (several dimensions of 16 at five dimensions)
        stages = [("central", 5 * proof_budget), ("projection", proof_budget)] if len(aims) <= 4 else []
        for how, budget in stages + [(None, proof_budget)]:
            found, proven = self.exhaust(aims, how, budget)
            if found is not None or proven:
                return found, proven
        return None, False

    def solution(self, flow: dict[Edge, int]) -> Solution | None:
        """The schedule of a flow the searches found, or None when its pipeline (fill, drain or
        paths) exceeds the limit (load-only: cannot happen)."""
        types = self.types
        counts = [0.0] * len(types)
        for order, amount in flow_paths(flow, self.lattice.nd):
            counts[self.index[order[::-1] if self.flip else order]] += amount
        value = objective_value(types, counts, self.slots, self.pipeline)
        if sum(counts) != self.n or value > self.limit * (1 + 1e-9):
            return None
        return Solution(value, "optimal", mix_of(types, counts), tuple(counts), searched=True)

    def exhaust(self, aims: list[list[int]], how: str | None, budget: int) -> tuple[Solution | None, bool]:
        """An exhaustive search over every step vector in `aims`: (solution, proven none)."""
        from dse.bounds.floorfit import OutOfBudget, exhaustive_flow

        lattice = self.lattice
        left = [budget]  # shared by every step vector
        try:
            for target in aims:
                # (a guide that cannot be built leaves the middle-first order: the proof never
                # rests on an LP's "infeasible")
                guide = None if how is None else lattice.guide(self.n, target, how)
                full = [0] * lattice.nd
                for j, d in enumerate(lattice.live):
                    full[d] = target[j]
                flow = exhaustive_flow(lattice, self.n, full, budget=left, guide=guide)
                if flow is not None:
                    return self.solution(flow), False  # (None, False) when its pipeline exceeds T
        except OutOfBudget:
            return None, False
        return None, True

    def guided(self, aims: list[list[int]], hows: list, budget: int) -> Solution | None:
        """Guided searches for the first two step vectors, with each guide in `hows`."""
        from dse.bounds.floorfit import find_flow

        for target, how in itertools.product(aims[:2], hows):
            flow = find_flow(self.lattice, self.n, target, how, budget=budget)
            found = None if flow is None else self.solution(flow)
            if found is not None:
                return found
        return None
