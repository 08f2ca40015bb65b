"""The work of `dse nccl-tests` (`dse.cli.nccl` holds its parser): the sizes -b/-e/-f/-i name, the
system and parameters of the design or calibration, NCCL's predicted row per size, the table and the
CSV file; and the machine flags both NCCL commands take. Imported by their commands when they run."""

from __future__ import annotations

import argparse
import csv
import re
from typing import Any

from dse.cli.parser import given_topology
from dse.core.errors import InputError
from dse.core.files import atomic_output
from dse.core.topology import Topology, notation_dims, parse_notation, parse_topology
from dse.core.units import parse_int, parse_size
from dse.costs.nccl.calibration import Calibration, default_calibration, resolve_calibration
from dse.costs.nccl.channels import MAX_CHANNELS
from dse.costs.nccl.env import algo_name, proto_name
from dse.costs.nccl.model import NcclParams, NcclSystem, bus_factor, channels, predict
from dse.costs.nccl.system import DEFAULT_MACHINE, MACHINE_DEFAULTS
from dse.costs.nccl.tables import CPUS, GENERATIONS, NETWORKS, nccl_release, release_name
from dse.output.report import format_table

#: Rows `dse nccl-tests` prints at most (one per size from -b to -e).
MAX_ROWS = 300
#: Bytes of one element: nccl-tests' default type, float.
_FLOAT_BYTES = 4
_COLUMNS = (
    "size_bytes", "count", "type", "redop", "root", "time_us", "algbw_GBps", "busbw_GBps", "algo", "proto",
)  # fmt: skip


def machine_flags(args: argparse.Namespace, *, fill: bool = False) -> dict[str, Any]:
    """The machine flags as `calibrate`'s keywords: None where not given, or with `fill` dse's
    defaults there (`dse.costs.nccl.system.DEFAULT_MACHINE`, `MACHINE_DEFAULTS`)."""
    out = {k: getattr(args, k) for k in ("generation", "nvls", "network", "cpu", "single_gpu_nodes", "nccl_version")}
    for key, allowed in (("generation", GENERATIONS), ("network", NETWORKS), ("cpu", CPUS)):
        if out[key] is not None and out[key] not in allowed:
            raise InputError(f"--{key}", f"unknown {key} {out[key]!r}", ", ".join(allowed))
    if out["nccl_version"] is not None:
        nccl_release(out["nccl_version"], "--nccl-version")
    for key in ("nvlink_links", "nics_per_node"):
        raw = getattr(args, key)
        out[key] = None if raw is None else parse_int(raw, f"--{key.replace('_', '-')}", minimum=1, maximum=1024)
    if fill:
        out = {**MACHINE_DEFAULTS, **DEFAULT_MACHINE, **{k: v for k, v in out.items() if v is not None}}
    return out


def predicted_rows(args: argparse.Namespace) -> tuple[str, list[tuple[Any, ...]]]:
    """`dse nccl-tests`'s header (the collective, the system, the calibration, the bus factor) and its
    rows, one per size: size, count, type, redop, root, time (us), algbw, busbw, algorithm, protocol.
    A bad flag, or a forced algorithm or protocol the system cannot run, is an `InputError`."""
    collective = collective_of(args.collective)
    algo, proto = _algo(args.algo), _proto(args.proto)
    max_channels = None
    if args.max_channels is not None:
        max_channels = parse_int(args.max_channels, "--max-channels", minimum=1, maximum=MAX_CHANNELS)
    calib, label, system, params = _system(args)
    sizes = _sizes(args)
    n = system.ranks
    rows = []
    for size in sizes:
        count, shown = _count(collective, size, n)
        try:
            p = predict(system, collective, shown, params=params, algo=algo, proto=proto, max_channels=max_channels)
        except InputError as e:  # a forced algorithm or protocol the system cannot run
            raise InputError(
                f"--{e.field}" if e.field in ("algo", "proto") else e.field, e.problem, e.allowed
            ) from None
        redop = "sum" if collective in ("all_reduce", "reduce_scatter", "reduce") else "none"
        root = 0 if collective in ("broadcast", "reduce") else -1
        t_us = p.time_ns / 1000.0
        rows.append((shown, count, "float", redop, root, t_us, p.algbw_GBps, p.busbw_GBps, p.algo, p.proto))
    return _header(args, calib, label, system, collective, bus_factor(collective, n)), rows


_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce")


def collective_of(text: str) -> str:
    """A model collective from its name or nccl-tests' binary name (all_reduce_perf, all-reduce)."""
    name = re.sub(r"_perf(_mpi)?$", "", str(text).strip().lower().replace("-", "_")).replace("all_to_all", "alltoall")
    if name not in _COLLECTIVES:
        allowed = ", ".join(_COLLECTIVES) + " (or nccl-tests' binary names: all_reduce_perf, ...)"
        raise InputError("--collective", f"unknown collective {text!r}", allowed)
    return name


