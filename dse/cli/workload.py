"""`dse workload list|convert`: the bundled workloads, and lossless conversion between formats."""

from __future__ import annotations

import argparse
import json
import os
import re

from dse.core.errors import InputError


def add_workload_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `workload` subcommand and its actions (list, convert, export, pipeline) on `sub`."""
    p = sub.add_parser(
        "workload",
        help="the bundled workloads; convert a workload file to dse TOML (or back), or export it as a Chakra trace",
    )
    wsub = p.add_subparsers(dest="workload_command", metavar="ACTION", parser_class=type(p), required=True)
    q = wsub.add_parser("list", help="the bundled workloads and the generators, by the names dse iterate takes")
    q.add_argument("--json", action="store_true", help="print one JSON list instead of a table")
    q.set_defaults(func=cmd_workload_list)
    q = wsub.add_parser("convert", help="write a workload as dse TOML (.toml) or ASTRA-sim 1.0 text (.txt), losslessly")
    q.add_argument(
        "source", metavar="WORKLOAD", help="an ASTRA-sim 1.0 text file, a .toml workload, a bundled name or a generator"
    )
    q.add_argument("-o", "--out", required=True, help="the file to write: .toml (dse) or .txt (ASTRA-sim 1.0)")
    q.add_argument("--origin", default="", help="the line of origin to record (default: the source file's name)")
    q.add_argument("--force", action="store_true", help="replace --out if it exists")
    q.set_defaults(func=cmd_workload_convert)
    q = wsub.add_parser(
        "export", help="write a workload as a Chakra trace (ASTRA-sim 2.x): PREFIX.0.et, PREFIX.1.et, ..."
    )
    q.add_argument(
        "source",
        metavar="WORKLOAD",
        help="an ASTRA-sim 1.0 text file, a .toml workload, a bundled name, a generator or a Chakra trace",
    )
    q.add_argument("--format", default="chakra", help="chakra (the only format so far)")
    q.add_argument("-o", "--out", required=True, metavar="PREFIX", help="the files are PREFIX.<rank>.et")
    q.add_argument(
        "-t",
        "--topology",
        default=None,
        help="the network the trace is for: names the dimensions of "
        "model- and data-parallel collectives, and how many rank files to write",
    )
    q.add_argument("--npus", default=None, help="rank files to write (default: the topology's NPUs, else 1)")
    q.add_argument("--force", action="store_true", help="replace existing rank files")
    q.set_defaults(func=cmd_workload_export)
    _add_pipeline_parser(wsub)


def _add_pipeline_parser(wsub: argparse._SubParsersAction) -> None:
    """Register `dse workload pipeline` on the workload actions `wsub`."""
    q = wsub.add_parser(
        "pipeline",
        help="write per-rank Chakra traces of a pipeline-parallel iteration (GPipe or 1F1B, data-parallel "
        "all-reduce): PREFIX.0.et, PREFIX.1.et, ...",
    )
    q.add_argument("prefix", metavar="OUT_PREFIX", help="the files are OUT_PREFIX.<rank>.et (its folder must exist)")
    q.add_argument("--stages", required=True, help="pipeline stages")
    q.add_argument("--dp", required=True, help="data-parallel ranks per stage (rank = replica + dp x stage)")
    q.add_argument("--microbatches", required=True, help="microbatches per iteration")
    q.add_argument("--schedule", default="gpipe", help="gpipe or 1f1b (default gpipe)")
    q.add_argument("--fwd-us", default="100", help="forward compute of one microbatch on one stage, us (default 100)")
    q.add_argument("--bwd-us", default="200", help="backward compute of one microbatch on one stage, us (default 200)")
    q.add_argument(
        "--activation",
        default="8MiB",
        help="bytes of one microbatch's activations (and their gradients) (default 8MiB)",
    )
    q.add_argument("--grads", default="256MiB", help="weight-gradient bytes each stage all-reduces (default 256MiB)")
    q.add_argument(
        "-t",
        "--topology",
        default=None,
        help="the network the trace is for: NPUs per dimension (8x16x8, dim 0 first), a topology or an ASTRA-sim "
        "network YAML; its lowest dimensions must hold dp NPUs for involved_dim, else groups are used "
        "(default: dp x stages)",
    )
    q.add_argument(
        "--groups",
        action="store_true",
        help="all-reduce on communicator groups (pg_name), written to OUT_PREFIX.json, instead of involved_dim",
    )
    q.add_argument("--force", action="store_true", help="replace existing files")
    q.set_defaults(func=cmd_workload_pipeline)


def cmd_workload_list(args: argparse.Namespace) -> int:
    """Print every workload `dse iterate` takes by name (bundled, LIBRA's, the generators) as a table
    with a note on its columns, or one JSON list with --json."""
    from dse.cli.workload_list import LIST_NOTE, workload_rows, workload_table
    from dse.output.report import footnote

    rows = workload_rows()
    if args.json:
        print(json.dumps(rows))
        return 0
    print(workload_table(rows))
    print(footnote(LIST_NOTE))
    return 0


def cmd_workload_convert(args: argparse.Namespace) -> int:
    """Write the workload as dse TOML or ASTRA-sim 1.0 text (by --out's suffix), losslessly, and
    print one line: the file, the workload's name, its layers and parallelism."""
    from dse.training.workload_formats import convert

    wl = convert(args.source, args.out, origin=args.origin, force=args.force)
    n = len(wl.layers)
    print(f"{args.out}: {wl.name}, {n} layer{'' if n == 1 else 's'}, {wl.parallelism}")
    return 0


def cmd_workload_export(args: argparse.Namespace) -> int:
    """Write the workload as a Chakra trace, one file per rank, and print the files, nodes,
    collectives and ranks, then notes (a --format other than chakra is an `InputError`)."""
    from dse.training.chakra.write import export_chakra

    if str(args.format).strip().lower() != "chakra":
        raise InputError("--format", f"{args.format!r}", "chakra")
    rep = export_chakra(args.source, args.out, topology=args.topology, npus=args.npus, force=args.force)
    files = rep.files[0] if len(rep.files) == 1 else f"{rep.files[0]} ... {rep.files[-1]}"
    collectives = f"{rep.collectives} collective{'' if rep.collectives == 1 else 's'}"
    print(f"{files}: {rep.nodes} nodes, {collectives}, {rep.ranks} rank file{'' if rep.ranks == 1 else 's'}")
    if rep.run_on:
        print(f"note: the model-parallel group splits a dimension: run the trace on {rep.run_on}")
    for note in rep.notes:
        print(f"note: {note}")
    return 0


def cmd_workload_pipeline(args: argparse.Namespace) -> int:
    """Write per-rank Chakra traces of a pipeline-parallel iteration and print the files, the
    pipeline's shape and where its data-parallel all-reduce runs."""
    from dse.core.topology import parse_topology
    from dse.training.pipeline_traces import write_pipeline_traces

    folder, name = os.path.split(str(args.prefix))
    given: str | None = args.topology
    dims: str | list[int] | None = given  # NPUs per dimension as given (8x16x8), or a topology's
    if given is not None and not re.fullmatch(r"[0-9x, ]+", given):
        dims = [d.npus for d in parse_topology(given).dims]
    rep = write_pipeline_traces(
        folder or ".",
        name,
        stages=args.stages,
        dp=args.dp,
        microbatches=args.microbatches,
        schedule=args.schedule,
        fwd_us=args.fwd_us,
        bwd_us=args.bwd_us,
        activation_bytes=args.activation,
        grad_bytes=args.grads,
        topology_dims=dims,
        groups=args.groups,
        force=args.force,
    )
    p = rep.pipeline
    files = rep.files[0] if len(rep.files) == 1 else f"{rep.files[0]} ... {rep.files[-1]}"
    print(
        f"{files}: {rep.ranks} rank file{'' if rep.ranks == 1 else 's'}, {p.stages} stages x {p.dp} data-parallel "
        f"ranks, {p.microbatches} microbatches ({p.schedule}), at most {rep.nodes} nodes per rank"
    )
    dims = "x".join(map(str, p.dims))
    if rep.groups_file:
        print(f"data-parallel all-reduce on communicator groups: {rep.groups_file} (network {dims})")
    elif rep.involved_dim:
        on = ",".join(str(d) for d, f in enumerate(rep.involved_dim) if f)
        print(f"data-parallel all-reduce on dimension{'s' if ',' in on else ''} {on} of {dims} (involved_dim)")
    return 0
