#!/usr/bin/env python3
"""Benchmark: evaluations per second of `dse.evaluate` (Themis+SCF all-reduce, 4D-Ring_FC_Ring_SW).

Run: .venv/bin/python scripts/bench_evaluate.py [--seconds S] [--repeat R] [--python]
Each row: the min and median evaluations/s of R (default 5) timed runs of at least S seconds each,
on one core (this process).
`--python` also measures the pure-Python event loop (the reference the C core mirrors).
`astra-sim-1` memoises its packet-level phase timings across calls (a pure function of dimension,
phase kind and bytes); its `cold` rows clear that cache before every evaluation.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import dse
from dse import simulate as sim_mod
from dse.costs import astra_sim1

TOPOLOGY = "4D-Ring_FC_Ring_SW"


def rates(fn, seconds: float, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= seconds:
                break
        out.append(n / dt)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--python", action="store_true", help="also time the pure-Python event loop")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(f"dse {dse.__version__}, Python {platform.python_version()}, {platform.machine()}, one core; "
          f"C core: {'yes' if sim_mod._csim is not None else 'no'}")  # fmt: skip
    engines = ["auto", "cold"] + (["python"] if args.python else [])
    print(f"{'cost model':<12} {'chunks':>6} {'engine':>7} {'min/s':>9} {'median/s':>9} {'ms (med)':>8}")
    csim = sim_mod._csim
    for model in dse.COST_MODELS:
        for chunks in (64, 512):
            for engine in engines:
                if engine == "cold" and model != "astra-sim-1":
                    continue
                sim_mod._csim = None if engine == "python" else csim

                def one() -> None:
                    if engine == "cold":
                        astra_sim1.phase_timing.cache_clear()
                    dse.evaluate(TOPOLOGY, size="1GB", chunks=chunks, scheduler="themis", queue="scf", cost_model=model)

                rs = rates(one, args.seconds, args.repeat)
                med = statistics.median(rs)
                label = engine if engine != "auto" else ("c" if csim is not None else "python")
                print(f"{model:<12} {chunks:>6} {label:>7} {min(rs):>9.0f} {med:>9.0f} {1e3 / med:>8.3f}")
    sim_mod._csim = csim


if __name__ == "__main__":
    main()
