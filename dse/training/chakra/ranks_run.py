"""Per-rank traces end to end: `iterate_ranks` reads the files, builds the costs, runs every rank.

The drop-in for ASTRA-sim 2.x's ``--workload-configuration=PREFIX --network-configuration=NET
--system-configuration=SYS --comm-group-configuration=GROUPS``: `iterate_ranks(PREFIX, NET,
system=SYS, comm_groups=GROUPS, cost_model="astra-sim")`.

- **The system file** (`dse.core.astra_system`) sets the scheduler, the queue, the chunks (its
  `preferred-dataset-splits`), the endpoint delay and the local-memory reduction cost of the
  ``astra-sim`` model, and the roofline. Giving `scheduler`, `queue` or `chunks` as well is refused
  (one source for each number). Without a system file they default to dse's (``themis``, ``scf``,
  64 chunks) and the roofline comes from `peak_tflops` and `mem_gbps` (decimal GB/s), if given.
- **The groups**: the ``--comm-groups`` file (ASTRA-sim's), else the groups a PyTorch trace's
  metadata declares. A collective without a group runs on the dimensions its ``involved_dim`` marks.
- **The ranks**: every ``PREFIX.<rank>.et`` (`dse.training.chakra.rankset`), their count the
  topology's NPU count; a single ``PREFIX.0.et`` is every rank's, as ASTRA-sim runs copies of it.
  The classes of alike ranks are held once; the per-rank simulator (`dse.training.chakra.ranks_sim`)
  runs every rank. (A single-rank trace without per-rank options still runs on dse's single-rank
  engine, `dse.training.iteration`, rank 0 standing for all.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.topology import Topology, parse_topology
from dse.core.units import parse_int, parse_positive
from dse.costs import CostModel, get_cost_model
from dse.schedulers import get_scheduler, parse_queue
from dse.training.chakra.ranks_costs import RankCosts, Roofline
from dse.training.chakra.ranks_result import RankClassResult, RanksResult, Span
from dse.training.chakra.ranks_sim import ClassProgram, Program, simulate
from dse.training.iteration_engine import RULES
from dse.training.iteration_planner import MIB
from dse.training.workload_graph import ASTRA2_RULES, COMM, RECV, SEND

_DEFAULTS = {"scheduler": "themis", "queue": "scf", "chunks": 64}


def iterate_ranks(
    workload: str | Path,
    topology: str | Topology,
    *,
    system: str | Path | None = None,
    comm_groups: str | Path | None = None,
    remote_memory: str | Path | None = None,
    cost_model: str = "astra-sim",
    scheduler: str | None = None,
    queue: str | None = None,
    chunks: int | str | None = None,
    peak_tflops: float | None = None,
    mem_gbps: float | None = None,
    spans: bool = False,
    by_class: bool = True,
) -> RanksResult:
    """Run every rank of the per-rank trace `workload` (``PREFIX`` or ``PREFIX.0.et``) on `topology`
    (module docstring); every bad input is one `InputError`, raised before anything runs.
    `by_class` False runs every rank even where one per class would be exact (the same numbers)."""
    from dse.core.astra_system import load_system

    topo = parse_topology(topology)
    cfg = load_system(system) if system is not None else None
    ranks = load_ranks(workload, topo.npus)
    warnings = _check_system(cfg, topo, ranks)
    run = _run_params(cfg, scheduler, queue, chunks)
    model = _model(cost_model, cfg)
    groups = dict(getattr(ranks, "trace_groups", {}) or {})
    if comm_groups is not None:
        from dse.core.comm_groups import load_comm_groups

        groups = load_comm_groups(comm_groups, topo.npus)
    sched = get_scheduler(run["scheduler"])
    q = parse_queue(run["queue"])
    costs = RankCosts(
        topo,
        model,
        sched,
        q,
        run["chunks"],
        MIB,
        groups,
        _roofline(cfg, peak_tflops, mem_gbps),
        _memory(remote_memory, cfg, mem_gbps, topo),
    )
    program = Program(
        str(workload),
        tuple(ClassProgram(c.ranks, c.graph, c.peers, c.groups, tuple(c.ids)) for c in ranks.classes),
        tuple(ranks.class_of),
    )
    out = simulate(program, costs, RULES.get(model.rules.workload_rules, ASTRA2_RULES), spans=spans, classes=by_class)
    return _result(ranks, topo, model.name, (sched.name, q, run["chunks"]), program, out, warnings, costs.notes)


def _result(
    ranks: Any,
    topo: Topology,
    model: str,
    how: tuple[str, str, int],
    program: Program,
    out: Any,
    notes: list[str],
    costs_notes: list[str],
) -> RanksResult:
    """The result of a run: per rank, per class, the run's totals; the workload named by its prefix."""
    workload_name = program.name.removesuffix(".0.et").removesuffix(".et")
    finish, compute = out.finish, out.compute
    exposed = [f - c for f, c in zip(finish, compute)]
    classes = tuple(
        RankClassResult(
            k,
            c.ranks,
            max(finish[r] for r in c.ranks),
            max(compute[r] for r in c.ranks),
            max(exposed[r] for r in c.ranks),
        )
        for k, c in enumerate(program.classes)
    )
    return RanksResult(
        workload=str(workload_name),
        topology=topo.label(),
        cost_model=model,
        scheduler=how[0],
        queue=how[1],
        chunks=how[2],
        npus=topo.npus,
        time_ns=max(finish),
        finish_ns_by_rank=tuple(finish),
        exposed_ns_by_rank=tuple(exposed),
        compute_ns_by_rank=tuple(compute),
        classes=classes,
        messages=out.messages,
        collectives=out.collectives,
        spans=tuple(sorted(out.spans, key=_span_key)),
        notes=tuple(ranks.notes) + tuple(notes) + tuple(costs_notes) + _how_run(program, out),
    )


