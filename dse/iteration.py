"""Training iterations: layers' compute overlapping their collectives on the network (issue #8).

`iterate(workload, topology)` runs one (or more) training iterations of a `Workload` on one
representative NPU and returns an `IterationResult`.

The model, precisely:

- **Compute** is one sequential resource per NPU. Its tasks, per iteration and layer L (0-based,
  n layers): forward F_L, input gradient I_L, weight gradient W_L and the update U_L.
- **Dependencies.** F_L waits for F_{L-1} and for layer L-1's fwd collective (its output is the
  next layer's input); in iteration k > 0, F_L also waits for U_L of iteration k-1 (and F_0 for
  the last backward task of iteration k-1). Back-propagation starts with I_{n-1} once F_{n-1} and
  its fwd collective are done; then per layer from the last: I_L, then W_L; I_{L-1} waits for
  W_L and for layer L's ig collective. U_L waits for W_L and layer L's wg collective: the wg
  collective blocks only that layer's update. The iteration ends when every compute task,
  collective and update is done. One exception, ``HYBRID_DLRM k`` (ASTRA-sim's DLRM): the
  embedding's (layer 0) forward all-to-all gates layer k+1's forward instead of layer 1's (it
  overlaps the bottom MLP, layers 1..k), and its backward all-to-all is issued after layer k+1's
  input-gradient compute and gates the embedding's own I_0 (`Workload.fwd_gate`, `ig_source`).
- **Issue.** A collective is issued when the compute that produces its data ends (fwd after F_L,
  ig after I_L, wg after W_L). When the compute resource is free it takes the ready task that
  became ready first (ties in the order they became ready); it never preempts. At equal times
  network events come first (as in `_run_servers`), then ideal collectives' ends, then compute ends.
- **Network.** Every in-flight collective's chunks share the per-dimension queues of the chunk
  simulator (`dse.simulate._run_servers`: one server per dimension, FIFO or SCF with the cost
  model's `scf_rule`, the same event keys, completion and refill order), so collectives compete
  chunk by chunk. A collective's chunks are queued in chunk order when it is issued.
- **Where a collective runs.** ``all`` scope: every dim. Hybrid workloads: model-parallel
  collectives (fwd, ig) on the first dims whose NPU counts multiply exactly to the group
  (`InputError` when no prefix does), data-parallel ones (wg) on the remaining dims; a scope
  with no dims (group of 1 NPU, or of all NPUs for wg) costs nothing. Phases are built by the
  cost model on the sub-topology of those dims and mapped back to the global dim indices.
- **Chunks.** ``min(chunks, max(1, bytes // min_chunk_bytes))`` chunks per collective,
  `min_chunk_bytes` = 1 MiB by default: a 64 MiB collective or larger gets all 64 chunks, a 4 MiB
  one 4, anything under 2 MiB one.
- **Themis across collectives.** With the paper-flavour load tracker (`paper` model) one set of
  per-dimension loads lives for the whole run (all collectives, all iterations): each collective's
  chunk orders are chosen when it is issued, from the loads of its own dims, and charge them; so
  the tracker sees every collective in issue order (an all-to-all keeps the ascending order
  but its phases are charged too). With ``offline_greedy`` models (astra-sim,
  astra-sim-1) and every other scheduler, orders are computed per collective as `evaluate` does
  (tracker reset per collective).
- **Ideal** (``scheduler="ideal"``): each collective takes bytes one NPU sends / sum of its
  dims' bandwidths (no latency) from its issue, without touching the queues (no contention
  between collectives): what 100 % bandwidth utilisation would give, still overlapped with compute.
- Only ``active_chunks = 1`` (one phase per dimension at a time) is modelled.

Reported per iteration: `time_ns`; `compute_ns` (busy time of the compute resource);
`comm_ns` (time at least one collective is in flight); `exposed_comm_ns` = time − compute (the
compute resource only ever idles waiting for a collective); `bw_utilization` = bytes one NPU sends /
(comm_ns × Σ_d B_d).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any, Sequence

from .collectives import A2A, ALL_TO_ALL, nominal_bytes_sent
from .costs import CostModel, Phase, get_cost_model
from .errors import InputError
from .limits import check_work
from .schedulers import ScheduleProblem, Scheduler, ThemisScheduler, baseline_order, get_scheduler, parse_queue
from .spec import simulation_steps
from .simulate import FIFO, policy_code, push_phase, queue_insert
from .topology import Topology, parse_topology
from .units import parse_int
from .workloads import ALL, MP, SLOTS, Workload, load_workload

MIB = 2**20
_COMPLETE, _RELEASE, _ARRIVE, _IDEAL_DONE, _COMPUTE_DONE = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class CollectiveRun:
    """One collective as it ran: which layer and slot, where, and when."""

    iteration: int
    layer: str
    slot: str
    collective: str
    size_bytes: int
    dims: tuple[int, ...]
    chunks: int
    issue_ns: float
    end_ns: float


@dataclass(frozen=True)
class IterationResult:
    """Times per training iteration (averaged over `iterations`) and per-collective details."""

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

    def as_dict(self, *, details: bool = False) -> dict[str, Any]:
        """A JSON-ready dict (the per-collective list only with `details`)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "collectives"}
        d["collective_count"] = len(self.collectives)
        if details:
            d["collectives"] = [c.__dict__ | {"dims": list(c.dims)} for c in self.collectives]
        return d


