#!/usr/bin/env python3
"""Benchmark: trials/s of `dse study run` on studies/bw_split_4d.toml (Themis variant, TPE, journal file).

Run: .venv/bin/python scripts/bench_study.py [--trials N]
Runs N trials with one worker and N with two workers (`--workers 2`, two processes on one journal
file), each on a fresh storage in a temporary folder, and prints trials/s and wall time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dse.search import load_studies, run_study

STUDY = Path(__file__).resolve().parents[1] / "studies" / "bw_split_4d.toml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=500)
    args = ap.parse_args()
    spec = load_studies(STUDY)[0]
    print(f"{spec.name}: TPE (seed {spec.seed}), {args.trials} trials, journal file storage")
    print(f"{'workers':>7} {'wall s':>8} {'trials/s':>9} {'complete':>8} {'best time':>12}")
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            res = run_study(spec, trials=args.trials, workers=workers, storage=str(Path(d) / "bench.journal"))
            dt = time.perf_counter() - t0
            print(f"{workers:>7} {dt:>8.1f} {args.trials / dt:>9.1f} {res['complete']:>8} {res['best_value'] / 1e6:>9.4f} ms")


if __name__ == "__main__":
    main()
