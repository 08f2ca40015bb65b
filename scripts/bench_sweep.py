"""Sweep throughput: points/s of a 10,000-point sweep with 1 and 2 jobs (loky), and the speed-up.

3D-SW_SW_SW_hetero, paper model, all-reduce: 125 sizes x 20 chunk counts x 4 scheduler+queue pairs.
The pool is warmed first (a tiny sweep), so the figures are steady-state throughput.
    .venv/bin/python scripts/bench_sweep.py
"""

import os
import tempfile
import time

from dse.sweep import parse_sweep, run_sweep

TABLE = {
    "topology": "3D-SW_SW_SW_hetero",
    "size": [10**8 + k * 10**6 for k in range(125)],
    "chunks": [4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42],
    "schedules": ["baseline+fifo", "themis+fifo", "themis+scf", "round_robin+scf"],
}


def bench(jobs: int) -> float:
    sweep = parse_sweep(TABLE)
    with tempfile.TemporaryDirectory() as d:
        run_sweep(parse_sweep(dict(TABLE, size=[1000000])), os.path.join(d, "warm.csv"), jobs=jobs)
        t = time.perf_counter()
        run_sweep(sweep, os.path.join(d, "out.csv"), jobs=jobs)
        dt = time.perf_counter() - t
    return len(sweep.points) / dt


if __name__ == "__main__":
    n = len(parse_sweep(TABLE).points)
    one, two = bench(1), bench(2)
    print(f"{n} points on {os.cpu_count()} cores")
    print(f"jobs=1  {one:8.0f} points/s")
    print(f"jobs=2  {two:8.0f} points/s   speed-up {two / one:.2f}x")
