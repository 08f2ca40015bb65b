"""`dse reproduce themis`: the Themis paper's experiments in one command (see dse.output.reproduce)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dse.core.errors import InputError


def add_reproduce_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `reproduce` subcommand on `sub`."""
    p = sub.add_parser("reproduce", help="reproduce a paper's experiments (themis)")
    p.add_argument("paper", help="which paper: themis")
    p.add_argument("--out", default=None, help="output folder (default studies/out/reproduce-themis-MODEL)")
    p.add_argument(
        "--cost-model", default="paper", help="paper (default), astra-sim-1 (runs NAME@artifact) or astra-sim"
    )
    p.add_argument("--jobs", default="1", help="worker processes (default 1; -1 for every core)")
    p.add_argument("--quick", action="store_true", help="a reduced grid (2 topologies, 3 sizes, 3 chunk counts)")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="labelled progress bars on stderr (default: when stderr is a terminal)",
    )
    p.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Run (or resume) the Themis paper's experiments into --out and print the summary's head, each
    experiment's points and the folder; a paper other than themis is an `InputError`."""
    from dse.core.units import parse_int
    from dse.costs import get_cost_model
    from dse.output.reproduce import reproduce_themis

    if args.paper.strip().lower() != "themis":
        raise InputError("paper", f"unknown paper {args.paper!r}", "themis")
    model = get_cost_model(args.cost_model).name
    jobs = -1 if str(args.jobs).strip() == "-1" else parse_int(args.jobs, "--jobs", minimum=1)
    default = f"studies/out/reproduce-themis-{model}{'-quick' if args.quick else ''}"
    out = default if args.out is None else args.out  # "" is refused as an empty path, not read as "."
    res = reproduce_themis(out, cost_model=model, jobs=jobs, quick=args.quick, progress=args.progress)
    folder = Path(res["out"])
    print((folder / "summary.md").read_text().split("## Per topology")[0].rstrip())
    print()
    for name, c in res["counts"].items():
        print(f"{name}: {c['points']} points, {c['done_before']} already done, {c['evaluated']} evaluated now")
    print(f"Everything is in {folder}/")
    return 0
