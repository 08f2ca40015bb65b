"""The NCCL commands: `dse calibrate nccl-tests` and `dse nccl-tests` (docs/nccl.md, docs/model.md §15).

`dse calibrate nccl-tests LOG... -t TOPOLOGY -o FILE` fits the `nccl` model to nccl-tests output files
and writes a calibration (`dse.costs.nccl.calibration`); `dse nccl-tests TOPOLOGY` prints the table
nccl-tests would print on that design under the model, with a calibration or NCCL's defaults.
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from dse.cli.parser import given_topology

if TYPE_CHECKING:
    from dse.costs.nccl.calibration import Calibration
    from dse.costs.nccl.model import NcclParams, NcclSystem

#: The bundled machines (`dse.costs.nccl.calibration.BUNDLED`), for --help without importing the model.
_BUNDLED_HELP = "HGX-H100, H800-node, DGX-A100-HDRx3"
#: Rows `dse nccl-tests` prints at most (one per size from -b to -e).
MAX_ROWS = 300
#: Bytes of one element: nccl-tests' default type, float.
_FLOAT_BYTES = 4
_COLUMNS = (
    "size_bytes", "count", "type", "redop", "root", "time_us", "algbw_GBps", "busbw_GBps", "algo", "proto",
)  # fmt: skip


def add_nccl_parser(sub: argparse._SubParsersAction) -> None:
    """Register the NCCL commands on `sub`: `calibrate` (with its kind `nccl-tests`) and `nccl-tests`."""
    p = sub.add_parser("calibrate", help="fit the nccl cost model to nccl-tests logs: a calibration file")
    kinds = p.add_subparsers(dest="calibrate_kind", metavar="KIND", parser_class=type(p), required=True)
    c = kinds.add_parser(
        "nccl-tests",
        help="nccl-tests output files (all_reduce_perf and the others, as printed) -> a calibration file",
        description="Fit the nccl cost model's per-tier latencies and efficiencies to nccl-tests output files "
        "(out-of-place times; every test of every file) and write the calibration TOML that --calibration reads.",
    )
    c.add_argument("logs", nargs="+", metavar="LOG", help="nccl-tests output files, as printed")
    c.add_argument("-t", "--topology", required=True, help="the measured system as a dse topology (preset or notation)")
    c.add_argument("-o", "--out", required=True, metavar="FILE", help="the calibration file to write (TOML)")
    _add_machine_flags(c)
    c.set_defaults(func=cmd_calibrate_nccl_tests)

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
        help=f"a bundled machine ({_BUNDLED_HELP}) or a file written by dse calibrate nccl-tests "
        "(default: NCCL's own parameters, with the machine flags below)",
    )
    n.add_argument("--collective", default="all_reduce", help="all_reduce (default), reduce_scatter, all_gather, "
                   "alltoall, broadcast, reduce; or nccl-tests' names (all_reduce_perf, ...)")  # fmt: skip
    n.add_argument("-b", "--minbytes", default="8", help="smallest size (default 8; 1K, 1M, 1G are 2^10.. as in "
                   "nccl-tests; 1KB, 1MiB as in dse)")  # fmt: skip
    n.add_argument("-e", "--maxbytes", default="16G", help="largest size (default 16G = 16 GiB)")
    n.add_argument("-f", "--stepfactor", default=None, help="multiply the size by this whole factor (default 2)")
    n.add_argument("-i", "--stepbytes", default=None, help="add this many bytes per row instead of -f")
    n.add_argument("--algo", default=None, help="force an algorithm like NCCL_ALGO: ring, tree, nvls, nvls_tree")
    n.add_argument("--proto", default=None, help="force a protocol like NCCL_PROTO: LL, LL128, Simple")
    n.add_argument("--csv", default=None, metavar="FILE", help="also write the rows to FILE, unrounded")
    _add_machine_flags(n)
    n.set_defaults(func=cmd_nccl_tests)


def _add_machine_flags(p: argparse.ArgumentParser) -> None:
    """The `system_of` fields a topology does not carry. Not given, they stay None (`_machine` fills
    in dse's defaults), so that `dse nccl-tests` can tell them apart from a calibration's."""
    p.add_argument("--generation", default=None, help="volta, ampere, hopper (default), blackwell")
    p.add_argument("--no-nvls", dest="nvls", action="store_const", const=False, default=None,
                   help="NVLS off, as NCCL_NVLS_ENABLE=0 (default: on where the GPUs have it)")  # fmt: skip
    p.add_argument("--network", default=None, help="ib (default), roce, efa, tcp")
    p.add_argument("--cpu", default=None, help="intel, amd, arm, other (default)")
    p.add_argument("--nvlink-links", default=None, help="NVLinks per GPU (default: the topology's links=)")
    p.add_argument("--nics-per-node", default=None, help="NICs per node (default: the network dimension's links=)")


def _machine(args: argparse.Namespace, *, fill: bool = False) -> dict[str, Any]:
    """The machine flags as `calibrate`'s keywords: None where not given, or with `fill` dse's
    defaults there (`dse.costs.nccl.system.DEFAULT_MACHINE`, `MACHINE_DEFAULTS`)."""
    from dse.core.errors import InputError
    from dse.core.units import parse_int
    from dse.costs.nccl.tables import CPUS, GENERATIONS, NETWORKS

    out = {k: getattr(args, k) for k in ("generation", "nvls", "network", "cpu")}
    for key, allowed in (("generation", GENERATIONS), ("network", NETWORKS), ("cpu", CPUS)):
        if out[key] is not None and out[key] not in allowed:
            raise InputError(f"--{key}", f"unknown {key} {out[key]!r}", ", ".join(allowed))
    for key in ("nvlink_links", "nics_per_node"):
        raw = getattr(args, key)
        out[key] = None if raw is None else parse_int(raw, f"--{key.replace('_', '-')}", minimum=1, maximum=1024)
    if fill:
        from dse.costs.nccl.system import DEFAULT_MACHINE, MACHINE_DEFAULTS

        out = {**MACHINE_DEFAULTS, **DEFAULT_MACHINE, **{k: v for k, v in out.items() if v is not None}}
    return out


# --------------------------------------------------------------------------- dse calibrate nccl-tests
def cmd_calibrate_nccl_tests(args: argparse.Namespace) -> int:
    """Fit, write the file, print the rows fitted, each collective's error and the file. Nothing is
    written unless the whole fit succeeds."""
    from dse.core.files import check_output_file
    from dse.core.topology import parse_topology
    from dse.costs.nccl.calibration import calibrate_details, write_calibration
    from dse.costs.nccl.fit import geomean_error
    from dse.output.report import format_table

    check_output_file(args.out, "--out")
    topology = parse_topology(args.topology)
    calib, errs, skipped = calibrate_details(args.logs, topology, **_machine(args, fill=True))
    write_calibration(args.out, calib)
    by_collective: dict[str, list[float]] = {}
    for e in errs:
        by_collective.setdefault(e.sample.collective, []).append(e.error)
    rows = [(c, len(v), f"{100 * geomean_error(v):.2f}") for c, v in sorted(by_collective.items())]
    logs = f"{len(calib.logs)} log" + ("s" if len(calib.logs) != 1 else "")
    print(f"fitted {calib.rows} rows of {logs} ({skipped} skipped) on {calib.topology}, {calib.generation}")
    print(format_table(("collective", "rows", "gm_error_pct"), rows))
    print(f"wrote {args.out}")
    return 0


# --------------------------------------------------------------------------- dse nccl-tests
def cmd_nccl_tests(args: argparse.Namespace) -> int:
    """Print (and with --csv write) the predicted nccl-tests table."""
    from dse.core.errors import InputError
    from dse.core.files import check_output_file
    from dse.costs.nccl.model import bus_factor, predict

    if args.csv is not None:
        check_output_file(args.csv, "--csv")
    collective = _collective(args.collective)
    algo, proto = _algo(args.algo), _proto(args.proto)
    calib, label, system, params = _system(args)
    sizes = _sizes(args)
    n = system.ranks
    rows = []
    for size in sizes:
        count, shown = _count(collective, size, n)
        try:
            p = predict(system, collective, shown, params=params, algo=algo, proto=proto)
        except InputError as e:  # a forced algorithm or protocol the system cannot run
            raise InputError(
                f"--{e.field}" if e.field in ("algo", "proto") else e.field, e.problem, e.allowed
            ) from None
        redop = "sum" if collective in ("all_reduce", "reduce_scatter", "reduce") else "none"
        root = 0 if collective in ("broadcast", "reduce") else -1
        t_us = p.time_ns / 1000.0
        rows.append((shown, count, "float", redop, root, t_us, p.algbw_GBps, p.busbw_GBps, p.algo, p.proto))
    print(_header(args, calib, label, system, collective, bus_factor(collective, n)))
    print(_table(rows))
    print(f"# Avg bus bandwidth    : {sum(r[7] for r in rows) / len(rows):.4g} GB/s")
    if args.csv is not None:
        _write_csv(args.csv, rows)
        print(f"# wrote {args.csv}")
    return 0


_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce")


def _collective(text: str) -> str:
    """A model collective from its name or nccl-tests' binary name (all_reduce_perf, all-reduce)."""
    from dse.core.errors import InputError

    name = re.sub(r"_perf(_mpi)?$", "", str(text).strip().lower().replace("-", "_")).replace("all_to_all", "alltoall")
    if name not in _COLLECTIVES:
        allowed = ", ".join(_COLLECTIVES) + " (or nccl-tests' binary names: all_reduce_perf, ...)"
        raise InputError("--collective", f"unknown collective {text!r}", allowed)
    return name


def _algo(text: str | None) -> str | None:
    from dse.core.errors import InputError

    if text is None:
        return None
    names = {"ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvls_tree"}
    key = str(text).strip().lower().replace("_", "")
    if key not in names:
        raise InputError("--algo", f"unknown algorithm {text!r}", "ring, tree, nvls, nvls_tree (NVLSTree)")
    return names[key]


def _proto(text: str | None) -> str | None:
    from dse.core.errors import InputError

    if text is None:
        return None
    names = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
    key = str(text).strip().lower()
    if key not in names:
        raise InputError("--proto", f"unknown protocol {text!r}", "LL, LL128, Simple")
    return names[key]


def _system(args: argparse.Namespace) -> tuple[Calibration | None, str, NcclSystem, NcclParams]:
    """The calibration (None: NCCL's defaults), the topology's label, its system and parameters."""
    from dse.core.errors import InputError
    from dse.core.topology import parse_notation, parse_topology
    from dse.costs.nccl.calibration import default_calibration, resolve_calibration

    spec = given_topology(args)
    if args.calibration is None:
        if not spec:
            raise InputError("topology", "missing", "a preset name (dse topologies) or a notation, or --calibration")
        topology = parse_topology(spec)
        calib = default_calibration(topology, **_machine(args, fill=True))
        return None, topology.label(), calib.fitted_system(), calib.params
    given = [k for k, v in _machine(args).items() if v is not None]
    if given:
        flag = "--no-nvls" if given[0] == "nvls" else f"--{given[0].replace('_', '-')}"
        raise InputError(flag, "given with --calibration, which carries the machine", "one of them")
    calib = resolve_calibration(args.calibration)
    topology = parse_topology(spec) if spec else parse_notation(calib.topology)
    system = calib.system(topology)
    return calib, topology.label(), system, calib.params_for(system)


def _size(text: str, flag: str) -> int:
    """Bytes from nccl-tests' form (8, 1K, 16M, 16G: powers of 1024) or dse's (1KB, 1MiB, 1e9)."""
    from dse.core.units import parse_size

    m = re.fullmatch(r"\s*([0-9]+)\s*([kKmMgGtT])\s*", str(text))
    if m:
        text = f"{m.group(1)}{m.group(2).upper()}iB"
    return parse_size(text, flag)


def _sizes(args: argparse.Namespace) -> list[int]:
    """The sizes nccl-tests' -b/-e/-f/-i would run: from -b, times -f (or plus -i) while <= -e."""
    from dse.core.errors import InputError
    from dse.core.units import parse_int

    lo, hi = _size(args.minbytes, "-b"), _size(args.maxbytes, "-e")
    if lo > hi:
        raise InputError("-b", f"{lo} bytes, more than -e's {hi}", "-b <= -e")
    if args.stepbytes is not None and args.stepfactor is not None:
        raise InputError("-i", "given with -f", "one of -f (a factor) or -i (bytes added per row)")
    step = _size(args.stepbytes, "-i") if args.stepbytes is not None else 0
    factor = parse_int(args.stepfactor or "2", "-f", minimum=2, maximum=1 << 20) if not step else 1
    rows = (hi - lo) // step + 1 if step else _rows_by_factor(lo, hi, factor)
    if rows > MAX_ROWS:
        raise InputError("-i", f"{rows:,} rows from -b to -e", f"at most {MAX_ROWS}: a larger -i or a smaller range")
    return [lo + k * step for k in range(rows)] if step else [lo * factor**k for k in range(rows)]


def _rows_by_factor(lo: int, hi: int, factor: int) -> int:
    rows, size = 0, lo
    while size <= hi:
        rows, size = rows + 1, size * factor
    return rows


def _count(collective: str, size: int, ranks: int) -> tuple[int, int]:
    """nccl-tests' count column (elements NCCL is passed: per rank for all-gather, reduce-scatter and
    all-to-all) and size column (bytes, the elements that fit, the largest buffer) for a size asked."""
    elements = size // _FLOAT_BYTES
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        per_rank = elements // ranks
        return per_rank, per_rank * ranks * _FLOAT_BYTES
    return elements, elements * _FLOAT_BYTES


def _header(
    args: argparse.Namespace, calib: Calibration | None, label: str, system: NcclSystem, collective: str, factor: float
) -> str:
    which = "NCCL's defaults" if calib is None else f"calibration {calib.name or args.calibration} ({calib.rows} rows)"
    forced = "".join(f", {k}={v}" for k, v in (("NCCL_ALGO", args.algo), ("NCCL_PROTO", args.proto)) if v)
    return (
        f"# {collective}_perf under dse's nccl model: {system.ranks} ranks ({system.gpus_per_node} GPUs x "
        f"{system.nodes} node{'s' if system.nodes > 1 else ''}, {system.generation}), {which}{forced}\n"
        f"# topology {label}; busbw = algbw x {factor:.4g}; one pass (the model has no in-place difference)"
    )


def _table(rows: list[tuple[Any, ...]]) -> str:
    from dse.output.report import format_table

    shown = [(*r[:5], f"{r[5]:.2f}", f"{r[6]:.2f}", f"{r[7]:.2f}", *r[8:]) for r in rows]
    return format_table(_COLUMNS, shown, align="rrllrrrrll")


def _write_csv(path: str, rows: list[tuple[Any, ...]]) -> None:
    import csv

    from dse.core.files import atomic_output

    with atomic_output(path, "--csv") as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(_COLUMNS)
        w.writerows([(*r[:5], repr(r[5]), repr(r[6]), repr(r[7]), *r[8:]) for r in rows])
