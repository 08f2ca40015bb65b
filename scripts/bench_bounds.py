#!/usr/bin/env python3
"""Benchmark: ILP solve time of the bounds over 2-5 dimensions and 4-1024 chunks.

Run: .venv/bin/python scripts/bench_bounds.py [--topologies K] [--time-limit S] [--seed N]
For each (dimensions, chunks) cell, K random topologies (seeded: kinds, power-of-two sizes,
bandwidths 25-400 GB/s, latencies 0-2000 ns; 1 GB all-reduce, paper model) are bounded. Printed:
median and maximum of the load-only ILP as `lower_bounds` solves it (`dse.bounds.api.ilp_bound`: the
fluid LP, the whole-step floor, from four dimensions up the searches for a schedule at the floor
(`dse.bounds.floorfit`), and when they find none the PuLP flow model solved by HiGHS in process; all of
it is timed), how many solves hit the time limit (they report the proven floor or HiGHS's dual
bound), and the median of the whole `lower_bounds` call (LP + ILP + pipeline bound). One untimed
call first loads the solver libraries, so the first cell does not carry their import time.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from dse.bounds.api import chunk_types, ilp_bound, lower_bounds
from dse.core.topology import Dim, Topology
from dse.sim.spec import CollectiveSpec

KINDS = ("ring", "fc", "switch")


def random_topology(rng: random.Random, ndims: int) -> Topology:
    dims = []
    for _ in range(ndims):
        kind = rng.choice(KINDS)
        dims.append(
            Dim(
                kind,
                2 ** rng.randint(1, 4),
                rng.choice([25, 50, 100, 150, 200, 250, 375, 400]),
                rng.choice([0, 20, 500, 700, 1700, 2000]),
            )
        )
    return Topology(tuple(dims))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topologies", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dims", default="2,3,4,5")
    ap.add_argument("--chunks", default="4,16,64,256,1024")
    args = ap.parse_args()
    lower_bounds("Ring(4,100,10)_SW(4,50,10)_FC(2,100,10)_Ring(2,50,10)", size="1GB", chunks=16)  # warm-up
    rng = random.Random(args.seed)
    print(
        f"ILP solve time, {args.topologies} random topologies per cell, time limit {args.time_limit:g} s, seed {args.seed}"
    )
    print(f"{'dims':>4} {'chunks':>6} {'ILP median':>11} {'ILP max':>9} {'limited':>7} {'all bounds median':>18}")
    for nd in map(int, args.dims.split(",")):
        topos = [random_topology(rng, nd) for _ in range(args.topologies)]
        for chunks in map(int, args.chunks.split(",")):
            ilp_times, full_times, limited = [], [], 0
            for topo in topos:
                spec = CollectiveSpec.parse(topo, size="1GB", chunks=chunks)
                types = chunk_types(spec)
                t0 = time.perf_counter()
                bw = [spec.cost_model.bytes_per_ns(d) for d in spec.topology.dims]
                _, _, sol = ilp_bound(types, 1, bw, time_limit_s=args.time_limit)
                ilp_times.append(time.perf_counter() - t0)
                limited += sol.status != "optimal"
                t0 = time.perf_counter()
                lower_bounds(topo, size="1GB", chunks=chunks, time_limit_s=args.time_limit)
                full_times.append(time.perf_counter() - t0)
            print(
                f"{nd:>4} {chunks:>6} {1e3 * statistics.median(ilp_times):>9.1f}ms {1e3 * max(ilp_times):>7.0f}ms "
                f"{limited:>4}/{len(topos)} {1e3 * statistics.median(full_times):>16.1f}ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
