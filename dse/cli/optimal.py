"""`dse optimal`: the best schedule of one collective, its proven lower bound, and how it compares."""

from __future__ import annotations

import argparse
import json

from dse.cli.parser import add_collective_options, add_topology, required_topology


def add_optimal_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `optimal` subcommand on `sub` (the collective's flags, 16 chunks by default)."""
    p = sub.add_parser("optimal", help="the optimal schedule of one collective (CP-SAT), proven against a lower bound")
    add_topology(p)
    add_collective_options(p)
    p.set_defaults(chunks="16")
    p.add_argument(
        "--work",
        default="20",
        help="the solver's budget in CP-SAT deterministic seconds, about seconds of one quiet core "
        "(default 20; a work limit, so the answer is the same on every run)",
    )
    p.add_argument(
        "--time-limit", default=None, help="also stop after this many seconds (then the answer may depend on load)"
    )
    p.add_argument(
        "--plot", default=None, metavar="FILE", help="draw the optimal and Themis timelines to FILE (.png/.svg)"
    )
    p.set_defaults(func=cmd_optimal)


def cmd_optimal(args: argparse.Namespace) -> int:
    """Solve one collective's optimal schedule with CP-SAT within --work (and --time-limit) and print
    it against its lower bound and Themis, or one JSON object; --plot FILE also draws the optimal and
    Themis timelines, the file checked before the solve."""
    from dse.bounds.optimal import MAX_SEED, optimal_for
    from dse.cli.optimal_report import optimal_text, plot_optimal_and_themis
    from dse.cli.spec import spec_args
    from dse.core.topology import parse_topology
    from dse.core.units import parse_int, parse_positive
    from dse.output.plots import figure_path
    from dse.sim.spec import CollectiveSpec

    topo = parse_topology(required_topology(args))
    spec = CollectiveSpec.parse(topo, **spec_args(args))
    if args.plot:  # a bad output place is refused before the solve, not after it
        figure_path(args.plot, "plot")
    best = optimal_for(
        spec,
        work=parse_positive(args.work, "work"),
        time_limit=None if args.time_limit is None else parse_positive(args.time_limit, "time_limit"),
        seed=parse_int(args.seed, "seed", minimum=0, maximum=MAX_SEED),
    )
    if args.plot:
        plot_optimal_and_themis(spec, best, args.plot, float(args.work))
    if args.json:
        print(json.dumps({"topology": best.topology, "notation": topo.notation(), **best.to_dict()}))
    else:
        print(optimal_text(best, topo.npus))
    return 0
