"""The NCCL commands: `dse calibrate nccl-tests`, `dse calibrate defaults` and `dse nccl-tests`
(docs/nccl.md, docs/model.md §15).

`dse calibrate nccl-tests LOG... -t TOPOLOGY -o FILE` fits the `nccl` model to nccl-tests output files
and writes a calibration (`dse.costs.nccl.calibration`); `dse calibrate defaults -t TOPOLOGY -o FILE`
writes one with NCCL's own parameters for the machine its flags describe; `dse nccl-tests TOPOLOGY`
prints the table nccl-tests would print on that design under the model, with a calibration or
NCCL's defaults.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dse.costs.nccl.calibration import Calibration
    from dse.costs.nccl.fit import RowError

#: The bundled machines (`dse.costs.nccl.calibration.BUNDLED`), for --help without importing the model.
BUNDLED_HELP = "HGX-H100, H800-node, DGX-A100-HDRx3"
#: Skipped rows `dse calibrate nccl-tests` names one by one; more are counted.
SKIPS_SHOWN = 10


def add_nccl_parser(sub: argparse._SubParsersAction) -> None:
    """Register the NCCL commands on `sub`: `calibrate` (kinds `nccl-tests`, `defaults`) and `nccl-tests`."""
    _add_calibrate_parser(sub)
    n = sub.add_parser(
        "nccl-tests",
        help="what nccl-tests would print on a design under the nccl cost model",
        description="The table nccl-tests prints (size, count, time, algbw, busbw), predicted by the nccl cost "
        "model, with the algorithm and protocol NCCL would pick for each size.",
    )
    n.add_argument("topology_pos", nargs="?", metavar="TOPOLOGY", help="preset name or notation")
    n.add_argument("-t", "--topology", help="same as TOPOLOGY (default: the calibration's own)")
    n.add_argument(
        "--calibration",
        default=None,
        metavar="NAME|FILE",
        help=f"a bundled machine ({BUNDLED_HELP}) or a file written by dse calibrate nccl-tests "
        "(default: NCCL's own parameters, with the machine flags below)",
    )
    n.add_argument("--collective", default="all_reduce", help="all_reduce (default), reduce_scatter, all_gather, "
                   "alltoall, broadcast, reduce; or nccl-tests' names (all_reduce_perf, ...)")  # fmt: skip
    n.add_argument("-b", "--minbytes", default="8", help="smallest size (default 8; 1K, 1M, 1G are 2^10.. as in "
                   "nccl-tests; 1KB, 1MiB as in dse)")  # fmt: skip
    n.add_argument("-e", "--maxbytes", default="16G", help="largest size (default 16G = 16 GiB)")
    n.add_argument("-f", "--stepfactor", default=None, help="multiply the size by this whole factor (default 2)")
    n.add_argument("-i", "--stepbytes", default=None, help="add this many bytes per row instead of -f")
    n.add_argument(
        "--algo",
        default=None,
        help="force an algorithm like NCCL_ALGO: ring, tree, nvls, nvls_tree; "
        "a list (ring,tree) or an exclusion (^nvls): NCCL's pick among those",
    )
    n.add_argument(
        "--proto",
        default=None,
        help="force a protocol like NCCL_PROTO: LL, LL128, Simple; a list or an exclusion (^LL128)",
    )
    n.add_argument("--max-channels", default=None, metavar="N", help="at most N channels for rings and trees, like "
                   "NCCL_MAX_NCHANNELS (1-64; default: NCCL's own count)")  # fmt: skip
    n.add_argument("--csv", default=None, metavar="FILE", help="also write the rows to FILE, unrounded")
    _add_machine_flags(n)
    n.set_defaults(func=cmd_nccl_tests)


def _add_calibrate_parser(sub: argparse._SubParsersAction) -> None:
    """Register `dse calibrate` with its kinds `nccl-tests` (fit logs) and `defaults` (no logs)."""
    p = sub.add_parser("calibrate", help="fit the nccl cost model to nccl-tests logs (or describe a machine): "
                       "a calibration file")  # fmt: skip
    kinds = p.add_subparsers(dest="calibrate_kind", metavar="KIND", parser_class=type(p), required=True)
    fit = ("Fit the nccl cost model's per-tier latencies and efficiencies to nccl-tests output files (out-of-place "
           "times; every test of every file) and write the calibration TOML that --calibration reads.")  # fmt: skip
    c = kinds.add_parser("nccl-tests", description=fit, help="nccl-tests output files (all_reduce_perf and the "
                         "others, as printed) -> a calibration file")  # fmt: skip
    c.add_argument(
        "logs", nargs="+", metavar="LOG", help="nccl-tests output files, as printed (or the JSON its -J option writes)"
    )
    _add_machine_and_out(c, "the measured system as a dse topology (preset or notation)")
    c.add_argument("--collective", default=None, help="the test of logs that do not name it (nccl-tests before 2.13, "
                   "a pasted table; one whose busbw is above 1.3 x its algbw is read as all_reduce): all_reduce, "
                   "reduce_scatter, all_gather, alltoall, broadcast, reduce")  # fmt: skip
    c.add_argument("--settings", default=None, metavar="NCCL_X=V,...", help="how runs whose log does not say were "
                   "made: NCCL_ALGO, NCCL_PROTO, NCCL_MAX_NCHANNELS (default: NCCL's choice)")  # fmt: skip
    c.add_argument("--held-out", action="store_true", help="also fit each half of the sizes (alternate rows) and "
                   "print the error on the other half: what the calibration predicts, not fits")  # fmt: skip
    c.set_defaults(func=cmd_calibrate_nccl_tests)
    d = kinds.add_parser(
        "defaults",
        help="no logs: NCCL's own parameters for the machine the flags describe -> a calibration file",
        description="Write a calibration file holding NCCL's own parameters (nothing fitted) for the machine that "
        "-t and the machine flags describe, so that --calibration FILE models that machine (another GPU "
        "generation, NVLS off, EFA, nodes of one GPU) wherever a cost model is taken.",
    )
    _add_machine_and_out(d, "the machine as a dse topology (preset or notation)")
    d.set_defaults(func=cmd_calibrate_defaults)


def _add_machine_and_out(p: argparse.ArgumentParser, topology_help: str) -> None:
    """A calibrate kind's -t (the machine, as `topology_help` says), -o and machine flags."""
    p.add_argument("-t", "--topology", required=True, help=topology_help)
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="the calibration file to write (TOML)")
    _add_machine_flags(p)


