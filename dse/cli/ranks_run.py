"""`dse iterate` on a per-rank trace (`dse.cli.iterate_ranks` describes when and what it prints):
the run, its --trace file, its --plot figure and its report. Imported by `dse.cli.iterate.cmd_iterate`
when it runs."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dse.cli.iterate_ranks import RANK_OPTIONS
from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.core.units import format_time
from dse.output.perfetto import check_trace_path, rank_ranges, write_trace
from dse.output.plots import figure_path
from dse.output.ranks_timeline import draw_ranks_timeline, ranks_plot_data
from dse.output.report import format_table, schedule_cell
from dse.training.chakra.ranks_result import RanksResult
from dse.training.chakra.ranks_run import iterate_ranks
from dse.training.chakra.rankset import is_rank_set
from dse.training.chakra.read import is_trace_path


def wants_ranks(args: argparse.Namespace) -> bool:
    """Whether `dse iterate` runs this trace per rank (module docstring)."""
    if any(getattr(args, k, None) is not None for k in RANK_OPTIONS):
        return True
    return is_trace_path(args.workload) and is_rank_set(args.workload)


def iterate_per_rank(args: argparse.Namespace) -> int:
    """`dse iterate` on a per-rank trace: run `iterate_ranks`, write --trace and --plot, and print the
    summary and the classes, or one JSON object. Options a per-rank run cannot take are an
    `InputError`; the exit code is 0."""
    if args.placement is not None:
        raise InputError("--placement", "given with a per-rank trace, whose nodes name their groups", "--comm-groups")
    if args.iterations not in (None, "1", 1):
        raise InputError("--iterations", "given with a per-rank trace", "1 (a per-rank trace is one iteration)")
    if args.scheduler == "ideal":
        raise InputError("--scheduler", "ideal is not run per rank", "a scheduler name")
    if args.plot is not None:
        figure_path(args.plot, "plot")
    if args.trace is not None:
        check_trace_path(args.trace)
    res = iterate_ranks(
        args.workload,
        args.topology,
        system=args.system,
        comm_groups=args.comm_groups,
        remote_memory=args.remote_memory,
        cost_model=args.cost_model,
        scheduler=args.scheduler,
        queue=args.queue,
        chunks=args.chunks,
        peak_tflops=args.peak_tflops,
        mem_gbps=args.mem_bw,
        spans=bool(args.timeline or args.plot or args.trace),
    )
    d = res.as_dict(spans=True)
    _write_outputs(args, d)
    if args.json:
        if not args.timeline:
            d.pop("spans", None)
        print(json.dumps(d))
        return 0
    for note in res.notes:
        print(f"note: {note}")
    print(_summary(res))
    print()
    print(_classes(res))
    return 0


def _write_outputs(args: argparse.Namespace, d: dict[str, Any]) -> None:
    """The --trace file and the --plot figure of a per-rank result `d` (its JSON form, with spans)."""
    topo = parse_topology(args.topology)
    if args.trace is not None:
        write_trace(d, args.trace, topology=topo)
    if args.plot is not None:
        data = ranks_plot_data(d, "--plot", topology=topo)
        for note in data.notes:
            print(f"note: {note}", file=sys.stderr if args.json else sys.stdout)
        draw_ranks_timeline(data, args.plot)


def _summary(res: RanksResult) -> str:
    """The run's quantities, one per row."""
    rows = [
        ("workload", res.workload),
        ("topology", f"{res.topology} ({res.npus} NPUs)"),
        ("scheduler / queue", schedule_cell(res.scheduler, res.queue, res.cost_model, f", {res.chunks} chunks")),
        ("iteration time (latest rank)", format_time(res.time_ns)),
        ("classes of alike ranks", len(res.classes)),
        ("collectives / messages", f"{res.collectives:,} / {res.messages:,}"),
    ]
    return format_table(("quantity", "value"), rows, align="ll")


def _classes(res: RanksResult) -> str:
    """One row per class of alike ranks: its ranks, finish, compute and exposed time."""

    def runs(ranks: tuple[int, ...]) -> str:
        """Every run of consecutive ranks, none left out."""
        return rank_ranges(ranks, most=len(ranks))

    body = [
        (c.index, runs(c.ranks), format_time(c.finish_ns), format_time(c.compute_ns), format_time(c.exposed_ns))
        for c in res.classes
    ]
    return format_table(("class", "ranks", "finish", "compute", "exposed comm."), body, align="rlrrr")
