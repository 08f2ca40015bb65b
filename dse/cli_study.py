"""`dse study ...`: run, report and list Optuna design-space studies (see dse.search)."""

from __future__ import annotations

import argparse
import json

from .errors import InputError
from .report import format_table
from .units import format_time, parse_int


def add_study_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("study", help="design-space search with Optuna: run, report, list")
    ssub = p.add_subparsers(dest="study_command", metavar="STUDY_COMMAND", parser_class=type(p))

    r = ssub.add_parser("run", help="run a study file until it has N complete trials (resumes)")
    r.add_argument("file", help="a studies/*.toml file")
    r.add_argument("--trials", default=None, help="complete trials in total (default: the file's)")
    r.add_argument("--workers", default="1", help="worker processes on the same storage (default 1)")
    r.add_argument("--storage", default=None, help="journal file, sqlite:///file.db or postgresql+psycopg://... "
                   "(default: a journal file under the study file's out/ folder)")  # fmt: skip
    r.add_argument("--only", default=None, help="run only this study of the file (a variant's full name)")
    r.add_argument("--quiet", action="store_true", help="print nothing (workers started by --workers)")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_study_run)

    rep = ssub.add_parser("report", help="CSV of the best trials or the Pareto front, and PNG figures")
    rep.add_argument("name", help="the study's name (dse study list shows them)")
    rep.add_argument("--storage", required=True)
    rep.add_argument("--out", required=True, help="folder for trials.csv, best.csv or pareto.csv, and figures")
    rep.set_defaults(func=cmd_study_report)

    ls = ssub.add_parser("list", help="the studies on a storage")
    ls.add_argument("--storage", required=True)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_study_list)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def cmd_study_run(args: argparse.Namespace) -> int:
    from .search import load_studies, run_study

    specs = load_studies(args.file)
    if args.only:
        specs = [s for s in specs if s.name == args.only]
        if not specs:
            raise InputError("--only", f"no study {args.only!r} in {args.file}")
    trials = parse_int(args.trials, "--trials", minimum=1) if args.trials is not None else None
    workers = parse_int(args.workers, "--workers", minimum=1)
    results = [run_study(s, trials=trials, workers=workers, storage=args.storage) for s in specs]
    if args.quiet:
        return 0
    if args.json:
        print(json.dumps(results))
        return 0
    for res in results:
        best = ""
        if "best_value" in res:
            v = res["best_value"]
            best = f"best {format_time(v) if v > 1e3 else f'{v:.6g}'} (trial {res['best_trial']}): {res['best_topology']}"
        elif "pareto_size" in res:
            best = f"Pareto front of {res['pareto_size']} designs"
        print(f"{res['study']}: {res['complete']} complete trials ({res['failed']} failed) on {res['storage']}; {best}")
    return 0


def cmd_study_report(args: argparse.Namespace) -> int:
    from .search import write_report

    rep = write_report(args.name, args.storage, args.out)
    print(f"{args.name}: {len(rep.rows)} complete trials; {'Pareto front' if rep.multi else 'best'}: {len(rep.best)} rows")
    for f in rep.files:
        print(f"  {f}")
    return 0


def cmd_study_list(args: argparse.Namespace) -> int:
    from .search import list_studies

    rows = list_studies(args.storage)
    if args.json:
        print(json.dumps(rows))
        return 0
    body = []
    for r in rows:
        best = r.get("best_value")
        body.append((r["study"], r["complete"], r["failed"], "" if best is None else (format_time(best) if best > 1e3 else f"{best:.6g}"),
                     r.get("pareto_size", "")))  # fmt: skip
    print(format_table(("study", "complete", "failed", "best", "pareto"), body, align="lrrrr"))
    return 0


