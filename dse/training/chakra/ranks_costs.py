"""What each piece of a per-rank trace costs: collectives, messages, compute, memory (`dse.training.chakra.ranks_sim`).

`RankCosts` answers the simulator's questions, each answer cached by what it depends on:

- A collective on whole dimensions (``involved_dim``, all NPUs, or a group that is all NPUs) whose
  members issue it together takes what the same collective takes alone on dse's engine
  (`dse.training.iteration_engine.Engine` on a one-node graph): the chunks, the scheduler, the
  queue and the cost model exactly as for a single-rank trace. Alone, because ASTRA-sim 2.x runs
  one collective at a time per NPU. Issued apart, under ``astra-sim``, ASTRA-sim's step-by-step
  replay (`dse.training.chakra.ranks_apart`) says when each member ends; under the other models (and
  where the replay cannot run, `_apart_ends`) it starts when its last member issues it.
- A collective on a communicator group that is a strict subset of the NPUs: under ``astra-sim``,
  ASTRA-sim 2.x's rule (`dse.costs.p2p.group_collective_ns`: a logical ring of the members); under
  ``paper`` and ``astra-sim-1`` the group is mapped to the dimensions, or parts of a dimension, it
  spans (`dse.training.chakra.group_scope`) and runs there like any collective, the chosen scheduler
  included. A group of one NPU takes no time.
- A message: `dse.costs.p2p.message_ns`. Compute without a duration: the roofline
  (`dse.costs.roofline.roofline_ns`). A memory node: `dse.core.remote_memory.memory_ns`, after the
  previous request of a shared memory server (per node, pool) has ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dse.core.errors import InputError
from dse.core.topology import Topology
from dse.costs import CostModel
from dse.schedulers import Scheduler
from dse.sim.simulate import policy_code
from dse.training.chakra.ranks_apart import NeverFinishes, apart_ends
from dse.training.iteration_engine import RULES, Engine
from dse.training.iteration_planner import Planner
from dse.training.workload_graph import COMM, Graph, Node
from dse.training.workloads import ALL


@dataclass(frozen=True)
class Roofline:
    """A roofline: peak FLOP/s and memory bytes/s (`peak_flops`, `mem_bytes_per_s`)."""

    peak_flops: float
    mem_bytes_per_s: float


@dataclass
class RankCosts:
    """The costs of one run's pieces (module docstring); `groups` maps a ``pg_name`` to its ranks."""

    topology: Topology
    model: CostModel
    scheduler: Scheduler
    queue: str
    chunks: int
    min_chunk_bytes: int
    groups: dict[str, tuple[int, ...]]
    roofline: Roofline | None = None
    memory: Any = None

    def __post_init__(self) -> None:
        self._alone: dict[tuple, float] = {}
        self._ring: dict[tuple, tuple[float, ...]] = {}
        self._msg: dict[tuple, float] = {}
        self._members: dict[Any, tuple[int, ...]] = {}
        self._dims: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._server_free: dict[int, float] = {}
        self._parts: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        self._apart: dict[tuple, tuple[float, ...]] = {}
        self.notes: list[str] = []
        self.npus = self.topology.npus

    # ----- who takes part -------------------------------------------------------------------------
    def members(self, rank: int, node: Node, group: str) -> tuple[int, ...]:
        """The ranks taking part, with `rank`, in a collective node (its group, else its scope)."""
        if group:
            ranks = self.groups.get(group)
            if ranks is None:
                raise InputError(
                    "--comm-groups",
                    f"rank {rank}: node {node.name!r} names communicator group {group!r}, which no group file defines",
                    "a --comm-groups file naming every pg_name the trace uses",
                )
            if rank not in ranks:
                raise InputError(
                    "--comm-groups",
                    f"rank {rank}: node {node.name!r} runs on group {group!r}, which does not hold rank {rank}",
                    "groups that hold every rank that names them",
                )
            return ranks
        dims = self.scope_dims(node.scope)
        return self._scope_members(rank, dims)

    def scope_dims(self, scope: Any) -> tuple[int, ...]:
        """The dimensions of a node's scope: all for ``all``, else those given that the topology has."""
        nd = self.topology.ndims
        if scope == ALL:
            return tuple(range(nd))
        return tuple(d for d in scope if d < nd)

    def _scope_members(self, rank: int, dims: tuple[int, ...]) -> tuple[int, ...]:
        """The ranks that differ from `rank` only in the coordinates of `dims` (all ranks' sets are
        built once per `dims`)."""
        parts = self._parts.get(dims)
        if parts is None:
            shape = self.topology.shape
            keys = []
            for r in range(self.npus):
                key, x = [], r
                for d, p in enumerate(shape):
                    if d not in dims:
                        key.append(x % p)
                    x //= p
                keys.append(tuple(key))
            sets: dict[tuple, list[int]] = {}
            for r, k in enumerate(keys):
                sets.setdefault(k, []).append(r)
            frozen = {k: tuple(v) for k, v in sets.items()}
            parts = self._parts[dims] = [frozen[k] for k in keys]
        return parts[rank]

    def dims_of(self, members: Sequence[int]) -> tuple[int, ...]:
        """The dimensions on which the members' coordinates differ."""
        key = tuple(members)
        hit = self._dims.get(key)
        if hit is None:
            from dse.costs.p2p import coords

            first = coords(self.topology, members[0])
            seen = {d for m in members[1:] for d, c in enumerate(coords(self.topology, m)) if c != first[d]}
            hit = self._dims[key] = tuple(sorted(seen))
        return hit

    # ----- what it costs --------------------------------------------------------------------------
    def collective_ns(self, node: Node, members: tuple[int, ...], group: str) -> float:
        """The time of a collective node on `members` when all issue it together (module docstring)."""
        return max(self.collective_ends(node, members, group, [0.0] * len(members)))

    def collective_ends(self, node: Node, members: tuple[int, ...], group: str, starts: Sequence[float]) -> list[float]:
        """When each member (in `members`' order) finishes a collective node it issued at ``starts[k]``:
        a group's ring under ``astra-sim`` follows each member's own steps; otherwise the collective
        starts when the last member issues it and ends for all its time alone later."""
        first = min(starts)
        rel = tuple(s - first for s in starts)
        astra_group = bool(group) and len(members) < self.npus and self.model.name == "astra-sim"
        if not astra_group:
            if self.model.name == "astra-sim" and len(members) > 1 and max(rel) > 0:
                apart = self._apart_ends(node, members, rel)
                if apart is not None:
                    return [first + e for e in apart]
            key: tuple = (node.collective, node.size, members if group else node.scope)
            alone = self._alone.get(key)
            if alone is None:
                alone = self._alone[key] = self._shared_ns(node, members, group)
            return [max(starts) + alone] * len(members)
        key = (node.collective, node.size, members, rel)
        hit = self._ring.get(key)
        if hit is None:
            from dse.costs.p2p import group_collective_ends_ns

            hit = self._ring[key] = tuple(
                group_collective_ends_ns(
                    self.model, self.topology, str(node.collective), node.size, members, splits=self.chunks, starts=rel
                )
            )
        return [first + e for e in hit]

    def _apart_ends(self, node: Node, members: tuple[int, ...], rel: tuple[float, ...]) -> tuple[float, ...] | None:
        """ASTRA-sim 2.x's step-by-step replay of a collective whose members issue apart
        (`dse.training.chakra.ranks_apart`), relative to the first issue. Where the replay would stall
        (ASTRA-sim never finishes such a run): refused under baseline + FIFO, where the reference
        runs confirm it; under Themis or smallest-first (no reference run), or beyond the work
        limit, None (dse's own rule then runs) with a note."""
        key = (node.collective, node.size, node.scope, members, rel)
        hit = self._apart.get(key)
        if hit is None:
            try:
                hit = self._apart[key] = tuple(apart_ends(self, node, members, rel))
            except NeverFinishes:
                if self.scheduler.name == "baseline" and self.queue == "fifo":
                    raise
                self._note(
                    "ASTRA-sim's step-by-step rule stalls on a collective whose members issue apart "
                    f"under {self.scheduler.name} / {self.queue} (no reference run confirms it): "
                    "dse starts it when its last member issues it"
                )
                return None
            except InputError as e:
                if e.field != "work":
                    raise
                self._note(
                    "a collective whose members issue apart would take more steps to replay than the "
                    "work limit allows: dse starts it when its last member issues it"
                )
                return None
        return hit

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _shared_ns(self, node: Node, members: tuple[int, ...], group: str) -> float:
        """A collective alone, all members together: on its scope's dims, or its group's (`group_scope`)."""
        if len(members) <= 1:
            return 0.0
        if not group or len(members) == self.npus:
            return self._alone_ns(node.collective, node.size, ALL if group else node.scope)
        from dse.training.chakra.group_scope import group_scope

        return self._alone_ns(node.collective, node.size, group_scope(self.topology, members, name=group))

    def _alone_ns(self, collective: Any, size: int, scope: Any) -> float:
        """A collective alone on dse's engine (a one-node graph)."""
        planner = Planner(self.topology, 0, self.model, self.scheduler, self.queue, self.chunks, self.min_chunk_bytes)
        g = Graph()
        g.end = g.add(Node(COMM, "collective", collective=collective, size=size, scope=scope))
        dialect = self.model.rules
        rules = RULES[dialect.workload_rules]
        engine = Engine(g, planner, policy_code(self.queue, dialect.scf_rule), dialect.dim_tiebreak, False, rules)
        return engine.simulate()

    def message_ns(self, src: int, dst: int, size: int) -> float:
        """The time of a `size`-byte message from `src` to `dst` (`dse.costs.p2p.message_ns`), cached."""
        key = (src, dst, size)
        hit = self._msg.get(key)
        if hit is None:
            from dse.costs.p2p import message_ns

            hit = self._msg[key] = float(message_ns(self.model, self.topology, src, dst, size))
        return hit

    def message_dim(self, src: int, dst: int) -> int:
        """The lowest dimension where the coordinates of `src` and `dst` differ (-1: none)."""
        from dse.costs.p2p import coords

        a, b = coords(self.topology, src), coords(self.topology, dst)
        return next((d for d, (x, y) in enumerate(zip(a, b)) if x != y), -1)

    def compute_ns(self, node: Node) -> float:
        """A compute node's time: the roofline's for a GPU node when the system enables it (whatever
        its duration, as ASTRA-sim 2.x does), else its duration."""
        roof = self.roofline
        if roof is not None and not node.cpu:
            from dse.costs.roofline import roofline_ns

            return float(roofline_ns(node.flops, node.tensor_bytes, roof.peak_flops, roof.mem_bytes_per_s))
        if not node.timed:
            raise InputError(
                "--system",
                f"compute node {node.name!r} has no duration (only num_ops and tensor_size)",
                "a system file with roofline-enabled, peak-perf and local-mem-bw, or --peak-tflops and --mem-bw",
            )
        return node.duration

    def memory_end(self, rank: int, t: float, node: Node) -> float:
        """When a memory node rank issues at t ends: `memory_ns` after the later of t and the end of
        the previous request its shared memory server (per node, pool) took, first come first served."""
        from dse.core.remote_memory import memory_ns

        ns = float(memory_ns(self.memory, node.size))
        server = getattr(self.memory, "server", None)
        s = server(rank) if server is not None else None
        if s is None:
            return t + ns
        end = max(t, self._server_free.get(s, 0.0)) + ns
        self._server_free[s] = end
        return end
