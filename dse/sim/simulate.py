"""The chunk simulator of one collective (docs/model.md §6): one representative NPU, one server per dimension.

Every chunk is a fixed list of phases (from the cost model). All chunks are issued at t = 0, in
chunk order, into the queue of their first dimension. A dimension serves up to `active_chunks`
phases at once; its queue policy picks the next waiting phase:

- ``fifo``: arrival order.
- ``scf`` with the ``priority`` rule (dse's own): smallest key (max of bytes in and out) first,
  ties by arrival.
- ``scf`` with the ``astra-sim`` rule (docs/model.md §6.2): a phase entering its
  chunk's second-to-last step, or flagged `fifo_only`, goes to the back; otherwise it goes before
  the first waiting phase whose key is >= its own (equal keys are overtaken).
- ``fixed``: a given service order, per dimension the chunks it serves in sequence, idle until
  the next one's phase arrives (`dse.sim.service_order`).

A completion moves the chunk to its next queue, refills the old dimension, then the new one
(ASTRA-sim's order). With an overlapped latency (`Phase.delay` > 0) the dimension is released when
the transfer ends and the chunk arrives at its next queue `delay` later; at equal times arrivals
are processed first, so a freed dimension chooses among everything that is ready. When phases
running together share the dimension's bandwidth (`shares_bandwidth`, the `paper` model with
`active_chunks` > 1), each of the n running phases progresses at 1/n of the rate.

This is the one-collective front of dse's event engine (`dse.sim.engine`, whose reference
`dse.sim.engine_ref` states the algorithm exactly).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from dse.costs.base import Phase, SimRules
from dse.schedulers.base import ScheduleProblem
from dse.sim import engine as _engine_front
from dse.sim.engine_io import FIFO, SCF_ASTRA, SCF_PRIORITY, NetRules, ServiceStall, TimelineEntry, policy_code
from dse.sim.service_order import check_service_order, parse_service_order, stall_error

__all__ = [
    "FIFO",
    "SCF_ASTRA",
    "SCF_PRIORITY",
    "SimOutput",
    "TimelineEntry",
    "policy_code",
    "schedule_time",
    "simulate",
]


class SimOutput(NamedTuple):
    """One collective's run: its time, per-dim busy ns and bytes, per-chunk ends, the timeline."""

    time_ns: float
    dim_busy_ns: tuple[float, ...]
    dim_bytes: tuple[float, ...]
    chunk_end_ns: tuple[float, ...]
    timeline: tuple[TimelineEntry, ...] | None


#: the rules of the `paper` model (and `SimRules`' defaults)
DEFAULT_RULES = SimRules()


def simulate(
    plans: Sequence[Sequence[Phase]],
    ndims: int,
    *,
    queue: str = "fifo",
    rules: SimRules = DEFAULT_RULES,
    active_chunks: int = 1,
    timeline: bool = False,
    engine: str = "auto",
    service_order: object = None,
) -> SimOutput:
    """Run the chunks' phase lists through the per-dimension queues; see the module docstring.

    `queue`: ``fifo``, ``scf`` or ``fixed``; `service_order` goes with ``fixed`` (and only with
    it): per dimension the chunk ids (indices into `plans`) it serves, in order, as a sequence per
    dimension or a string such as ``"0,1,1,0|1,0,0,1"``. It is checked against the plans (each
    chunk once per phase it has on the dimension) and a sequence the chunks' orders make impossible
    is refused when the run finds it; both are one-line `InputError`s (`dse.sim.service_order`).
    `rules`: the cost model's `SimRules` (`CostModel.rules`): its smallest-first rule, whether
    concurrent phases share a dimension's bandwidth, and whether same-tick ends go lower dimension
    first (ASTRA-sim 1.0). `engine`: ``"auto"`` (C when it is built), ``"c"`` or ``"python"``; all
    give the same numbers.
    """
    plans = plans if type(plans) is list else list(plans)
    tieless = not any(ph.tie for p in {id(p): p for p in plans}.values() for ph in p)
    order = None
    if queue == "fixed" or service_order is not None:
        order = parse_service_order(service_order, ndims, queue)
        check_service_order(order, plans)  # type: ignore[arg-type]
    net = NetRules(
        ndims,
        policy_code(queue, rules.scf_rule),
        active_chunks,
        active_chunks > 1 and rules.shares_bandwidth,
        rules.dim_tiebreak,
        tieless=tieless,
        service_order=order,
    )
    try:
        out = _engine_front.run(net, plans=plans, record=timeline, engine=engine)  # type: ignore[arg-type]
    except ServiceStall as e:
        raise stall_error(e, order) from None  # type: ignore[arg-type]
    entries = None
    if out.log is not None:
        entries = tuple(
            TimelineEntry(c, plans[c][k].dim, plans[c][k].kind, t0, t1, plans[c][k].busy) for c, k, t0, t1 in out.log
        )
    return SimOutput(out.finish_ns, out.dim_busy, out.dim_bytes, out.chunk_end, entries)


def schedule_time(problem: ScheduleProblem, plans: Sequence[Sequence[Phase]]) -> float:
    """The time (ns) of chunks with these phase lists, in issue order, run as `problem` says: the
    simulator that schedulers which time candidate orders (`lp_guided`) are given."""
    out = simulate(
        plans,
        problem.ndims,
        queue=problem.queue,
        rules=problem.cost_model.rules,
        active_chunks=problem.active_chunks,
    )
    return out.time_ns
