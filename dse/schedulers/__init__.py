"""Inter-dimension schedulers: one dimension order per chunk (docs/model.md §5)."""

from __future__ import annotations

from dse.core.errors import InputError
from dse.core.registry import LazyRegistry
from dse.schedulers.base import (
    ChunkSchedule,
    Order,
    ScheduleProblem,
    Scheduler,
    Simulate,
    ascending,
    baseline_order,
)
from dse.schedulers.simple import BaselineScheduler, FixedScheduler, RandomScheduler, RoundRobinScheduler, parse_orders
from dse.schedulers.themis import ThemisScheduler

SCHEDULERS: LazyRegistry[type[Scheduler]] = LazyRegistry(
    (
        (cls.name, cls)
        for cls in (BaselineScheduler, ThemisScheduler, RoundRobinScheduler, RandomScheduler, FixedScheduler)
    ),
    {"lp_guided": "dse.schedulers.lp_guided"},  # its LP needs PuLP and HiGHS: imported on its first lookup
    # Schedulers of layers above and of other packages: the modules their packages declare under
    # this entry-point group (dse's own: `optimal`, in the bounds layer, pyproject.toml).
    group="dse.schedulers",
)
QUEUES: tuple[str, ...] = ("fifo", "scf")


def register_scheduler(cls: type[Scheduler]) -> type[Scheduler]:
    """Make a scheduler class available by its `name` (used by schedulers loaded on their first
    lookup, such as `lp_guided`, and by schedulers defined outside `dse`)."""
    SCHEDULERS[cls.name] = cls
    return cls


def get_scheduler(scheduler: str | Scheduler, *, orders: object = None) -> Scheduler:
    """A scheduler instance from its name or an instance; `orders` feeds `fixed` (and only it)."""
    if isinstance(scheduler, Scheduler):
        if orders is not None:
            raise InputError("orders", "given with a scheduler instance", "orders only with the name fixed")
        return scheduler
    key = str(scheduler).strip().lower().replace("-", "_")
    if key == "roundrobin":
        key = "round_robin"
    if key not in SCHEDULERS:
        raise InputError("scheduler", f"unknown scheduler {scheduler!r}", ", ".join(SCHEDULERS))
    if orders is not None and key != "fixed":
        raise InputError(
            "orders",
            f"given with the {key} scheduler, which chooses its own orders",
            "orders only with scheduler fixed",
        )
    if key == "fixed":
        return FixedScheduler(orders or ())  # type: ignore[arg-type]
    return SCHEDULERS[key]()


#: the queue that serves a given service order (`dse.sim.service_order`): single collectives only
FIXED_QUEUE = "fixed"


def parse_queue(queue: str, *, fixed: bool = False) -> str:
    """`fifo` or `scf` (smallest-chunk-first; `smallestFirst` accepted), and with `fixed` (where a
    service order can be given: `dse.evaluate`) `fixed` too."""
    key = str(queue).strip().lower().replace("-", "_")
    key = {"smallestfirst": "scf", "smallest_first": "scf", "smallest_chunk_first": "scf"}.get(key, key)
    if key == FIXED_QUEUE and fixed:
        return key
    if key == FIXED_QUEUE:
        raise InputError("queue", "fixed needs a service order, which only dse.evaluate takes", ", ".join(QUEUES))
    if key not in QUEUES:
        allowed = ", ".join(QUEUES) + (", fixed (with a service order)" if fixed else "")
        raise InputError("queue", f"unknown queue policy {queue!r}", allowed)
    return key


__all__ = [
    "SCHEDULERS",
    "QUEUES",
    "FIXED_QUEUE",
    "ChunkSchedule",
    "Order",
    "ScheduleProblem",
    "Scheduler",
    "Simulate",
    "ascending",
    "baseline_order",
    "BaselineScheduler",
    "FixedScheduler",
    "RandomScheduler",
    "RoundRobinScheduler",
    "ThemisScheduler",
    "get_scheduler",
    "parse_orders",
    "parse_queue",
    "register_scheduler",
]
