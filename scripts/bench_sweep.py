"""Sweep throughput: points/s of a 10,000-point sweep with 1 and 2 jobs, and against joblib's loky.

3D-SW_SW_SW_hetero, paper model, all-reduce: 125 sizes x 20 chunk counts x 4 scheduler+queue pairs.
Each configuration runs `--repeat` times (default 5) into a fresh CSV; min and median are printed.
`loky` is the runner sweeps used before dse.explore.sweep.runners (joblib's loky processes), measured in the same
run as the reference for the forked pool (`processes`, the default).

    .venv/bin/python scripts/bench_sweep.py [--repeat 5]
"""

import argparse
import os
import statistics
import tempfile
import time

from dse.explore.sweep.sweeps import parse_sweep, run_sweep

TABLE = {
    "topology": "3D-SW_SW_SW_hetero",
    "size": [10**8 + k * 10**6 for k in range(125)],
    "chunks": [4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42],
    "schedules": ["baseline+fifo", "themis+fifo", "themis+scf", "round_robin+scf"],
}


def loky_runner(jobs):
    from joblib import Parallel, delayed

    def run(func, tasks):
        yield from Parallel(n_jobs=jobs, return_as="generator_unordered")(delayed(func)(t) for t in tasks)

    return run


def bench(jobs: int, runner=None) -> float:
    sweep = parse_sweep(TABLE)
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        run_sweep(sweep, os.path.join(d, "out.csv"), jobs=jobs, runner=runner)
        dt = time.perf_counter() - t
    return len(sweep.points) / dt


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = len(parse_sweep(TABLE).points)
    with tempfile.TemporaryDirectory() as d:  # warm up: imports, loky's pool
        run_sweep(parse_sweep(dict(TABLE, size=[1000000])), os.path.join(d, "w.csv"), jobs=2, runner=loky_runner(2))
    print(f"{n} points on {os.cpu_count()} cores, {args.repeat} runs each (points/s)")
    print(f"{'runner':<10} {'jobs':>4} {'min':>8} {'median':>8}")
    medians = {}
    for name, jobs, runner in (("processes", 1, None), ("processes", 2, None), ("loky", 2, loky_runner(2))):
        rates = [bench(jobs, runner) for _ in range(args.repeat)]
        medians[(name, jobs)] = statistics.median(rates)
        print(f"{name:<10} {jobs:>4} {min(rates):>8.0f} {statistics.median(rates):>8.0f}")
    print(
        f"speed-up of 2 jobs over 1 (medians): {medians[('processes', 2)] / medians[('processes', 1)]:.2f}x; "
        f"processes / loky at 2 jobs: {medians[('processes', 2)] / medians[('loky', 2)]:.2f}x"
    )
