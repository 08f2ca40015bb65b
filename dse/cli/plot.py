"""`dse plot sweep|timeline`: figures of a sweep CSV, or of one evaluation's or iteration's timeline
(dse.output.plots, dse.output.timeline_plot; per-rank iterations: dse.output.ranks_timeline)."""

from __future__ import annotations

import argparse


def add_plot_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `plot` subcommand and its kinds on a subparsers object (dse.cli.main hooks it)."""
    p = sub.add_parser(
        "plot", help="figures: a sweep CSV (dse plot sweep) or one evaluation's phases (dse plot timeline)"
    )
    psub = p.add_subparsers(dest="plot_kind", metavar="KIND", parser_class=type(p), required=True)
    q = psub.add_parser("sweep", help="a sweep CSV: y against x, one line per hue, one panel per facet")
    q.add_argument("csv", metavar="RESULTS.csv")
    q.add_argument("--x", required=True, help="a column, e.g. chunks or size_bytes")
    q.add_argument("--y", required=True, help="a numeric column, e.g. bw_utilization or time_ns")
    q.add_argument("--hue", default=None, help="column(s) naming the lines, e.g. scheduler or scheduler,queue")
    q.add_argument("--facet", default=None, help="column(s) naming the panels, e.g. topology")
    q.add_argument("--logx", action="store_true", help="logarithmic x axis")
    q.add_argument(
        "--mean",
        action="store_true",
        help="average rows that differ only in columns the plot does "
        "not show (without it such rows are refused, naming the columns)",
    )
    q.add_argument("--out", required=True, help="the figure: .png or .svg")
    q.set_defaults(func=cmd_plot_sweep)
    q = psub.add_parser(
        "timeline",
        help="the per-dimension phases of one evaluation (dse evaluate --json --timeline), "
        "each resource's nodes of an iteration (dse iterate --json --timeline), or, for per-rank "
        "traces, each rank class's lanes",
    )
    q.add_argument(
        "result", metavar="RESULT.json", help="the output of dse evaluate or dse iterate ... --json --timeline"
    )
    q.add_argument("--out", required=True, help="the figure: .png or .svg")
    q.set_defaults(func=cmd_plot_timeline)


def cmd_plot_sweep(args: argparse.Namespace) -> int:
    """Draw a sweep CSV; say how many rows each point averages, if any."""
    from dse.output.plots import plot_sweep_file

    data = plot_sweep_file(
        args.csv, args.out, x=args.x, y=args.y, hue=args.hue, facet=args.facet, logx=args.logx, mean=args.mean
    )
    if data.averaged:
        most = max(n for lines in data.panels.values() for line in lines for n in line.n)
        print(f"note: each point averages the rows that differ in {', '.join(data.averaged)} (up to {most} rows)")
    print(args.out)
    return 0


def cmd_plot_timeline(args: argparse.Namespace) -> int:
    """Draw the timeline of a `dse evaluate` or `dse iterate` JSON result: a per-rank one (spans of
    rank classes) as a panel per class, saying what the figure leaves out; any other as before."""
    from dse.output.ranks_timeline import plot_ranks_result
    from dse.output.timeline_plot import plot_timeline_result, read_result

    d = read_result(args.result, args.out)  # read once, drawn one way or the other
    data = plot_ranks_result(d, args.result, args.out)
    if data is None:
        plot_timeline_result(d, args.result, args.out)
    else:
        for note in data.notes:
            print(f"note: {note}")
    print(args.out)
    return 0
