"""`evaluate`: one collective on one topology, validated in one place, simulated once."""

from __future__ import annotations

import math
import warnings
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Unpack

from dse.core.collectives import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, ROOTED, nominal_bytes_sent
from dse.core.errors import InputError
from dse.core.limits import check_work
from dse.core.topology import Topology, parse_topology
from dse.costs import CostModel, Phase, get_cost_model
from dse.schedulers import ScheduleProblem
from dse.sim import engine as engine_front
from dse.sim.compiled import CACHE, Shape, compilable
from dse.sim.result import Result
from dse.sim.simulate import SimOutput, TimelineEntry, schedule_time, simulate
from dse.sim.spec import CollectiveSpec, RunArgs, RunSpec, SpecArgs, simulation_steps


def evaluate(topology: Topology | str | CollectiveSpec, *, timeline: bool = False, **run: Unpack[RunArgs]) -> Result:
    """Simulate one collective and return its `Result`.

    `topology`: a `Topology`, a preset name, a notation string, or a validated `CollectiveSpec`
    (then no `SpecArgs` keywords). `run`: the collective's keywords (`SpecArgs`: collective, size,
    chunks, cost_model, latency_mode, active_chunks) and how it runs (`RunArgs`: scheduler, queue,
    seed, orders, service_order; `orders` feeds `fixed`, e.g. ``"0123;3210"``, and `service_order`
    the queue `fixed`, per dimension the chunks it serves in order, e.g. ``"0,1,1,0|1,0,0,1"``:
    `dse.sim.service_order`; a run's timeline replayed that way gives its numbers to the bit).
    `size` is bytes per NPU: the per-NPU input for RS and AR, the per-NPU output for AG in the
    `paper` model and the input shard in `astra-sim`. `timeline=True` records every phase in
    `Result.timeline`. The result remembers the size's unit family (`Result.size_unit`: binary for
    KiB/MiB/GiB/TiB, decimal otherwise, ints included) so that reports print it back the same way.

    Points the compiled path runs (`dse.sim.compiled`) go there; a call whose arguments but its size
    were seen before is validated again only for its size."""
    key = None if timeline else _call_key(topology, run)
    try:
        call = CACHE.calls.get(key) if key is not None else None
    except TypeError:  # an unhashable topology: not remembered
        key = call = None
    if call is None:
        p = RunSpec.parse(topology, **run)
        if key is not None:
            call = _Call.validated(p, run["size"])
            CACHE.remember(key, call)
    else:
        p = call.run if run["size"] == call.size else call.run.resized(run["size"])
    if p.spec.cost_model.closed_form:  # no simulation: no work to check
        return closed_form_result(p, None if call is None or timeline else call.consts(p))
    if call is None or call.shape is None or engine_front.DEFAULT == "python":
        p.check_work()
        return evaluate_prepared(p, timeline=timeline)
    check_work(*call.steps)
    return call.evaluate(p)


#: keyword values a remembered call may have: hashable, and equal only when they mean the same
_PLAIN = (str, int, type(None))
#: keywords a remembered call never has (their points never run compiled)
_UNKEPT = ("orders", "service_order")


def _call_key(topology: object, run: Mapping[str, object]) -> tuple | None:
    """The key under which `evaluate` remembers a call's validation (all but its size, in the order
    given), or None (not remembered: a non-plain argument, such as a `Scheduler` or a float size;
    an unhashable topology fails the lookup)."""
    name = topology.name if isinstance(topology, Topology) else None  # labels differ, dims may not
    key: list = [topology, name]
    for kv in run.items():
        if type(kv[1]) not in _PLAIN:
            return None
        if kv[0] != "size":
            key.append(kv)
    if "size" not in run or any(run.get(k) is not None for k in _UNKEPT):
        return None
    return tuple(key)


