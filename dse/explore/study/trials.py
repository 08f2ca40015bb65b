"""One trial of a study: draw a design from the space, measure it, record it, return its objectives.

Every trial stores, besides its objective values, the topology's notation, the Themis+SCF and
baseline+FIFO times, Themis's bandwidth utilisation, the fluid (LP) bound and Themis's gap to it,
and the hardware cost: one user attribute holding a dict, the choices its space fixed included
(`dse.explore.study.storage` describes the layout, and reads studies written before it too). A TPE trial of
`bw_split_4d` appends 9 records to a journal (creation, worker, four weights, TPE's relative
parameters, record, result) where it appended 24, and is fsynced once (`dse.explore.study.journal`). The
fluid bound is cached per design (`fluid_bound`).
"""

from __future__ import annotations

import functools
from typing import Any

from dse.bounds.api import fluid_bound_ns
from dse.core.errors import InputError
from dse.core.topology import Topology
from dse.costs import get_cost_model
from dse.explore.study.storage import FIXED_KEY, LAYOUT, RECORD_ATTR
from dse.explore.study.studies import StudySpec
from dse.explore.study.workload import measure_workload, workload_metric
from dse.sim.batch import evaluate_many
from dse.sim.evaluate import evaluate
from dse.sim.result import Result
from dse.sim.spec import CollectiveSpec


def measure(spec: StudySpec, topo: Topology, chunks: int) -> dict[str, Any]:
    """Everything a trial records about one design (see the module docstring)."""
    common = dict(topology=topo, collective=spec.collective, size=spec.size, chunks=chunks, cost_model=spec.cost_model)
    # a closed-form model (nccl) has one time whatever the schedule, and no chunk schedule to bound:
    # measured once, no bound, no gap (`metric_value`)
    closed = get_cost_model(spec.cost_model).closed_form
    runs = [dict(common, scheduler="themis", queue="scf")]
    both = evaluate_many(runs if closed else [*runs, dict(common, scheduler="baseline", queue="fifo")])
    themis = both.result(0)
    base = themis if closed else both.result(1)
    lp = None if closed else fluid_bound(topo, spec.collective, spec.size, chunks, spec.cost_model)
    return {
        "topology": topo.notation(),
        "time_themis_ns": themis.time_ns,
        "time_baseline_ns": base.time_ns,
        "bw_utilization": themis.bw_utilization,
        "bound_ns": lp,
        "gap": None if lp is None else themis.time_ns / lp - 1.0,
        "cost_usd": spec.prices.dollars(topo),
    }


@functools.lru_cache(maxsize=4096)
def fluid_bound(topo: Topology, collective: str, size: int, chunks: int, cost_model: str) -> float:
    """The fluid (LP) bound of one design, or the ideal where that is higher (ns), cached per design.

    The LP weighs each dimension's load, which is its bytes over its bandwidth: two designs of one
    shape, collective, size, chunk count and cost model with other bandwidths have other bounds,
    so a design (the exact topology, bandwidths and latencies included) is the widest valid key.
    What does not depend on the bandwidths (the chunk plan and the orders) is a small part of a
    bound's cost. A hit needs a design seen before in this process: a discrete space's, a
    repeated draw, or the first (random) trials of a study's variants, which share their seeds."""
    cspec = CollectiveSpec.parse(topo, collective=collective, size=size, chunks=chunks, cost_model=cost_model)
    return fluid_bound_ns(cspec)  # the ideal alone beyond LP_ORDER_TYPES chunk types, counted first


def _evaluate_design(topo: Topology, spec: StudySpec, chunks: int, scheduler: str, queue: str) -> Result:
    """One design under one schedule, as the study's collective."""
    return evaluate(
        topo,
        collective=spec.collective,
        size=spec.size,
        chunks=chunks,
        cost_model=spec.cost_model,
        scheduler=scheduler,
        queue=queue,
    )


def metric_value(
    spec: StudySpec, topo: Topology, chunks: int, metric: str, scheduler: str, queue: str, record: dict[str, Any]
) -> float:
    """One objective or constraint value, reusing what `measure` already computed."""
    if metric == "cost":
        return record["cost_usd"]
    if scheduler == "themis" and queue == "scf":
        t, u = record["time_themis_ns"], record["bw_utilization"]
    elif scheduler == "baseline" and queue == "fifo" and metric == "time":
        t, u = record["time_baseline_ns"], None
    else:
        r = _evaluate_design(topo, spec, chunks, scheduler, queue)
        t, u = r.time_ns, r.bw_utilization
    if metric == "time":
        return t
    if metric == "gap":
        if record["bound_ns"] is None:
            raise InputError(
                "objectives", f"gap under {spec.cost_model}, which has no bound", "time, bw_utilization, cost"
            )
        return t / record["bound_ns"] - 1.0
    if u is None:
        u = _evaluate_design(topo, spec, chunks, scheduler, queue).bw_utilization
    return u


def probe(spec: StudySpec) -> None:
    """Measure the space's first design as a trial would (its record, every objective and
    constraint), so that a study none of whose trials could run is refused, as the `InputError` of
    that design, before any storage is opened or created."""
    topo, chunks = spec.space.first_design()
    sched, queue = spec.space.schedulers[0], spec.space.queues[0]
    target = spec.training
    try:
        record = measure(spec, topo, chunks) if target is None else measure_workload(target, topo, spec.prices)
        for m, s, q in [(c.metric, c.scheduler, c.queue) for c in spec.constraints] + [
            (o.metric, *((sched, queue) if (o.scheduler, o.queue) == ("themis", "scf") else (o.scheduler, o.queue)))
            for o in spec.objectives
        ]:
            if target is not None:
                workload_metric(target, topo, m, s, q, record)
            else:
                metric_value(spec, topo, chunks, m, s, q, record)
    except InputError as e:
        raise InputError("space", f"its first design {topo.notation()} cannot be measured: {e}") from None


def objective(spec: StudySpec, trial: Any, layout: int = LAYOUT) -> list[float]:
    """The Optuna objective: draw a design, measure it, record it, return the objective values.

    The record is one user attribute (`dse.explore.study.storage.RECORD_ATTR`), written once everything is
    measured; `layout` 1 (a study begun before that layout) keeps every choice an Optuna parameter."""
    fixed: dict[str, Any] | None = {} if layout >= 2 else None
    topo, chunks, sched, queue = spec.space.suggest(trial, fixed)
    target = spec.training
    record = measure(spec, topo, chunks) if target is None else measure_workload(target, topo, spec.prices)

    def value(metric: str, s: str, q: str) -> float:
        """The value of `metric` measured with scheduler `s` and queue `q` on the trial's design."""
        if target is not None:
            return workload_metric(target, topo, metric, s, q, record)
        return metric_value(spec, topo, chunks, metric, s, q, record)

    for c in spec.constraints:
        trial.set_constraint(c.metric, value(c.metric, c.scheduler, c.queue) - c.maximum)
    values = []
    for o in spec.objectives:
        # the space's own scheduler choice applies to objectives that name the default
        s, q = (sched, queue) if (o.scheduler, o.queue) == ("themis", "scf") else (o.scheduler, o.queue)
        values.append(value(o.metric, s, q))
    trial.set_user_attr(RECORD_ATTR, record | ({FIXED_KEY: fixed} if fixed else {}))
    return values
