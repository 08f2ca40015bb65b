"""`dse libra-compare`: LIBRA's bandwidth allocation against dse's, both simulated by dse."""

from __future__ import annotations

import argparse
import json


def add_libra_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `libra-compare` subcommand on `sub`."""
    p = sub.add_parser(
        "libra-compare", help="LIBRA's per-dimension bandwidths for a training workload against a dse study's"
    )
    p.add_argument("--network", default="4d", help="LIBRA's 4d (Ring_FC_Ring_SW, 4,096 NPUs) or 3d network")
    p.add_argument("--workloads", nargs="+", default=None, help="GPT_3 MSFT_1T Turing_NLG (default) ResNet_50")
    p.add_argument(
        "--constraints",
        nargs="+",
        default=None,
        help="LIBRA's constraint sets: total_bw_500gbps multiple_constraints total_bw_1000gbps (default: all)",
    )
    p.add_argument("--trials", default="300", help="trials of each dse study (default 300)")
    p.add_argument("--seed", default="0", help="the studies' seed (default 0)")
    p.add_argument("--cost-model", default="paper", help="dse's cost model for the simulations (default paper)")
    p.add_argument("--out", default="out/libra", help="the studies' journals (a rerun resumes them; default out/libra)")
    p.add_argument("--libra", default=None, metavar="DIR", help="read LIBRA's own input files from DIR (its inputs/)")
    p.add_argument("--json", action="store_true", help="print one JSON list instead of a table")
    p.set_defaults(func=cmd_libra_compare)


def cmd_libra_compare(args: argparse.Namespace) -> int:
    """Run a dse study per LIBRA case (network, workload, constraint set) into --out, resuming it, and
    print LIBRA's bandwidths against the study's as a markdown table, or one JSON list."""
    from dse.core.files import output_folder
    from dse.core.units import parse_int
    from dse.costs import get_cost_model
    from dse.explore.libra.bw_constraints import LIBRA_CONSTRAINTS
    from dse.explore.libra.compare import DEFAULT_WORKLOADS, compare, load_cases
    from dse.output.libra_table import libra_markdown, libra_rows

    get_cost_model(args.cost_model)  # refused before any study is written
    trials = parse_int(args.trials, "--trials", minimum=1)
    seed = parse_int(args.seed, "--seed", minimum=0)
    cases = load_cases(
        str(args.network).lower(),
        tuple(args.workloads or DEFAULT_WORKLOADS),
        tuple(args.constraints or LIBRA_CONSTRAINTS),
        args.libra,
    )
    with output_folder(args.out, "--out") as out:  # created now, removed if no study could be written in it
        results = [compare(c, trials=trials, seed=seed, out=out, cost_model=args.cost_model) for c in cases]
    rows = libra_rows(results)
    print(json.dumps(rows) if args.json else libra_markdown(rows))
    return 0
