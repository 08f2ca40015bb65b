"""`dse sweep FILE.toml --out RESULTS.csv`: every point of a sweep file (collectives, or training
iterations when it names a workload), in parallel, into a resumable CSV (dse.explore.sweep.sweeps; the file
format: dse.explore.sweep.file)."""

from __future__ import annotations

import argparse


def add_sweep_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `sweep` subcommand on `sub`."""
    p = sub.add_parser("sweep", help="evaluate every point of a TOML sweep file in parallel, into a resumable CSV")
    p.add_argument(
        "file",
        metavar="FILE.toml",
        help="a sweep file: a [sweep] table of evaluate() parameters, per-dimension bandwidth/latency axes "
        "(bandwidth, latency, bw0, lat0, ...), or a workload (training iterations)",
    )
    p.add_argument("--out", required=True, help="the CSV to write; re-running resumes it")
    p.add_argument(
        "--jobs",
        default="1",
        help="worker processes (default 1; -1 for every core); at most DSE_MAX_PROCESSES (256), "
        "and no more than the points left to run",
    )
    p.add_argument("--backend", default="processes", help="processes (forked workers, default) or dask")
    p.add_argument("--scheduler-address", default=None, help="dask.distributed scheduler, e.g. tcp://host:8786")
    p.add_argument("--batch", default=None, help="points per task (default: automatic, at most 200)")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr (default: when stderr is a terminal)",
    )
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run the sweep and print one line: the points, those already done, those evaluated now."""
    from dse.core.units import parse_int
    from dse.explore.sweep.sweeps import check_jobs, load_sweep, run_sweep

    jobs = parse_int(args.jobs, "--jobs", minimum=-1)
    check_jobs(jobs, "--jobs")  # 0, below -1 or above the process limit: one line before anything is read
    batch = parse_int(args.batch, "batch", minimum=1) if args.batch is not None else None
    sweep = load_sweep(args.file)
    counts = run_sweep(
        sweep,
        args.out,
        jobs=jobs,
        backend=args.backend,
        scheduler_address=args.scheduler_address,
        batch=batch,
        progress=args.progress,
    )
    print(
        f"{args.out}: {counts['points']} points, {counts['done_before']} already there, {counts['evaluated']} evaluated"
    )
    return 0
