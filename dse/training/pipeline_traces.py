"""Per-rank Chakra traces of a pipeline-parallel training iteration (`dse workload pipeline`).

`write_pipeline_traces(folder, name, stages=S, dp=D, microbatches=M, ...)` writes
``FOLDER/NAME.<rank>.et`` for the S x D ranks of one iteration: S pipeline stages, each replicated
on D data-parallel ranks, running M microbatches, then a data-parallel all-reduce of each stage's
weight gradients. The files are in the encoding ASTRA-sim 2.x reads (``--workload-configuration=
FOLDER/NAME``, with ``--comm-group-configuration FOLDER/NAME.json`` when groups are written; that of
the reference pipelines in ``astra-sim-2-p2p``), and ``dse iterate FOLDER/NAME`` runs them.

**Rank layout.** Rank ``r = d + D * s`` runs stage ``s`` as data-parallel replica ``d``: the
data-parallel index varies fastest, as in STAGE's traces. On a network of dimensions with
``P0, P1, ...`` NPUs (``rank = c0 + P0 * c1 + P0 * P1 * c2 + ...``, ASTRA-sim's numbering), a stage's
D ranks are the sub-grid of the lowest k dimensions when ``P0 * ... * P(k-1) = D``; the stages then
lie along the remaining dimensions, and stage s sends to rank ``r + D`` and receives from ``r - D``.

**One rank's graph** (nodes in this order, which is the order ASTRA-sim issues ready nodes in), for
each step of its stage's schedule:

- forward of microbatch m: a receive of the activations from the previous stage (not on stage 0),
  the forward compute (``fwd_us``), a send of the activations to the next stage (not on the last);
- backward of m: a receive of the activation gradients from the next stage (not on the last), the
  backward compute (``bwd_us``), a send of the gradients to the previous stage (not on stage 0).

Each compute depends on the compute before it (one schedule per stage) and on its receive; each send
on its compute. Receives depend on nothing: they are posted at the start (a receive holds no resource
in ASTRA-sim 2.x and ends when its message has arrived). Activations and their gradients are both
``activation_bytes``. Tags: ``2m`` for the forward activations of microbatch m, ``2m + 1`` for its
backward gradients, so (source, destination, tag, size) is unique for every message. After the
last compute, an ALL_REDUCE of ``grad_bytes`` over the stage's D ranks (none when D is 1): on the
dimensions that hold them (``involved_dim``), or with ``groups`` (or when no lowest dimensions
multiply to D) on the communicator group ``s + 1`` (``pg_name``; ASTRA-sim reads ``"0"`` as all
NPUs), with the groups written to ``FOLDER/NAME.json`` as ``{"s + 1": [ranks]}``.

**Schedules.** ``gpipe``: the forwards of microbatches 0..M-1, then the backwards M-1..0 (the last
forward's backward first). ``1f1b`` (PipeDream-flush, as Megatron-LM runs it): stage s runs
``w = min(S - 1 - s, M)`` forwards, then alternates one forward and one backward (forward w + i,
backward i), then the remaining backwards in order.

Ranks without a send, a receive or an all-reduce (one stage, one replica) still hold their computes:
no rank file is empty (ASTRA-sim aborts on one).

**Speed.** The ranks of one stage differ only in their own rank and their peers: each stage's messages
are encoded once, and per rank only its sends and receives are re-serialized with their ranks set
(`_StageTemplate`); the files are written in one pass (`dse.training.chakra.write.write_rank_files`).
Durations are whole microseconds in ``duration_micros`` (a fraction is kept exactly in
``dse_duration_ns``, as every dse export does).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.core.collectives import ALL_REDUCE
from dse.core.errors import InputError
from dse.core.files import check_output_file, output_target, write_atomic
from dse.core.limits import MAX_NS, check_input, check_work
from dse.core.units import parse_int, parse_positive, parse_size
from dse.training.chakra import schema as cs
from dse.training.chakra.write import HEADER, MAX_RANK_FILES, check_prefix, encode_graph, frame, write_rank_files
from dse.training.workload_graph import COMM, COMPUTE, RECV, SEND, Graph, Node
from dse.training.workloads import ALL

SCHEDULES = ("gpipe", "1f1b")
#: steps of `check_work` per node written (encoding it and writing it)
STEPS_PER_NODE = 6
_DIMS = re.compile(r"\s*[0-9]+(\s*[x,]\s*[0-9]+)*\s*")


@dataclass(frozen=True)
class Pipeline:
    """A validated pipeline iteration (module docstring): `dims` the network's NPUs per dimension,
    `groups` whether the data-parallel all-reduce uses communicator groups (else ``involved_dim``)."""

    stages: int
    dp: int
    microbatches: int
    schedule: str
    fwd_ns: float
    bwd_ns: float
    activation_bytes: int
    grad_bytes: int
    dims: tuple[int, ...]
    groups: bool

    @property
    def ranks(self) -> int:
        """The NPU count: stages x data-parallel replicas."""
        return self.stages * self.dp

    def dp_dims(self) -> int | None:
        """k such that the lowest k dimensions hold exactly `dp` NPUs (None: no such k)."""
        n = 1
        for k, p in enumerate(self.dims):
            if n == self.dp:
                return k
            n *= p
        return len(self.dims) if n == self.dp else None

    def order(self, stage: int) -> list[tuple[str, int]]:
        """Stage `stage`'s computes in schedule order: ("F" or "B", microbatch)."""
        S, M = self.stages, self.microbatches
        if self.schedule == "gpipe":
            return [("F", m) for m in range(M)] + [("B", m) for m in reversed(range(M))]
        w = min(S - 1 - stage, M)
        steady = [step for i in range(M - w) for step in (("F", w + i), ("B", i))]
        return [("F", m) for m in range(w)] + steady + [("B", m) for m in range(M - w, M)]

    def rank_graph(self, rank: int) -> Graph:
        """Rank `rank`'s graph (module docstring): sends, receives, computes, the all-reduce."""
        s, D, last = rank // self.dp, self.dp, self.stages - 1
        g = Graph()
        prev: int | None = None
        for kind, m in self.order(s):
            fwd = kind == "F"
            peer_in, peer_out = (rank - D, rank + D) if fwd else (rank + D, rank - D)
            has_in, has_out = (s > 0, s < last) if fwd else (s < last, s > 0)
            what, tag = ("act", 2 * m) if fwd else ("grad", 2 * m + 1)
            size = self.activation_bytes
            r = g.add(Node(RECV, f"recv_{what}_mb{m}", peer=peer_in, tag=tag, size=size)) if has_in else None
            name, dur = (f"fwd_mb{m}", self.fwd_ns) if fwd else (f"bwd_mb{m}", self.bwd_ns)
            prev = g.add(Node(COMPUTE, name, duration=dur), (prev, 0.0), (r, 0.0))
            if has_out:
                g.add(Node(SEND, f"send_{what}_mb{m}", peer=peer_out, tag=tag, size=size), (prev, 0.0))
        if D > 1:
            scope: Any = ALL if self.groups else tuple(range(self.dp_dims() or 0))
            group = str(s + 1) if self.groups else ""
            ar = Node(COMM, "dp_allreduce_grads", collective=ALL_REDUCE, size=self.grad_bytes, scope=scope, group=group)
            g.add(ar, (prev, 0.0))
        return g

    def comm_groups(self) -> dict[str, list[int]]:
        """The data-parallel groups: ``{"s + 1": [s * dp, ..., s * dp + dp - 1]}``."""
        return {str(s + 1): list(range(s * self.dp, (s + 1) * self.dp)) for s in range(self.stages)}


