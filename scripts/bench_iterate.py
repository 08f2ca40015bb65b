#!/usr/bin/env python3
"""Benchmark: training iterations per second of `dse.iterate` (target: at least 20/s).

Run: .venv/bin/python scripts/bench_iterate.py [--workload W] [--topology T] [--scheduler S]
     [--queue Q] [--cost-model M] [--repeat N] [--iterations K]
Default: the bundled Transformer-1T workload (18 layers, 11 collectives, 588 chunks)
on 4D-Ring_FC_Ring_SW, themis + scf, paper model. Each repeat is one `iterate` call with
`--iterations` iterations (load and topology parsing included, workload loaded once); printed:
iterations/s over all repeats, the median call time, and the simulated iteration time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from dse.iteration import iterate
from dse.workloads import load_workload

DEFAULT = "transformer_1t_fused_only_t"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default=DEFAULT)
    ap.add_argument("--topology", default="4D-Ring_FC_Ring_SW")
    ap.add_argument("--scheduler", default="themis")
    ap.add_argument("--queue", default="scf")
    ap.add_argument("--cost-model", default="paper")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--iterations", type=int, default=1)
    a = ap.parse_args()
    wl = load_workload(a.workload)
    times = []
    res = None
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        res = iterate(wl, a.topology, scheduler=a.scheduler, queue=a.queue, cost_model=a.cost_model, iterations=a.iterations)
        times.append(time.perf_counter() - t0)
    assert res is not None
    total = sum(times)
    chunks = sum(c.chunks for c in res.collectives)
    print(f"{wl.name} on {a.topology}, {a.scheduler}+{a.queue}, {a.cost_model} model: "
          f"{a.repeat * a.iterations / total:.1f} iterations/s (median call {statistics.median(times) * 1e3:.2f} ms "
          f"for {a.iterations} iteration(s), {len(res.collectives)} collectives, {chunks} chunks); "
          f"simulated iteration {res.time_ns / 1e6:.3f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
