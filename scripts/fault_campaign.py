#!/usr/bin/env python3
"""The fault-injection campaign behind the README's reliability figures.

Runs the checks of `dse.testing.faults` and `dse.testing.interrupts` on seeded random cases (the
test suite runs the same checks under hypothesis, fewer of them) and prints one Markdown row per
kind of fault: cases tried, cases handled as promised, and the promise. Exits 1 if any case was not handled, listing it.

    .venv/bin/python scripts/fault_campaign.py            # about 9 minutes on 2 cores
    .venv/bin/python scripts/fault_campaign.py --scale 0.2
    .venv/bin/python scripts/fault_campaign.py --only "crafted Chakra traces"

The second campaign's classes (special files, short writes and full disks, crafted traces, damaged
per-rank trace sets, many dimensions, the dashboard's HTTP API, concurrent studies, process caps,
network storage faults, mutated engine calls) come from the ``CAMPAIGN`` tables of the
`dse.testing.faults_*` modules: each names its promise, its default number of cases and a function
that runs one seeded case.
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import shutil
import signal
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dse.testing import faults, interrupts  # noqa: E402

#: The modules whose ``CAMPAIGN`` tables add fault classes (`dse.testing.faults_*`).
CAMPAIGN_MODULES = ("files", "traces", "ranks", "dims", "dashboard", "studies", "engine")

PROMISES = {
    "malformed commands": "exit 0, or one `dse: error:` line and exit 2; no traceback",
    "malformed files": "the same, and a rejected run creates no output and changes no file",
    "damaged sweep CSVs": "own-row damage repaired to the uninterrupted rows; anything else refused, file untouched",
    "damaged study journals": "a damaged end cut back, the study resumes to the same trials; damage inside refused, untouched",
    "kill -9": "no process or /dev/shm entry left; the same command resumes to the uninterrupted output",
    "SIGINT (Ctrl-C)": "exit 130 and one line (or 0 if the work was done); resumes to the uninterrupted output",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every case count (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", action="append", default=None, metavar="CLASS", help="run only this class (repeatable)")
    args = ap.parse_args()
    interrupts.default_sigint()  # the SIGINT cases need Ctrl-C to reach the commands
    extra = second_classes()
    promises = {**PROMISES, **{k: v[0] for k, v in extra.items()}}
    unknown = sorted(set(args.only or ()) - set(promises))
    if unknown:
        ap.error(f"--only: unknown class {unknown[0]!r} (allowed: {', '.join(promises)})")
    wanted = lambda kind: args.only is None or kind in args.only  # noqa: E731
    n = lambda k: max(1, round(k * args.scale))  # noqa: E731
    work = Path(tempfile.mkdtemp(prefix="dse-faults-"))
    counts: dict[str, list[int]] = {k: [0, 0] for k in promises if wanted(k)}
    codes: dict[str, Counter[int]] = {"malformed commands": Counter(), "malformed files": Counter()}
    failures: list[str] = []

    def record(kind: str, case: str, problems: list[str]) -> None:
        counts[kind][0] += 1
        if problems:
            failures.append(f"{kind}: {case}: {problems}")
        else:
            counts[kind][1] += 1

    try:
        first_campaign(args.seed, n, wanted, work, record, codes)
        for kind, (_, default, case) in extra.items():
            if not wanted(kind):
                continue
            for i in range(n(default)):
                folder = work / "second" / f"{len(counts)}-{i}"
                folder.mkdir(parents=True)
                record(kind, f"#{i}", case(random.Random(f"{args.seed}-{kind}-{i}"), folder))
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print("| fault | cases | handled as promised | the promise |")
    print("|---|---:|---:|---|")
    for kind, (tried, ok) in counts.items():
        seen = f" ({codes[kind][0]:,} ran, {codes[kind][2]:,} refused)" if kind in codes else ""
        print(f"| {kind} | {tried:,}{seen} | {ok:,} | {promises[kind]} |")
    for f in failures:
        print("NOT HANDLED:", f)
    return 1 if failures else 0


def second_classes() -> faults.Campaign:
    """The fault classes of the `dse.testing.faults_*` modules' ``CAMPAIGN`` tables, in module order."""
    classes: faults.Campaign = {}
    for name in CAMPAIGN_MODULES:
        classes.update(importlib.import_module(f"dse.testing.faults_{name}").CAMPAIGN)
    return classes


def first_campaign(
    seed: int,
    n: Callable[[int], int],
    wanted: Callable[[str], bool],
    work: Path,
    record: Callable[[str, str, list[str]], None],
    codes: dict[str, Counter[int]],
) -> None:
    """The first campaign's classes: malformed commands and files, damaged CSVs and journals, signals."""
    os.environ["DSE_MAX_WORK"] = "2e5"  # every accepted fuzz case stays quick; the limit is exercised too
    for i in range(n(2000) if wanted("malformed commands") else 0):
        rng = random.Random(f"{seed}-cmd-{i}")
        folder = work / "cmd"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        argv = faults.notation_argv(rng)
        record("malformed commands", repr(argv), faults.cli_case(argv, folder, codes=codes["malformed commands"]))
    for kind in ("sweep", "study", "space", "astra", "workload", "binary"):
        for i in range(n(300) if wanted("malformed files") else 0):
            rng = random.Random(f"{seed}-{kind}-{i}")
            folder = work / "files"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            argv, outputs = faults.file_argv(kind, rng, folder)
            record(
                "malformed files",
                f"{kind} #{i}",
                faults.cli_case(argv, folder, outputs=outputs, codes=codes["malformed files"]),
            )
    for i in range(n(500) if wanted("damaged sweep CSVs") else 0):
        record("damaged sweep CSVs", f"#{i}", faults.csv_case(work, random.Random(f"{seed}-csv-{i}")))
    for i in range(n(150) if wanted("damaged study journals") else 0):
        record("damaged study journals", f"#{i}", faults.journal_case(work, random.Random(f"{seed}-j-{i}")))
    del os.environ["DSE_MAX_WORK"]
    signals = [(signal.SIGKILL, "kill -9"), (signal.SIGINT, "SIGINT (Ctrl-C)")]
    signals = [(sig, kind) for sig, kind in signals if wanted(kind)]
    if not signals:
        return
    refs = {t: interrupts.kill_reference(t, work) for t in interrupts.KILL_TARGETS}
    rng = random.Random(f"{seed}-kill")
    for target in interrupts.KILL_TARGETS:
        for sig, kind in signals:
            for i in range(n(6)):
                at = rng.uniform(0.05, 0.6 if target == "reproduce" else 0.95)
                folder = work / f"kill-{target}-{sig.name}-{i}"
                folder.mkdir()
                record(kind, f"{target} at {at:.0%}", interrupts.kill_case(target, sig, at, folder, refs[target]))


if __name__ == "__main__":
    sys.exit(main())
