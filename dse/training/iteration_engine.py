"""Running a workload graph (`dse.training.workload_graph`) on dse's one event engine (`dse.sim.engine`).

`Engine` turns the graph into the engine's terms (`EngineGraph`: node kinds, resources, durations,
dependency lags, the cost model's `ResourceRules`) and plans each collective when the engine issues
it (`Planner.plans`: the scheduler's orders, Themis' loads across collectives, the chunk phases).
What the engine does with them, event by event, is written in `dse.sim.engine_ref`; in short:

- A node is ready when every dependency is done and its lag has passed. One GPU compute node and
  one CPU node run at a time, never preempted; a freed resource takes the ready node that became
  ready first or, under ASTRA-sim 2.x's rules, the ready node of lowest index. A collective is
  issued at once, or under ASTRA-sim 2.x's rules when no other collective (or replayed
  communication) is in flight; a mark is done at once.
- An issued collective's chunks enter the queues of their first dimensions in chunk order and share
  the per-dimension queues with every collective in flight (FIFO or the cost model's
  smallest-first rule). With `SimRules.issue_priorities` a phase entering a FIFO queue (or an
  all-reduce or all-to-all phase under smallest-first) goes behind the waiting phases of equal or
  higher priority (ASTRA-sim 1.0's `insert_stream`). The collective ends when its last chunk
  does, and counts as done its `delay` later.
- With ``ideal=True`` a collective takes its ideal time from its issue, without queues.
- A node resumed by a collective tells the planner (`Planner.resumed_by_collective`, ASTRA-sim
  1.0's Themis rule).
- When the planner asks (`Planner.tracks_lead`, ASTRA-sim 2.x's Themis rule), every event carries
  the first NPU to handle it (`Phase.lead`), and a collective is planned knowing it.
- With `ResourceRules.end_before_release`, a collective's last phase frees its dimension only
  after the collective's end has been handled (the nodes it frees dispatched).
"""

from __future__ import annotations

from collections.abc import Sequence

from dse.costs.base import Phase
from dse.sim import engine as engine_front
from dse.sim.engine_io import CPU, GPU, N_COMM, N_COMPUTE, N_MARK, N_REPLAY, NET, EngineGraph, NetRules
from dse.training.iteration_planner import Planner
from dse.training.workload_graph import ASTRA2_RULES, COMM, COMPUTE, DSE_RULES, MARK, REPLAY, Graph, ResourceRules

RESOURCE_NAMES = {GPU: "gpu", CPU: "cpu", NET: "net", -1: ""}
RULES = {r.name: r for r in (DSE_RULES, ASTRA2_RULES)}
_KINDS = {COMPUTE: N_COMPUTE, COMM: N_COMM, MARK: N_MARK, REPLAY: N_REPLAY}


def resource_of(kind: str, cpu: bool) -> int:
    """The resource a node occupies while it runs (-1: none, a mark)."""
    if kind == COMPUTE:
        return CPU if cpu else GPU
    if kind == REPLAY:
        return CPU if cpu else NET
    return NET if kind == COMM else -1


def engine_graph(graph: Graph, rules: ResourceRules, ideal: Sequence[float] | None = None) -> EngineGraph:
    """The engine's form of a workload graph under a cost model's resource rules."""
    succ: list[list[tuple[int, float]]] = [[] for _ in graph.nodes]
    for a, b, lag in graph.edges:
        succ[a].append((b, float(lag)))
    nodes = graph.nodes
    return EngineGraph(
        kinds=tuple(_KINDS[n.kind] for n in nodes),
        resources=tuple(resource_of(n.kind, n.cpu) for n in nodes),
        durations=tuple(float(n.duration) for n in nodes),
        delays=tuple(float(n.delay) for n in nodes),
        succ=tuple(tuple(s) for s in succ),
        end=graph.end,
        comm_exclusive=rules.comm_exclusive,
        by_id=rules.by_id,
        min_ns=rules.min_ns,
        end_before_release=rules.end_before_release,
        ideal=tuple(ideal) if ideal is not None else None,
    )


class Engine:
    """Runs one graph; afterwards `start`/`end` hold every node's times and the totals are set."""

    def __init__(
        self,
        graph: Graph,
        planner: Planner,
        policy: int,
        dim_tiebreak: bool,
        ideal: bool,
        rules: ResourceRules = DSE_RULES,
        engine: str = "auto",
    ) -> None:
        self.graph, self.planner, self.policy, self.dim_tiebreak, self.ideal = (
            graph,
            planner,
            policy,
            dim_tiebreak,
            ideal,
        )
        self.rules, self.engine = rules, engine
        n = len(graph.nodes)
        self.start = [float("nan")] * n
        self.end = [float("nan")] * n
        self.chunks = [0] * n
        self.dims: list[tuple[int, ...]] = [()] * n
        self.compute_busy = 0.0
        self.cpu_busy = 0.0
        self.comm_time = 0.0
        self.bytes_sent = 0.0

    def issue(self, i: int, t: float, lead: int) -> tuple[Sequence[tuple[Phase, ...]], int]:
        """The engine's hook: collective i's chunk phases, planned when it is issued."""
        node = self.graph.nodes[i]
        plans, dims = self.planner.plans(node.collective, node.size, node.scope, t, lead)  # type: ignore[arg-type]
        self.dims[i], self.chunks[i] = dims, len(plans)
        if not plans:
            return plans, 0
        return plans, self.planner.priority(node.policy)

    def resumed(self) -> None:
        """The engine's hook: the workload was resumed by a collective's completion."""
        self.planner.resumed_by_collective()

    def simulate(self) -> float:
        """Run the graph on the engine and return the end node's time; the per-node times and the
        busy totals are kept on the object."""
        planner, nodes = self.planner, self.graph.nodes
        ideal_ns: list[float] | None = None
        ideal_bytes = 0.0
        if self.ideal:
            ideal_ns = [0.0] * len(nodes)
            for i, node in enumerate(nodes):
                if node.kind == COMM:
                    ideal_ns[i], need = planner.ideal_ns(node.collective, node.size, node.scope)  # type: ignore[arg-type]
                    ideal_bytes += need
                    self.dims[i], self.chunks[i] = planner.scope(node.scope)[0], 1
        net = NetRules(
            planner.topo.ndims,
            self.policy,
            dim_tiebreak=self.dim_tiebreak,
            issue_priorities=planner.model.rules.issue_priorities,
            track_lead=planner.tracks_lead,
            tieless=not planner.model.rules.phase_ties,
        )
        out = engine_front.run(net, engine_graph(self.graph, self.rules, ideal_ns), self, engine=self.engine)
        self.start, self.end = list(out.node_start), list(out.node_end)
        self.compute_busy, self.cpu_busy, self.comm_time = out.compute_ns, out.cpu_ns, out.comm_ns
        self.bytes_sent = out.bytes_sent + ideal_bytes
        return self.end[self.graph.end]
