"""The engine that runs a workload graph (`dse.workload_graph`) on the network and the NPU's resources.

One event heap of ``(time, class, tie, counter, event, a, b)``: at equal times the network's
events come first (a phase's completion or arrival, then a dimension's release), then collectives
counted done, then computes ending, then dependency lags ending; the counter breaks the remaining
ties in the order events were made, so a run is deterministic.

- A node is ready when every dependency is done and its lag has passed. Resources
  (`ResourceRules`, the cost model's `workload_rules`): one GPU compute node and one CPU node at a
  time, never preempted; a freed resource takes the ready node that became ready first (ties in
  the order they became ready) or, under ASTRA-sim 2.x's rules, the ready node of lowest index. A
  `comm` node is issued at once, or under ASTRA-sim 2.x's rules when no other collective (or
  replayed communication) is in flight; a `mark` is done at once.
- An issued collective's chunks enter the queues of their first dimensions in chunk order; the
  dims serve them as `dse.simulate._run_servers` does (one phase at a time per dim, FIFO or the
  cost model's smallest-first rule, the same completion and refill order), shared by every
  collective in flight. With `CostModel.issue_priorities` a phase entering a FIFO queue (or an
  all-reduce or all-to-all phase under smallest-first) goes behind the waiting phases of equal or
  higher priority (ASTRA-sim 1.0's `insert_stream`). The collective ends when its last chunk
  does, and counts as done its `delay` later.
- With ``ideal=True`` a collective takes its ideal time from its issue, without queues.
- A node resumed by a collective (its last dependency, strictly after every other) tells the
  planner (`Planner.resumed_by_collective`, ASTRA-sim 1.0's Themis rule).
- When the planner asks (`Planner.tracks_lead`, ASTRA-sim 2.x's Themis rule), every event carries
  the first NPU to handle it: a phase ends first at `Planner.lead_after` of the NPU that started it
  first, and whatever an event starts or issues (phases, computes, collectives) starts first at
  that event's first NPU; a collective is planned knowing it.
- With `ResourceRules.end_before_release`, a collective's last phase frees its dimension only
  after the collective's end has been handled (the nodes it frees dispatched).
"""

from __future__ import annotations

import heapq
from .iteration_planner import Planner
from .simulate import FIFO, push_phase, queue_insert, refill_after
from .workload_graph import ASTRA2_RULES, COMM, COMPUTE, DSE_RULES, REPLAY, Graph, ResourceRules

_COMPLETE, _RELEASE, _ARRIVE, _COMM_DONE, _COMPUTE_DONE, _LAG = 0, 1, 2, 3, 4, 5
#: the NPU's resources: GPU compute, CPU, GPU communication (none: -1)
GPU, CPU, NET = 0, 1, 2
RESOURCE_NAMES = {GPU: "gpu", CPU: "cpu", NET: "net", -1: ""}
RULES = {r.name: r for r in (DSE_RULES, ASTRA2_RULES)}


def resource_of(kind: str, cpu: bool) -> int:
    """The resource a node occupies while it runs (-1: none, a mark)."""
    if kind == COMPUTE:
        return CPU if cpu else GPU
    if kind == REPLAY:
        return CPU if cpu else NET
    return NET if kind == COMM else -1


