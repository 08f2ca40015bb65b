"""`evaluate`: one collective on one topology, validated in one place, simulated once."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

from dse.core.collectives import ALL_GATHER, ALL_REDUCE, nominal_bytes_sent
from dse.core.errors import InputError
from dse.core.limits import check_work
from dse.core.topology import Topology, parse_topology
from dse.core.units import parse_int, size_family
from dse.costs import CostModel, Phase
from dse.schedulers import ScheduleProblem, Scheduler, get_scheduler, parse_queue
from dse.sim.batch import Prepared, point_rows, run_point, table_for, tableable
from dse.sim.result import Result
from dse.sim.simulate import SimOutput, TimelineEntry, simulate
from dse.sim.spec import CollectiveSpec, simulation_steps
from dse.sim.tables import ShapeTable


def evaluate(
    topology: Topology | str,
    *,
    collective: str = "all_reduce",
    size: int | float | str,
    chunks: int = 64,
    scheduler: str | Scheduler = "themis",
    queue: str = "scf",
    cost_model: str | CostModel = "paper",
    latency_mode: str | None = None,
    active_chunks: int = 1,
    seed: int = 0,
    orders: object = None,
    timeline: bool = False,
) -> Result:
    """Simulate one collective and return its `Result`.

    `topology`: a `Topology`, a preset name or a notation string. `size`: bytes per NPU (an int or
    a string such as ``"1GiB"``); the per-NPU input for RS and AR, the per-NPU output for AG in the
    `paper` model and the input shard in `astra-sim`. `scheduler`: a name (`baseline`, `themis`,
    `lp_guided`, `round_robin`, `random`, `fixed`) or a `Scheduler`; `orders` feeds `fixed` (e.g.
    ``"0123;3210"``).
    `queue`: `fifo` or `scf`. `latency_mode`: `overlapped` or `serialized`, None for the model's
    default. `timeline=True` records every phase in `Result.timeline`. The result remembers the
    size's unit family (`Result.size_unit`: binary for KiB/MiB/GiB/TiB, decimal otherwise, ints
    included) so that reports print it back the same way.
    """
    key = None
    if (
        not timeline
        and orders is None
        and type(scheduler) is str
        and type(cost_model) is str
        and type(chunks) is int
        and type(active_chunks) is int
        and type(seed) is int
        and type(size) in (int, str)
    ):
        name = topology.name if isinstance(topology, Topology) else None  # labels differ, dims may not
        key = (
            topology,
            name,
            collective,
            size,
            chunks,
            scheduler,
            queue,
            cost_model,
            latency_mode,
            active_chunks,
            seed,
        )
        hit = _FAST.get(key)
        if hit is not None:  # the same arguments again: validated before, checked against the work limit now
            check_work(*hit[2])
            return _run_fast(hit[0], hit[1], hit[3], hit[4])
    spec = CollectiveSpec.parse(
        topology,
        collective=collective,
        size=size,
        chunks=chunks,
        cost_model=cost_model,
        latency_mode=latency_mode,
        active_chunks=active_chunks,
        work_check=False,
    )
    sched = get_scheduler(scheduler, orders=orders)
    q = parse_queue(queue)
    seed = parse_int(seed, "seed", minimum=0)
    size_unit = size_family(size)
    spec.check_work(queue=q, extra_simulations=sched.simulations())
    prepared = Prepared(spec, sched, q, seed, size_unit)
    if not timeline and tableable(prepared) and (table := table_for(prepared, now=False)) is not None:
        consts = result_constants(topo := spec.topology, spec.collective, spec.size, spec.cost_model)
        rows = point_rows(table, topo)
        if key is not None:  # a shape seen before: its table, the work estimate, the result's constants, its rows
            try:
                if len(_FAST) >= 1024:
                    _FAST.clear()
                _FAST[key] = (
                    prepared,
                    table,
                    simulation_steps(topo, spec.collective, spec.chunks, spec.cost_model, q),
                    consts,
                    rows,
                )
            except TypeError:  # an unhashable argument: nothing to remember
                pass
        return _run_fast(prepared, table, consts, rows)
    return evaluate_prepared(prepared, timeline=timeline)


def evaluate_prepared(p: Prepared, *, timeline: bool = False) -> Result:
    """`evaluate` of a validated point without a shape table: the scheduler's orders, the cost
    model's phases, the engine (`dse.sim.simulate`)."""
    spec, sched, q, seed = p.spec, p.sched, p.queue, p.seed
    topo, coll, nbytes, nchunks = spec.topology, spec.collective, spec.size, spec.chunks
    model, mode, active = spec.cost_model, spec.latency_mode, spec.active_chunks
    plan = model.chunking(coll, nbytes, nchunks, topo, baseline=sched.is_baseline)
    problem = ScheduleProblem(topo, coll, plan, model, seed, q, mode, active)
    chunk_orders = sched.orders(problem)
    phase_plans = build_plans(model, topo, coll, chunk_orders, plan.sizes, mode, sched.is_baseline)
    # phases that overlap on a dimension at full bandwidth each: busy time is their union (`Result`)
    overlapping = active > 1 and not model.shares_bandwidth
    out = simulate(
        phase_plans,
        topo.ndims,
        queue=q,
        scf_rule=model.scf_rule,
        active_chunks=active,
        shares_bandwidth=model.shares_bandwidth,
        dim_tiebreak=model.dim_tiebreak,
        timeline=timeline or overlapping,
    )
    return make_result(
        topo,
        coll,
        nbytes,
        nchunks,
        sched,
        q,
        model,
        mode,
        active,
        seed,
        chunk_orders,
        out,
        size_unit=p.size_unit,
        keep_timeline=timeline,
    )


