"""Workload graphs: what one NPU computes and communicates, and what waits for what (docs/model.md §9).

A `Graph` is the form every workload takes before it runs: `compute` nodes (run one at a time on
the NPU's compute resource), `comm` nodes (collectives on the network) and `mark` nodes (no
work: a join point, such as the end of a pass), linked by dependency edges. An edge ``(a, b,
lag)`` says that b may start `lag` ns after a is done. The engine (`dse.training.iteration_engine`) runs any
graph; front-ends compile to it: `compile_workload` below for layer workloads (ASTRA-sim 1.0 text
files, dse's TOML, the generators), and the Chakra front-end for execution traces.

`compile_workload` follows the training loop of the workload's parallelism strategy, as ASTRA-sim
1.0 runs it (reference: the Themis artifact's runs); with ``tick=0`` (every model but
``astra-sim-1``) it is simply the training dependencies:

- **Forward**, layers 0..n-1: F_L starts after F_{L-1} and after layer L's weight-gradient
  collective of the previous pass (its weights must be updated). After F_L its fwd collective is
  issued; the forward of layer `Workload.fwd_consumer(L)` (L+1, or the first top-MLP layer for the DLRM
  embedding's all-to-all) waits for it.
- **Backward**: ``DATA``, ``MICRO`` and ``HYBRID_DLRM`` run W_{n-1}, I_{n-1}, W_{n-2}, ...,
  W_0; the model-parallel strategies run I_{n-1}, W_{n-1}, ..., I_0, W_0. Each issues its
  collective when its compute ends (the DLRM embedding's ig collective after I_{k+1}). An ig
  collective is awaited before I_{ig_consumer(L)}, or at the pass's end when that compute does not run.
- **Layer 0's input gradient** is not computed: nothing consumes it. A workload that is a slice of
  a model (`Workload.layer0_input_gradient`, set by ASTRA-sim 1.0's model-parallel strategies, whose
  loops compute it) computes it and issues its collective.
- **Activation recompute**: before I_L of a layer in `checkpoint_initiates`, the forward is re-run
  from the closest checkpoint below L up to L-1: the compute and the fwd collectives, each awaited
  before the next layer as in the forward pass.
- **Update**: a layer's `wg_update` is a delay after each of its collectives before the collective
  counts as done (the weights are applied, the activations used); it occupies nothing, and a layer
  without collectives has none.
- **One tick per state change** (``tick`` ns, 1 in ASTRA-sim 1.0, whose workload layer moves from
  one compute to the next through an event one cycle later): the next compute starts `tick` after
  the previous one ends, and a wait for a collective at the end of a compute (a blocking fwd
  collective, the ig collective awaited after W_L, the DLRM all-to-all after F_k) also ends `tick`
  after the collective is done. A pass ends `tick` after its last compute.
- **Passes**: pass p+1 starts when pass p has ended. The run ends when the last pass has ended and
  every collective is done.
- ``MICRO``: every pass issues the first layer's wg collective at time 0; nothing is computed.
- ``DATA`` in ASTRA-sim 1.0 never issues fwd or ig collectives; dse runs them if a file has them.

Size: `compile_workload` and `repeat_graph` count the nodes they would build first (`graph_nodes`:
the layers' computes and collectives, and the forwards each recompute re-runs, which grow with
the square of the layers) and refuse more than the work limit allows (`dse.core.limits.check_work`,
`BUILD_STEPS_PER_NODE` steps a node, which covers building the node and its edges).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import accumulate

from dse.core.limits import check_work
from dse.training.placement import PartScope
from dse.training.workloads import ALL, SLOTS, Workload

COMPUTE, COMM, MARK, REPLAY = "compute", "comm", "mark", "replay"
#: per-rank traces only (`dse.training.chakra.ranks_sim`): a point-to-point send or receive, a memory access
SEND, RECV, MEM = "send", "recv", "mem"
#: ASTRA-sim 1.0's issue priorities of a collective (`Sys::get_priority`): the configured policy
#: (``none``), last-in-first-out, first-in-first-out, or ahead of everything
POLICIES = ("none", "lifo", "fifo", "highest")
#: the backward order per parallelism strategy: weight gradient first, or input gradient first
_WG_FIRST = ("DATA", "MICRO", "HYBRID_DLRM")


@dataclass(frozen=True)
class Node:
    """One node of a workload graph.

    `duration`: compute ns (a `replay` node: ns it occupies its resource without computing, such as
    a Chakra BROADCAST). `cpu`: it runs on the NPU's CPU, not its GPU. A collective: `collective`,
    `size` bytes per NPU, `scope` (``all``, ``mp``, ``dp`` or explicit dim indices), `delay` ns
    after it ends before it counts as done, and the issue `policy` (`POLICIES`). `iteration`,
    `layer`, `slot` say where it comes from (`layer` is -1 for a Chakra node).

    Per-rank traces add: a collective's communicator `group` (a ``pg_name``; "" = its `scope`); a
    `SEND` (`peer` = destination) or `RECV` (`peer` = source) of `size` bytes with its `tag`; a
    `MEM` node (`mem` = ``"load"`` or ``"store"``, ``"remote_load"``/``"remote_store"``) of `size`
    bytes; a compute node's `flops` (``num_ops``) and `tensor_bytes` (``tensor_size``), which the
    roofline times when `duration` is not given (`timed` False) or the system asks for it.
    """

    kind: str
    name: str
    duration: float = 0.0
    collective: str | None = None
    size: int = 0
    scope: str | tuple[int, ...] | PartScope = ALL
    delay: float = 0.0
    policy: str = "none"
    iteration: int = 0
    layer: int = -1
    slot: str = ""
    cpu: bool = False
    group: str = ""
    peer: int = -1
    tag: int = 0
    flops: float = 0.0
    tensor_bytes: int = 0
    timed: bool = True
    mem: str = ""


@dataclass(frozen=True)
class ResourceRules:
    """Which nodes may be in flight together on one NPU (the cost model's `workload_rules`).

    Every rule set runs one GPU compute node and one CPU node at a time. `comm_exclusive`: one
    collective (or replayed communication) at a time, as ASTRA-sim 2.x's workload layer does; if
    not, every collective is issued when ready and they share the network's queues. `by_id`: a
    freed resource takes the ready node of lowest index (ASTRA-sim 2.x issues the dependency-free
    node of lowest id first); if not, the one ready earliest (ties: the order they became ready).
    `min_ns`: the shortest time a compute or replay node takes (ASTRA-sim 2.x gives 1 ns to a
    node whose duration is 0). `end_before_release`: a collective's end is handled (the nodes it
    frees issued) while its last phase still holds its dimension, which is refilled afterwards
    (ASTRA-sim 2.x calls the workload back before the finished stream leaves its queue, so a
    collective issued then queues there behind it: under smallest-first its equal-size chunks
    stack up last-in-first-out, the first one included).
    """

    name: str
    comm_exclusive: bool
    by_id: bool
    min_ns: float = 0.0
    end_before_release: bool = False


#: dse's own rules (`paper`, `astra-sim-1`): collectives overlap each other and compute
DSE_RULES = ResourceRules("dse", comm_exclusive=False, by_id=False)
#: ASTRA-sim 2.x's `HardwareResource` (`astra-sim`): one GPU compute, one GPU communication and one
#: CPU node in flight per NPU
ASTRA2_RULES = ResourceRules("astra-sim-2", comm_exclusive=True, by_id=True, min_ns=1.0, end_before_release=True)


@dataclass
class Graph:
    """Nodes and dependency edges ``(source, target, lag ns)``; `end` is the node whose time is the run's end."""

    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[int, int, float]] = field(default_factory=list)
    end: int = -1

    def add(self, node: Node, *after: tuple[int | None, float]) -> int:
        """Append `node`, waiting for each ``(source, lag)`` in `after` (None sources are skipped)."""
        self.nodes.append(node)
        i = len(self.nodes) - 1
        for src, lag in after:
            if src is not None:
                self.edges.append((src, i, lag))
        return i

    def comms(self) -> Iterator[Node]:
        """The collective nodes, in index order."""
        return (n for n in self.nodes if n.kind == COMM)