def _how_run(program: Program, out: Any) -> tuple[str, ...]:
    """A note when one rank per class stood for the others (`dse.training.chakra.ranks_classes`)."""
    n = len(program.class_of)
    if not out.by_class:
        return ()
    return (f"simulated {out.simulated:,} of the {n:,} ranks, one for each set of ranks that run alike",)


def _check_system(cfg: Any, topo: Topology, ranks: Any) -> list[str]:
    """The system file against the topology and the collectives the ranks run: warning lines."""
    if cfg is None:
        return []
    if cfg.active_chunks != 1:
        raise InputError(
            "--system",
            f"active-chunks-per-dimension is {cfg.active_chunks}; per-rank runs model one active chunk",
            "1",
        )
    colls = {n.collective for c in ranks.classes for n in c.graph.nodes if n.kind == COMM and n.collective}
    return list(cfg.check_topology(topo, colls))


def _span_key(s: Span) -> tuple:
    return (s.cls, s.lane, s.start_ns, s.end_ns, s.name)


def _run_params(cfg: Any, scheduler: str | None, queue: str | None, chunks: int | str | None) -> dict[str, Any]:
    given = {"scheduler": scheduler, "queue": queue, "chunks": chunks}
    if cfg is None:
        out = {k: (v if v is not None else _DEFAULTS[k]) for k, v in given.items()}
    else:
        for k, v in given.items():
            if v is not None:
                raise InputError(
                    f"--{k}", "given with --system, whose file sets it", f"one of them: the system file or --{k}"
                )
        out = {"scheduler": cfg.scheduler, "queue": cfg.queue, "chunks": cfg.chunks}
    out["chunks"] = parse_int(out["chunks"], "chunks", minimum=1)
    return out


def _model(name: str, cfg: Any) -> CostModel:
    model = get_cost_model(name)
    if cfg is None or model.name != "astra-sim":
        return model
    from dse.costs.astra_sim import AstraSimModel

    return AstraSimModel(endpoint_delay_ns=cfg.endpoint_delay_ns, local_mem_bytes_per_s=cfg.local_mem_bytes_per_s)


def _roofline(cfg: Any, peak_tflops: float | None, mem_gbps: float | None) -> Roofline | None:
    if cfg is not None:
        if peak_tflops is not None or mem_gbps is not None:
            raise InputError("--peak-tflops", "given with --system, whose file sets the roofline", "one of them")
        roof = cfg.roofline
        return None if roof is None else Roofline(*roof)
    if peak_tflops is None and mem_gbps is None:
        return None
    if peak_tflops is None or mem_gbps is None:
        raise InputError("--peak-tflops", "given without --mem-bw (or the reverse)", "both, or neither")
    return Roofline(
        parse_positive(peak_tflops, "--peak-tflops", maximum=1e9) * 1e12,
        parse_positive(mem_gbps, "--mem-bw", maximum=1e9) * 1e9,
    )


def _memory(path: str | Path | None, cfg: Any, mem_gbps: float | None, topo: Topology) -> Any:
    """What memory nodes run against (`dse.core.remote_memory.choose_memory`)."""
    from dse.core import remote_memory as rm

    remote = rm.load_remote_memory(path) if path is not None else None
    if remote is not None:
        remote.check_npus(topo.npus)
    local = (
        cfg
        if cfg is not None
        else (None if mem_gbps is None else parse_positive(mem_gbps, "--mem-bw", maximum=1e9) * 1e9)
    )
    return rm.choose_memory(remote, local)


def load_ranks(workload: str | Path, npus: int) -> Any:
    """The `RankSet` of a per-rank trace; a single ``PREFIX.0.et`` (no ``PREFIX.1.et`` beside it) is
    every rank's, as ASTRA-sim runs copies of one file, unless it sends or receives (whose peers
    would then be every rank's): that is refused in one line."""
    from dse.training.chakra.rankset import RankClassGraph, RankSet, is_rank_set, load_rank_set

    if npus == 1 or is_rank_set(workload):
        return load_rank_set(workload, npus)
    from dse.training.chakra.read import load_trace

    t = load_trace(workload)
    p2p = next((n for n in t.graph.nodes if n.kind in (SEND, RECV)), None)
    if p2p is not None:
        raise InputError(
            "workload",
            f"{t.path}: node {p2p.name!r} sends or receives, and {t.path} is the only rank file "
            f"(the topology has {npus} NPUs)",
            f"one file per NPU ({t.name}.0.et to {t.name}.{npus - 1}.et) for a trace with sends and receives",
        )
    groups = tuple(n.group for n in t.graph.nodes if n.kind == COMM)
    ranks = tuple(range(npus))
    one = RankClassGraph(ranks, t.graph, t.ids, tuple(() for _ in ranks), tuple(groups for _ in ranks))
    note = f"{t.path} is every rank's trace (one file for {npus} NPUs, as ASTRA-sim runs copies of it)"
    return RankSet(t.name, t.name, npus, (0,) * npus, (one,), version=t.version, notes=(*t.notes, note))