#: evaluate's arguments -> their validated form and shape table (bounded; see `evaluate`)
_FAST: dict[tuple, tuple] = {}


def _run_fast(p: Prepared, table: ShapeTable, consts: tuple, rows: tuple) -> Result:
    """One point through its shape table (`dse.sim.batch`), as a `Result`."""
    s = p.spec
    time, busy, sent, ids = run_point(table, s.topology, rows)
    out = SimOutput(time[0], tuple(busy), tuple(sent), (), None)
    chunk_orders = list(map(table.perms.__getitem__, ids))
    return make_result(
        s.topology,
        s.collective,
        s.size,
        s.chunks,
        p.sched,
        p.queue,
        s.cost_model,
        s.latency_mode,
        s.active_chunks,
        p.seed,
        chunk_orders,
        out,
        size_unit=p.size_unit,
        keep_timeline=False,
        consts=consts,
    )


def build_plans(
    model: CostModel,
    topo: Topology,
    coll: str,
    chunk_orders: list[tuple[int, ...]],
    sizes: tuple[float, ...],
    mode: str,
    baseline: bool,
) -> list[tuple[Phase, ...]]:
    """Each chunk's phases; chunks with the same order and size share one tuple."""
    cache: dict[tuple[tuple[int, ...], float], tuple[Phase, ...]] = {}
    memo: dict = {}
    plans = []
    for order, size in zip(chunk_orders, sizes):
        p = cache.get((order, size))
        if p is None:
            p = model.phases(topo, coll, order, size, latency_mode=mode, baseline=baseline, memo=memo)
            cache[(order, size)] = p
        plans.append(p)
    return plans


def busy_union(timeline: Sequence[TimelineEntry], ndims: int) -> tuple[float, ...]:
    """Per dimension, the measure of the union of its phases' server intervals [start, start + busy]."""
    spans: list[list[tuple[float, float]]] = [[] for _ in range(ndims)]
    for e in timeline:
        spans[e.dim].append((e.start, e.start + e.busy))
    total = []
    for iv in spans:
        iv.sort()
        acc, lo, hi = 0.0, None, 0.0
        for a, b in iv:
            if lo is None or a > hi:
                if lo is not None:
                    acc += hi - lo
                lo, hi = a, b
            elif b > hi:
                hi = b
        total.append(acc + (hi - lo if lo is not None else 0.0))
    return tuple(total)


def _warn_capped(model: CostModel, active: int, raw: float) -> None:
    """One line saying why a BW utilisation above 100 % is shown as 100 %."""
    if not model.shares_bandwidth and active > 1:
        why = (
            f"the {model.name} model runs up to {active} phases at once on a dimension, each at the full "
            "bandwidth (congestion-unaware), so more bytes move than the dimensions' bandwidth allows"
        )
    else:
        why = f"the {model.name} model moved more bytes than the dimensions' bandwidth allows"
    warnings.warn(
        f"BW utilisation above 100 % shown as 100 %: {why}; the uncapped value is bw_utilization_uncapped in --json",
        stacklevel=4,
    )


