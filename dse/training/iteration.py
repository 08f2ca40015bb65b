"""Training iterations: a workload's compute overlapping its collectives on the network.

`iterate(workload, topology)` runs one or more training passes of a `Workload` on one
representative NPU and returns an `IterationResult`. Three steps, each in its own module:

1. `dse.training.workload_graph.compile_workload` turns the workload into a graph of compute tasks and
   collectives with their dependencies: the training loop of its parallelism strategy (its module
   docstring says exactly which compute waits for which collective). The semantics are dse's for
   every cost model, because they are simply how training works: layer 0 computes no input
   gradient (nothing consumes it; a workload that is a slice of a model says otherwise,
   `Workload.layer0_input_gradient`); a layer's update is a delay after its collectives, not
   compute; activation recompute re-runs the forward (compute and fwd collectives) from the
   preceding checkpoint before the backward of each `checkpoint_initiates` layer.
2. `dse.training.placement.group_topology` places a hybrid workload's model-parallel group on the leading
   dimensions, splitting one dimension in two logical dimensions that share its links when no
   prefix holds the group exactly (ASTRA-sim 1.0's rule); data parallelism takes the rest.
3. `dse.training.iteration_engine.Engine` runs the graph: one compute resource, every collective in flight
   sharing the per-dimension queues of the chunk simulator, with the chosen scheduler, queue and
   cost model (`dse.training.iteration_planner` builds each collective's chunk phases).

What belongs to one simulator lives in its cost model, not here: ASTRA-sim 1.0's one-tick workload
state changes (`SimRules.workload_tick` of `CostModel.rules`), its 64 splits whatever a collective's size
(`fixed_splits`), its Themis loads kept across collectives (`themis_across`), its issue priorities
(`issue_priorities`), its direct all-to-all (the `astra-sim-1` phases). Other models cut a
collective into `chunks` chunks of at least `min_chunk_bytes` (1 MiB): a 64 MiB collective or
larger gets all 64 chunks, a 4 MiB one 4, anything under 2 MiB one.

``scheduler="ideal"``: each collective takes bytes one NPU sends / the sum of its dims' bandwidths
from its issue, without queues: 100 % bandwidth, still overlapped with compute. Only
``active_chunks = 1`` is modelled.

Reported per pass (`iterations` passes, averaged): `time_ns`; `compute_ns` (compute executed,
recompute included); `comm_ns` (time at least one collective is on the network);
`exposed_comm_ns` = time − compute (the compute resource idles only waiting for collectives, and
for ASTRA-sim 1.0's ticks); `bw_utilization` = bytes one NPU sends / (comm_ns × Σ_d B_d).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from dse.core.errors import InputError
from dse.core.limits import check_work
from dse.core.topology import Topology, parse_topology
from dse.core.units import parse_int
from dse.costs import CostModel, get_cost_model
from dse.schedulers import Scheduler, get_scheduler, parse_queue
from dse.sim.simulate import policy_code
from dse.sim.spec import simulation_steps
from dse.training.chakra.read import ChakraTrace
from dse.training.iteration_engine import RESOURCE_NAMES, RULES, Engine, resource_of
from dse.training.iteration_planner import MIB, Planner, chunk_count
from dse.training.placement import group_topology
from dse.training.workload_graph import COMM, MARK, Graph, compile_workload, repeat_graph
from dse.training.workload_load import load_workload
from dse.training.workloads import ALL, SLOTS, Workload

__all__ = ["CollectiveRun", "IterationResult", "chunk_count", "iterate", "scope_dims"]


@dataclass(frozen=True)
class CollectiveRun:
    """One collective as it ran: which pass, layer and slot, where (logical dims), and when.

    `end_ns` is when its last chunk left the network; it counts as done `delay_ns` later."""

    iteration: int
    layer: str
    slot: str
    collective: str
    size_bytes: int
    dims: tuple[int, ...]
    chunks: int
    issue_ns: float
    end_ns: float
    delay_ns: float = 0.0


@dataclass(frozen=True)
class NodeRun:
    """One graph node as it ran: graph `index`, `id` (a Chakra trace's node id, else the index),
    `kind` (compute, comm, replay), `resource` (gpu, cpu, net) and its start and end in ns."""

    index: int
    id: int
    name: str
    kind: str
    resource: str
    iteration: int
    start_ns: float
    end_ns: float


@dataclass(frozen=True)
class IterationResult:
    """Times per training pass (averaged over `iterations`) and per-collective details."""

    workload: str
    topology: str
    scheduler: str
    queue: str
    cost_model: str
    iterations: int
    chunks: int
    time_ns: float
    compute_ns: float
    comm_ns: float
    exposed_comm_ns: float
    bw_utilization: float
    bytes_sent: float
    total_ns: float
    collectives: tuple[CollectiveRun, ...]
    #: the logical topology the collectives ran on, when a dimension was split for the model-parallel group
    logical_topology: str = ""
    #: of `compute_ns`, the part on the CPU (Chakra nodes with ``is_cpu_op``); exposed
    #: communication is time − GPU compute, as ASTRA-sim 2.x reports it
    cpu_ns: float = 0.0
    #: every node's start and end (with ``iterate(..., nodes=True)``), marks left out
    nodes: tuple[NodeRun, ...] = ()
    #: what a user should know about the workload (a Chakra trace's rank check, say)
    notes: tuple[str, ...] = ()

    def as_dict(self, *, details: bool = False) -> dict[str, Any]:
        """A JSON-ready dict (the per-collective list only with `details`)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("collectives", "nodes")}
        d["notes"] = list(self.notes)
        d["collective_count"] = len(self.collectives)
        if details:
            d["collectives"] = [c.__dict__ | {"dims": list(c.dims)} for c in self.collectives]
        if self.nodes:
            d["nodes"] = [dict(n.__dict__) for n in self.nodes]
        return d


