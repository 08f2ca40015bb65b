"""`dse iterate WORKLOAD --topology T`: training iterations with overlapping collectives (dse.training.iteration)."""

from __future__ import annotations

import argparse

from dse.cli.iterate_ranks import add_rank_options, cmd_iterate_ranks, wants_ranks
from dse.cli.parser import add_calibration, cost_model_arg
from dse.core.errors import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers read the name)
if TYPE_CHECKING:
    from dse.training.iteration import IterationResult


def add_iterate_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `iterate` subcommand on a subparsers object (dse.cli.main hooks it)."""
    p = sub.add_parser("iterate", help="training iterations: layers' compute overlapping their collectives")
    p.add_argument(
        "workload",
        help="an ASTRA-sim 1.0 workload file, a .toml workload, a Chakra trace (PREFIX.0.et "
        "or PREFIX), or a generator: resnet152[:batch=32,...], transformer[:layers=24,mp=128,...]",
    )
    p.add_argument("-t", "--topology", required=True, help="preset name or notation")
    p.add_argument(
        "--placement",
        default=None,
        metavar="FILE",
        help="where each slot's collectives run: a .toml file with a [placement] table, or LIBRA's communicator "
        "file (per dimension, the NPUs of it each group spans)",
    )
    p.add_argument("--scheduler", default=None, help="one of {schedulers}, or ideal (default themis)")
    p.add_argument("--queue", default=None, help="one of {queues} (default scf)")
    p.add_argument("--cost-model", default="paper", help="one of {cost_models} (default paper)")
    add_calibration(p)
    p.add_argument(
        "--iterations", default="1", help="training passes, each after the previous one; times are per pass (default 1)"
    )
    p.add_argument(
        "--chunks",
        default=None,
        help=(
            "chunks per collective (default 64); at most one per MiB, except in astra-sim-1, "
            "which always splits in this many"
        ),
    )
    p.add_argument(
        "--collectives", action="store_true", help="also list every collective (table) / include them (JSON)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--timeline", action="store_true", help="with --json: include every node's start and end")
    p.add_argument(
        "--plot", default=None, metavar="FILE", help="also draw each resource's nodes over time (.png or .svg)"
    )
    add_rank_options(p)
    p.set_defaults(func=cmd_iterate)


def cmd_iterate(args: argparse.Namespace) -> int:
    """Run `dse.iterate` and print a table or one JSON object; `InputError` propagates (exit 2)."""
    from dse.training.iteration import iterate

    if not args.topology:
        raise InputError("topology", "missing", "a preset name or a notation")
    if args.timeline and not args.json:
        raise InputError(
            "--timeline", "given without --json", "--json --timeline, or --plot FILE.png to draw the nodes"
        )
    if args.plot is not None:
        from dse.output.plots import figure_path

        figure_path(args.plot, "plot")  # refused before any work
    if wants_ranks(args):
        return cmd_iterate_ranks(args)
    if args.trace is not None:
        raise InputError("--trace", "given for a single-rank run", "a per-rank trace (PREFIX.<rank>.et for every rank)")
    workload = args.workload
    if args.placement is not None:
        from dse.training.placement_read import load_placement, with_placement
        from dse.training.workloads import Workload, load_workload

        wl = load_workload(workload)
        if not isinstance(wl, Workload):
            raise InputError(
                "--placement", "given with a Chakra trace, which names its dimensions itself", "a layer workload"
            )
        workload = with_placement(wl, load_placement(args.placement, "--placement"))
    res = iterate(
        workload,
        args.topology,
        scheduler=args.scheduler or "themis",
        queue=args.queue or "scf",
        cost_model=cost_model_arg(args),
        iterations=args.iterations,
        chunks=args.chunks or 64,
        nodes=args.timeline or args.plot is not None,
    )
    if args.plot is not None:
        from dse.output.iteration_timeline import iteration_plot_data
        from dse.output.timeline_plot import draw_timelines

        draw_timelines([iteration_plot_data(res.as_dict())], args.plot)
    _print_result(res, args)
    return 0


def _print_result(res: IterationResult, args: argparse.Namespace) -> None:
    """One JSON object, or the notes, the summary table, what its BW utilisation is measured
    against (`dse.output.report.utilization_note`) and, on request, the collectives."""
    import json

    from dse.output.report import footnote, utilization_line, utilization_note

    if args.json:
        d = res.as_dict(details=args.collectives)
        if not args.timeline:
            d.pop("nodes", None)
        d["bw_utilization_note"] = utilization_note(res.cost_model, iteration=True)
        print(json.dumps(d))
        return
    for note in res.notes:
        print(f"note: {note}")
    print(_summary_table(res))
    print(footnote(utilization_line(res.cost_model, iteration=True)))
    if args.collectives and res.collectives:
        print()
        print(_collectives_table(res))


def _summary_table(res: IterationResult) -> str:
    """The iteration's quantities, one per row."""
    from dse.core.units import format_time
    from dse.output.report import format_table, schedule_cell

    rows = [
        ("workload", res.workload),
        ("topology", res.topology),
        *([("split for the model-parallel group", res.logical_topology)] if res.logical_topology else []),
        ("scheduler / queue", schedule_cell(res.scheduler, res.queue, res.cost_model)),
        ("iterations", res.iterations),
        ("iteration time", format_time(res.time_ns)),
        ("compute", format_time(res.compute_ns) + (f" (CPU {format_time(res.cpu_ns)})" if res.cpu_ns else "")),
        ("communication in flight", format_time(res.comm_ns)),
        (
            "exposed communication",
            f"{format_time(res.exposed_comm_ns)} ({res.exposed_comm_ns / res.time_ns:.1%})" if res.time_ns else "0",
        ),
        ("BW utilisation (while communicating)", f"{res.bw_utilization:.1%}"),
        ("collectives", len(res.collectives)),
    ]
    return format_table(("quantity", "value"), rows, align="ll")


def _collectives_table(res: IterationResult) -> str:
    """Every collective: pass, layer, slot, what, where, and when it was issued and done."""
    from dse.core.units import format_size, format_time
    from dse.output.report import format_table

    body = [
        (
            c.iteration,
            c.layer,
            c.slot,
            c.collective,
            format_size(c.size_bytes),
            ",".join(map(str, c.dims)),
            c.chunks,
            format_time(c.issue_ns),
            format_time(c.end_ns + c.delay_ns),
        )
        for c in res.collectives
    ]
    return format_table(
        ("it", "layer", "slot", "collective", "size", "dims", "chunks", "issued", "done"), body, align="rllllrrrr"
    )