def scope_dims(topology: Topology, scope: str, group: int | None) -> tuple[int, ...]:
    """Global dim indices of a scope: all dims, the model-parallel prefix or the rest."""
    nd = topology.ndims
    if scope == ALL:
        return tuple(range(nd))
    prod, k = 1, 0
    while prod < (group or 1) and k < nd:
        prod *= topology.dims[k].npus
        k += 1
    if prod != (group or 1):
        prefixes = [math.prod(topology.shape[:i]) for i in range(1, nd + 1)]
        raise InputError(
            "model_parallel_group",
            f"no leading dims of {topology.label()} (shape {'x'.join(map(str, topology.shape))}) hold exactly {group} NPUs",
            ", ".join(map(str, prefixes)),
        )
    return tuple(range(k)) if scope == MP else tuple(range(k, nd))


def chunk_count(nbytes: int, chunks: int, min_chunk_bytes: int = MIB) -> int:
    """Chunks of one collective: `chunks`, but none smaller than `min_chunk_bytes` (at least 1)."""
    return max(1, min(chunks, nbytes // max(1, min_chunk_bytes)))


class _CarryingThemis:
    """The paper's load tracker (ThemisScheduler's Algorithm 1) with loads kept across collectives."""

    def __init__(self, sched: ThemisScheduler, topology: Topology) -> None:
        self.sched = sched
        self.loads = [d.steps * d.latency if sched.seed_latency else 0.0 for d in topology.dims]

    def orders(self, problem: ScheduleProblem, dims: tuple[int, ...]) -> list[tuple[int, ...]]:
        model, coll = problem.cost_model, problem.collective
        sub = problem.topology.dims
        nd = len(sub)
        base = baseline_order(coll, nd)
        if coll == ALL_TO_ALL:  # never reordered; its phases still load the dims
            for size in problem.chunks.charges:
                c = model.start_bytes(coll, size, problem.topology)
                for g, dim in zip(dims, sub):
                    self.loads[g] += model.bandwidth_time(dim, A2A, c)
            return [base] * problem.nchunks
        out, loads = self.sched.track(problem, [self.loads[g] for g in dims])
        for g, v in zip(dims, loads):
            self.loads[g] = v
        return out


class _Planner:
    """Turns (collective, bytes, scope) into chunk phase lists in global dim indices."""

    def __init__(self, topo: Topology, model: CostModel, sched: Scheduler | None, queue: str,
                 chunks: int, min_chunk_bytes: int, group: int | None) -> None:  # fmt: skip
        self.topo, self.model, self.sched, self.queue = topo, model, sched, queue
        self.chunks, self.min_chunk = chunks, min_chunk_bytes
        self.group = group
        self.scopes: dict[str, tuple[tuple[int, ...], Topology | None, dict]] = {}
        self.phase_cache: dict[tuple, tuple[Phase, ...]] = {}
        self.order_cache: dict[tuple, list[tuple[int, ...]]] = {}
        self.tracker = None
        if isinstance(sched, ThemisScheduler) and model.themis_flavor == "load_tracker":
            self.tracker = _CarryingThemis(sched, topo)
        self.modes: dict[tuple, str] = {}

    def scope(self, scope: str) -> tuple[tuple[int, ...], Topology | None, dict]:
        hit = self.scopes.get(scope)
        if hit is None:
            dims = scope_dims(self.topo, scope, self.group)
            sub = Topology(tuple(self.topo.dims[i] for i in dims)) if dims else None
            hit = self.scopes[scope] = (dims, sub, {})
        return hit

    def ideal_ns(self, coll: str, nbytes: int, scope: str) -> float:
        dims, sub, _ = self.scope(scope)
        if sub is None:
            return 0.0
        need = nominal_bytes_sent(coll, nbytes, sub.shape, ag_input_shard=self.model.ag_input_shard)
        return need / sum(self.model.bytes_per_ns(d) for d in sub.dims)

    def plans(self, coll: str, nbytes: int, scope: str) -> tuple[list[tuple[Phase, ...]], tuple[int, ...]]:
        dims, sub, memo = self.scope(scope)
        if sub is None:
            return [], dims
        model, sched = self.model, self.sched
        assert sched is not None
        key = (coll, scope)
        mode = self.modes.get(key)
        if mode is None:
            mode = self.modes[key] = model.check(sub, coll, None, 1)
        n = chunk_count(nbytes, self.chunks, self.min_chunk)
        plan = model.chunking(coll, nbytes, n, sub, baseline=sched.is_baseline)
        problem = ScheduleProblem(sub, coll, plan, model, 0, self.queue, mode, 1)
        if self.tracker is not None:
            orders = self.tracker.orders(problem, dims)
        else:
            okey = (coll, nbytes, scope)
            orders = self.order_cache.get(okey)  # type: ignore[assignment]
            if orders is None:
                orders = self.order_cache[okey] = sched.orders(problem)
        out = []
        cache = self.phase_cache
        for order, size in zip(orders, plan.sizes):
            k = (scope, coll, order, size)
            p = cache.get(k)
            if p is None:
                local = model.phases(sub, coll, order, size, latency_mode=mode, baseline=sched.is_baseline, memo=memo)
                p = cache[k] = tuple(ph._replace(dim=dims[ph.dim]) for ph in local)
            out.append(p)
        return out, dims


def iterate(
    workload: "str | Workload",
    topology: "str | Topology",
    *,
    scheduler: "str | Scheduler" = "themis",
    queue: str = "scf",
    cost_model: "str | CostModel" = "paper",
    iterations: int = 1,
    chunks: int = 64,
    min_chunk_bytes: int = MIB,
) -> IterationResult:
    """Simulate `iterations` training iterations of `workload` on `topology` (module docstring).

    `workload`: a file path, a `Workload` or a generator spec (``"resnet152"``,
    ``"transformer:layers=8"``). `scheduler`: any `dse` scheduler, or ``"ideal"`` (every
    collective at 100 % bandwidth of its dims, no contention).
    """
    wl = load_workload(workload)
    topo = parse_topology(topology)
    model = get_cost_model(cost_model)
    q = parse_queue(queue)
    iterations = parse_int(iterations, "iterations", minimum=1)
    chunks = parse_int(chunks, "chunks", minimum=1)
    min_chunk_bytes = parse_int(min_chunk_bytes, "min_chunk_bytes", minimum=1)
    ideal = isinstance(scheduler, str) and scheduler.strip().lower() == "ideal"
    sched = None if ideal else get_scheduler(scheduler)
    planner = _Planner(topo, model, sched, q, chunks, min_chunk_bytes, wl.model_parallel_group)
    for slot in SLOTS:  # validate the placement up front, even if the slot is unused
        if any(layer.comm(slot) for layer in wl.layers):
            planner.scope(wl.scope(slot))
    steps, what = iteration_steps(wl, planner, q, ideal)
    check_work(steps * iterations, f"{iterations} iteration(s) of {what}")
    policy = policy_code(q, model.scf_rule)
    sim = _Engine(wl, topo, planner, policy, model.dim_tiebreak, ideal, iterations)
    total = sim.run()
    if not math.isfinite(total):  # the input ranges (dse.limits) keep every time finite: a last guard
        raise InputError("workload", f"the iteration's time is not finite ({total})", "times and sizes within dse.limits")
    compute = sim.compute_busy / iterations
    time = total / iterations
    comm = sim.comm_time / iterations
    bw = sum(model.bytes_per_ns(d) for d in topo.dims)
    sent = sim.bytes_sent / iterations
    return IterationResult(
        workload=wl.name, topology=topo.label(), scheduler="ideal" if ideal else sched.name,  # type: ignore[union-attr]
        queue=q, cost_model=model.name, iterations=iterations, chunks=chunks, time_ns=time,
        compute_ns=compute, comm_ns=comm, exposed_comm_ns=max(0.0, time - compute),
        bw_utilization=sent / (comm * bw) if comm > 0 else 0.0, bytes_sent=sent, total_ns=total,
        collectives=tuple(sim.runs),
    )  # fmt: skip


def iteration_steps(wl: Workload, planner: _Planner, queue: str, ideal: bool) -> tuple[float, str]:
    """Estimated work steps of one iteration (`dse.limits`): compute tasks, and each collective's
    chunk-phases as `dse.spec.simulation_steps` counts them; and where they come from."""
    steps = 4.0 * len(wl.layers)
    ncoll = 0
    for layer in wl.layers:
        for slot in SLOTS:
            comm = layer.comm(slot)
            if comm is None:
                continue
            ncoll += 1
            _, sub, _ = planner.scope(wl.scope(slot))
            if sub is None or ideal:
                continue
            n = chunk_count(comm[1], planner.chunks, planner.min_chunk)
            steps += simulation_steps(sub, comm[0], n, planner.model, queue)[0]
    return steps, f"{len(wl.layers):,} layers and {ncoll:,} collectives"


class _Engine:
    """The event loop: `_run_servers` with dynamic collective issue and a compute resource."""

    def __init__(self, wl: Workload, topo: Topology, planner: _Planner, policy: int, dim_tiebreak: bool,
                 ideal: bool, iterations: int) -> None:  # fmt: skip
        self.wl, self.planner, self.policy, self.dim_tiebreak, self.ideal = wl, planner, policy, dim_tiebreak, ideal
        self.nd = topo.ndims
        self.iterations = iterations
        self.compute_busy = 0.0
        self.comm_time = 0.0
        self.bytes_sent = 0.0
        self.runs: list[CollectiveRun] = []
        self._build_dag()

    # ----- the task graph ---------------------------------------------------------------------
    def _build_dag(self) -> None:
        """Nodes: ('c', ns) compute tasks and ('n', (iteration, layer index, slot)) collectives.

        Program order F_0..F_{n-1}, I_{n-1}, W_{n-1}, ..., I_0, W_0 (then the next iteration);
        U_L after W_L. A fwd collective of L gates F_{fwd_gate(L)} (I_{n-1} past the last layer);
        an ig collective is issued by I_{ig_source(L)} and gates I_{ig_gate(L)}; a wg collective
        gates U_L (`Workload.fwd_gate` etc.: the layer after, or the DLRM embedding's overlap).
        """
        wl = self.wl
        kind: list[str] = []
        info: list[Any] = []
        need: list[int] = []
        succ: list[list[int]] = []

        def node(k: str, x: Any) -> int:
            kind.append(k)
            info.append(x)
            succ.append([])
            need.append(0)
            return len(kind) - 1

        def edge(a: int | None, b: int) -> None:
            if a is not None:
                succ[a].append(b)
                need[b] += 1

        n = len(wl.layers)
        layers = wl.layers
        prev_tail: int | None = None
        prev_update: list[int | None] = [None] * n
        for it in range(self.iterations):
            F = [node("c", layer.fwd_compute) for layer in layers]
            I: list[int] = [0] * n
            W: list[int] = [0] * n
            for li in range(n - 1, -1, -1):
                I[li] = node("c", layers[li].ig_compute)
                W[li] = node("c", layers[li].wg_compute)
            U = [node("c", layer.wg_update) for layer in layers]
            # program order on the compute resource
            edge(prev_tail, F[0])
            for li in range(1, n):
                edge(F[li - 1], F[li])
            edge(F[n - 1], I[n - 1])
            for li in range(n):
                edge(I[li], W[li])
                edge(W[li], U[li])
                if li < n - 1:
                    edge(W[li + 1], I[li])
                edge(prev_update[li], F[li])
            # collectives
            for li, layer in enumerate(layers):
                if layer.comm("fwd"):
                    c = node("n", (it, li, "fwd"))
                    edge(F[li], c)
                    g = wl.fwd_gate(li)
                    edge(c, F[g] if g < n else I[n - 1])
                if layer.comm("ig"):
                    c = node("n", (it, li, "ig"))
                    edge(I[wl.ig_source(li)], c)
                    g = wl.ig_gate(li)
                    if g >= 0:
                        edge(c, I[g])
                if layer.comm("wg"):
                    c = node("n", (it, li, "wg"))
                    edge(W[li], c)
                    edge(c, U[li])
            prev_tail, prev_update = W[0], list(U)
        self.kind, self.info, self.need, self.succ = kind, info, need, succ

    # ----- the loop ---------------------------------------------------------------------------
    def run(self) -> float:
        planner, policy, dim_tiebreak, nd = self.planner, self.policy, self.dim_tiebreak, self.nd
        kind, info, need, succ = self.kind, self.info, list(self.need), self.succ
        wl = self.wl
        plans: list[tuple[Phase, ...]] = []
        pos: list[int] = []
        owner: list[int] = []
        started: list[float] = []
        wait: list[list] = [[] for _ in range(nd)]
        running = [0] * nd
        heap: list = []
        push, pop = heapq.heappush, heapq.heappop
        counter = 0
        remaining: dict[int, int] = {}  # collective node -> chunks left
        issued: dict[int, tuple[float, tuple]] = {}
        ready: list = []  # compute tasks: (ready time, seq, node)
        compute_free = True
        in_flight = 0
        comm_since = 0.0
        sent_total = 0.0
        busy_total = 0.0

        def start(c: int, d: int, t: float) -> None:
            nonlocal counter, sent_total
            ph = plans[c][pos[c]]
            running[d] += 1
            sent_total += ph[5]
            started[c] = t
            counter = push_phase(heap, ph, c, d, t, counter, dim_tiebreak)

        def enqueue(c: int) -> int:
            nonlocal counter
            plan = plans[c]
            ph = plan[pos[c]]
            counter = queue_insert(wait[ph[0]], policy, c, ph, len(plan) - pos[c] - 1, counter)
            return ph[0]

        def refill(d: int, t: float) -> None:
            q = wait[d]
            while q and running[d] == 0:
                item = q.pop(0)
                start(item if policy == FIFO else item[-1], d, t)

        def finish(i: int, t: float) -> None:
            """Node i is done at t: release its successors."""
            nonlocal counter
            for s in succ[i]:
                need[s] -= 1
                if need[s] == 0:
                    if kind[s] == "c":
                        push(ready, (t, counter, s))
                        counter += 1
                    else:
                        issue(s, t)

        def issue(i: int, t: float) -> None:
            nonlocal counter, in_flight, comm_since, sent_total
            it, li, slot = info[i]
            coll, nbytes = wl.layers[li].comm(slot)  # type: ignore[misc]
            scope = wl.scope(slot)
            if in_flight == 0:
                comm_since = t
            in_flight += 1
            if self.ideal:
                dims = planner.scope(scope)[0]
                issued[i] = (t, dims, 1)
                dt = planner.ideal_ns(coll, nbytes, scope)
                if dims:
                    sent_total += nominal_bytes_sent(coll, nbytes, planner.scope(scope)[1].shape,  # type: ignore[union-attr]
                                                     ag_input_shard=planner.model.ag_input_shard)  # fmt: skip
                push(heap, (t + dt, 2, 0, counter, _IDEAL_DONE, i, 0))
                counter += 1
                return
            chunk_plans, dims = planner.plans(coll, nbytes, scope)
            issued[i] = (t, dims, len(chunk_plans))
            if not chunk_plans:
                push(heap, (t, 2, 0, counter, _IDEAL_DONE, i, 0))
                counter += 1
                return
            remaining[i] = len(chunk_plans)
            first = len(plans)
            for p in chunk_plans:
                plans.append(p)
                pos.append(0)
                owner.append(i)
                started.append(t)
            for c in range(first, len(plans)):
                refill(enqueue(c), t)

        def coll_done(i: int, t: float) -> None:
            nonlocal in_flight
            in_flight -= 1
            if in_flight == 0:
                self.comm_time += t - comm_since
            t0, dims, nchunks = issued[i]
            it, li, slot = info[i]
            coll, nbytes = wl.layers[li].comm(slot)  # type: ignore[misc]
            self.runs.append(CollectiveRun(it, wl.layers[li].name, slot, coll, nbytes, dims, nchunks, t0, t))
            finish(i, t)

        def run_compute(t: float) -> None:
            nonlocal compute_free, counter, busy_total
            if compute_free and ready:
                _, _, s = pop(ready)
                compute_free = False
                dur = info[s]
                busy_total += dur
                push(heap, (t + dur, 3, 0, counter, _COMPUTE_DONE, s, 0))
                counter += 1

        # roots: compute tasks without dependencies (F_0 of the first iteration)
        for i in range(len(kind)):
            if need[i] == 0:
                push(ready, (0.0, counter, i))
                counter += 1
        run_compute(0.0)
        end = 0.0
        while heap:
            t, _, _, _, ev, c, d = pop(heap)
            end = t
            if ev == _COMPUTE_DONE:
                compute_free = True
                finish(c, t)
                run_compute(t)
                continue
            if ev == _IDEAL_DONE:
                coll_done(c, t)
                run_compute(t)
                continue
            if ev != _ARRIVE:
                running[d] -= 1
            if ev != _RELEASE:
                plan = plans[c]
                pos[c] += 1
                done = -1
                if pos[c] < len(plan):
                    d2 = enqueue(c)
                else:
                    d2 = -1
                    o = owner[c]
                    remaining[o] -= 1
                    if remaining[o] == 0:
                        done = o
                if ev == _COMPLETE:
                    refill(d, t)
                    if d2 >= 0 and d2 != d:
                        refill(d2, t)
                elif d2 >= 0:
                    refill(d2, t)
                if done >= 0:
                    coll_done(done, t)
                    run_compute(t)
            else:
                refill(d, t)
        if any(need) or ready or not compute_free:
            raise RuntimeError("iteration engine stalled (dependency cycle)")  # pragma: no cover
        self.compute_busy = busy_total
        self.bytes_sent = sent_total
        return end


# ----- the paper's end-to-end table -------------------------------------------------------------
PAPER_SPEEDUPS = {"ResNet-152": 1.49, "GNMT": 1.30, "DLRM": 1.30, "Transformer-1T": 1.25}


#: The paper's end-to-end workloads: ResNet-152 from the generator (the artifact has ResNet-50
#: only), the others bundled (converted from the Themis artifact's ASTRA-sim 1.0 files).
END_TO_END = {"ResNet-152": "resnet152", "GNMT": "gnmt_fp16_fused", "DLRM": "large_DLRM_fused",
              "Transformer-1T": "transformer_1t_fused_only_t"}  # fmt: skip


def end_to_end_workloads() -> dict[str, Workload]:
    """The four workloads of the paper's end-to-end figure, loaded; a missing one is an `InputError`
    (one line), never a silently shorter table."""
    return {label: load_workload(spec) for label, spec in END_TO_END.items()}


def end_to_end_rows(cost_model: str = "paper", *, topologies: "Sequence[str | Topology] | None" = None, chunks: int = 64) -> list[dict]:
    """Iteration time of baseline+fifo, themis+scf and ideal per workload x paper topology.

    A combination the workload cannot run on (a model-parallel group no prefix of dims holds)
    gets a row with ``error`` set and no times.
    """
    from .topology import PAPER_PRESETS

    rows = []
    for label, wl in end_to_end_workloads().items():
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
                baseline_ns=base.time_ns, themis_ns=themis.time_ns, ideal_ns=ideal.time_ns,
                themis_speedup=base.time_ns / themis.time_ns, ideal_speedup=base.time_ns / ideal.time_ns,
                baseline_exposed_ns=base.exposed_comm_ns, themis_exposed_ns=themis.exposed_comm_ns,
            )  # fmt: skip
            rows.append(row)
    return rows


def _gmean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def end_to_end_markdown(rows: Sequence[dict]) -> str:
    """Markdown: per-topology rows, then geometric means per workload next to the paper's."""
    lines = ["| workload | topology | baseline ms | themis ms | ideal ms | themis speed-up | ideal speed-up |",
             "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['topology']} | not run | — | — | n/a | n/a |")
            continue
        lines.append(f"| {r['workload']} | {r['topology']} | {r['baseline_ns'] / 1e6:.3f} | {r['themis_ns'] / 1e6:.3f} | "
                     f"{r['ideal_ns'] / 1e6:.3f} | {r['themis_speedup']:.3f} | {r['ideal_speedup']:.3f} |")  # fmt: skip
    lines += ["", "| workload | topologies | themis speed-up (geomean) | ideal speed-up (geomean) | paper (Themis) |",
              "|---|---:|---:|---:|---:|"]  # fmt: skip
    for label in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == label]
        ok = [r for r in mine if "error" not in r]
        paper = PAPER_SPEEDUPS.get(label)
        count = f"{len(ok)}" if len(ok) == len(mine) else f"{len(ok)} of {len(mine)}"
        lines.append(f"| {label} | {count} | {_gmean([r['themis_speedup'] for r in ok]):.3f} | "
                     f"{_gmean([r['ideal_speedup'] for r in ok]):.3f} | {paper if paper else '—'} |")  # fmt: skip
    skipped = [r for r in rows if "error" in r]
    if skipped:
        lines += ["", "Not run (left out of the means above):", ""]
        lines += [f"- {r['workload']} on {r['topology']}: {r['error']}" for r in skipped]
    return "\n".join(lines)