def scope_dims(topology: Topology, scope: str, group: int | None) -> tuple[int, ...]:
    """Logical dim indices of a scope (all dims, the model-parallel ones or the rest) on the
    topology `group_topology` makes for `group`."""
    logical, k = group_topology(topology, group)
    nd = logical.ndims
    if scope == ALL:
        return tuple(range(nd))
    return tuple(range(k)) if scope == "mp" else tuple(range(k, nd))


def iterate(
    workload: str | Workload,
    topology: str | Topology,
    *,
    scheduler: str | Scheduler = "themis",
    queue: str = "scf",
    cost_model: str | CostModel = "paper",
    iterations: int = 1,
    chunks: int = 64,
    min_chunk_bytes: int = MIB,
    nodes: bool = False,
) -> IterationResult:
    """Simulate `iterations` training passes of `workload` on `topology` (module docstring).

    `workload`: a file path, a `Workload`, a bundled workload's name or a generator spec
    (``"resnet152"``, ``"transformer:layers=8"``). `scheduler`: any `dse` scheduler, or
    ``"ideal"`` (every collective at 100 % bandwidth of its dims, no contention). `nodes`: also
    report every node's start and end (`IterationResult.nodes`).

    The work limit (`dse.core.limits.check_work`) is checked before the graph is built, from the
    collectives every pass of a layer workload runs (a lower bound), then exactly on the graph."""
    wl = _check_single_rank(load_workload(workload))
    topo = parse_topology(topology)
    model, q = get_cost_model(cost_model), parse_queue(queue)
    iterations = parse_int(iterations, "iterations", minimum=1)
    chunks = parse_int(chunks, "chunks", minimum=1)
    min_chunk_bytes = parse_int(min_chunk_bytes, "min_chunk_bytes", minimum=1)
    ideal = isinstance(scheduler, str) and scheduler.strip().lower() == "ideal"
    sched = None if ideal else get_scheduler(scheduler)
    logical, k = _logical(wl, topo)
    planner = Planner(logical, k, model, sched, q, chunks, min_chunk_bytes)
    if not isinstance(wl, ChakraTrace):
        _check_least_work(wl, planner, q, ideal, iterations)
    one = wl.graph if isinstance(wl, ChakraTrace) else compile_workload(wl, passes=1, tick=model.rules.workload_tick)
    steps, what = graph_steps(one, planner, q, ideal)
    check_work(steps * iterations, f"{iterations} iteration(s) of {what}")
    graph = one if iterations == 1 else _passes(wl, one, iterations, model)
    rules = model.rules
    engine = Engine(
        graph, planner, policy_code(q, rules.scf_rule), rules.dim_tiebreak, ideal, RULES[rules.workload_rules]
    )
    total = engine.simulate()
    if not math.isfinite(total):  # the input ranges (dse.core.limits) keep every time finite: a last guard
        raise InputError(
            "workload", f"the iteration's time is not finite ({total})", "times and sizes within dse.core.limits"
        )
    return IterationResult(
        workload=wl.name,
        topology=topo.label(),
        scheduler="ideal" if ideal else sched.name,  # type: ignore[union-attr]
        queue=q,
        cost_model=model.label,
        iterations=iterations,
        chunks=chunks,
        **_per_pass(engine, total, iterations, sum(model.bytes_per_ns(d) for d in logical.dims)),
        nodes=_node_runs(graph, engine, wl.ids if isinstance(wl, ChakraTrace) else (), len(one.nodes)) if nodes else (),
        collectives=_collective_runs(graph, engine, None if isinstance(wl, ChakraTrace) else wl),
        logical_topology=logical.notation() if logical is not topo else "",
        notes=wl.notes if isinstance(wl, ChakraTrace) else (),
    )


