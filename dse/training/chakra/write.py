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

Per-rank traces (pipeline stages differ): `export_rank_graphs` writes a graph per rank; generators
(`dse.training.pipeline_traces`) encode node by node (`encode_node`, `frame`). As ASTRA-sim 2.x and
STAGE encode them: sends and receives carry ``comm_src``, ``comm_dst``, ``comm_tag``, ``comm_size``
(int64; ranks and tags up to 2^32 - 1, read as uint32; the own end is left out when the rank is not
known: ASTRA-sim takes the rank that runs it); a collective's group is ``pg_name`` (decimal digits
for ASTRA-sim, ``"0"`` = all NPUs); a ``COMP_NODE`` has ``num_ops`` (int64) and ``tensor_size``
(uint64 bytes) when it has FLOPs and no ``duration_micros`` when untimed (the roofline times it;
timed at 0 ns with FLOPs: ``dse_duration_ns`` 0, not to read as untimed); a memory node has
``tensor_size`` (local or remote is not written: ASTRA-sim sends every one to its remote memory).
`write_rank_files` writes many files in one pass: temporary files beside them, fsynced 16 at a time
(the file system commits them together), then renamed; each folder fsynced once and scanned once;
Ctrl-C stops it between groups of 64 files (`dse.core.interrupts`)."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from dse.core.errors import InputError
from dse.core.files import check_output_file, output_target, pid_alive, sync_folder, write_all, write_failure
from dse.core.interrupts import deferred_ctrl_c
from dse.core.limits import MAX_BYTES
from dse.core.topology import Topology, parse_topology
from dse.core.units import parse_int
from dse.training.chakra import schema as cs
from dse.training.chakra.read import CHAKRA_TYPE, ChakraTrace
from dse.training.placement import PLACEMENT_SLOTS, PartScope, group_topology
from dse.training.workload_graph import COMM, COMPUTE, MARK, MEM, RECV, REPLAY, SEND, Graph, Node, compile_workload
from dse.training.workload_load import load_workload
from dse.training.workloads import ALL, DP, MP, Workload

VERSION = "0.0.4"
MAX_RANK_FILES = 1_048_576
MAX_RANK = 2**32 - 1  # the ranks and tags of sends and receives: ASTRA-sim 2.x reads them as uint32
#: a memory node's `Node.mem` -> its Chakra type (local or remote memory: the same node type)
MEM_TYPES = {"load": cs.MEM_LOAD, "store": cs.MEM_STORE, "remote_load": cs.MEM_LOAD, "remote_store": cs.MEM_STORE}


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
    check_prefix(Path(prefix))  # before any work: the folder exists, no special file at PREFIX.0.et
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
    files = write_rank_files(prefix, lambda _: data, ranks, force)
    run_on = logical.notation() if (logical is not None and topo is not None and logical is not topo) else ""
    colls = sum(1 for n in graph.nodes if n.kind == COMM)
    return ExportReport(tuple(files), len(nodes), colls, ranks, run_on, tuple(notes))


def export_rank_graphs(graphs: Sequence[Graph], prefix: str | Path, *, force: bool = False) -> ExportReport:
    """Write ``PREFIX.<r>.et`` from `graphs[r]` for every rank r (a send's ``comm_src`` and a
    receive's ``comm_dst`` are r), all files or none, as `export_chakra` does. `nodes` and
    `collectives` of the report are the most that one rank file holds."""
    check_prefix(Path(prefix))
    if not 1 <= len(graphs) <= MAX_RANK_FILES:
        raise InputError("graphs", f"{len(graphs)} ranks", f"1 to {MAX_RANK_FILES} graphs, one per rank")
    encoded = [encode_graph(g, None, rank=r) for r, g in enumerate(graphs)]
    files = write_rank_files(prefix, lambda r: serialize(encoded[r][0]), len(graphs), force)
    notes = dict.fromkeys(note for _, ns in encoded for note in ns)
    colls = max(sum(1 for n in g.nodes if n.kind == COMM) for g in graphs)
    return ExportReport(tuple(files), max(len(e[0]) for e in encoded), colls, len(graphs), "", tuple(notes))


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
        """The non-mark nodes that node i depends on through marks, memoised."""
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
    graph: Graph, flags_len: int | None, *, mp_dims: int = 0, ndims: int | None = None, rank: int | None = None
) -> tuple[list[Any], list[str]]:
    """The Chakra `Node` messages of a graph (marks contracted), and notes on what ASTRA-sim sees differently.

    `rank`: the rank whose file it is, written as a send's ``comm_src`` and a receive's ``comm_dst``
    (None: left out, ASTRA-sim takes the rank that runs the node)."""
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
        flags = _scope_flags(nd, flags_len, mp_dims, ndims) if nd.kind == COMM else None
        out.append(encode_node(len(out), nd, [ids[p] for p in deps[i]], rank=rank, flags=flags, seen=seen))
    return out, seen.notes()