def _policy(wl: Workload, slot: str) -> str:
    """ASTRA-sim 1.0's issue policy of a slot's collective in this strategy's loop."""
    p = wl.parallelism
    if p == "HYBRID_DLRM":
        return "highest" if slot in ("fwd", "ig") else "none"
    if p in ("DATA", "MICRO"):
        return "none"
    return {"fwd": "none", "ig": "lifo", "wg": "fifo"}[slot]


#: Work to build one graph node (module docstring), in steps of `check_work`.
BUILD_STEPS_PER_NODE = 20


def graph_nodes(wl: Workload, passes: int = 1) -> int:
    """How many nodes `compile_workload` builds for `passes` passes of `wl` (at most one more per
    layer and pass: a layer 0 input gradient that does not run is counted)."""
    if wl.parallelism == "MICRO":
        return 2 + passes
    layers = wl.layers
    per_pass = 3 * len(layers) + 1 + sum(1 for layer in layers for slot in SLOTS if layer.comm(slot))
    again = list(accumulate((1 + (layer.comm("fwd") is not None) for layer in layers), initial=0))
    marks = sorted(set(wl.checkpoints))
    for li in set(wl.checkpoint_initiates):
        below = bisect_left(marks, li)
        if below:  # the forwards from the checkpoint below li to li - 1, and a mark
            per_pass += 1 + again[li] - again[marks[below - 1]]
    return per_pass * passes + 1