def _check_single_rank(trace: Workload | ChakraTrace) -> Workload | ChakraTrace:
    """The workload, if it can run on one representative NPU: a trace's sends, receives, memory
    nodes, group collectives and compute without a duration run per rank (`dse.training.chakra.ranks_run`)."""
    from dse.training.chakra.read import needs_ranks

    if isinstance(trace, ChakraTrace) and needs_ranks(trace):
        raise InputError(
            "workload",
            f"{trace.path} has sends, receives, memory nodes, communicator groups or compute without a "
            "duration, which run per rank",
            f"one file per NPU ({trace.name}.0.et, {trace.name}.1.et, ...), or --system / --peak-tflops and "
            "--mem-bw to run this file as every rank's",
        )
    return trace


def _check_least_work(wl: Workload, planner: Planner, q: str, ideal: bool, iterations: int) -> None:
    """Refuse, before the graph is built, a layer workload whose collectives alone pass the work limit."""
    sure = ((wl.scope(slot), c, b) for slot, c, b in _sure_comms(wl))
    steps, ncoll = comm_steps(sure, planner, q, ideal)
    tasks = 2 * len(wl.layers)  # every layer's forward and weight gradient
    what = f"at least {tasks:,} tasks and {ncoll:,} collectives"
    check_work((tasks + ncoll + steps) * iterations, f"{iterations} iteration(s) of {what}")


def check_fit(workload: Workload | ChakraTrace, topology: Topology) -> Workload | ChakraTrace:
    """The workload, if `iterate` can run it on `topology`: on one representative NPU (not a per-rank
    trace) with its model-parallel group or placement fitting the topology; else one `InputError`,
    before any work (what sweeps and design comparisons check for every point first)."""
    wl = _check_single_rank(workload)
    _logical(wl, topology)
    return wl


def _logical(wl: Workload | ChakraTrace, topo: Topology) -> tuple[Topology, int]:
    """The logical topology a workload's collectives run on and its model-parallel dims.

    A hybrid workload's group is placed on the leading dimensions (`group_topology`); a Chakra
    trace names its dimensions itself, and so does a placement."""
    if isinstance(wl, ChakraTrace):
        return topo, 0
    if wl.placement is not None:  # its groups name the physical dims themselves
        wl.placement.check(topo, wl.field("placement"))
        return topo, 0
    hybrid = any(wl.scope(slot) != ALL for slot, _, _ in _sure_comms(wl))
    return group_topology(topo, wl.model_parallel_group if hybrid else None, wl.field("model_parallel_group"))


def _sure_comms(wl: Workload) -> Iterator[tuple[str, str, int]]:
    """(slot, collective, bytes) of the collectives every pass of `wl` runs (`compile_workload`):
    each layer's fwd, ig and wg collectives, but layer 0's ig when its input gradient is not
    computed (and `MICRO`'s first wg only); recomputes run some fwd ones again."""
    layers = wl.layers[:1] if wl.parallelism == "MICRO" else wl.layers
    skip0 = wl.parallelism == "MICRO" or (not wl.layer0_input_gradient and wl.ig_source(0) == 0)
    for li, layer in enumerate(layers):
        for slot in ("wg",) if wl.parallelism == "MICRO" else SLOTS:
            c = layer.comm(slot)
            if c is not None and not (slot == "ig" and li == 0 and skip0):
                yield slot, c[0], c[1]