@dataclass(frozen=True)
class _Call:
    """What `evaluate` remembers of a call: the validated run at its first size, the shape the compiled
    path runs it on (None: it runs in Python), the work estimate, the point's rows and the `Result`'s
    constants that do not depend on the size (`result_constants`)."""

    run: RunSpec
    size: object
    shape: Shape | None
    steps: tuple[float, str]
    bw: array
    lat: array
    total_bw: float
    label: str
    dims_shape: tuple[int, ...]
    sized: tuple[float, float, float]  # `size_constants` at the first size

    @classmethod
    def validated(cls, p: RunSpec, size: object) -> _Call:
        """What to remember of `p`, validated from a call whose size argument was `size`."""
        spec = p.spec
        topo, model = spec.topology, spec.cost_model
        shape = CACHE.shape(p) if compilable(p) else None
        steps = (0.0, "") if model.closed_form else simulation_steps(topo, spec.collective, spec.chunks, model, p.queue)
        total_bw = sum(model.bytes_per_ns(d, spec.collective) for d in topo.dims)
        bw, lat = array("d", [d.bandwidth for d in topo.dims]), array("d", [d.latency for d in topo.dims])
        sized = size_constants(topo.shape, spec.collective, spec.size, model)
        return cls(p, size, shape, steps, bw, lat, total_bw, topo.label(), topo.shape, sized)

    def consts(self, p: RunSpec) -> tuple:
        """`result_constants` of `p`, this call at some size."""
        spec = p.spec
        sized = (
            self.sized
            if p is self.run
            else size_constants(self.dims_shape, spec.collective, spec.size, spec.cost_model)
        )
        return (sized[0], self.total_bw, sized[1], sized[2], self.label)

    def evaluate(self, p: RunSpec) -> Result:
        """Run `p` (this call at some size) on the compiled path."""
        spec = p.spec
        assert self.shape is not None
        one = CACHE.run_one(self.shape, spec.size, spec.chunks, self.bw, self.lat)
        if one is None:
            return evaluate_prepared(p)
        sized = (
            self.sized
            if p is self.run
            else size_constants(self.dims_shape, spec.collective, spec.size, spec.cost_model)
        )
        need, data, factor = sized
        out = SimOutput(one.time_ns, one.dim_busy_ns, one.dim_bytes, (), None)
        consts = (need, self.total_bw, data, factor, self.label)
        return make_result(p, one.orders, out, keep_timeline=False, consts=consts)


def evaluate_prepared(p: RunSpec, *, timeline: bool = False) -> Result:
    """`evaluate` of a validated point without a shape table: the scheduler's orders, the cost
    model's phases, the engine (`dse.sim.simulate`)."""
    spec, sched = p.spec, p.sched
    topo, model, active = spec.topology, spec.cost_model, spec.active_chunks
    if model.closed_form:
        return closed_form_result(p)
    plan = model.chunking(spec.collective, spec.size, spec.chunks, topo, baseline=sched.is_baseline)
    problem = ScheduleProblem(
        topo,
        spec.collective,
        plan,
        model,
        p.seed,
        p.queue,
        spec.latency_mode,
        active,
        spec.size,
        spec.chunks,
        simulate=schedule_time,
    )
    service = p.service_order
    if sched.serves_own_order:  # orders, AR compositions and the dimensions' sequences (`optimal`)
        own = sched.schedule(problem)
        chunk_orders, service = own.orders, own.service_order
        phase_plans = route_plans(model, topo, spec.collective, own.orders, plan.sizes, spec.latency_mode, own.ar_phase)
    else:
        chunk_orders = sched.orders(problem)
        phase_plans = build_plans(
            model, topo, spec.collective, chunk_orders, plan.sizes, spec.latency_mode, sched.is_baseline
        )
    # phases that overlap on a dimension at full bandwidth each: busy time is their union (`Result`)
    overlapping = active > 1 and not model.rules.shares_bandwidth
    out = simulate(
        phase_plans,
        topo.ndims,
        queue=p.queue,
        rules=model.rules,
        active_chunks=active,
        timeline=timeline or overlapping,
        service_order=service,
    )
    return make_result(p, chunk_orders, out, keep_timeline=timeline)


def closed_form_result(p: RunSpec, consts: tuple | None = None) -> Result:
    """The `Result` of a closed-form model (`CostModel.closed_form`, `nccl`): its whole-collective
    time, no chunk orders. Every dimension counts as busy for the time's bandwidth part (the time
    less its latency part) and sends what the ascending dimension order sends on it
    (`ascending_dim_bytes`; docs/model.md §15). `consts`: the point's `result_constants`, if known."""
    spec = p.spec
    topo, model = spec.topology, spec.cost_model
    time_ns, latency_ns, _, _ = model.collective_timing(topo, spec.collective, spec.size)  # type: ignore[attr-defined]
    busy = max(0.0, time_ns - latency_ns)
    dim_bytes = ascending_dim_bytes(spec.collective, spec.size, topo.shape)
    out = SimOutput(time_ns, (busy,) * topo.ndims, dim_bytes, (), None)
    return make_result(p, (), out, keep_timeline=False, consts=consts)


