#!/usr/bin/env python3
"""Benchmark: trials/s of `dse study run` on studies/bw_split_4d.toml (Themis variant, TPE, journal file).

Run: .venv/bin/python scripts/bench_study.py [--trials N] [--repeat R]
Runs N trials with one worker and N with two workers (`--workers 2`, two processes on one journal
file), each on a fresh storage in a temporary folder, R times (default 5), and prints the min and
median wall time and trials/s.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from dse.search import load_studies, run_study

STUDY = Path(__file__).resolve().parents[1] / "studies" / "bw_split_4d.toml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    spec = load_studies(STUDY)[0]
    print(f"{spec.name}: TPE (seed {spec.seed}), {args.trials} trials, journal file storage")
    print(f"{'workers':>7} {'min s':>7} {'median s':>8} {'trials/s (med)':>14} {'complete':>8}")
    for workers in (1, 2):
        times = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as d:
                t0 = time.perf_counter()
                res = run_study(spec, trials=args.trials, workers=workers, storage=str(Path(d) / "bench.journal"))
                times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print(f"{workers:>7} {min(times):>7.1f} {med:>8.1f} {args.trials / med:>14.1f} {res['complete']:>8}")


if __name__ == "__main__":
    main()