def _passes(wl: Workload | ChakraTrace, one: Graph, iterations: int, model: CostModel) -> Graph:
    """The graph of `iterations` passes: a trace's pass repeated, a workload compiled for them all."""
    if isinstance(wl, ChakraTrace):
        return repeat_graph(one, iterations)
    return compile_workload(wl, passes=iterations, tick=model.rules.workload_tick)


def _per_pass(engine: Engine, total: float, iterations: int, bytes_per_ns: float) -> dict[str, float]:
    """A run's times, bytes and bandwidth utilisation per pass (module docstring), as `IterationResult`
    fields; `bytes_per_ns`: the sum of the logical dimensions' bandwidths."""
    time = total / iterations
    gpu = engine.compute_busy / iterations
    cpu = engine.cpu_busy / iterations
    comm = engine.comm_time / iterations
    sent = engine.bytes_sent / iterations
    return {
        "time_ns": time,
        "compute_ns": gpu + cpu,
        "cpu_ns": cpu,
        "comm_ns": comm,
        "exposed_comm_ns": max(0.0, time - gpu),
        "bw_utilization": sent / (comm * bytes_per_ns) if comm > 0 else 0.0,
        "bytes_sent": sent,
        "total_ns": total,
    }


def _collective_runs(graph: Graph, engine: Engine, wl: Workload | None) -> tuple[CollectiveRun, ...]:
    """Every collective as it ran; named by its layer's name for a workload (`wl`), else by its node's."""
    return tuple(
        CollectiveRun(
            n.iteration,
            n.name if wl is None or n.layer < 0 else wl.layers[n.layer].name,
            n.slot,
            n.collective,  # type: ignore[arg-type]
            n.size,
            engine.dims[i],
            engine.chunks[i],
            engine.start[i],
            engine.end[i],
            n.delay,
        )
        for i, n in enumerate(graph.nodes)
        if n.kind == COMM
    )


def _node_runs(graph: Graph, engine: Engine, ids: Sequence[int], per_pass: int) -> tuple[NodeRun, ...]:
    """Every node but marks as it ran; `ids`: a trace's node ids in graph order (its end mark has
    none), repeated each pass of `per_pass` nodes; without, a node's id is its index."""
    return tuple(
        NodeRun(
            i,
            ids[i % per_pass] if ids else i,
            n.name,
            n.kind,
            RESOURCE_NAMES[resource_of(n.kind, n.cpu)],
            n.iteration,
            engine.start[i],
            engine.end[i],
        )
        for i, n in enumerate(graph.nodes)
        if n.kind != MARK
    )


def graph_steps(graph: Graph, planner: Planner, queue: str, ideal: bool) -> tuple[float, str]:
    """Estimated work steps of a graph (`dse.core.limits`): its nodes, and each collective's
    chunk-phases as `dse.sim.spec.simulation_steps` counts them; and what the graph holds."""
    steps, ncoll = comm_steps(((n.scope, n.collective, n.size) for n in graph.comms()), planner, queue, ideal)
    return len(graph.nodes) + steps, f"{len(graph.nodes) - ncoll:,} tasks and {ncoll:,} collectives"


def comm_steps(comms: Iterable[tuple[Any, Any, int]], planner: Planner, queue: str, ideal: bool) -> tuple[float, int]:
    """The chunk-phase steps of collectives (scope, collective, bytes), and how many they are."""
    steps = 0.0
    ncoll = 0
    memo: dict[tuple, float] = {}
    for scope, collective, size in comms:
        ncoll += 1
        _, sub, _ = planner.scope(scope)
        if sub is None or ideal:
            continue
        key = (scope, collective, planner.nchunks(size))
        if key not in memo:
            memo[key] = simulation_steps(sub, collective, key[2], planner.model, queue)[0]
        steps += memo[key]
    return steps, ncoll


# ----- the paper's end-to-end table -------------------------------------------------------------
PAPER_SPEEDUPS = {"ResNet-152": 1.49, "GNMT": 1.30, "DLRM": 1.30, "Transformer-1T": 1.25}


