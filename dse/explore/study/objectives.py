"""What a study optimises and bounds: its metrics, objectives and constraints, and their names.

Metrics of a collective study: ``time``, ``bw_utilization``, ``cost`` and ``gap``; of a workload
study (``[workload] file = ...``): ``iteration_time``, ``cost``, ``iteration_time_x_cost`` (stored
in ns x $, LIBRA's performance-per-cost objective up to its scale) and ``libra_iteration_time``
(LIBRA's analytic model of the iteration: no latency, no overlap, `dse.explore.libra.model`). Each
but ``cost`` and ``libra_iteration_time`` is measured with a scheduler and a queue (Themis+SCF by
default). An objective has a direction; a constraint a ``max`` in the metric's stored unit (ns,
a fraction, $; given to Optuna as ``trial.set_constraint``). `metric_name` is an objective's id,
the study's Optuna metric name in its journal (``time_ns_themis_scf``); people read it named with
its unit (``time (ms) with themis+scf``, `dse.explore.study.units`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dse.core.errors import InputError
from dse.core.units import parse_positive
from dse.explore.study.toml_fields import as_list, check_keys, parse_scheduler
from dse.schedulers import parse_queue

#: Each metric and its default direction.
METRICS = {
    "time": "minimize",
    "bw_utilization": "maximize",
    "cost": "minimize",
    "gap": "minimize",
    "iteration_time": "minimize",
    "iteration_time_x_cost": "minimize",
    "libra_iteration_time": "minimize",
}
#: Each metric's prefix in `metric_name`.
METRIC_PREFIX = {
    "time": "time_ns",
    "bw_utilization": "bw_utilization",
    "gap": "gap",
    "cost": "cost",
    "iteration_time": "iteration_time_ns",
    "iteration_time_x_cost": "iteration_time_x_cost",
    "libra_iteration_time": "libra_iteration_time_ns",
}
#: the metrics of a study of one collective, and of a study of a training workload
COLLECTIVE_METRICS = ("time", "bw_utilization", "gap", "cost")
WORKLOAD_METRICS = ("iteration_time", "iteration_time_x_cost", "cost", "libra_iteration_time")


def metric_name(metric: str, scheduler: str, queue: str) -> str:
    """An objective's id, its Optuna metric name: ``time_ns_themis_scf``, ``cost``..."""
    if metric in ("cost", "libra_iteration_time"):  # no scheduler: a price, or LIBRA's analytic model
        return METRIC_PREFIX[metric]
    return f"{METRIC_PREFIX[metric]}_{scheduler}_{queue}"


@dataclass(frozen=True)
class Objective:
    """One objective: a metric, a direction, and the scheduler and queue it is measured with."""

    metric: str
    direction: str
    scheduler: str
    queue: str

    @property
    def label(self) -> str:
        """How a study's user attribute names it: ``time[themis+scf]``, or ``cost``."""
        return self.metric if self.metric == "cost" else f"{self.metric}[{self.scheduler}+{self.queue}]"

    @property
    def name(self) -> str:
        """The objective's id, Optuna's metric name: ``time_ns_themis_scf``, ``cost`` (shown as
        `dse.explore.study.units.shown` names it)."""
        return metric_name(self.metric, self.scheduler, self.queue)


@dataclass(frozen=True)
class Constraint:
    """One constraint: a metric (measured with a scheduler and queue) at most `maximum`."""

    metric: str
    maximum: float
    scheduler: str = "themis"
    queue: str = "scf"


def _metric(raw: Any, allowed: tuple[str, ...], field: str) -> str:
    """A metric's name (``iteration_time x cost`` is ``iteration_time_x_cost``), one of `allowed`."""
    metric = " ".join(str(raw or "").lower().split()).replace(" x ", "_x_")
    if metric not in allowed:
        kind = "a workload study" if allowed == WORKLOAD_METRICS else "a collective study"
        what = f"unknown metric {metric!r}" if metric not in METRICS else f"{metric!r} is not a metric of {kind}"
        raise InputError(field, what, ", ".join(allowed))
    return metric


def parse_objectives(raw: Any, allowed: tuple[str, ...] = COLLECTIVE_METRICS) -> tuple[Objective, ...]:
    """``[[objectives]]`` tables: at least one, each a metric of `allowed`."""
    if not raw:
        raise InputError(
            "objectives", "missing or empty", "[[objectives]] with metric = time, bw_utilization, cost or gap"
        )
    out = []
    for o in as_list(raw, "objectives"):
        if not isinstance(o, dict):
            raise InputError("objectives", f"{o!r} is not a table", "[[objectives]] metric = ...")
        check_keys(o, {"metric", "direction", "scheduler", "queue"}, "objectives")
        metric = _metric(o.get("metric"), allowed, "objectives.metric")
        direction = str(o.get("direction", METRICS[metric])).lower()
        if direction not in ("minimize", "maximize"):
            raise InputError("objectives.direction", f"unknown direction {direction!r}", "minimize, maximize")
        out.append(
            Objective(
                metric, direction, parse_scheduler(o.get("scheduler", "themis")), parse_queue(o.get("queue", "scf"))
            )
        )
    return tuple(out)


def parse_constraints(raw: Any, allowed: tuple[str, ...] = COLLECTIVE_METRICS) -> tuple[Constraint, ...]:
    """``[[constraints]]`` tables: none or more, each on a metric of `allowed`."""
    out = []
    for c in raw or []:
        if not isinstance(c, dict):
            raise InputError("constraints", f"{c!r} is not a table", "[[constraints]] metric = ..., max = ...")
        check_keys(c, {"metric", "max", "scheduler", "queue"}, "constraints")
        metric = _metric(c.get("metric"), allowed, "constraints.metric")
        if "max" not in c:
            raise InputError("constraints.max", "missing", "the largest allowed value")
        out.append(
            Constraint(
                metric,
                float(parse_positive(c["max"], "constraints.max", allow_zero=True)),
                parse_scheduler(c.get("scheduler", "themis")),
                parse_queue(c.get("queue", "scf")),
            )
        )
    return tuple(out)
