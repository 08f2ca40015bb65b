"""Writing any dse workload as a Chakra trace that ASTRA-sim 2.x runs (`dse workload export`).

`export_chakra(workload, prefix)` compiles the workload's graph (`dse.training.workload_graph`, one pass,
no ASTRA-sim 1.0 ticks) and writes ``PREFIX.<rank>.et`` for each NPU, every rank the same graph,
in the encoding of ASTRA-sim's microbenchmarks: a `GlobalMetadata` (version ``0.0.4``) then one
`Node` per compute or collective, ids 0, 1, ... in the graph's order (the order ASTRA-sim 2.x
issues ready nodes in), dependencies as ``data_deps``, and the attributes ASTRA-sim reads:
``is_cpu_op`` on every node; ``comm_type``, ``comm_size`` and ``involved_dim`` on collectives.

- Marks (join points) are not written: each node depends directly on the nodes its marks waited
  for (ASTRA-sim 2.x holds a METADATA node's successors until its next event, and can stall).
- ``involved_dim`` names the dimensions of the topology the trace is for: with `topology` the
  logical one (`dse.training.placement.group_topology`, which may split a dimension for a model-parallel
  group, and the export says which topology to run it on); without, a workload whose collectives
  all span every dimension needs none, and a re-exported trace keeps its own.
- ``duration_micros`` is Chakra's unit, whole microseconds: a duration that is not a whole
  number of them is rounded to the nearest and also kept exactly in ``dse_duration_ns``.
- What ASTRA-sim 2.x has no field for is kept in attributes it ignores and dse reads back: a
  layer's update delay (``dse_delay_ns``), ASTRA-sim 1.0's issue policy (``dse_policy``), and
  labels (``dse_iteration``, ``dse_layer``, ``dse_slot``). `ExportReport.notes` says when the
  trace means something else to ASTRA-sim 2.x (rounded durations, delays it does not apply).

So ``load_trace(PREFIX)`` gives the same graph (marks contracted) and the same iteration time in
every cost model but ``astra-sim-1``, whose one-cycle state changes a trace cannot carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from dse.core.errors import InputError
from dse.core.files import atomic_output, check_output_file, output_target
from dse.core.topology import Topology, parse_topology
from dse.core.units import parse_int
from dse.training import chakra_schema as cs
from dse.training.chakra_read import CHAKRA_TYPE, ChakraTrace
from dse.training.placement import PLACEMENT_SLOTS, PartScope, group_topology
from dse.training.workload_graph import COMM, COMPUTE, MARK, REPLAY, Graph, Node, compile_workload
from dse.training.workloads import ALL, DP, MP, Workload, load_workload

VERSION = "0.0.4"
MAX_RANK_FILES = 1_048_576


@dataclass(frozen=True)
class ExportReport:
    """What `export_chakra` wrote: files, nodes, and what a user should know."""

    files: tuple[str, ...]
    nodes: int
    collectives: int
    ranks: int
    #: the topology to run the trace on, when it is not the one given (a split dimension)
    run_on: str = ""
    notes: tuple[str, ...] = field(default=())


def export_chakra(
    workload: Any,
    prefix: str | Path,
    *,
    topology: str | Topology | None = None,
    npus: int | None = None,
    force: bool = False,
) -> ExportReport:
    """Write `workload` as ``PREFIX.<rank>.et`` for each of `npus` ranks (module docstring).

    `npus`: rank files to write; default the topology's NPUs, else 1 (rank 0 only: ASTRA-sim needs
    one per NPU). An existing file is replaced only with `force`; nothing is written on an error.
    """
    _check_prefix(Path(prefix))  # before any work: the folder exists, no special file at PREFIX.0.et
    wl = load_workload(workload)
    topo = parse_topology(topology) if topology is not None else None
    k = 0
    if isinstance(wl, ChakraTrace):
        graph, flags_len, logical = wl.graph, None, topo
    elif wl.placement is not None:
        graph, flags_len, logical = _placed_graph(wl, topo), None, topo
    else:
        graph = compile_workload(wl, passes=1, tick=0.0)
        hybrid = any(n.scope != ALL for n in graph.comms())
        if hybrid and topo is None:
            raise InputError(
                "topology",
                f"{wl.name} has model- and data-parallel collectives, whose dimensions depend on the topology",
                "-t TOPOLOGY: the network the trace is for",
            )
        logical, k = (
            (topo, 0)
            if topo is None
            else group_topology(topo, wl.model_parallel_group if hybrid else None, wl.field("model_parallel_group"))
        )
        flags_len = logical.ndims if logical is not None else None
    ranks = (
        parse_int(npus, "npus", minimum=1, maximum=MAX_RANK_FILES)
        if npus is not None
        else (topo.npus if topo is not None else 1)
    )
    if ranks > MAX_RANK_FILES:
        raise InputError("npus", f"{ranks} rank files", f"at most {MAX_RANK_FILES}: pass --npus")
    nodes, notes = encode_graph(graph, flags_len, mp_dims=k, ndims=logical.ndims if logical is not None else None)
    data = serialize(nodes)
    files = _write(Path(prefix), data, ranks, force)
    run_on = logical.notation() if (logical is not None and topo is not None and logical is not topo) else ""
    colls = sum(1 for n in graph.nodes if n.kind == COMM)
    return ExportReport(tuple(files), len(nodes), colls, ranks, run_on, tuple(notes))


def _deps_without_marks(graph: Graph) -> list[list[int]]:
    """Every node's dependencies with marks contracted (a mark's own dependencies instead)."""
    preds: list[list[int]] = [[] for _ in graph.nodes]
    for a, b, lag in graph.edges:
        if lag:
            raise InputError(
                "workload", "a dependency with a lag (ASTRA-sim 1.0's ticks)", "a graph compiled with tick 0"
            )
        preds[b].append(a)
    memo: dict[int, list[int]] = {}

    def resolved(i: int) -> list[int]:  # the non-mark nodes a mark stands for
        out = memo.get(i)
        if out is None:
            out = []
            stack, seen = [i], {i}
            while stack:
                x = stack.pop()
                for p in preds[x]:
                    if p in seen:
                        continue
                    seen.add(p)
                    if graph.nodes[p].kind == MARK:
                        stack.append(p)
                    else:
                        out.append(p)
            memo[i] = out = sorted(out)
        return out

    deps = []
    for i, nd in enumerate(graph.nodes):
        ds: dict[int, None] = {}
        for p in preds[i]:
            if graph.nodes[p].kind == MARK:
                ds.update(dict.fromkeys(resolved(p)))
            else:
                ds[p] = None
        deps.append(sorted(ds) if nd.kind != MARK else [])
    return deps


def _placed_graph(wl: Workload, topo: Topology | None) -> Graph:
    """A placed workload's graph with each collective's scope as its dims: a Chakra trace names
    whole dimensions only (``involved_dim``), so a group on part of a dimension is refused."""
    if topo is None:
        raise InputError("topology", f"{wl.name} has a placement, which names the topology's dimensions", "-t TOPOLOGY")
    assert wl.placement is not None
    wl.placement.check(topo, wl.field("placement"))
    for slot in PLACEMENT_SLOTS:
        for d, k in wl.placement.parts(slot).parts:
            if k != topo.dims[d].npus:
                raise InputError(
                    wl.field("placement"),
                    f"the {slot} group spans {k} of dimension {d}'s {topo.dims[d].npus} NPUs",
                    "whole dimensions in a Chakra trace (its involved_dim names whole dimensions)",
                )
    graph = compile_workload(wl, passes=1, tick=0.0)
    graph.nodes[:] = [replace(n, scope=n.scope.dims) if isinstance(n.scope, PartScope) else n for n in graph.nodes]
    return graph


def _scope_flags(node: Node, flags_len: int | None, mp_dims: int, ndims: int | None) -> list[bool] | None:
    scope = node.scope
    if scope == ALL:
        return None
    if scope in (MP, DP):
        assert ndims is not None
        return [(d < mp_dims) == (scope == MP) for d in range(ndims)]
    dims = set(cast("tuple[int, ...]", scope))  # a scope past ALL, MP and DP names dims
    n = max(flags_len or 0, (max(dims) + 1) if dims else 0)
    return [d in dims for d in range(n)]


def encode_graph(
    graph: Graph, flags_len: int | None, *, mp_dims: int = 0, ndims: int | None = None
) -> tuple[list[Any], list[str]]:
    """The Chakra `Node` messages of a graph (marks contracted), and notes on what ASTRA-sim sees differently."""
    deps = _deps_without_marks(graph)
    trace_len = max(
        (max(n.scope) + 1 for n in graph.nodes if n.kind == COMM and isinstance(n.scope, tuple) and n.scope), default=0
    )
    flags_len = flags_len or trace_len or None
    ids: dict[int, int] = {}
    out: list[Any] = []
    seen = _Differences()
    for i, nd in enumerate(graph.nodes):
        if nd.kind == MARK:
            continue
        ids[i] = len(out)
        m = cs.ChakraNode(id=len(out), name=nd.name)
        m.data_deps.extend(ids[p] for p in deps[i])
        _attr(m, "is_cpu_op", bool_val=nd.cpu)
        if nd.kind in (COMPUTE, REPLAY):
            _encode_duration(m, nd, seen)
        if nd.kind == COMPUTE:
            m.type = cs.COMP
        elif nd.kind == REPLAY:
            m.type = cs.COMM_COLL
            if not nd.cpu:
                _attr(m, "comm_type", int64_val=cs.BROADCAST)
        else:
            _encode_collective(m, nd, _scope_flags(nd, flags_len, mp_dims, ndims), seen)
        _encode_labels(m, nd)
        out.append(m)
    return out, seen.notes()


@dataclass
class _Differences:
    """What ASTRA-sim 2.x reads differently, counted while encoding: durations rounded to whole
    microseconds (and the largest rounding, ns), and update delays it does not apply."""

    rounded: int = 0
    worst: float = 0.0
    delays: int = 0

    def notes(self) -> list[str]:
        """One note per kind of difference found."""
        notes = []
        if self.rounded:
            notes.append(
                f"{self.rounded} duration{'s are' if self.rounded > 1 else ' is'} not whole microseconds "
                f"(Chakra's unit): ASTRA-sim 2.x reads them rounded, by up to {self.worst:.0f} ns each; "
                "dse reads the exact ns kept in dse_duration_ns"
            )
        if self.delays:
            notes.append(
                f"{self.delays} collective{'s carry' if self.delays > 1 else ' carries'} an update delay "
                "(dse_delay_ns) that ASTRA-sim 2.x does not apply"
            )
        return notes


def _encode_duration(m: Any, nd: Node, seen: _Differences) -> None:
    """A compute's duration in whole microseconds (rounded to the nearest), the exact ns kept beside
    it when they differ."""
    us = int(nd.duration // 1000 + (1 if nd.duration % 1000 >= 500 else 0))
    m.duration_micros = us
    if us * 1000 != nd.duration:
        _attr(m, "dse_duration_ns", double_val=float(nd.duration))
        seen.rounded += 1
        seen.worst = max(seen.worst, abs(us * 1000 - nd.duration))


def _encode_collective(m: Any, nd: Node, flags: list[bool] | None, seen: _Differences) -> None:
    """A collective: its type, size and dimensions (`flags`, None: all), and dse's delay and issue policy."""
    m.type = cs.COMM_COLL
    _attr(m, "comm_type", int64_val=CHAKRA_TYPE[nd.collective])  # type: ignore[index]
    _attr(m, "comm_size", int64_val=nd.size)
    if flags is not None:
        a = m.attr.add(name="involved_dim")
        a.bool_list.values.extend(flags)
    if nd.delay:
        _attr(m, "dse_delay_ns", double_val=float(nd.delay))
        seen.delays += 1
    if nd.policy != "none":
        _attr(m, "dse_policy", string_val=nd.policy)


