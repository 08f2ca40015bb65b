"""From a workload's collective to the chunk phases the engine queues (`dse.training.iteration_engine`).

A `Planner` holds what the collectives of one run share: the logical topology (with a split
dimension if the model-parallel group needs one, `dse.training.placement`), the scopes, the cost model's
chunking and phases, the scheduler's orders and Themis' loads across collectives, and the issue
priorities. The cost model decides the rules that differ between simulators:

- chunks: `chunks` per collective, or none smaller than `min_chunk_bytes` (`SimRules.fixed_splits`);
- Themis across collectives (`SimRules.themis_across`): ``carry``, one load tracker for the whole
  run, each collective charging its own dims (the paper's Algorithm 1); ``reset``, every
  collective from zero loads; ``astra-sim-1`` and ``astra-sim-2``, ASTRA-sim's one OfflineGreedy
  state over all logical dims (node 0's), reset only when node 0 issues a collective at a new
  tick. When node 0 is the first NPU to issue, the loads are reset, then accumulate; when
  another NPU is first, it schedules every chunk from the loads as they stand (the previous
  collective's, unless node 0 reset them since), and node 0, issuing later in the same tick,
  takes that cached schedule and resets the loads. Who is first: in 1.0, node 0 until the run
  first waits for a collective, another node after it (docs/model.md §9.3); in 2.x, the NPU the
  engine's same-tick order puts first (`lead`, the issuing event's first NPU, `lead_after`). An
  all-to-all never consults the loads, but resets them;
- priorities (`SimRules.issue_priorities`): ASTRA-sim 1.0 gives each collective a priority when
  it is issued (last-in-first-out counts up, first-in-first-out down, ``highest`` above all) and a
  phase entering a first-in-first-out queue goes behind the waiting phases of equal or higher
  priority; otherwise every collective has priority 0 (arrival order).
"""

from __future__ import annotations

import math
from typing import Any

from dse.core.collectives import A2A, ALL_GATHER, ALL_TO_ALL, first_phase_kind, nominal_bytes_sent
from dse.core.topology import Topology
from dse.costs import CostModel, Phase
from dse.schedulers import ScheduleProblem, Scheduler, ThemisScheduler, baseline_order
from dse.schedulers.themis import OfflineGreedy
from dse.sim.engine_ref import lead_after
from dse.sim.simulate import schedule_time
from dse.training.placement import PartScope
from dse.training.workloads import ALL, DP, MP

MIB = 2**20
HIGHEST = 100_000_000