@dataclass(frozen=True)
class PipelineReport:
    """What `write_pipeline_traces` wrote: the rank files, the most nodes one holds, the groups file
    ("" when none) and the all-reduce's ``involved_dim`` (empty with groups or without an all-reduce)."""

    files: tuple[str, ...]
    ranks: int
    nodes: int
    groups_file: str
    involved_dim: tuple[bool, ...]
    pipeline: Pipeline


class _StageTemplate:
    """One stage's rank file, encoded once for its first rank: per rank, only the sends and receives
    are re-serialized, with their own rank and their peer (the same offset from it) set."""

    def __init__(self, messages: list[Any], base: int) -> None:
        self.parts: list[bytes | tuple[Any, Any, Any, int]] = []
        for m in messages:
            if m.type not in (cs.COMM_SEND, cs.COMM_RECV):
                self.parts.append(frame(m))
                continue
            attrs = {a.name: a for a in m.attr}
            own, peer = ("comm_src", "comm_dst") if m.type == cs.COMM_SEND else ("comm_dst", "comm_src")
            self.parts.append((m, attrs[own], attrs[peer], attrs[peer].int64_val - base))

    def render(self, rank: int) -> bytes:
        """The bytes of rank `rank`'s file."""
        out = [HEADER]
        for p in self.parts:
            if isinstance(p, bytes):
                out.append(p)
            else:
                m, own, peer, offset = p
                own.int64_val, peer.int64_val = rank, rank + offset
                out.append(frame(m))
        return b"".join(out)