def _encode_labels(m: Any, nd: Node) -> None:
    """The node's pass, layer and slot, where it has them."""
    if nd.iteration:
        _attr(m, "dse_iteration", int64_val=nd.iteration)
    if nd.layer >= 0:
        _attr(m, "dse_layer", int64_val=nd.layer)
    if nd.slot:
        _attr(m, "dse_slot", string_val=nd.slot)


def _attr(m: Any, name: str, **value: Any) -> None:
    a = m.attr.add(name=name)
    ((key, v),) = value.items()
    setattr(a, key, v)


def serialize(nodes: list[Any]) -> bytes:
    """The bytes of a trace file: the length-prefixed metadata, then each node."""
    parts = [_delimited(cs.GlobalMetadata(version=VERSION).SerializeToString(deterministic=True))]
    parts += [_delimited(m.SerializeToString(deterministic=True)) for m in nodes]
    return b"".join(parts)


def _delimited(body: bytes) -> bytes:
    n, head = len(body), bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            head.append(b | 0x80)
        else:
            head.append(b)
            return bytes(head) + body


def _check_prefix(prefix: Path) -> None:
    """PREFIX names files, not one: not ``*.et``; the first file's place follows the output rules
    of `dse.core.files` (its folder exists; a FIFO, device or folder there is refused)."""
    if str(prefix).endswith(".et"):
        raise InputError("out", f"{str(prefix)!r} ends in .et", "a PREFIX: the files are PREFIX.0.et, PREFIX.1.et, ...")
    check_output_file(f"{prefix}.0.et", "out", whole=True)


def _write(prefix: Path, data: bytes, ranks: int, force: bool) -> list[str]:
    """Write every rank's file, or none: existing ones only with `force`. Every file's place is
    checked before the first is written (`dse.core.files`: a symlink is followed, a special file
    refused)."""
    _check_prefix(prefix)
    names = [Path(f"{prefix}.{r}.et") for r in range(ranks)]
    for p in names:
        check_output_file(p, "out", whole=True)
        if not force and p.exists():
            raise InputError("out", f"{str(p)!r} exists", "another PREFIX, or --force to replace it")
    written: list[str] = []
    fresh = [not output_target(p, "out").exists() for p in names]
    try:
        for p in names:
            with atomic_output(p, "out") as tmp:
                tmp.write_bytes(data)
            written.append(str(p))
    except BaseException:  # an error or Ctrl-C part way: take back the files this call created
        for p, new in zip(names, fresh):
            if new and str(p) in written:
                output_target(p, "out").unlink(missing_ok=True)  # what a symlink named, not the link
        raise
    return written