def _add_machine_flags(p: argparse.ArgumentParser) -> None:
    """The `system_of` fields a topology does not carry. Not given, they stay None
    (`dse.cli.nccl_tests.machine_flags` fills in dse's defaults), so that `dse nccl-tests` can tell
    them apart from a calibration's."""
    p.add_argument("--generation", default=None, help="volta, ampere, hopper (default), blackwell")
    p.add_argument("--no-nvls", dest="nvls", action="store_const", const=False, default=None,
                   help="NVLS off, as NCCL_NVLS_ENABLE=0 (default: on where the GPUs have it)")  # fmt: skip
    p.add_argument("--network", default=None, help="ib (default), roce, efa, tcp")
    p.add_argument("--cpu", default=None, help="intel, amd, arm, other (default)")
    p.add_argument("--nvlink-links", default=None, help="NVLinks per GPU (default: the topology's links=)")
    p.add_argument("--nics-per-node", default=None, help="NICs per node (default: the network dimension's links=)")
    p.add_argument("--single-gpu-nodes", action="store_const", const=True, default=None,
                   help="nodes of one GPU: every dimension of the topology is the network between them")  # fmt: skip
    p.add_argument("--nccl-version", default=None, metavar="X.Y.Z",
                   help="the NCCL release whose tuner values apply, as logs print it (default: 2.30.7)")  # fmt: skip


# --------------------------------------------------------------------------- dse calibrate nccl-tests
def cmd_calibrate_nccl_tests(args: argparse.Namespace) -> int:
    """Fit, write the file, print the rows fitted, the error per collective and the settings its runs
    were made with, and the file. Nothing is written unless the whole fit succeeds."""
    from dse.cli.nccl_tests import collective_of, gpu_topology, machine_flags
    from dse.core.files import check_output_file
    from dse.costs.nccl.calibration import calibrate_details, write_calibration
    from dse.costs.nccl.env import parse_settings
    from dse.costs.nccl.fit import geomean_error
    from dse.costs.nccl.tables import release_name
    from dse.output.report import format_table

    check_output_file(args.out, "--out")
    topology = gpu_topology(args.topology, bool(args.single_gpu_nodes))
    collective = None if args.collective is None else collective_of(args.collective)
    settings = None if args.settings is None else parse_settings(args.settings, "--settings")
    machine = machine_flags(args, fill=True)
    if args.nccl_version is None:  # the release the logs print (calibrate_details)
        del machine["nccl_version"]
    calib, errs, skipped, held = calibrate_details(
        args.logs, topology, collective=collective, settings=settings, held_out=args.held_out, **machine
    )
    write_calibration(args.out, calib)
    groups, held_groups = _by_run(errs), _by_run(held or [])
    head = ("collective", "run_with", "rows", "gm_error_pct") + (("held_out_gm_pct",) if held is not None else ())
    rows = [
        (c, run, len(v), f"{100 * geomean_error(v):.2f}")
        + ((f"{100 * geomean_error(held_groups[c, run]):.2f}" if held_groups.get((c, run)) else "-",) if held else ())
        for (c, run), v in sorted(groups.items())
    ]
    logs = f"{len(calib.logs)} log" + ("s" if len(calib.logs) != 1 else "")
    release = release_name(calib.nccl_version) + ("" if calib.nccl_version else " (the newest restated)")
    where = f"{calib.topology}, {calib.generation}, NCCL {release}"
    print(f"fitted {calib.rows} rows of {logs} ({len(skipped)} skipped) on {where}")
    print(format_table(head, rows))
    if held is not None:
        gm = 100 * geomean_error(e.error for e in held)
        print(
            f"held out: {gm:.2f} % geometric-mean error over {len(held)} rows, "
            "each predicted by a fit on the other half of the sizes"
        )
    if agree := _logged_agreement(calib, errs):
        print(agree)
    for line in skipped[:SKIPS_SHOWN]:
        print(f"skipped {line}")
    if len(skipped) > SKIPS_SHOWN:
        print(f"skipped {len(skipped) - SKIPS_SHOWN} more rows")
    print(f"wrote {args.out}")
    return 0