def ascending_dim_bytes(coll: str, size: float, shape: tuple[int, ...]) -> tuple[float, ...]:
    """Bytes one NPU sends on each dimension when the collective runs dimension by dimension in
    ascending order (the baseline's order); they sum to `nominal_bytes_sent` (AG: `size` is the
    per-NPU output). A reduce-scatter shrinks its data dimension by dimension, an all-gather grows
    it (the mirror image), an all-reduce does both, an all-to-all keeps it. A broadcast or reduce
    passes `size` along one chain of the NPUs, dimension 0 innermost: of its N−1 hops, dimension d
    takes N·(1/P_<d − 1/P_≤d) (P_<d the product of the sizes below d)."""
    if coll == ALL_TO_ALL:
        return tuple(size * (p - 1) / p for p in shape)
    if coll in ROOTED:
        below, hops = 1, []
        for p in shape:
            hops.append(size * (1 / below - 1 / (below * p)))
            below *= p
        return tuple(hops)
    order = shape[::-1] if coll == ALL_GATHER else shape
    out, c = [], size
    for p in order:
        out.append(c * (p - 1) / p * (2 if coll == ALL_REDUCE else 1))
        c /= p
    return tuple(out[::-1]) if coll == ALL_GATHER else tuple(out)


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


def route_plans(
    model: CostModel,
    topo: Topology,
    coll: str,
    chunk_orders: Sequence[tuple[int, ...]],
    sizes: Sequence[float],
    mode: str,
    ar_phase: Sequence[bool],
) -> list[tuple[Phase, ...]]:
    """Each chunk's phases where each chunk says whether it runs ASTRA-sim's AR composition (the
    `optimal` scheduler's routes); `build_plans` with one flag per chunk."""
    return [build_plans(model, topo, coll, [o], (s,), mode, ar)[0] for o, s, ar in zip(chunk_orders, sizes, ar_phase)]


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
    if not model.rules.shares_bandwidth and active > 1:
        why = (
            f"the {model.name} model runs up to {active} phases at once on a dimension, each at the full "
            "bandwidth (congestion-unaware), so more bytes move than the dimensions' bandwidth allows"
        )
    elif model.closed_form:
        why = (
            f"under {model.name}, NVLS (and a tree across 2 nodes) reduces in the switches: each GPU sends less "
            "than an endpoint algorithm must, so the time beats what the dimensions' bandwidth allows for it"
        )
    else:
        why = f"the {model.name} model moved more bytes than the dimensions' bandwidth allows"
    warnings.warn(
        f"BW utilisation above 100 % shown as 100 %: {why}; the uncapped value is bw_utilization_uncapped in --json",
        stacklevel=4,
    )


def size_constants(shape: tuple[int, ...], coll: str, nbytes: int, model: CostModel) -> tuple[float, float, float]:
    """What a `Result` takes from the point's size on a topology of this `shape` (`Topology.shape`):
    the bytes one NPU must send, the data algbw counts, and busbw's factor."""
    need = nominal_bytes_sent(coll, nbytes, shape, ag_input_shard=model.rules.ag_input_shard)
    n = math.prod(shape)
    # nccl-tests: algbw over the per-NPU data (AG: its output); busbw scales by the bytes on the wire
    data = nbytes * n if coll == ALL_GATHER and model.rules.ag_input_shard else nbytes
    factor = 2 * (n - 1) / n if coll == ALL_REDUCE else 1.0 if coll in ROOTED else (n - 1) / n
    return need, data, factor


def result_constants(
    topo: Topology, coll: str, nbytes: int, model: CostModel
) -> tuple[float, float, float, float, str]:
    """What a `Result` takes from the point alone: `size_constants`' bytes to send, the sum of the
    dims' bandwidths (model's unit), `size_constants`' data and factor, the topology's label."""
    need, data, factor = size_constants(topo.shape, coll, nbytes, model)
    total_bw = sum(model.bytes_per_ns(d, coll) for d in topo.dims)
    return need, total_bw, data, factor, topo.label()


