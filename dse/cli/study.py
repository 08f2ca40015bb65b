"""`dse study ...`: run, show, report, list and browse Optuna design-space studies (see dse.explore.study.studies).

What they print names every objective with its unit and gives its values in it (`time (ms) with
themis+scf`, `cost ($)`, `time x cost (ms·$) with themis+scf`: `dse.explore.study.units`); the
journal keeps its values as stored (ns, fractions, $), so every journal prints the same way.

`show`, `report`, `list` and `dashboard` find a study where `run` put it when no --storage is given:
``studies/out/<name up to its first dot>.journal`` under the current folder (`dse.explore.study.storage.storage_for`).
The environment variable ``DSE_STORAGE`` stands for ``--storage`` when the option is not given, so a
database password need not appear on a command line (where `ps` shows it); `run` hands its worker
processes the storage that way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from dse.core.errors import InputError

STORAGE_HELP = (
    "journal file, sqlite:///file.db or postgresql+psycopg://... (default: "
    "studies/out/<NAME up to its first dot>.journal under the current folder, where "
    "'dse study run studies/<file>.toml' writes it; the environment variable DSE_STORAGE, if set, "
    "stands for this option)"
)


def storage_arg(args: argparse.Namespace) -> str | None:
    """`--storage`, else the environment variable ``DSE_STORAGE`` (if set and not empty), else None."""
    if args.storage is not None:
        return str(args.storage)
    return os.environ.get("DSE_STORAGE", "").strip() or None


def add_study_parser(sub: argparse._SubParsersAction) -> None:
    """Register `dse study` and its actions on `sub`; `dse study` alone prints its help, exit 2."""
    p = sub.add_parser("study", help="design-space search with Optuna: run, show, report, list, dashboard")
    ssub = p.add_subparsers(dest="study_command", metavar="STUDY_COMMAND", parser_class=type(p))

    r = ssub.add_parser("run", help="run a study file until it has N complete trials (resumes)")
    r.add_argument("file", help="a studies/*.toml file")
    r.add_argument("--trials", default=None, help="complete trials in total (default: the file's)")
    r.add_argument("--workers", default="1", help="worker processes on the same storage (default 1)")
    r.add_argument(
        "--storage",
        default=None,
        help="journal file, sqlite:///file.db or postgresql+psycopg://... "
        "(default: a journal file under the study file's out/ folder, named after the study: "
        "studies/out/bw_split_4d.journal for studies/bw_split_4d.toml)",
    )
    r.add_argument("--only", default=None, help="run only this study of the file (a variant's full name)")
    r.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a bar of complete trials per study on stderr (default: when stderr is a terminal)",
    )
    r.add_argument("--quiet", action="store_true", help="print nothing (workers started by --workers)")
    r.add_argument("--json", action="store_true", help="print one JSON object per study instead of a line")
    r.set_defaults(func=cmd_study_run)

    rep = ssub.add_parser("report", help="CSV of the trials and the best or the Pareto front, and PNG figures")
    rep.add_argument("name", help="the study's name, e.g. bw_split_4d.themis (dse study list shows them)")
    rep.add_argument("--storage", default=None, help=STORAGE_HELP)
    rep.add_argument("--out", required=True, help="folder for trials.csv, best.csv or pareto.csv, and figures")
    rep.set_defaults(func=cmd_study_report)

    sh = ssub.add_parser(
        "show", help="a study's objectives and constraints with their units, and its best designs or Pareto front"
    )
    sh.add_argument("name", help="the study's name, e.g. bw_split_4d.themis (dse study list shows them)")
    sh.add_argument("--storage", default=None, help=STORAGE_HELP)
    sh.add_argument("--top", default="10", help="best trials shown, one objective (default 10, at most 20)")
    sh.add_argument(
        "--json",
        action="store_true",
        help="print a JSON object: objectives (name with unit, id, CSV column, direction) and the rows "
        "as dse study report's CSV files hold them",
    )
    sh.set_defaults(func=cmd_study_show)

    ls = ssub.add_parser("list", help="the studies on a storage (default: the journals in studies/out/)")
    ls.add_argument(
        "--storage",
        default=None,
        help="journal file, sqlite:///file.db or postgresql+psycopg://... "
        "(default: every journal in studies/out/ under the current folder, where "
        "'dse study run studies/<file>.toml' writes)",
    )
    ls.add_argument("--json", action="store_true", help="print a JSON list: every field of the table")
    ls.set_defaults(func=cmd_study_list)

    _add_dashboard_parser(ssub)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _add_dashboard_parser(ssub: argparse._SubParsersAction) -> None:
    """Register `dse study dashboard` on the study actions `ssub`."""
    d = ssub.add_parser(
        "dashboard",
        help="serve optuna-dashboard on one study, read-only (pip install '.[dashboard]')",
        description="Serve optuna-dashboard on study NAME alone (the storage's other studies are "
        "not shown), read-only: every request that would change the storage is refused (403), and "
        "errors are one line on stderr. --allow-writes serves optuna-dashboard's editing of the study "
        "(notes, trial states, deleting it; not creating or renaming studies), with a warning. "
        "It listens on 127.0.0.1; another --host is served with a warning line.",
    )
    d.add_argument("name", help="the study's name, e.g. bw_split_4d.themis")
    d.add_argument("--storage", default=None, help=STORAGE_HELP)
    d.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; any other prints a warning: "
        "every machine that can reach the port reads the study)",
    )
    d.add_argument("--port", default="8080", help="port to listen on (default 8080; 0: any free port)")
    d.add_argument(
        "--allow-writes",
        action="store_true",
        help="let the dashboard change the study: notes, trial states and attributes, deleting it "
        "(default: read-only); anyone who can reach the port can then change or delete the study",
    )
    d.set_defaults(func=cmd_study_dashboard)


def cmd_study_run(args: argparse.Namespace) -> int:
    """Run each study of the file (or --only one) until it has --trials complete trials, resuming
    what its storage holds, and print one line per study (--json: one JSON list; --quiet: nothing)."""
    from dse.cli.study_lines import run_line
    from dse.core.progress import wanted
    from dse.core.units import parse_int
    from dse.explore.study.studies import load_studies
    from dse.explore.study.workers import run_study

    specs = load_studies(args.file)
    if args.only:
        specs = [s for s in specs if s.name == args.only]
        if not specs:
            raise InputError("--only", f"no study {args.only!r} in {args.file}")
    trials = parse_int(args.trials, "--trials", minimum=1) if args.trials is not None else None
    workers = parse_int(args.workers, "--workers", minimum=1)
    progress = not args.quiet and wanted(args.progress)
    results = [
        run_study(s, trials=trials, workers=workers, storage=storage_arg(args), progress=progress, quiet=args.quiet)
        for s in specs
    ]
    if args.quiet:
        return 0
    if args.json:
        print(json.dumps(results))
        return 0
    for res in results:
        print(run_line(res))
    return 0


def cmd_study_report(args: argparse.Namespace) -> int:
    """Write the study's trials, its best rows or Pareto front (CSV) and figures to --out, and print
    how many rows, each file written and the notes."""
    from dse.explore.study.storage import storage_for
    from dse.output.study_report import write_report

    rep = write_report(args.name, storage_for(args.name, storage_arg(args)), args.out)
    print(
        f"{args.name}: {len(rep.rows)} complete trials; {'Pareto front' if rep.multi else 'best'}: {len(rep.best)} rows"
    )
    for f in rep.files:
        print(f"  {f}")
    for note in rep.notes:
        print(note)
    return 0


def cmd_study_show(args: argparse.Namespace) -> int:
    """Print the study's objectives and constraints with their units and its --top best designs (or
    its Pareto front), or one JSON object with --json."""
    from dse.core.units import parse_int
    from dse.explore.study.storage import redact, storage_for
    from dse.output.study_report import report_data, show_text

    top = parse_int(args.top, "--top", minimum=1)
    url = storage_for(args.name, storage_arg(args))
    study, rep = report_data(args.name, url)
    if not args.json:
        print(show_text(study, rep, url, top))
        return 0
    objectives = [
        {"name": s.name, "id": s.id, "column": s.column, "direction": d.name.lower()}
        for s, d in zip(rep.objectives, study.directions)
    ]
    rows = rep.best if rep.multi else rep.best[:top]
    print(json.dumps({"study": args.name, "storage": redact(url), "objectives": objectives, "rows": rows}))
    return 0


def cmd_study_list(args: argparse.Namespace) -> int:
    """Print the studies on --storage (default: every journal in studies/out/) as a table, or one
    JSON list with --json; no journal to read is an `InputError`."""
    from dse.explore.study.storage import STUDIES_OUT, default_journals
    from dse.explore.study.units import shown
    from dse.explore.study.workers import list_studies
    from dse.output.report import format_table

    urls = [storage] if (storage := storage_arg(args)) is not None else default_journals()
    if not urls:
        raise InputError(
            "storage",
            f"no journal in {STUDIES_OUT}/ (where dse study run studies/<file>.toml writes by default)",
            "--storage S, or run a study first",
        )
    rows = [row for url in urls for row in list_studies(url)]
    if args.json:
        print(json.dumps(rows))
        return 0
    body = []
    for r in rows:
        best = r.get("best_value")
        body.append(
            (
                r["study"],
                r["complete"],
                r["failed"],
                "; ".join(r["objectives"]),
                "" if best is None else shown(r["best_metric"]).text(best),
                r.get("pareto_size", ""),
                r["storage"],
            )
        )
    head = ("study", "complete", "failed", "objective", "best", "pareto", "storage")
    print(format_table(head, body, align="lrrlrrl"))
    return 0


def cmd_study_dashboard(args: argparse.Namespace) -> int:
    """Serve optuna-dashboard on one study (read-only unless --allow-writes) until Ctrl-C: one line
    saying where, warnings on stderr; exit 0, Ctrl-C included."""
    from dse.core.units import parse_int
    from dse.explore.study.dashboard import require, serve
    from dse.explore.study.storage import redact, storage_for

    require()
    port = parse_int(args.port, "--port", minimum=0, maximum=65535)
    url = storage_for(args.name, storage_arg(args))
    mode = "editing allowed" if args.allow_writes else "read-only"

    def announce(page: str) -> None:
        """Say where the dashboard is served."""
        print(f"{args.name}: optuna-dashboard ({mode}) on {redact(url)} at {page} (Ctrl-C stops it)", flush=True)

    def warn(line: str) -> None:
        """One warning line on stderr."""
        print(f"dse: warning: {line}", file=sys.stderr, flush=True)

    try:
        serve(args.name, url, args.host, port, announce, allow_writes=args.allow_writes, warn=warn)
    except KeyboardInterrupt:  # the way to stop a server: nothing to resume, nothing to report
        return 0
    return 0