def _algo(text: str | None) -> str | None:
    """--algo as the model names it (ring, tree, nvls, nvls_tree), None when not given."""
    return None if text is None else algo_name(text, "--algo")


def _proto(text: str | None) -> str | None:
    """--proto as the model names it (LL, LL128, Simple), None when not given."""
    return None if text is None else proto_name(text, "--proto")


def _system(args: argparse.Namespace) -> tuple[Calibration | None, str, NcclSystem, NcclParams]:
    """The calibration (None: NCCL's defaults), the topology's label, its system and parameters."""
    spec = given_topology(args)
    if args.calibration is None:
        if not spec:
            raise InputError("topology", "missing", "a preset name (dse topologies) or a notation, or --calibration")
        topology = gpu_topology(spec, bool(args.single_gpu_nodes))
        calib = default_calibration(topology, **machine_flags(args, fill=True))
        return None, topology.label(), calib.fitted_system(), calib.params
    given = [k for k, v in machine_flags(args).items() if v is not None]
    if given:
        flag = "--no-nvls" if given[0] == "nvls" else f"--{given[0].replace('_', '-')}"
        raise InputError(flag, "given with --calibration, which carries the machine", "one of them")
    calib = resolve_calibration(args.calibration)
    topology = gpu_topology(spec, calib.single_gpu_nodes) if spec else parse_notation(calib.topology)
    system = calib.system(topology)
    return calib, topology.label(), system, calib.params_for(system)


def gpu_topology(spec: str, single_gpu_nodes: bool) -> Topology:
    """`parse_topology`; a notation whose dimension 0 (the node) has 1 GPU needs `single_gpu_nodes`
    (``--single-gpu-nodes``): a dse topology drops dimensions of 1 NPU, so its network would be read
    as one node's fabric (`InputError` without it)."""
    if not single_gpu_nodes and "(" in spec and notation_dims(spec)[0].npus == 1:
        raise InputError(
            "topology", f"{spec!r} has one GPU a node, which a dse topology drops (its nodes would become one "
            "node's GPUs)", "--single-gpu-nodes, or 2 or more GPUs a node",
        )  # fmt: skip
    return parse_topology(spec)


def _size(text: str, flag: str) -> int:
    """Bytes from nccl-tests' form (8, 1K, 16M, 16G: powers of 1024) or dse's (1KB, 1MiB, 1e9)."""
    m = re.fullmatch(r"\s*([0-9]+)\s*([kKmMgGtT])\s*", str(text))
    if m:
        text = f"{m.group(1)}{m.group(2).upper()}iB"
    return parse_size(text, flag)


def _sizes(args: argparse.Namespace) -> list[int]:
    """The sizes nccl-tests' -b/-e/-f/-i would run: from -b, times -f (or plus -i) while <= -e."""
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
    """How many sizes from `lo`, each `factor` times the last, are at most `hi`."""
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
    """The two comment lines above nccl-tests' table: what runs, on which system, with what calibration."""
    which = "NCCL's defaults" if calib is None else f"calibration {calib.name or args.calibration} ({calib.rows} rows)"
    given = (("NCCL_ALGO", args.algo), ("NCCL_PROTO", args.proto), ("NCCL_MAX_NCHANNELS", args.max_channels))
    forced = "".join(f", {k}={v}" for k, v in given if v)
    ch = channels(system)
    gpus = f"{system.gpus_per_node} GPU{'s' if system.gpus_per_node > 1 else ''}"
    return (
        f"# {collective}_perf under dse's nccl model: {system.ranks} ranks ({gpus} x "
        f"{system.nodes} node{'s' if system.nodes > 1 else ''}, {system.generation}, NCCL "
        f"{release_name(system.nccl_version)}'s tuner), {which}{forced}\n"
        f"# topology {label}; busbw = algbw x {factor:.4g}; NCCL's {ch.comm} channels (its search: {ch.ring} x "
        f"{ch.ring_GBps:g} GB/s); one pass (the model has no in-place difference)"
    )


def rows_table(rows: list[tuple[Any, ...]]) -> str:
    """The rows of `predicted_rows` as nccl-tests' table, times and bandwidths to two decimals."""
    shown = [(*r[:5], f"{r[5]:.2f}", f"{r[6]:.2f}", f"{r[7]:.2f}", *r[8:]) for r in rows]
    return format_table(_COLUMNS, shown, align="rrllrrrrll")


def write_rows_csv(path: str, rows: list[tuple[Any, ...]]) -> None:
    """Write the rows of `predicted_rows` to the CSV file `path` (atomically), every number unrounded."""
    with atomic_output(path, "--csv") as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(_COLUMNS)
        w.writerows([(*r[:5], repr(r[5]), repr(r[6]), repr(r[7]), *r[8:]) for r in rows])
