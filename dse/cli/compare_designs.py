"""`dse compare-designs WORKLOAD T1 T2 ...`: one training workload on several network designs, side by
side (dse.output.compare_designs): iteration time, exposed communication, BW utilisation, cost, speed-up."""

from __future__ import annotations

import argparse
import json

from dse.cli.parser import add_calibration, cost_model_arg


def add_compare_designs_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `compare-designs` subcommand on `sub`."""
    p = sub.add_parser(
        "compare-designs",
        help="one training workload on several networks: iteration time, exposed communication, "
        "cost and speed-up against the first, as a table, JSON or a bar chart",
    )
    p.add_argument(
        "workload",
        help="any workload dse iterate takes: a bundled name (dse workload list), a file, a trace or a generator",
    )
    p.add_argument(
        "designs",
        nargs="+",
        metavar="TOPOLOGY",
        help="the designs: preset names, notations or network files; the first is the reference of the speed-up",
    )
    p.add_argument(
        "--placement", default=None, metavar="FILE", help="where each slot's collectives run, as for dse iterate"
    )
    p.add_argument("--scheduler", default="themis", help="one of {schedulers}, or ideal (default themis)")
    p.add_argument("--queue", default="scf", help="one of {queues} (default scf)")
    p.add_argument("--cost-model", default="paper", help="one of {cost_models} (default paper)")
    add_calibration(p)
    p.add_argument("--chunks", default="64", help="chunks per collective (default 64)")
    p.add_argument(
        "--cost",
        default=None,
        metavar="PRICES.toml",
        help="price each network with a [cost] table ($ per GB/s per NPU per dimension tier: link, "
        "switch_port, nic; $ per link: link_fixed), as a study file has",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument(
        "--plot", default=None, metavar="FILE", help="also draw a bar chart (.png or .svg): each design's "
        "iteration split into compute and exposed communication, and its cost when priced",
    )  # fmt: skip
    p.set_defaults(func=cmd_compare_designs)


def cmd_compare_designs(args: argparse.Namespace) -> int:
    """Check every input, run the workload on each design, print the table or JSON, draw the plot."""
    from dse.output.compare_designs import (
        check_designs,
        compare_designs,
        comparison_json,
        comparison_table,
        draw_comparison,
    )
    from dse.output.plots import figure_path

    if args.plot is not None:
        figure_path(args.plot, "--plot")  # refused before any work
    how = {"scheduler": args.scheduler, "queue": args.queue, "cost_model": cost_model_arg(args), "chunks": args.chunks}
    checked = check_designs(args.workload, args.designs, placement=args.placement, cost=args.cost, **how)
    cmp = compare_designs(checked, placement=args.placement, **how)
    if args.plot is not None:
        draw_comparison(cmp, args.plot)
    if args.json:
        print(json.dumps(comparison_json(cmp)))
        return 0
    for note in cmp.notes:
        print(f"note: {note}")
    print(comparison_table(cmp))
    if args.plot is not None:
        print(args.plot)
    return 0