def compile_workload(wl: Workload, *, passes: int = 1, tick: float = 0.0) -> Graph:
    """The graph of `passes` training passes of `wl` (module docstring); refused first if it would
    take more than the work limit to build."""
    nodes = graph_nodes(wl, passes)
    check_work(nodes * BUILD_STEPS_PER_NODE, f"building {nodes:,} graph nodes of {wl.name}")
    g = Graph()
    if wl.parallelism == "MICRO":
        start = g.add(Node(MARK, "start"))
        comms = [c for it in range(passes) if (c := _comm(g, wl, it, 0, "wg", start)) is not None]
        g.end = g.add(Node(MARK, "end"), (start, 0.0), *((c, 0.0) for c in comms))
        return g
    n = len(wl.layers)
    prev_end: int | None = None  # the previous pass's end mark
    prev_wg: list[int | None] = [None] * n
    all_comms: list[int] = []
    for it in range(passes):
        last, pending = _forward(g, wl, it, prev_end, prev_wg, tick, all_comms)
        last, late, wg_of = _backward(g, wl, it, last, pending, tick, all_comms)
        prev_end = g.add(Node(MARK, f"pass{it} end", iteration=it), (last, tick), *late)
        prev_wg = wg_of
    g.end = g.add(Node(MARK, "end"), (prev_end, 0.0), *((c, 0.0) for c in all_comms))
    return g


def _forward(
    g: Graph, wl: Workload, it: int, prev_end: int | None, prev_wg: list, tick: float, all_comms: list[int]
) -> tuple[int | None, list]:
    """F_0..F_{n-1}; returns the last compute and the end-checks the backward's first compute inherits."""
    n = len(wl.layers)
    last: int | None = prev_end
    lag = 0.0  # a pass starts when the previous one has ended (its end mark has the tick)
    fwd_wait: dict[int, list] = {}  # layer -> fwd collectives its forward waits for
    for li, layer in enumerate(wl.layers):
        node = Node(COMPUTE, f"F{li}", layer.fwd_compute, iteration=it, layer=li, slot="fwd")
        last = g.add(node, (last, lag), (prev_wg[li], 0.0), *fwd_wait.pop(li, []))
        lag = tick
        c = _comm(g, wl, it, li, "fwd", last)
        if c is not None:
            all_comms.append(c)
            fwd_wait.setdefault(min(wl.fwd_consumer(li), n), []).append((c, tick))
    return last, fwd_wait.pop(n, [])