def encode_node(
    nid: int,
    nd: Node,
    deps: Iterable[int] = (),
    *,
    rank: int | None = None,
    flags: Sequence[bool] | None = None,
    seen: _Differences | None = None,
) -> Any:
    """One graph node (not a mark) as a Chakra `Node` message with id `nid` and ``data_deps`` `deps`
    (module docstring). `rank`: the own end of a send or receive (None: left out); `flags`: a
    collective's ``involved_dim`` (None: none written); `seen` counts what ASTRA-sim reads differently."""
    seen = seen if seen is not None else _Differences()
    where, kind = f"node {nid} ({nd.name})", nd.kind
    types = {COMPUTE: cs.COMP, REPLAY: cs.COMM_COLL, COMM: cs.COMM_COLL, SEND: cs.COMM_SEND, RECV: cs.COMM_RECV}
    ntype = MEM_TYPES.get(nd.mem, -1) if kind == MEM else types.get(kind, -1)
    if ntype < 0:
        raise InputError(where, f"kind {kind!r}, mem {nd.mem!r}", f"{', '.join(types)}; mem {', '.join(MEM_TYPES)}")
    m = cs.ChakraNode(id=nid, name=nd.name, type=ntype)
    m.data_deps.extend(deps)
    _attr(m, "is_cpu_op", bool_val=nd.cpu)
    if kind in (COMPUTE, REPLAY) and nd.timed:
        _encode_duration(m, nd.duration, seen, zero=kind == COMPUTE and nd.flops > 0)
    if kind == COMPUTE:
        _encode_ops(m, nd.flops, nd.tensor_bytes, where)
    elif kind == REPLAY and not nd.cpu:
        _attr(m, "comm_type", int64_val=cs.BROADCAST)
    elif kind == COMM:
        _encode_collective(m, nd, flags, seen)
    elif kind in (SEND, RECV):
        _encode_p2p(m, nd, rank, where)
    elif kind == MEM:
        _check_bytes(nd.size, where, "tensor_size")
        _attr(m, "tensor_size", uint64_val=nd.size)
    _encode_labels(m, nd)
    return m


def _encode_p2p(m: Any, nd: Node, rank: int | None, where: str) -> None:
    """A send's or receive's ``comm_src``, ``comm_dst``, ``comm_tag`` and ``comm_size`` (int64); the
    own end only when `rank` is known. A message to oneself is refused."""
    src, dst = (rank, nd.peer) if nd.kind == SEND else (nd.peer, rank)
    for key, v in (("comm_src", src), ("comm_dst", dst), ("comm_tag", nd.tag)):
        if v is not None and not 0 <= v <= MAX_RANK:
            raise InputError(where, f"{key} {v}", f"an integer from 0 to {MAX_RANK}")
    if src == dst:
        raise InputError(where, f"a {nd.kind} whose peer is its own rank {src}", "another rank")
    _check_bytes(nd.size, where, "comm_size")
    for key, v in (("comm_src", src), ("comm_dst", dst), ("comm_tag", nd.tag), ("comm_size", nd.size)):
        if v is not None:
            _attr(m, key, int64_val=v)


def _encode_ops(m: Any, flops: float, tensor_bytes: int, where: str) -> None:
    """A compute's ``num_ops`` (int64, whole operations) and ``tensor_size`` (uint64 bytes), where not 0."""
    if not 0 <= flops < 2**63:
        raise InputError(where, f"num_ops {flops!r}", "0 to 2^63 - 1 operations")
    _check_bytes(tensor_bytes, where, "tensor_size")
    if flops:
        _attr(m, "num_ops", int64_val=round(flops))
    if tensor_bytes:
        _attr(m, "tensor_size", uint64_val=int(tensor_bytes))


def _check_bytes(n: int, where: str, key: str) -> None:
    if not 0 <= n <= MAX_BYTES:
        raise InputError(where, f"{key} {n!r}", "0 to 2^53 bytes")


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


