#!/usr/bin/env python3
"""Benchmark: `dse.evaluate_many` on 10,000 bandwidth splits of 4D-Ring_FC_Ring_SW (Themis+SCF all-reduce
of 1 GB, 64 chunks), against a loop of `dse.evaluate` over the same points, in one run.

Run: .venv/bin/python scripts/bench_batch.py [--points N] [--repeat R] [--loop M] [--cost-model M]

The splits: each point gives the 800 GB/s per NPU of the preset's study (studies/bw_split_4d.toml)
to the four dimensions at random (seeded), each at least 25 GB/s. Rows: evaluations/s, min and
median of R (default 5) runs, on one core, for
- `many (rows)`: the vectorised form, `evaluate_many(bandwidths=rows, topology=..., ...)`;
- `many (topologies)`: `evaluate_many(topologies, ...)`, the points as `Topology` objects;
- `evaluate loop`: `evaluate` on the first M (default 1,000) of them, one by one;
and checks that every point of the batch equals `evaluate` on it, to the bit (`identical`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import random
import statistics
import time

import dse
from dse.core.topology import Topology, parse_topology
from dse.sim import engine as engine_mod

TOPOLOGY = "4D-Ring_FC_Ring_SW"
KW = dict(size="1GB", chunks=64, scheduler="themis", queue="scf")


def splits(n: int, nd: int, budget: float = 800.0, minimum: float = 25.0, seed: int = 0) -> list[list[float]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        w = [rng.random() for _ in range(nd)]
        s = sum(w)
        out.append([minimum + (budget - nd * minimum) * x / s for x in w])
    return out


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--loop", type=int, default=1_000)
    ap.add_argument("--cost-model", default="paper")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(os.environ.get("DSE_BENCH_CORE", sorted(os.sched_getaffinity(0))[0]))})
    base = parse_topology(TOPOLOGY)
    rows = splits(args.points, base.ndims)
    topos = [Topology(tuple(dataclasses.replace(d, bandwidth=b) for d, b in zip(base.dims, r))) for r in rows]
    kw = dict(KW, cost_model=args.cost_model)
    print(
        f"dse {dse.__version__}, Python {platform.python_version()}, {platform.machine()}, one core; "
        f"C engine: {'yes' if engine_mod.c_engine_built() else 'no'}; {args.points:,} points, "
        f"{args.cost_model}, Themis+SCF, 1 GB all-reduce, 64 chunks; {args.repeat} runs"
    )
    res = dse.evaluate_many(bandwidths=rows, topology=TOPOLOGY, **kw)
    res2 = dse.evaluate_many(topos, **kw)
    loop = [dse.evaluate(t, **kw) for t in topos[: args.loop]]
    same = all(res.result(i) == r and res2.result(i) == r for i, r in enumerate(loop))
    same = same and res.time_ns == res2.time_ns
    print(
        f"identical to evaluate: {'yes' if same else 'NO'} ({len(loop):,} points compared with evaluate, "
        f"{args.points:,} between the two batch forms)"
    )
    cases = [
        ("many (rows)", args.points, lambda: dse.evaluate_many(bandwidths=rows, topology=TOPOLOGY, **kw)),
        ("many (topologies)", args.points, lambda: dse.evaluate_many(topos, **kw)),
        ("evaluate loop", args.loop, lambda: [dse.evaluate(t, **kw) for t in topos[: args.loop]]),
    ]
    print(f"{'form':<18} {'points':>7} {'min/s':>9} {'median/s':>9}")
    meds = {}
    for name, n, fn in cases:
        ts = timed(fn, args.repeat)
        meds[name] = n / statistics.median(ts)
        print(f"{name:<18} {n:>7} {n / max(ts):>9.0f} {meds[name]:>9.0f}")
    print(f"many (rows) / evaluate loop: {meds['many (rows)'] / meds['evaluate loop']:.1f}x (medians, this run)")


if __name__ == "__main__":
    main()