def _by_run(errs: list[RowError]) -> dict[tuple[str, str], list[float]]:
    """Row errors by (collective, how its rows were timed: NCCL's pick as its log recorded it, the
    forced settings, or NCCL's choice as the model makes it)."""
    from dse.costs.nccl.env import NcclEnv

    groups: dict[tuple[str, str], list[float]] = {}
    for e in errs:
        s = e.sample
        forced = NcclEnv(None if s.logged else s.algo, None if s.logged else s.proto, s.max_channels).suffix()
        how = ("NCCL's logged pick" + forced) if s.logged else (forced.lstrip(",") or "NCCL's choice")
        groups.setdefault((s.collective, how), []).append(e.error)
    return groups


def _logged_agreement(calib: Calibration, errs: list[RowError]) -> str:
    """How often the model's own pick (NCCL's tuner as dse models it) is the one the logs recorded
    NCCL making; empty when no log records NCCL's picks."""
    from dse.costs.nccl.model import predict_time

    logged = [e.sample for e in errs if e.sample.logged]
    if not logged:
        return ""
    system = calib.fitted_system()
    same = sum(predict_time(system, s.collective, s.size_bytes)[2:] == (s.algo, s.proto) for s in logged)
    return (
        f"NCCL's pick, from its log: the model picks the same algorithm and protocol for {same} of "
        f"{len(logged)} rows; every logged row is timed with NCCL's own"
    )


def cmd_calibrate_defaults(args: argparse.Namespace) -> int:
    """Write a calibration with NCCL's own parameters for the machine described (`default_calibration`)
    and say what machine it is. A bad flag or topology: one `InputError`, nothing written."""
    from dse.cli.nccl_tests import gpu_topology, machine_flags
    from dse.core.files import check_output_file
    from dse.costs.nccl.calibration import default_calibration, write_calibration
    from dse.costs.nccl.tables import release_name

    check_output_file(args.out, "--out")
    topology = gpu_topology(args.topology, bool(args.single_gpu_nodes))
    calib = default_calibration(topology, **machine_flags(args, fill=True))
    write_calibration(args.out, calib, command="dse calibrate defaults")
    system = calib.system(topology)
    nodes = f"{system.nodes} node{'s' if system.nodes > 1 else ''}"
    nvls = "NVLS on" if calib.nvls else "NVLS off"
    release = release_name(calib.nccl_version)
    print(f"NCCL's own parameters (nothing fitted) for {calib.topology}: {system.ranks} GPUs ({system.gpus_per_node} "
          f"a node x {nodes}), {calib.generation}, {nvls}, {calib.network} network, NCCL {release}")  # fmt: skip
    print(f"wrote {args.out}")
    return 0


# --------------------------------------------------------------------------- dse nccl-tests
def cmd_nccl_tests(args: argparse.Namespace) -> int:
    """Print the table nccl-tests would print on the design under the `nccl` model (one row per size
    from -b to -e, NCCL's algorithm and protocol for each) and its average bus bandwidth; --csv FILE
    also writes the rows, unrounded."""
    from dse.cli.nccl_tests import predicted_rows, rows_table, write_rows_csv
    from dse.core.files import check_output_file

    if args.csv is not None:
        check_output_file(args.csv, "--csv")
    header, rows = predicted_rows(args)
    print(header)
    print(rows_table(rows))
    print(f"# Avg bus bandwidth    : {sum(r[7] for r in rows) / len(rows):.4g} GB/s")
    if args.csv is not None:
        write_rows_csv(args.csv, rows)
        print(f"# wrote {args.csv}")
    return 0
