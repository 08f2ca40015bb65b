"""`dse iterate` on a per-rank trace: ASTRA-sim 2.x's files as they are (dse.training.chakra.ranks_run).

A trace runs per rank when it has a file per rank (``PREFIX.1.et`` beside ``PREFIX.0.et``) or when
an option only a per-rank run has is given (`RANK_OPTIONS`); a single rank file is then every
rank's, as ASTRA-sim runs copies of it. The text output is the run's summary, then one row per
class of alike ranks (its ranks, finish, compute and exposed time); ``--json`` gives every field of
`RanksResult`, ``finish_ns_by_rank``, ``exposed_ns_by_rank`` and ``compute_ns_by_rank`` among them
(``--timeline`` adds the spans); ``--trace FILE.json`` writes Chrome / Perfetto trace events.
"""

from __future__ import annotations

import argparse

from dse.core.errors import InputError

#: the options of a per-rank run (their argparse destinations)
RANK_OPTIONS = ("system", "comm_groups", "remote_memory", "peak_tflops", "mem_bw", "trace")


def add_rank_options(p: argparse.ArgumentParser) -> None:
    """The per-rank options of `dse iterate`."""
    p.add_argument(
        "--system",
        default=None,
        metavar="SYS.json",
        help="an ASTRA-sim 2.x system configuration: sets the scheduler, queue, chunks, endpoint delay, roofline",
    )
    p.add_argument(
        "--comm-groups",
        default=None,
        metavar="GROUPS.json",
        help='ASTRA-sim\'s communicator-group file ({"<pg_name>": [ranks]}) for collectives with a pg_name',
    )
    p.add_argument(
        "--remote-memory",
        default=None,
        metavar="MEM.json",
        help="ASTRA-sim's remote-memory configuration, for MEM_LOAD/MEM_STORE nodes",
    )
    p.add_argument("--peak-tflops", default=None, help="roofline without --system: peak compute in TFLOP/s")
    p.add_argument("--mem-bw", default=None, help="roofline without --system: memory bandwidth, GB/s (10^9 B/s)")
    p.add_argument(
        "--trace", default=None, metavar="FILE.json", help="per-rank runs: write Chrome / Perfetto trace events"
    )


def wants_ranks(args: argparse.Namespace) -> bool:
    """Whether `dse iterate` runs this trace per rank (module docstring)."""
    if any(getattr(args, k, None) is not None for k in RANK_OPTIONS):
        return True
    from dse.training.chakra.read import is_trace_path

    if not is_trace_path(args.workload):
        return False
    from dse.training.chakra.rankset import is_rank_set

    return is_rank_set(args.workload)


def cmd_iterate_ranks(args: argparse.Namespace) -> int:
    """Run `iterate_ranks` and print the summary and the classes, or one JSON object."""
    import json

    from dse.training.chakra.ranks_run import iterate_ranks

    if args.placement is not None:
        raise InputError("--placement", "given with a per-rank trace, whose nodes name their groups", "--comm-groups")
    if args.iterations not in (None, "1", 1):
        raise InputError("--iterations", "given with a per-rank trace", "1 (a per-rank trace is one iteration)")
    if args.scheduler == "ideal":
        raise InputError("--scheduler", "ideal is not run per rank", "a scheduler name")
    outputs = [a for a in (args.trace, args.plot) if a is not None]
    if outputs:
        from dse.output.plots import figure_path

        if args.plot is not None:
            figure_path(args.plot, "plot")
        if args.trace is not None:
            from dse.output.perfetto import check_trace_path

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


def _write_outputs(args: argparse.Namespace, d: dict) -> None:
    """The --trace file and the --plot figure of a per-rank result `d` (its JSON form, with spans)."""
    import sys

    from dse.core.topology import parse_topology

    topo = parse_topology(args.topology)
    if args.trace is not None:
        from dse.output.perfetto import write_trace

        write_trace(d, args.trace, topology=topo)
    if args.plot is not None:
        from dse.output.ranks_timeline import draw_ranks_timeline, ranks_plot_data

        data = ranks_plot_data(d, "--plot", topology=topo)
        for note in data.notes:
            print(f"note: {note}", file=sys.stderr if args.json else sys.stdout)
        draw_ranks_timeline(data, args.plot)


def _summary(res) -> str:  # noqa: ANN001 - a RanksResult
    from dse.core.units import format_time
    from dse.output.report import format_table, schedule_cell

    rows = [
        ("workload", res.workload),
        ("topology", f"{res.topology} ({res.npus} NPUs)"),
        ("scheduler / queue", schedule_cell(res.scheduler, res.queue, res.cost_model, f", {res.chunks} chunks")),
        ("iteration time (latest rank)", format_time(res.time_ns)),
        ("classes of alike ranks", len(res.classes)),
        ("collectives / messages", f"{res.collectives:,} / {res.messages:,}"),
    ]
    return format_table(("quantity", "value"), rows, align="ll")


def _classes(res) -> str:  # noqa: ANN001 - a RanksResult
    from dse.core.units import format_time
    from dse.output.perfetto import rank_ranges
    from dse.output.report import format_table

    def runs(ranks: tuple[int, ...]) -> str:  # every run of consecutive ranks, none left out
        return rank_ranges(ranks, most=len(ranks))

    body = [
        (c.index, runs(c.ranks), format_time(c.finish_ns), format_time(c.compute_ns), format_time(c.exposed_ns))
        for c in res.classes
    ]
    return format_table(("class", "ranks", "finish", "compute", "exposed comm."), body, align="rlrrr")
