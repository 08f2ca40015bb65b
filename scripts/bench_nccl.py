#!/usr/bin/env python3
"""Benchmark: `dse.evaluate` under the `nccl` cost model against `paper`, on one GPU cluster topology.

Run: .venv/bin/python scripts/bench_nccl.py [--seconds S] [--repeat R] [--topology T] [--calibration NAME]
     [--settings NCCL_ALGO=ring,...]

Both models evaluate a Themis+SCF all-reduce (the scheduler does not apply under `nccl`) on the same
topology, in two ways: `same` (one point again and again) and `fresh` (each call at a size never
seen before). Each row: min and median evaluations/s of R (default 5) timed runs of at least S
seconds, on one core (this process); `nccl / paper` is the ratio of the medians measured in this run
(above 1: `nccl` is faster). The machine is named on the first line. `--calibration NAME` (a bundled
machine such as HGX-H100, or a calibration file) times `nccl:NAME`: a calibration's time of NCCL's
pick, which costs one more plan than the defaults' (the pick comes from the defaults). `--settings`
appends NCCL's forced settings to the model's name (``nccl,NCCL_ALGO=ring``: dse.costs.nccl.env).
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_evaluate import rates  # noqa: E402  (calls per second, min of R timed runs)

import dse  # noqa: E402

TOPOLOGY = "SW(8,450,0,links=18)_SW(16,50,0,links=1)"


def caller(model: str, topology: str, fresh: bool) -> Callable[[], object]:
    """One evaluation per call: the same 1 GB point, or a size not seen before (1 GB upwards)."""
    sizes = itertools.count(10**9, 8)
    if fresh:
        return lambda: dse.evaluate(topology, size=next(sizes), cost_model=model, chunks=64)
    return lambda: dse.evaluate(topology, size=10**9, cost_model=model, chunks=64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--topology", default=TOPOLOGY)
    ap.add_argument("--calibration", default=None, help="time nccl:NAME (a bundled machine or a calibration file)")
    ap.add_argument("--settings", default=None, help="NCCL's forced settings, e.g. NCCL_ALGO=ring,NCCL_PROTO=Simple")
    args = ap.parse_args()
    nccl = "nccl" if args.calibration is None else f"nccl:{args.calibration}"
    if args.settings:
        nccl += f",{args.settings}"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {load:.2f}")
    print(f"topology {args.topology}; min / median evaluations/s of {args.repeat} runs of >= {args.seconds} s")
    print(f"{'engine':8} {'paper':>20} {nccl:>20} {'nccl / paper':>13}")
    for what in ("same", "fresh"):
        got = {}
        for model in ("paper", nccl):
            fn = caller(model, args.topology, what == "fresh")
            fn()  # warm: imports, caches
            got[model] = rates(fn, args.seconds, args.repeat)
        cells = [f"{min(r):>9,.0f} / {statistics.median(r):>8,.0f}" for r in got.values()]
        ratio = statistics.median(got[nccl]) / statistics.median(got["paper"])
        print(f"{what:8} {cells[0]:>20} {cells[1]:>20} {ratio:>13.2f}")


if __name__ == "__main__":
    main()