def result_constants(
    topo: Topology, coll: str, nbytes: int, model: CostModel
) -> tuple[float, float, float, float, str]:
    """What a `Result` takes from the point alone: the bytes one NPU must send, the sum of the
    dims' bandwidths (model's unit), the data algbw counts, busbw's factor, the topology's label."""
    need = nominal_bytes_sent(coll, nbytes, topo.shape, ag_input_shard=model.ag_input_shard)
    total_bw = sum(model.bytes_per_ns(d, coll) for d in topo.dims)
    n = topo.npus
    # nccl-tests: algbw over the per-NPU data (AG: its output); busbw scales by the bytes on the wire
    data = nbytes * n if coll == ALL_GATHER and model.ag_input_shard else nbytes
    factor = 2 * (n - 1) / n if coll == ALL_REDUCE else (n - 1) / n
    return need, total_bw, data, factor, topo.label()


def make_result(  # type: ignore[no-untyped-def]
    topo,
    coll,
    nbytes,
    nchunks,
    sched,
    q,
    model,
    mode,
    active,
    seed,
    chunk_orders,
    out,
    *,
    size_unit: str = "decimal",
    keep_timeline: bool = True,
    consts: tuple | None = None,
) -> Result:
    """Assemble a `Result` from a simulation's output (see `Result` for what each number means).

    Phases that overlap on a dimension (`active` > 1 without shared bandwidth) need the timeline,
    whose union gives the busy time; `keep_timeline=False` then leaves it out of the result.
    `consts`: the point's `result_constants`, if known."""
    t = out.time_ns
    need, total_bw, data, factor, label = consts or result_constants(topo, coll, nbytes, model)
    algbw = data / t if t > 0 else 0.0
    if t <= 0:
        raise InputError("size", "the collective takes no time", "a size of at least one byte per chunk")
    if not math.isfinite(t):  # the input ranges (dse.core.limits) keep every time finite: a last guard
        raise InputError(
            "topology",
            f"the collective's time is not finite ({t})",
            "sizes, bandwidths and latencies within dse.core.limits",
        )
    busy = out.dim_busy_ns
    if active > 1 and not model.shares_bandwidth and out.timeline is not None:
        busy = busy_union(out.timeline, topo.ndims)
    raw = need / (t * total_bw)
    if raw > 1 + 1e-9:
        _warn_capped(model, active, raw)
    return Result(
        topology=label,
        collective=coll,
        size_bytes=nbytes,
        size_unit=size_unit,
        chunks=nchunks,
        scheduler=sched.name,
        queue=q,
        cost_model=model.name,
        latency_mode=mode,
        active_chunks=active,
        seed=seed,
        time_ns=t,
        bytes_sent=need,
        bw_utilization=min(raw, 1.0),
        bw_utilization_uncapped=raw,
        algbw_GBps=algbw,
        busbw_GBps=algbw * factor,
        dim_busy_ns=busy,
        dim_bytes=out.dim_bytes,
        dim_utilization=tuple(b / t for b in busy),
        orders=tuple(chunk_orders),
        simulated_chunks=len(chunk_orders),
        timeline=out.timeline if keep_timeline else None,
    )


COMPARE_SCHEDULERS: tuple[str, ...] = ("baseline", "themis", "lp_guided", "round_robin", "random")


def compare(
    topology: Topology | str,
    *,
    collective: str = "all_reduce",
    size: int | float | str,
    chunks: int = 64,
    cost_model: str | CostModel = "paper",
    latency_mode: str | None = None,
    active_chunks: int = 1,
    seed: int = 0,
    schedulers: tuple[str, ...] = COMPARE_SCHEDULERS,
    queues: tuple[str, ...] = ("fifo", "scf"),
) -> list[Result]:
    """Every scheduler x queue on one topology and collective (baseline+fifo first)."""
    topo = parse_topology(topology)
    return [
        evaluate(
            topo,
            collective=collective,
            size=size,
            chunks=chunks,
            scheduler=s,
            queue=q,
            cost_model=cost_model,
            latency_mode=latency_mode,
            active_chunks=active_chunks,
            seed=seed,
        )
        for s in schedulers
        for q in queues
    ]