def chunk_count(nbytes: int, chunks: int, min_chunk_bytes: int = MIB) -> int:
    """Chunks of one collective: `chunks`, but none smaller than `min_chunk_bytes` (at least 1)."""
    return max(1, min(chunks, nbytes // max(1, min_chunk_bytes)))


class _CarryingThemis:
    """The paper's load tracker (ThemisScheduler's Algorithm 1) with loads kept across collectives."""

    def __init__(self, sched: ThemisScheduler, topology: Topology) -> None:
        self.sched = sched
        self.loads = [d.steps * d.latency if sched.seed_latency else 0.0 for d in topology.dims]

    def orders(self, problem: ScheduleProblem, dims: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Each chunk's dimension order, from the loads carried over from earlier collectives on `dims`."""
        model, coll = problem.cost_model, problem.collective
        sub = problem.topology.dims
        base = baseline_order(coll, len(sub))
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


class _NodeZeroGreedy:
    """ASTRA-sim's OfflineGreedy across collectives: one state, node 0's reset rule (module docstring)."""

    def __init__(self, topology: Topology, model: CostModel) -> None:
        self.greedy = OfflineGreedy([model.greedy_bandwidth(d) for d in topology.dims], topology.shape)
        self.nd = topology.ndims
        self.node0_leads = True  # 1.0's rule; 2.x passes node0_first per issue
        self.last_reset = 0.0

    def orders(
        self, problem: ScheduleProblem, dims: tuple[int, ...], t: float, node0_first: bool | None = None
    ) -> list[tuple[int, ...]]:
        """Each chunk's dimension order from the shared greedy state, reset at a new tick as node 0's rule
        says (`node0_first`, when given, sets whether node 0 leads)."""
        coll = problem.collective
        new_tick = t != self.last_reset
        if node0_first is not None:
            self.node0_leads = node0_first
        if self.node0_leads and new_tick:
            self.greedy.reset()
            self.last_reset = t
        if coll == ALL_TO_ALL:
            out = [baseline_order(coll, len(dims))] * problem.nchunks
        else:
            involved = tuple(d in dims for d in range(self.nd))
            local = {g: i for i, g in enumerate(dims)}
            ag = coll == ALL_GATHER
            out = [
                tuple(local[d] for d in self.greedy.order(int(r), involved, ag) if d in local)
                for r in problem.chunks.charges
            ]
        if not self.node0_leads and new_tick:
            self.greedy.reset()
            self.last_reset = t
        return out


class Planner:
    """Turns a collective (kind, bytes, scope) issued at a time into chunk phase lists in logical dim indices."""

    def __init__(
        self,
        topology: Topology,
        mp_dims: int,
        model: CostModel,
        sched: Scheduler | None,
        queue: str,
        chunks: int,
        min_chunk_bytes: int,
    ) -> None:
        self.topo, self.mp_dims, self.model, self.sched, self.queue = topology, mp_dims, model, sched, queue
        self.chunks, self.min_chunk = chunks, min_chunk_bytes
        self.scopes: dict[Any, tuple[tuple[int, ...], Topology | None, dict]] = {}
        self.phase_cache: dict[tuple, tuple[Phase, ...]] = {}
        self.order_cache: dict[tuple, list[tuple[int, ...]]] = {}
        self.modes: dict[tuple, str] = {}
        self.priority_counter = 0
        self.carrying: _CarryingThemis | None = None
        self.node0: _NodeZeroGreedy | None = None
        #: the engine passes each collective's first issuing NPU (`lead`) and tracks it (`lead_after`)
        self.tracks_lead = False
        self._lead_maps: dict[tuple, tuple[int, tuple[int, ...]]] = {}
        if isinstance(sched, ThemisScheduler):
            across, flavor = model.rules.themis_across, model.rules.themis_flavor
            if across == "carry" and flavor == "load_tracker":
                self.carrying = _CarryingThemis(sched, topology)
            elif across in ("astra-sim-1", "astra-sim-2") and flavor == "offline_greedy":
                self.node0 = _NodeZeroGreedy(topology, model)
                self.tracks_lead = across == "astra-sim-2"

    def scope(self, scope: Any) -> tuple[tuple[int, ...], Topology | None, dict]:
        """A scope's logical dims, its sub-topology (None if it has no dims) and a phase memo."""
        hit = self.scopes.get(scope)
        if hit is None:
            nd = self.topo.ndims
            if isinstance(scope, PartScope):  # a placement's groups, on parts of physical dims
                hit = self.scopes[scope] = (scope.dims, scope.topology(self.topo), {})
                return hit
            if scope == ALL:
                dims = tuple(range(nd))
            elif scope == MP:
                dims = tuple(range(self.mp_dims))
            elif scope == DP:
                dims = tuple(range(self.mp_dims, nd))
            else:  # explicit dims (a Chakra trace's involved_dim): those past the last are ignored
                dims = tuple(d for d in scope if d < nd)
            sub = Topology(tuple(self.topo.dims[i] for i in dims)) if dims else None
            hit = self.scopes[scope] = (dims, sub, {})
        return hit

    def nchunks(self, nbytes: int) -> int:
        """How many chunks a collective of `nbytes` is split into."""
        if self.model.rules.fixed_splits:
            return max(1, min(self.chunks, nbytes))
        return chunk_count(nbytes, self.chunks, self.min_chunk)

    def priority(self, policy: str) -> int:
        """The collective's queue priority (ASTRA-sim 1.0's `get_priority`; 0 without `issue_priorities`)."""
        if not self.model.rules.issue_priorities:
            return 0
        if policy == "highest":
            return HIGHEST
        p = self.priority_counter
        self.priority_counter += -1 if policy == "fifo" else 1  # "none": the artifact's LIFO policy
        return p

    def resumed_by_collective(self) -> None:
        """The workload waited for a collective and was resumed by its completion (ASTRA-sim 1.0's Themis rule)."""
        if self.node0 is not None and not self.tracks_lead:
            self.node0.node0_leads = False

    def _lead_map(self, dim: int, coll: str, kind: str) -> tuple[int, tuple[int, ...]] | None:
        """`Phase.lead` of a `coll` phase of `kind` on logical dim `dim`: (stride, table), or None
        when the engine does not track the lead."""
        if not self.tracks_lead:
            return None
        key = (dim, coll, kind)
        hit = self._lead_maps.get(key)
        if hit is None:
            dims = self.topo.dims
            stride = math.prod(d.npus for d in dims[:dim])
            table = tuple(self.model.lead_after(dims[dim], coll, kind, i) for i in range(dims[dim].npus))
            hit = self._lead_maps[key] = (stride, table)
        return hit

    def lead_after(self, lead: int, coll: str, ph: Phase) -> int:
        """The first NPU (flat index, dim 0 fastest) to end phase `ph` of a `coll` chunk started first by `lead`."""
        m = self._lead_map(ph.dim, coll, ph.kind)
        return lead_after(lead, ph._replace(lead=m)) if m is not None else lead

    def ideal_ns(self, coll: str, nbytes: int, scope: Any) -> tuple[float, float]:
        """(ns, bytes one NPU sends) of a collective at 100 % of its dims' bandwidth."""
        _, sub, _ = self.scope(scope)
        if sub is None:
            return 0.0, 0.0
        need = nominal_bytes_sent(coll, nbytes, sub.shape, ag_input_shard=self.model.rules.ag_input_shard)
        return need / sum(self.model.bytes_per_ns(d, coll) for d in sub.dims), need

    def plans(
        self, coll: str, nbytes: int, scope: Any, t: float, lead: int = 0
    ) -> tuple[list[tuple[Phase, ...]], tuple[int, ...]]:
        """The chunks' phase lists (logical dim indices) of a collective issued at `t`, first by NPU
        `lead`, and its dims."""
        dims, sub, memo = self.scope(scope)
        if sub is None:
            return [], dims
        if self.model.closed_form:
            return [self.closed_form_phase(coll, nbytes, scope, dims, sub)], dims
        model, sched = self.model, self.sched
        assert sched is not None
        key = (coll, scope)
        mode = self.modes.get(key)
        if mode is None:
            mode = self.modes[key] = model.check(sub, coll, None, 1)
        plan = model.chunking(coll, nbytes, self.nchunks(nbytes), sub, baseline=sched.is_baseline)
        problem = ScheduleProblem(sub, coll, plan, model, 0, self.queue, mode, 1, simulate=schedule_time)
        if self.carrying is not None:
            orders = self.carrying.orders(problem, dims)
        elif self.node0 is not None:
            orders = self.node0.orders(problem, dims, t, lead == 0 if self.tracks_lead else None)
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
                p = cache[k] = tuple(
                    ph._replace(dim=dims[ph.dim], lead=self._lead_map(dims[ph.dim], coll, ph.kind)) for ph in local
                )
            out.append(p)
        return out, dims

    def closed_form_phase(
        self, coll: str, nbytes: int, scope: Any, dims: tuple[int, ...], sub: Topology
    ) -> tuple[Phase, ...]:
        """A closed-form model's collective (`nccl`) as one chunk of one phase: it holds the slowest
        dimension of its scope (the network when it crosses nodes) for the model's whole time, and
        sends the collective's nominal bytes. Collectives on the scope's other dimensions may run
        beside it. `fabric`: the scope starts at the node's fabric (dimension 0)."""
        key = ("closed", scope, coll, nbytes)
        hit = self.phase_cache.get(key)
        if hit is None:
            timing = self.model.collective_timing(sub, coll, nbytes, fabric=dims[0] == 0)  # type: ignore[attr-defined]
            slowest = min(range(len(dims)), key=lambda j: (sub.dims[j].bandwidth, -j))
            need = nominal_bytes_sent(coll, nbytes, sub.shape)
            kind = first_phase_kind(coll)
            hit = self.phase_cache[key] = (Phase(dims[slowest], kind, timing[0], 0.0, float(nbytes), need),)
        return hit