def _encode_duration(m: Any, duration: float, seen: _Differences, *, zero: bool = False) -> None:
    """A compute's duration in whole microseconds (rounded to the nearest), the exact ns kept beside
    it when they differ, or when it is 0 and `zero` (a node with FLOPs: 0 would read as untimed)."""
    us = int(duration // 1000 + (1 if duration % 1000 >= 500 else 0))
    m.duration_micros = us
    if us * 1000 != duration or (zero and not us):
        _attr(m, "dse_duration_ns", double_val=float(duration))
    if us * 1000 != duration:
        seen.rounded += 1
        seen.worst = max(seen.worst, abs(us * 1000 - duration))


def _encode_collective(m: Any, nd: Node, flags: Sequence[bool] | None, seen: _Differences) -> None:
    """A collective: its type, size, dimensions (`flags`, None: all) and group (``pg_name``), and dse's
    delay and issue policy."""
    m.type = cs.COMM_COLL
    _attr(m, "comm_type", int64_val=CHAKRA_TYPE[nd.collective])  # type: ignore[index]
    _attr(m, "comm_size", int64_val=nd.size)
    if flags is not None:
        a = m.attr.add(name="involved_dim")
        a.bool_list.values.extend(flags)
    if nd.group:
        _attr(m, "pg_name", string_val=nd.group)
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
    return b"".join([HEADER, *(frame(m) for m in nodes)])


def frame(m: Any) -> bytes:
    """One message as a trace file holds it: its length (varint), then its bytes."""
    return _delimited(m.SerializeToString(deterministic=True))


def _delimited(body: bytes) -> bytes:
    n, head = len(body), bytearray()  # the length as a varint: 7 bits a byte, low bits first
    while n > 0x7F:
        head.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(head) + bytes([n]) + body


HEADER = _delimited(cs.GlobalMetadata(version=VERSION).SerializeToString(deterministic=True))


def check_prefix(prefix: Path) -> None:
    """PREFIX names files, not one: not ``*.et``; the first file's place follows the output rules
    of `dse.core.files` (its folder exists; a FIFO, device or folder there is refused)."""
    if str(prefix).endswith(".et"):
        raise InputError("out", f"{str(prefix)!r} ends in .et", "a PREFIX: the files are PREFIX.0.et, PREFIX.1.et, ...")
    check_output_file(f"{prefix}.0.et", "out", whole=True)


def write_rank_files(prefix: str | Path, data_of: Callable[[int], bytes], ranks: int, force: bool = False) -> list[str]:
    """Write ``PREFIX.<r>.et`` holding `data_of(r)` for every rank r < `ranks`: all or none (module
    docstring). Every file's place is checked before the first byte is written (`dse.core.files`'
    output rules: its folder exists, a symlink is followed, a special file refused); an existing
    file is replaced only with `force`. An error or Ctrl-C part way leaves no temporary file and
    takes back the files this call created."""
    prefix = Path(prefix)
    check_prefix(prefix)
    names = [Path(f"{prefix}.{r}.et") for r in range(ranks)]
    for p in names:
        check_output_file(p, "out", whole=True)
        if not force and p.exists():
            raise InputError("out", f"{str(p)!r} exists", "another PREFIX, or --force to replace it")
    targets = [output_target(p, "out") for p in names]
    fresh = [not t.exists() for t in targets]
    folders = sorted({t.parent for t in targets})
    temps: list[Path | None] = [None] * ranks
    moved = at = 0
    try:
        with deferred_ctrl_c() as ctrl_c:  # raised between groups of files, never inside a rename's count
            for folder in folders:
                _sweep_stale(folder, {t.name for t in targets})
            with ThreadPoolExecutor(max(1, min(16, ranks))) as pool:
                for start in range(0, ranks, 64):  # 64 files' bytes in memory at a time
                    jobs = [(r, targets[r], data_of(r), temps) for r in range(start, min(ranks, start + 64))]
                    for r, err in pool.map(_write_temp, jobs):
                        if err is not None:
                            at = r
                            raise err
                    ctrl_c.check()
            for at, p in enumerate(names):
                check_output_file(p, "out", whole=True)  # a FIFO or folder put there meanwhile: refused, not replaced
                os.replace(cast(Path, temps[at]), targets[at])
                moved += 1
            for folder in folders:
                sync_folder(folder)
    except BaseException as e:  # an error or Ctrl-C part way: no temporary file, no file this call created
        for tmp in temps[moved:]:
            with contextlib.suppress(OSError, TypeError):
                os.unlink(tmp)  # type: ignore[arg-type]
        for t in [t for t, new in zip(targets[:moved], fresh) if new]:
            t.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise write_failure("out", str(names[at]), e, kept=not fresh[at]) from None
        raise
    return [str(p) for p in names]


def _write_temp(job: tuple[int, Path, bytes, list[Path | None]]) -> tuple[int, OSError | None]:
    """Rank r's `data` in a new temporary file ``.NAME.PID.XXXXXXXX.tmp`` beside its `target` (the
    name `dse.core.files.temp_beside` gives: either cleans the other's leftovers), fsynced, with the
    replaced file's permissions (or the usual ones); ``temps[r]`` is set before a byte is written."""
    r, target, data, temps = job
    try:
        while True:
            tmp = target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
            with contextlib.suppress(FileExistsError):
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
                break
        temps[r] = tmp
        try:
            with contextlib.suppress(FileNotFoundError):
                os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        return r, e
    return r, None


def _sweep_stale(folder: Path, names: set[str]) -> None:
    """Remove the temporary files of `names` that a killed dse process left in `folder` (its PID no
    longer runs): one scan of the folder, not one per file."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for e in entries:
            if not (e.name.startswith(".") and e.name.endswith(".tmp")):
                continue
            parts = e.name[1:-4].rsplit(".", 2)
            if len(parts) == 3 and parts[0] in names and parts[1].isdigit() and not pid_alive(int(parts[1])):
                with contextlib.suppress(OSError):
                    os.unlink(e.path)
