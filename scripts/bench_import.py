"""Start-up cost of `import dse`, `dse --help` and `dse evaluate`, each in fresh subprocesses.

    python scripts/bench_import.py [--runs 7] [--repo PATH] [--python EXE]

For each command: the wall time of the whole process (min and median of --runs), the same minus the
bare interpreter's (`python -c pass`, the reference; the ratio is to it), and the import time that
`-X importtime` reports (the cumulative times of the top-level imports after start-up, summed; the
median of --runs). `dse evaluate` also simulates, a few ms, which the wall time includes and the
import time does not.

Two settings of the bytecode cache, each a table:

- ``source``: PYTHONDONTWRITEBYTECODE=1, dse compiled from source at every start (unless a
  ``__pycache__`` already holds it: the table says so). The standard library and the installed
  packages still come from their .pyc files.
- ``cached``: every module from a .pyc (PYTHONPYCACHEPREFIX in a temporary folder, one warm-up
  run first): an installed dse, run a second time.

Runs `python -m dse` with the working directory at --repo (default: this checkout), so the checkout
is imported, not an installed copy. A benchmark, never a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: (label, interpreter arguments); the first is the reference.
CASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("python -c pass", ("-c", "pass")),
    ("import dse", ("-c", "import dse")),
    ("dse --help", ("-m", "dse", "--help")),
    ("dse evaluate", ("-m", "dse", "evaluate", "4D-Ring_FC_Ring_SW", "--size", "1GB")),
)


def run_once(
    python: str, args: tuple[str, ...], cwd: Path, env: dict[str, str], *, importtime: bool = False
) -> tuple[float, str]:
    """One fresh process: its wall time in seconds, and its stderr (the -X importtime report)."""
    cmd = [python, *(("-X", "importtime") if importtime else ()), *args]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return wall, p.stderr


def import_seconds(report: str) -> float:
    """The time -X importtime gives the imports after start-up: the top-level entries' cumulative
    times, summed, from the line after `site` on (`-c pass` gives 0)."""
    total, after_site = 0.0, False
    for line in report.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if not cumulative.strip().isdigit():
            continue  # the header
        top = name.startswith(" ") and not name.startswith("  ")
        if top and after_site:
            total += int(cumulative) / 1e6
        if top and name.strip() == "site":
            after_site = True
    return total


def measure(python: str, cwd: Path, env: dict[str, str], runs: int) -> list[tuple[str, list[float], list[float]]]:
    """Per case: the wall times and the import times of `runs` fresh processes (after one warm-up)."""
    out = []
    for label, args in CASES:
        run_once(python, args, cwd, env)  # warm-up (fills the cache in the cached setting)
        walls = [run_once(python, args, cwd, env)[0] for _ in range(runs)]
        imports = [import_seconds(run_once(python, args, cwd, env, importtime=True)[1]) for _ in range(runs)]
        out.append((label, walls, imports))
    return out


def table(rows: list[tuple[str, list[float], list[float]]]) -> str:
    """The results as a text table, times in ms."""
    ref_min, ref_med = min(rows[0][1]), statistics.median(rows[0][1])
    head = f"{'command':<16} {'wall min':>9} {'wall med':>9} {'- bare min':>10} {'- bare med':>10} {'x bare':>7} {'import med':>10}"
    lines = [head, "-" * len(head)]
    for label, walls, imports in rows:
        lo, med = min(walls), statistics.median(walls)
        lines.append(
            f"{label:<16} {lo * 1e3:9.1f} {med * 1e3:9.1f} {(lo - ref_min) * 1e3:10.1f} {(med - ref_med) * 1e3:10.1f} "
            f"{med / ref_med:7.2f} {statistics.median(imports) * 1e3:10.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure both bytecode settings and print a table for each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=7, help="fresh processes per command and measure (default 7, at least 5)"
    )
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to import (default: this one)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter (default: this one)")
    parser.add_argument(
        "--setting", choices=("source", "cached", "both"), default="both", help="bytecode setting (default both)"
    )
    args = parser.parse_args(argv)
    if args.runs < 5:
        parser.error("--runs: at least 5")
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    print(f"{args.python} ({sys.version.split()[0]}), {args.repo}, {args.runs} runs each; times in ms\n")
    if args.setting in ("source", "both"):
        cached = sorted(str(p.relative_to(args.repo)) for p in (args.repo / "dse").rglob("__pycache__"))
        note = f" (but {', '.join(cached)} exist: those modules come from .pyc)" if cached else ""
        print(f"source: PYTHONDONTWRITEBYTECODE=1, dse compiled at every start{note}")
        print(table(measure(args.python, args.repo, {**base, "PYTHONDONTWRITEBYTECODE": "1"}, args.runs)))
        print()
    if args.setting in ("cached", "both"):
        with tempfile.TemporaryDirectory(prefix="bench_import_") as prefix:
            print("cached: every module from a .pyc (PYTHONPYCACHEPREFIX, warmed up)")
            print(table(measure(args.python, args.repo, {**base, "PYTHONPYCACHEPREFIX": prefix}, args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
