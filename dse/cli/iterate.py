"""`dse iterate WORKLOAD --topology T`: training iterations with overlapping collectives (dse.training.iteration)."""

from __future__ import annotations

import argparse

from dse.cli.iterate_ranks import add_rank_options
from dse.cli.parser import add_calibration, cost_model_arg
from dse.core.errors import InputError


def add_iterate_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `iterate` subcommand on `sub` (with the per-rank options of `add_rank_options`)."""
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
    """Run `dse.iterate` on the workload and print a summary table (and with --collectives every
    collective) or one JSON object; --plot FILE also draws each resource's nodes. A per-rank trace
    runs per rank (`dse.cli.ranks_run.iterate_per_rank`). `InputError` propagates (exit 2)."""
    from dse.cli.iterate_report import print_iteration
    from dse.cli.ranks_run import iterate_per_rank, wants_ranks
    from dse.output.iteration_timeline import iteration_plot_data
    from dse.output.plots import figure_path
    from dse.output.timeline_plot import draw_timelines
    from dse.training.iteration import iterate
    from dse.training.placement_read import load_placement, with_placement
    from dse.training.workload_load import load_workload
    from dse.training.workloads import Workload

    if not args.topology:
        raise InputError("topology", "missing", "a preset name or a notation")
    if args.timeline and not args.json:
        raise InputError(
            "--timeline", "given without --json", "--json --timeline, or --plot FILE.png to draw the nodes"
        )
    if args.plot is not None:
        figure_path(args.plot, "plot")  # refused before any work
    if wants_ranks(args):
        return iterate_per_rank(args)
    if args.trace is not None:
        raise InputError("--trace", "given for a single-rank run", "a per-rank trace (PREFIX.<rank>.et for every rank)")
    workload = args.workload
    if args.placement is not None:
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
        draw_timelines([iteration_plot_data(res.as_dict())], args.plot)
    print_iteration(res, args)
    return 0
