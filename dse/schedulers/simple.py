"""The simple schedulers: baseline (hierarchical), round-robin, random (seeded) and fixed."""

from __future__ import annotations

import random
from collections.abc import Sequence

from dse.core.errors import InputError
from dse.schedulers.base import Order, ScheduleProblem, Scheduler, baseline_order


class BaselineScheduler(Scheduler):
    """The classic hierarchical order: RS (and AR) ascending dim 0 → N, standalone AG descending."""

    name = "baseline"
    shape_only = True
    description = "hierarchical: ascending dims (AG descending)"
    is_baseline = True

    def _orders(self, problem: ScheduleProblem) -> list[Order]:
        return [baseline_order(problem.collective, problem.ndims)] * problem.nchunks


class RoundRobinScheduler(Scheduler):
    """Rotate the baseline order by one dimension per chunk, so each chunk starts elsewhere."""

    name = "round_robin"
    shape_only = True
    description = "baseline order rotated by one dim per chunk"

    def _orders(self, problem: ScheduleProblem) -> list[Order]:
        base = baseline_order(problem.collective, problem.ndims)
        k = problem.ndims
        return [base[i % k :] + base[: i % k] for i in range(problem.nchunks)]


class RandomScheduler(Scheduler):
    """A uniformly random order per chunk, from `random.Random(seed)`: for ablations."""

    name = "random"
    shape_only = True
    description = "uniformly random order per chunk (seeded)"

    def _orders(self, problem: ScheduleProblem) -> list[Order]:
        rng = random.Random(problem.seed)
        out = []
        for _ in range(problem.nchunks):
            o = list(range(problem.ndims))
            rng.shuffle(o)
            out.append(tuple(o))
        return out


class FixedScheduler(Scheduler):
    """User-given orders, cycled over the chunks: for tests and what-if studies.

    `orders` is a sequence of permutations, or a string such as ``"0123"`` or ``"0,1,2,3;3,2,1,0"``.
    """

    name = "fixed"
    shape_only = True
    description = "user-given orders, cycled over the chunks"

    def __init__(self, orders: Sequence[Sequence[int]] | str = ()) -> None:
        self.fixed = (
            parse_orders(orders) if isinstance(orders, str) else tuple(tuple(int(d) for d in o) for o in orders)
        )

    def __repr__(self) -> str:
        return f"FixedScheduler(orders={self.fixed!r})"

    def _orders(self, problem: ScheduleProblem) -> list[Order]:
        if not self.fixed:
            raise InputError("orders", "the fixed scheduler needs at least one order", "e.g. --orders 0123 or 0,1;1,0")
        want = set(range(problem.ndims))
        for o in self.fixed:
            if len(o) != problem.ndims or set(o) != want:
                raise InputError("orders", f"{o} is not a permutation of {sorted(want)}", "one entry per dimension")
        return [self.fixed[i % len(self.fixed)] for i in range(problem.nchunks)]


def parse_orders(text: str) -> tuple[Order, ...]:
    """Orders from ``"0123;3210"`` (digits) or ``"0,1,2,3;3,2,1,0"``."""
    out = []
    for part in text.replace(" ", "").split(";"):
        if not part:
            continue
        items = part.split(",") if "," in part else list(part)
        if not all(i.isascii() and i.isdigit() and len(i) < 10 for i in items):
            raise InputError("orders", f"cannot read {part!r} as an order", "e.g. 0123 or 0,1,2,3; ';' between orders")
        out.append(tuple(int(i) for i in items))
    if not out:
        raise InputError("orders", f"no order in {text!r}", "e.g. 0123 or 0,1,2,3; ';' between orders")
    return tuple(out)
