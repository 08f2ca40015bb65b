#!/usr/bin/env python3
"""Benchmark: trials/s of `dse study run` on studies/bw_split_4d.toml (Themis variant, TPE, journal file).

Run: .venv/bin/python scripts/bench_study.py [--trials N] [--repeat R] [--workers 1,2] [--profile]
Runs N trials with one worker and N with two workers (`--workers 2`, two processes on one journal
file), each on a fresh storage in a temporary folder, R times (default 5), and prints the min and
median wall time and the trials/s they give. It measures the dse of the tree it is in (its worker
processes too), whatever dse the Python running it has installed: run it from another checkout to
compare. `--profile`: instead, one run of N trials with one worker under cProfile, and where its
time goes (journal fsync and other writes, the sampler, the LP bound, the evaluations, the rest).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

from dse.explore.study.studies import load_studies  # noqa: E402
from dse.explore.study.workers import run_study  # noqa: E402

STUDY = ROOT / "studies" / "bw_split_4d.toml"


def timed_run(spec, trials: int, workers: int) -> tuple[float, int]:
    """Wall seconds of one run of `trials` trials on a fresh journal, and the complete trials."""
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        res = run_study(spec, trials=trials, workers=workers, storage=str(Path(d) / "bench.journal"))
        return time.perf_counter() - t0, res["complete"]


def bench(spec, trials: int, repeat: int, workers: list[int]) -> None:
    """The min and median of `repeat` runs per worker count, as seconds and trials/s."""
    print(f"{'workers':>7} {'min s':>7} {'median s':>8} {'trials/s (best)':>15} {'trials/s (med)':>14} {'complete':>8}")
    for w in workers:
        runs = [timed_run(spec, trials, w) for _ in range(repeat)]
        times = [t for t, _ in runs]
        best, med = min(times), statistics.median(times)
        print(f"{w:>7} {best:>7.2f} {med:>8.2f} {trials / best:>15.1f} {trials / med:>14.1f} {runs[-1][1]:>8}")
        print(f"{'':>7} runs (s): {', '.join(f'{t:.2f}' for t in times)}")


def _cumulative(stats: dict, match) -> float:
    return sum(v[3] for k, v in stats.items() if match(k))


def profile(spec, trials: int) -> None:
    """One run with one worker under cProfile: seconds, share and ms per trial of each part."""
    with tempfile.TemporaryDirectory() as d:
        prof = cProfile.Profile()
        prof.runcall(run_study, spec, trials=trials, storage=str(Path(d) / "bench.journal"))
    st = pstats.Stats(prof).stats  # (file, line, function) -> (calls, calls, own s, cumulative s, callers)
    total = _cumulative(st, lambda k: k[2] == "run_study" and k[0].endswith("study/workers.py"))
    fsync = sum(v[2] for k, v in st.items() if k[2] == "<built-in method posix.fsync>")
    writes = _cumulative(st, lambda k: k[2] == "append_logs")
    hooks = ("infer_relative_search_space", "sample_relative", "sample_independent", "before_trial", "after_trial")
    sampler = _cumulative(st, lambda k: k[0].endswith("study/samplers.py") and k[2] in hooks)
    bound = _cumulative(st, lambda k: k[2] == "fluid_bound" and k[0].endswith("study/trials.py"))
    evaluation = _cumulative(st, lambda k: k[2] == "evaluate_many" and k[0].endswith("batch.py"))
    parts = [
        ("journal fsync", fsync),
        ("journal writes, fsync aside", writes - fsync),
        ("sampler (TPE, its journal reads included)", sampler),
        ("LP bound", bound),
        ("evaluation (Themis+SCF, baseline+FIFO)", evaluation),
        ("other (ask, tell, gate, reads, suggest)", total - writes - sampler - bound - evaluation),
    ]
    print(f"{trials} trials, one worker, under cProfile: {total:.2f} s ({1e3 * total / trials:.2f} ms per trial)")
    for name, s in parts:
        print(f"  {name:42s} {s:6.2f} s {100 * s / total:5.1f} % {1e3 * s / trials:6.2f} ms/trial")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workers", default="1,2", help="worker counts, comma-separated (default 1,2)")
    ap.add_argument("--profile", action="store_true", help="one profiled run with one worker instead")
    args = ap.parse_args()
    spec = load_studies(STUDY)[0]
    print(f"{spec.name}: TPE (seed {spec.seed}), {args.trials} trials, journal file storage, dse from {ROOT}")
    if args.profile:
        profile(spec, args.trials)
    else:
        bench(spec, args.trials, args.repeat, [int(w) for w in args.workers.split(",")])


if __name__ == "__main__":
    main()