def parse_pipeline(
    *,
    stages: object,
    dp: object,
    microbatches: object,
    schedule: str = "gpipe",
    fwd_us: object,
    bwd_us: object,
    activation_bytes: int | float | str,
    grad_bytes: int | float | str,
    topology_dims: Sequence[int] | str | None = None,
    groups: bool = False,
) -> Pipeline:
    """A `Pipeline` from user values (each bad one: one `InputError` naming it). `topology_dims`: NPUs
    per network dimension, dim 0 first (a list, or ``"8x16x8"``); default ``(dp, stages)`` without 1s."""
    S = parse_int(stages, "stages", maximum=MAX_RANK_FILES)
    D = parse_int(dp, "dp", maximum=MAX_RANK_FILES)
    M = parse_int(microbatches, "microbatches", maximum=10**6)
    sched = str(schedule).strip().lower()
    if sched not in SCHEDULES:
        raise InputError("schedule", repr(schedule), ", ".join(SCHEDULES))
    if S * D > MAX_RANK_FILES:
        raise InputError(
            "stages", f"{S} stages x {D} data-parallel ranks = {S * D:,} ranks", f"at most {MAX_RANK_FILES:,}"
        )
    fwd = round(parse_positive(fwd_us, "fwd_us", allow_zero=True, maximum=MAX_NS / 1000) * 1000, 6)
    bwd = round(parse_positive(bwd_us, "bwd_us", allow_zero=True, maximum=MAX_NS / 1000) * 1000, 6)
    act, grads = parse_size(activation_bytes, "activation_bytes"), parse_size(grad_bytes, "grad_bytes")
    dims = _dims(topology_dims, S, D)
    p = Pipeline(S, D, M, sched, fwd, bwd, act, grads, dims, groups)
    if D > 1 and not groups and p.dp_dims() is None:
        p = Pipeline(S, D, M, sched, fwd, bwd, act, grads, dims, True)
    nodes = 2 * M + 4 * M + 1  # computes, sends and receives (at most), the all-reduce
    check_input("trace_nodes", nodes, "microbatches", "nodes in one rank file")
    check_work(S * D * nodes * STEPS_PER_NODE, f"{S * D:,} rank files of up to {nodes:,} nodes")
    return p


def _dims(value: Sequence[int] | str | None, stages: int, dp: int) -> tuple[int, ...]:
    """The network's NPUs per dimension, whose product must be stages x dp."""
    if value is None:
        return tuple(n for n in (dp, stages) if n > 1) or (1,)
    if isinstance(value, str):
        if not _DIMS.fullmatch(value):
            raise InputError("topology_dims", repr(value), "NPUs per dimension, dim 0 first: 8x16x8 or 8,16,8")
        value = [int(v) for v in re.split(r"[x,]", value)]
    dims = tuple(parse_int(v, "topology_dims", maximum=MAX_RANK_FILES) for v in value)
    check_input("dimensions", len(dims), "topology_dims", "dimensions")
    if not dims or math.prod(dims) != stages * dp:
        raise InputError(
            "topology_dims",
            f"{'x'.join(map(str, dims)) or 'none'} ({math.prod(dims):,} NPUs) for {stages} stages x {dp} "
            f"= {stages * dp:,} ranks",
            "dimensions whose NPUs multiply to stages x dp",
        )
    return dims


def write_pipeline_traces(folder: str | Path, name: str, *, force: bool = False, **spec: Any) -> PipelineReport:
    """Write ``FOLDER/NAME.<rank>.et`` for every rank of the pipeline (module docstring), and
    ``FOLDER/NAME.json`` when the all-reduce uses communicator groups. The folder must exist; an
    existing file is replaced only with `force`; bad input writes nothing. `spec`: `parse_pipeline`'s
    keywords (stages, dp, microbatches, schedule, fwd_us, bwd_us, activation_bytes, grad_bytes,
    topology_dims, groups)."""
    if not name or "/" in name or name in (".", ".."):
        raise InputError("name", repr(name), "a file name without /: the files are NAME.<rank>.et")
    check_prefix(Path(folder) / name)  # before any work: not *.et, the folder exists, no special file at .0.et
    p = parse_pipeline(**spec)
    prefix = Path(folder) / name
    gfile = Path(f"{prefix}.json") if p.groups and p.dp > 1 else None
    if gfile is not None:
        check_output_file(gfile, "out", whole=True)
        if not force and gfile.exists():
            raise InputError("out", f"{str(gfile)!r} exists", "another name, or --force to replace it")
    templates = [_template(p, s) for s in range(p.stages)]
    fresh = [not output_target(f"{prefix}.{r}.et", "out").exists() for r in range(p.ranks)]
    files = write_rank_files(prefix, lambda r: templates[r // p.dp].render(r), p.ranks, force)
    if gfile is not None:
        try:
            write_atomic(gfile, json.dumps(p.comm_groups()) + "\n")
        except BaseException:  # the groups file belongs with the rank files: take back the new ones
            for f, new in zip(files, fresh):
                if new:
                    output_target(f, "out").unlink(missing_ok=True)
            raise
    nodes = max(len(t.parts) for t in templates)
    k = p.dp_dims()
    flags = () if (p.groups or p.dp == 1 or k is None) else tuple(d < k for d in range(len(p.dims)))
    return PipelineReport(tuple(files), p.ranks, nodes, str(gfile or ""), flags, p)


def _template(p: Pipeline, stage: int) -> _StageTemplate:
    base = stage * p.dp
    messages, _ = encode_graph(p.rank_graph(base), len(p.dims), rank=base)
    return _StageTemplate(messages, base)