class Metrics(NamedTuple):
    """A `Result`'s figures of merit (see `Result`)."""

    bw_utilization: float
    bw_utilization_uncapped: float
    algbw_GBps: float
    busbw_GBps: float


def result_metrics(p: RunSpec, t: float, need: float, total_bw: float, data: float, factor: float) -> Metrics:
    """The figures of merit of a run of `p` that took `t` ns (`size_constants` and the total bandwidth
    give the rest); a time that is not positive and finite is one `InputError`, a utilisation above
    100 % a warning."""
    if t <= 0:
        raise InputError("size", "the collective takes no time", "a size of at least one byte per chunk")
    if not math.isfinite(t):  # the input ranges (dse.core.limits) keep every time finite: a last guard
        raise InputError(
            "topology",
            f"the collective's time is not finite ({t})",
            "sizes, bandwidths and latencies within dse.core.limits",
        )
    algbw = data / t
    raw = need / (t * total_bw)
    if raw > 1 + 1e-9:
        _warn_capped(p.spec.cost_model, p.spec.active_chunks, raw)
    return Metrics(min(raw, 1.0), raw, algbw, algbw * factor)


def make_result(
    p: RunSpec,
    chunk_orders: Sequence[tuple[int, ...]],
    out: SimOutput,
    *,
    keep_timeline: bool = True,
    consts: tuple | None = None,
) -> Result:
    """Assemble a `Result` from a simulation's output (see `Result` for what each number means).

    Phases that overlap on a dimension (`active_chunks` > 1 without shared bandwidth) need the
    timeline, whose union gives the busy time; `keep_timeline=False` then leaves it out of the
    result. `consts`: the point's `result_constants`, if known."""
    spec = p.spec
    topo, model, active = spec.topology, spec.cost_model, spec.active_chunks
    t = out.time_ns
    need, total_bw, data, factor, label = consts or result_constants(topo, spec.collective, spec.size, model)
    m = result_metrics(p, t, need, total_bw, data, factor)
    busy = out.dim_busy_ns
    if active > 1 and not model.rules.shares_bandwidth and out.timeline is not None:
        busy = busy_union(out.timeline, topo.ndims)
    return Result.from_fields(
        {
            "topology": label,
            "collective": spec.collective,
            "size_bytes": spec.size,
            "chunks": spec.chunks,
            "scheduler": p.sched.name,
            "queue": p.queue,
            "cost_model": model.label,
            "latency_mode": spec.latency_mode,
            "active_chunks": active,
            "seed": p.seed,
            "size_unit": p.size_unit,
            "time_ns": t,
            "bytes_sent": need,
            "bw_utilization": m.bw_utilization,
            "bw_utilization_uncapped": m.bw_utilization_uncapped,
            "algbw_GBps": m.algbw_GBps,
            "busbw_GBps": m.busbw_GBps,
            "dim_busy_ns": busy,
            "dim_bytes": out.dim_bytes,
            "dim_utilization": tuple([b / t for b in busy]),
            "orders": tuple(chunk_orders),
            "simulated_chunks": len(chunk_orders),
            "timeline": out.timeline if keep_timeline else None,
        }
    )


COMPARE_SCHEDULERS: tuple[str, ...] = ("baseline", "themis", "lp_guided", "round_robin", "random")


def compare(
    topology: Topology | str | CollectiveSpec,
    *,
    seed: int = 0,
    schedulers: tuple[str, ...] = COMPARE_SCHEDULERS,
    queues: tuple[str, ...] = ("fifo", "scf"),
    **spec: Unpack[SpecArgs],
) -> list[Result]:
    """Every scheduler x queue on one topology and collective (baseline+fifo first); `spec`: the
    collective's keywords (`SpecArgs`). Under a closed-form model (`nccl`), where neither applies,
    the one result."""
    if not isinstance(topology, CollectiveSpec):
        topology = parse_topology(topology)
        if get_cost_model(spec.get("cost_model", "paper")).closed_form:
            return [evaluate(topology, seed=seed, **spec)]
    return [evaluate(topology, scheduler=s, queue=q, seed=seed, **spec) for s in schedulers for q in queues]