class Engine:
    """Runs one graph; afterwards `start`/`end` hold every node's times and the totals are set."""

    def __init__(self, graph: Graph, planner: Planner, policy: int, dim_tiebreak: bool, ideal: bool,
                 rules: ResourceRules = DSE_RULES) -> None:  # fmt: skip
        self.graph, self.planner, self.policy, self.dim_tiebreak, self.ideal = graph, planner, policy, dim_tiebreak, ideal
        self.rules = rules
        n = len(graph.nodes)
        self.succ: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        self.need = [0] * n
        for a, b, lag in graph.edges:
            self.succ[a].append((b, lag))
            self.need[b] += 1
        self.start = [float("nan")] * n
        self.end = [float("nan")] * n
        self.chunks = [0] * n
        self.dims: list[tuple[int, ...]] = [()] * n
        self.compute_busy = 0.0
        self.cpu_busy = 0.0
        self.comm_time = 0.0
        self.bytes_sent = 0.0

    def run(self) -> float:  # noqa: C901 - one event loop, kept in one place for speed
        """Run the graph; returns the end node's time."""
        graph, planner, policy, dim_tiebreak = self.graph, self.planner, self.policy, self.dim_tiebreak
        nodes, succ, need = graph.nodes, self.succ, list(self.need)
        kinds = [nd.kind for nd in nodes]
        nd_ = planner.topo.ndims
        use_prio = planner.model.issue_priorities
        start_t, end_t, nchunks, dims_of = self.start, self.end, self.chunks, self.dims
        comm_rel = [-1.0] * len(nodes)  # latest release by a collective (or a mark it resumed)
        other_rel = [-1.0] * len(nodes)
        by_comm = [False] * len(nodes)
        plans: list = []
        pos: list[int] = []
        owner: list[int] = []
        prio: list[int] = []
        wait: list[list] = [[] for _ in range(nd_)]
        running = [0] * nd_
        remaining: dict[int, int] = {}
        heap: list = []
        push, pop = heapq.heappush, heapq.heappop
        counter = 0
        rules = self.rules
        res = [resource_of(nd.kind, nd.cpu) for nd in nodes]
        exclusive = (True, True, rules.comm_exclusive)
        by_id, min_ns, late_release = rules.by_id, rules.min_ns, rules.end_before_release
        ready: list[list] = [[], [], []]  # per resource: (index or ready time, counter, node)
        taken = [False, False, False]
        cpu_busy = 0.0
        # the first NPU to handle the current event (ASTRA-sim 2.x's same-tick order, `Planner.lead_after`)
        track = planner.tracks_lead
        lead = 0
        phase_lead: list[int] = []  # per chunk: the first NPU to start its current phase
        node_lead = [0] * len(nodes)  # per node: the first NPU to issue it
        lag_lead: dict[int, int] = {}
        in_flight = 0
        comm_since = 0.0
        sent = 0.0
        busy = 0.0

        def enqueue(c: int) -> int:
            nonlocal counter
            plan = plans[c]
            ph = plan[pos[c]]
            q = wait[ph[0]]
            if use_prio and (policy == FIFO or ph[6]):  # behind the waiting phases of equal or higher priority
                p = prio[c]
                j = len(q)
                if j and prio[q[-1][1]] < p:
                    j = 0
                    while prio[q[j][1]] >= p:
                        j += 1
                q.insert(j, (ph[4], c))
            else:
                counter = queue_insert(q, policy, c, ph, len(plan) - pos[c] - 1, counter)
            return ph[0]

        def refill(d: int, t: float) -> None:
            nonlocal counter, sent
            q = wait[d]
            while q and running[d] == 0:
                item = q.pop(0)
                c = item if (policy == FIFO and not use_prio) else item[-1]
                ph = plans[c][pos[c]]
                running[d] += 1
                sent += ph[5]
                if track:
                    phase_lead[c] = lead
                counter = push_phase(heap, ph, c, d, t, counter, dim_tiebreak)

        def release(s: int, t: float) -> None:
            """Node s is done at t: count its successors' dependencies (after their lags)."""
            nonlocal counter
            for x, lag in succ[s]:
                if lag:
                    if track:
                        lag_lead[counter] = lead
                    push(heap, (t + lag, 4, 0, counter, _LAG, s, x))
                    counter += 1
                else:
                    arrive(s, x, t)

        def arrive(s: int, x: int, t: float) -> None:
            nonlocal counter
            if kinds[s] == COMM or by_comm[s]:
                if t > comm_rel[x]:
                    comm_rel[x] = t
            elif t > other_rel[x]:
                other_rel[x] = t
            need[x] -= 1
            if need[x]:
                return
            if comm_rel[x] > other_rel[x]:
                by_comm[x] = True
                if kinds[x] != COMM:
                    planner.resumed_by_collective()
            r = res[x]
            if r < 0:
                start_t[x] = end_t[x] = t
                release(x, t)
            elif r == NET and not exclusive[NET] and kinds[x] == COMM:
                issue(x, t)
            else:
                push(ready[r], (x if by_id else t, counter, x))
                counter += 1

        def issue(i: int, t: float) -> None:
            nonlocal counter, in_flight, comm_since, sent
            node = nodes[i]
            start_t[i] = t
            node_lead[i] = lead
            if in_flight == 0:
                comm_since = t
            in_flight += 1
            if self.ideal:
                dt, need_bytes = planner.ideal_ns(node.collective, node.size, node.scope)  # type: ignore[arg-type]
                sent += need_bytes
                dims_of[i] = planner.scope(node.scope)[0]
                nchunks[i] = 1
                push(heap, (t + dt, 2, 0, counter, _COMM_DONE, i, 0))
                counter += 1
                return
            chunk_plans, dims = planner.plans(node.collective, node.size, node.scope, t, lead)  # type: ignore[arg-type]
            dims_of[i], nchunks[i] = dims, len(chunk_plans)
            if not chunk_plans:
                push(heap, (t, 2, 0, counter, _COMM_DONE, i, 0))
                counter += 1
                return
            p = planner.priority(node.policy)
            remaining[i] = len(chunk_plans)
            first = len(plans)
            for cp in chunk_plans:
                plans.append(cp)
                pos.append(0)
                phase_lead.append(lead)
                owner.append(i)
                prio.append(p)
            for c in range(first, len(plans)):
                refill(enqueue(c), t)

        def network_end(i: int, t: float) -> None:
            """Collective i's last chunk ended at t: it is done after its delay."""
            nonlocal in_flight, counter
            if exclusive[NET]:
                taken[NET] = False
            in_flight -= 1
            if in_flight == 0:
                self.comm_time += t - comm_since
            end_t[i] = t
            node_lead[i] = lead
            delay = nodes[i].delay
            if delay:
                push(heap, (t + delay, 2, 0, counter, _COMM_DONE, i, 1))
                counter += 1
            else:
                release(i, t)

        def dispatch(t: float) -> None:
            """Start what the free resources can take."""
            nonlocal counter, busy, cpu_busy
            for r in (GPU, CPU, NET):
                q = ready[r]
                while q and not taken[r]:
                    s = pop(q)[2]
                    taken[r] = exclusive[r]
                    if kinds[s] == COMM:
                        issue(s, t)
                        continue
                    dur = nodes[s].duration
                    if kinds[s] == COMPUTE:  # the compute as given: a 0-ns node's 1 ns is time, not compute
                        if r == GPU:
                            busy += dur
                        else:
                            cpu_busy += dur
                    if dur < min_ns:
                        dur = min_ns
                    start_t[s] = t
                    node_lead[s] = lead
                    push(heap, (t + dur, 3, 0, counter, _COMPUTE_DONE, s, r))
                    counter += 1

        for i in [i for i in range(len(nodes)) if need[i] == 0]:  # the roots, fixed before any is released
            need[i] = 1
            arrive(i, i, 0.0)
        dispatch(0.0)
        while heap:
            t, _, _, n_, ev, c, d = pop(heap)
            if track:
                if ev >= _COMM_DONE:
                    lead = lag_lead.pop(n_) if ev == _LAG else node_lead[c]
                else:
                    lead = planner.lead_after(phase_lead[c], nodes[owner[c]].collective, plans[c][pos[c]])  # type: ignore[arg-type]
            if ev == _COMPUTE_DONE:
                taken[d] = False
                end_t[c] = t
                release(c, t)
                dispatch(t)
                continue
            if ev == _LAG:
                arrive(c, d, t)
                dispatch(t)
                continue
            if ev == _COMM_DONE:
                if d == 0:  # ideal or empty: the network part ends now
                    network_end(c, t)
                else:
                    release(c, t)
                dispatch(t)
                continue
            if ev == _RELEASE:
                running[d] -= 1
                refill(d, t)
                continue
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
            if done >= 0 and late_release:  # the collective's end first, its dim freed after
                network_end(done, t)
                dispatch(t)
                done = -1
            if ev != _ARRIVE:
                running[d] -= 1
            refill_after(ev, d, d2, refill, t)
            if done >= 0:
                network_end(done, t)
                dispatch(t)
        if any(need) or any(ready) or any(taken):
            raise RuntimeError("workload engine stalled (a dependency cycle)")  # pragma: no cover
        self.compute_busy = busy
        self.cpu_busy = cpu_busy
        self.bytes_sent = sent
        return end_t[graph.end]
