"""`dse validate nccl`: the `nccl` model against public nccl-tests measurements, held out from its calibration."""

from __future__ import annotations

import argparse
import json


def add_validate_parser(sub: argparse._SubParsersAction) -> None:
    """Register `dse validate` and its model `nccl` on `sub`."""
    p = sub.add_parser("validate", help="the nccl model's error on public measurements it was not calibrated on")
    vsub = p.add_subparsers(dest="validate_command", metavar="MODEL", required=True, parser_class=type(p))
    q = vsub.add_parser(
        "nccl",
        help="calibrate on part of each measured machine's nccl-tests data and print the error on the rest",
    )
    q.add_argument("--markdown", action="store_true", help="print the tables as markdown (as the README shows them)")
    view = q.add_mutually_exclusive_group()
    view.add_argument(
        "--json", action="store_true",
        help="print one JSON object: every case with its held-out points, every machine, ASTRA-sim's points",
    )  # fmt: skip
    view.add_argument("--machines", action="store_true", help="print only each machine's error and the summary")
    view.add_argument(
        "--rows", action="store_true",
        help="print every held-out measurement: its file line, size, measured and predicted time, error, algorithm",
    )  # fmt: skip
    q.set_defaults(func=cmd_validate_nccl)


def cmd_validate_nccl(args: argparse.Namespace) -> int:
    """Print the validation table (`dse.costs.nccl.validation.validation_table`), its last line the summary."""
    from dataclasses import asdict  # here, not at the top: it loads inspect, which `dse --help` does not need

    from dse.costs.nccl.validation import validation_table
    from dse.output.nccl_report import machine_errors, machines_text, rows_text, validation_text

    table = validation_table()
    if args.json:
        out = {
            "cases": [asdict(c) for c in table.cases],
            "machines": [asdict(m) for m in machine_errors(table)],
            "astra_sim": [asdict(p) for p in table.astra_sim],
            "astra_sim_gm": {str(k): v for k, v in table.astra_sim_gm.items()},
            "measurements": table.measurements,
            "machine_count": table.machines,
            "gm": table.gm,
            "summary": table.summary_line(),
        }
        print(json.dumps(out))
    elif args.machines:
        print(machines_text(table, markdown=args.markdown))
    elif args.rows:
        print(rows_text(table, markdown=args.markdown))
    else:
        print(validation_text(table, markdown=args.markdown))
    return 0