def _backward(
    g: Graph, wl: Workload, it: int, last: int | None, pending: list, tick: float, all_comms: list[int]
) -> tuple[int | None, list, list]:
    """The backward pass; returns its last compute, what the pass's end awaits, and each layer's wg collective."""
    n = len(wl.layers)
    wg_first = wl.parallelism in _WG_FIRST
    steps = ("wg", "ig") if wg_first else ("ig", "wg")
    initiates = set(wl.checkpoint_initiates)
    ig_wait: dict[int, list] = {}  # layer -> ig collectives its I awaits (weight-gradient-first loops)
    after_w: list = []  # ig collectives awaited after the layer's W (input-gradient-first loops)
    late: list = []  # awaited at the pass's end
    wg_of: list[int | None] = [None] * n
    for li in range(n - 1, -1, -1):
        layer = wl.layers[li]
        for slot in steps:
            if slot == "ig":
                if li == 0 and not wl.layer0_input_gradient:
                    continue
                waits, pending = pending + ig_wait.pop(li, []), []
                if li in initiates:
                    last, waits = _recompute(g, wl, it, li, last, waits, tick, all_comms)
                last = g.add(
                    Node(COMPUTE, f"I{li}", layer.ig_compute, iteration=it, layer=li, slot="ig"), (last, tick), *waits
                )
                for src in _ig_issued_by(wl, li):
                    c = _comm(g, wl, it, src, "ig", last)
                    if c is None:
                        continue
                    all_comms.append(c)
                    consumer = wl.ig_consumer(src)
                    if not wg_first:
                        after_w.append((c, tick))
                    elif 0 <= consumer < li and (consumer > 0 or wl.layer0_input_gradient):
                        ig_wait.setdefault(consumer, []).append((c, tick))
                    else:
                        late.append((c, tick))
            else:
                waits, pending = pending, []
                last = g.add(
                    Node(COMPUTE, f"W{li}", layer.wg_compute, iteration=it, layer=li, slot="wg"), (last, tick), *waits
                )
                c = _comm(g, wl, it, li, "wg", last)
                wg_of[li] = c
                if c is not None:
                    all_comms.append(c)
                if not wg_first:
                    pending, after_w = after_w, []
    late += pending + after_w
    for cs in ig_wait.values():  # awaited by an input gradient that never runs
        late += cs
    return last, late, wg_of


def _ig_issued_by(wl: Workload, li: int) -> list[int]:
    """Layers whose ig collective the input-gradient compute of layer `li` issues."""
    out = [li] if wl.ig_source(li) == li else []
    if li != 0 and wl.ig_source(0) == li:
        out.append(0)
    return out


def _comm(g: Graph, wl: Workload, it: int, li: int, slot: str, after: int | None) -> int | None:
    layer = wl.layers[li]
    comm = layer.comm(slot)
    if comm is None:
        return None
    node = Node(
        COMM,
        f"{slot}{li}",
        collective=comm[0],
        size=comm[1],
        scope=wl.scope(slot),
        delay=layer.wg_update,
        policy=_policy(wl, slot),
        iteration=it,
        layer=li,
        slot=slot,
    )
    return g.add(node, (after, 0.0))


def _recompute(
    g: Graph, wl: Workload, it: int, li: int, last: int | None, pending: list, tick: float, all_comms: list[int]
) -> tuple[int, list]:
    """Re-run the forward from the checkpoint below `li` to li-1; returns the last compute and its end-checks."""
    start = max(c for c in wl.checkpoints if c < li)
    # the state change into recompute is a step of its own (zero compute)
    x = g.add(Node(COMPUTE, f"recompute{li}", 0.0, iteration=it, layer=li, slot="recompute"), (last, tick), *pending)
    waits: list = []
    for lj in range(start, li):
        layer = wl.layers[lj]
        f = g.add(Node(COMPUTE, f"F{lj}'", layer.fwd_compute, iteration=it, layer=lj, slot="fwd"), (x, tick), *waits)
        x = f
        waits = []
        c = _comm(g, wl, it, lj, "fwd", f)
        if c is not None:
            all_comms.append(c)
            waits = [(c, tick)]
    return x, waits


def repeat_graph(g: Graph, passes: int) -> Graph:
    """`passes` copies of `g` (a Chakra trace's graph, say), each started when the previous one has
    ended: its roots wait for the previous copy's `end`. Copy p's nodes have ``iteration`` p.
    Refused first if it would take more than the work limit to build."""
    if passes == 1:
        return g
    nodes = len(g.nodes) * passes
    check_work(nodes * BUILD_STEPS_PER_NODE, f"building {nodes:,} graph nodes ({passes:,} passes)")
    out = Graph()
    n = len(g.nodes)
    has_pred = {b for _, b, _ in g.edges}
    prev_end: int | None = None
    for p in range(passes):
        base = len(out.nodes)
        out.nodes.extend(replace(nd, iteration=p) for nd in g.nodes)
        out.edges.extend((a + base, b + base, lag) for a, b, lag in g.edges)
        if prev_end is not None:
            out.edges.extend((prev_end, base + i, 0.0) for i in range(n) if i not in has_pred)
        prev_end = base + g.end
    out.end = prev_end  # type: ignore[assignment]
    return out
