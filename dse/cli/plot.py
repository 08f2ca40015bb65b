"""`dse plot sweep|timeline`: figures of a sweep CSV, or of one evaluation's or iteration's timeline
(dse.output.plots, dse.output.timeline_plot; per-rank iterations: dse.output.ranks_timeline)."""

from __future__ import annotations

import argparse


def add_plot_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `plot` subcommand and its kinds (sweep, timeline) on `sub`."""
    p = sub.add_parser(
        "plot", help="figures: a sweep CSV (dse plot sweep) or one evaluation's phases (dse plot timeline)"
    )
    psub = p.add_subparsers(dest="plot_kind", metavar="KIND", parser_class=type(p), required=True)
    q = psub.add_parser(
        "sweep",
        help="a sweep CSV: lines over a numeric x, bars over categories, a scatter of every row or "
        "the distribution of y (--kind); axes in ms, %%, GB/s, $",
        description="Every axis is labelled with its quantity and unit: times in the largest of s, ms, "
        "µs, ns that the axis reaches, utilisation and gaps in % (the 0-1 bw_utilization and gap of "
        "older CSVs too), bandwidths in GB/s, cost in $, sizes in B, KB, MB, GB (KiB, MiB, GiB when "
        "every size is a multiple of 1024). A line or bar plot refuses rows that land on one point but "
        "differ in a parameter it does not show, naming them (columns that follow from others, such as "
        "topology from design and the bandwidths, are not named); a bar plot refuses more than 50 categories.",
    )
    q.add_argument("csv", metavar="RESULTS.csv")
    q.add_argument(
        "--x", default=None, help="a column, e.g. chunks, size_bytes, design, bw0_GBps, total_bw_GBps (not with cdf)"
    )
    q.add_argument("--y", required=True, help="a numeric column, e.g. bw_utilization_pct, time_ns, iteration_time_ns")
    q.add_argument(
        "--kind",
        default=None,
        choices=("line", "bar", "scatter", "cdf"),
        help="line (y over a numeric x), bar (y per category of x, grouped by hue), scatter (every row, "
        "y against a numeric x; a numeric hue with many values is a colour scale), cdf (the distribution "
        "of y, one curve per hue; no --x). Default: line for a numeric x, else bar",
    )
    q.add_argument("--hue", default=None, help="column(s) naming the series, e.g. scheduler or scheduler,queue")
    q.add_argument("--facet", default=None, help="column(s) naming the panels, e.g. design")
    q.add_argument("--logx", action="store_true", help="logarithmic x axis (base 2)")
    q.add_argument(
        "--mean",
        action="store_true",
        help="line and bar: average rows that differ only in columns the plot does "
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
    """Draw a sweep CSV; say how many rows were left out (no x or y value) and how many each point averages."""
    from dse.output.plots import plot_sweep_file

    data = plot_sweep_file(
        args.csv,
        args.out,
        x=args.x,
        y=args.y,
        hue=args.hue,
        facet=args.facet,
        logx=args.logx,
        mean=args.mean,
        kind=args.kind,
    )
    if data.left_out:
        cells = f"{data.x} or {data.y}" if data.x and data.numeric_x else data.y
        print(f"note: {data.left_out} row(s) with an empty {cells} cell are left out")
    if data.averaged:
        most = max(n for lines in data.panels.values() for line in lines for n in line.n)
        print(f"note: each point averages the rows that differ in {', '.join(data.averaged)} (up to {most} rows)")
    print(args.out)
    return 0


def cmd_plot_timeline(args: argparse.Namespace) -> int:
    """Draw the timeline of a `dse evaluate` or `dse iterate` JSON result: a per-rank one (spans of
    rank classes) as a panel per class, saying what the figure leaves out; any other as its per-dimension
    or per-resource timeline."""
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