#: The paper's end-to-end workloads: ResNet-152 from the generator (the artifact has ResNet-50
#: only), the others bundled (converted from the Themis artifact's ASTRA-sim 1.0 files).
END_TO_END = {
    "ResNet-152": "resnet152",
    "GNMT": "gnmt_fp16_fused",
    "DLRM": "large_DLRM_fused",
    "Transformer-1T": "transformer_1t_fused_only_t",
}
#: What the artifact itself ran end to end (its own workload files, ResNet-50 for ResNet): the
#: workloads of the end-to-end table under `astra-sim-1`, which replays those runs.
END_TO_END_ARTIFACT = {
    "ResNet-50": "Resnet50_DataParallel_fused",
    "GNMT": "gnmt_fp16_fused",
    "DLRM": "large_DLRM_fused",
    "Transformer-1T": "transformer_1t_fused_only_t",
}


def end_to_end_workloads(cost_model: str = "paper") -> dict[str, Workload]:
    """The four workloads of the paper's end-to-end figure, loaded (the artifact's own files under
    `astra-sim-1`); a missing one is an `InputError` (one line), never a silently shorter table."""
    specs = END_TO_END_ARTIFACT if get_cost_model(cost_model).name == "astra-sim-1" else END_TO_END
    return {label: load_workload(spec) for label, spec in specs.items()}


def end_to_end_rows(
    cost_model: str = "paper", *, topologies: Sequence[str | Topology] | None = None, chunks: int = 64
) -> list[dict]:
    """Iteration time of baseline+fifo, themis+scf and ideal per workload x paper topology.

    A combination the workload cannot run on (a model-parallel group no prefix of dims holds and
    no split of one dim gives) gets a row with ``error`` set and no times.
    """
    from dse.core.presets import PAPER_PRESETS

    rows = []
    for label, wl in end_to_end_workloads(cost_model).items():
        for topo in topologies or PAPER_PRESETS:
            row: dict[str, Any] = {"workload": label, "topology": topo}
            try:
                base = iterate(wl, topo, scheduler="baseline", queue="fifo", cost_model=cost_model, chunks=chunks)
                themis = iterate(wl, topo, scheduler="themis", queue="scf", cost_model=cost_model, chunks=chunks)
                ideal = iterate(wl, topo, scheduler="ideal", queue="scf", cost_model=cost_model, chunks=chunks)
            except InputError as e:
                row["error"] = str(e)
                rows.append(row)
                continue
            row.update(
                compute_ns=base.compute_ns,
                baseline_ns=base.time_ns,
                themis_ns=themis.time_ns,
                ideal_ns=ideal.time_ns,
                themis_speedup=base.time_ns / themis.time_ns,
                ideal_speedup=base.time_ns / ideal.time_ns,
                baseline_exposed_ns=base.exposed_comm_ns,
                themis_exposed_ns=themis.exposed_comm_ns,
            )
            rows.append(row)
    return rows


def _gmean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def end_to_end_markdown(rows: Sequence[dict]) -> str:
    """Markdown: per-topology rows, then geometric means per workload next to the paper's."""
    lines = [
        "| workload | topology | baseline ms | themis ms | ideal ms | themis speed-up | ideal speed-up |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['topology']} | not run | — | — | n/a | n/a |")
            continue
        lines.append(
            f"| {r['workload']} | {r['topology']} | {r['baseline_ns'] / 1e6:.3f} | {r['themis_ns'] / 1e6:.3f} | "
            f"{r['ideal_ns'] / 1e6:.3f} | {r['themis_speedup']:.3f} | {r['ideal_speedup']:.3f} |"
        )
    lines += [
        "",
        "| workload | topologies | themis speed-up (geomean) | ideal speed-up (geomean) | paper (Themis) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == label]
        ok = [r for r in mine if "error" not in r]
        paper = PAPER_SPEEDUPS.get(label) or (
            f"{PAPER_SPEEDUPS['ResNet-152']} (ResNet-152)" if label == "ResNet-50" else None
        )
        count = f"{len(ok)}" if len(ok) == len(mine) else f"{len(ok)} of {len(mine)}"
        lines.append(
            f"| {label} | {count} | {_gmean([r['themis_speedup'] for r in ok]):.3f} | "
            f"{_gmean([r['ideal_speedup'] for r in ok]):.3f} | {paper if paper else '—'} |"
        )
    skipped = [r for r in rows if "error" in r]
    if skipped:
        lines += ["", "Not run (left out of the means above):", ""]
        lines += [f"- {r['workload']} on {r['topology']}: {r['error']}" for r in skipped]
    return "\n".join(lines)
