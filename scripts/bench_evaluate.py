#!/usr/bin/env python3
"""Benchmark: evaluations per second of `dse.evaluate` (Themis+SCF all-reduce of 1 GB, 4D-Ring_FC_Ring_SW),
per cost model and chunk count, against the floor of an event loop compiled in the same run.

Run: .venv/bin/python scripts/bench_evaluate.py [--seconds S] [--repeat R] [--chunks 64,256,1024,4096] [--no-python]

Each row: the min and median evaluations/s of R (default 5) timed runs of at least S seconds each,
on one core (this process), and the time per chunk. Engines:
- `same`: the same point again and again (a loop over schedulers or queues);
- `new bw`: each evaluation on new bandwidths, of 997 splits cycled (a sweep or a study over
  bandwidth splits);
- `fresh`: each evaluation at a size never seen before and new bandwidths (a sweep over sizes);
- `python`: `fresh` through the pure-Python path: the schedulers, the cost model's own phases and the
  reference event heap (dse.sim.engine_ref), as `DSE_ENGINE=python` runs them.
`floor`: scripts/minimal_loop.c, compiled here with `cc -O2`, on the same chunks' phases and the
same events (a release and an arrival per phase where latency is overlapped), with FIFO queues and
nothing else; `x floor` = one `evaluate` / one minimal loop, both timed in this run (median over
median); `x python` = evaluations/s over the `python` row's (medians, this run).
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import itertools
import os
import platform
import random
import statistics
import subprocess
import tempfile
import time
from array import array
from pathlib import Path

import dse
from dse.core.topology import Topology, parse_topology
from dse.sim import engine as engine_mod
from dse.sim.evaluate import build_plans

TOPOLOGY = "4D-Ring_FC_Ring_SW"
MINIMAL = Path(__file__).resolve().parent / "minimal_loop.c"


def rates(fn, seconds: float, repeat: int) -> list[float]:
    """Calls per second of `fn`, `repeat` times, each timing at least `seconds`."""
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


def compile_floor(tmp: str):  # type: ignore[no-untyped-def]
    """The minimal loop as a ctypes function, or None without a C compiler."""
    lib = os.path.join(tmp, "minimal_loop.so")
    try:
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, str(MINIMAL)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    fn = ctypes.CDLL(lib).minimal_loop
    fn.restype = ctypes.c_double
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return fn


def floor_call(fn, topo: Topology, model: str, chunks: int):  # type: ignore[no-untyped-def]
    """A no-argument call of the minimal loop on the phases `evaluate` runs for this point."""
    r = dse.evaluate(topo, size="1GB", chunks=chunks, cost_model=model)
    m = dse.get_cost_model(model)
    plan = m.chunking("all_reduce", r.size_bytes, chunks, topo, baseline=False)
    plans = build_plans(m, topo, "all_reduce", list(r.orders), plan.sizes, r.latency_mode, False)
    nph = len(plans[0])
    if any(len(p) != nph for p in plans):
        return None
    dims = array("i", [ph.dim for p in plans for ph in p])
    busy = array("d", [ph.busy for p in plans for ph in p])
    delay = array("d", [ph.delay for p in plans for ph in p])
    a, b, c = dims.buffer_info()[0], busy.buffer_info()[0], delay.buffer_info()[0]
    return lambda: fn(len(plans), nph, topo.ndims, a, b, c), (dims, busy, delay)


def variants(topo: Topology, n: int, seed: int = 0) -> list[Topology]:
    """`n` copies of `topo` with the same total bandwidth split at random (each dim >= 10 %)."""
    rng = random.Random(seed)
    total = topo.total_bandwidth
    out = []
    for _ in range(n):
        w = [0.1 + rng.random() for _ in topo.dims]
        s = sum(w)
        out.append(Topology(tuple(dataclasses.replace(d, bandwidth=total * x / s) for d, x in zip(topo.dims, w))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--chunks", default="64,256,1024,4096")
    ap.add_argument("--no-python", action="store_true", help="leave out the pure-Python row (and x python)")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(os.environ.get("DSE_BENCH_CORE", sorted(os.sched_getaffinity(0))[0]))})
    chunk_list = [int(c) for c in args.chunks.split(",")]
    topo = parse_topology(TOPOLOGY)
    print(
        f"dse {dse.__version__}, Python {platform.python_version()}, {platform.machine()}, one core; "
        f"C engine: {'yes' if engine_mod.c_engine_built() else 'no'}; {args.repeat} runs of >= {args.seconds:g} s"
    )
    print(
        f"{'cost model':<12} {'chunks':>6} {'engine':>7} {'min/s':>9} {'median/s':>9} {'us/chunk':>8} "
        f"{'x floor':>7} {'x python':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        fn = compile_floor(tmp)
        for model, cls in dse.COST_MODELS.items():
            if cls.closed_form:  # no chunks to simulate (`nccl`: scripts/bench_nccl.py)
                continue
            for chunks in chunk_list:
                floor_med = None
                if fn is not None:
                    got = floor_call(fn, topo, model, chunks)
                    if got is not None:
                        call, _keep = got
                        fr = rates(call, args.seconds, args.repeat)
                        floor_med = statistics.median(fr)
                        print(
                            f"{model:<12} {chunks:>6} {'floor':>7} {min(fr):>9.0f} {floor_med:>9.0f} "
                            f"{1e6 / floor_med / chunks:>8.3f} {'1.0':>7} {'-':>8}"
                        )
                engines = ["same", "new bw", "fresh"] + ([] if args.no_python else ["python"])
                got = {e: timed_engine(e, topo, model, chunks, args) for e in engines}
                py = statistics.median(got["python"]) if "python" in got else None
                for engine, rs in got.items():
                    med = statistics.median(rs)
                    ratio = f"{floor_med / med:.1f}" if floor_med else "-"
                    xpy = f"{med / py:.1f}" if py else "-"
                    print(
                        f"{model:<12} {chunks:>6} {engine:>7} {min(rs):>9.0f} {med:>9.0f} {1e6 / med / chunks:>8.3f} "
                        f"{ratio:>7} {xpy:>8}"
                    )


#: sizes never seen before: each `fresh` call takes the next
_SIZES = itertools.count(10**9, 4096)


def timed_engine(engine: str, topo: Topology, model: str, chunks: int, args: argparse.Namespace) -> list[float]:
    """`rates` of one engine row (module docstring)."""
    pool = variants(topo, 997)
    it = iter(range(1 << 62))
    if engine == "same":

        def one() -> None:
            dse.evaluate(topo, size="1GB", chunks=chunks, cost_model=model)
    elif engine == "new bw":

        def one() -> None:
            dse.evaluate(pool[next(it) % len(pool)], size="1GB", chunks=chunks, cost_model=model)
    else:

        def one() -> None:
            dse.evaluate(pool[next(it) % len(pool)], size=next(_SIZES), chunks=chunks, cost_model=model)

    old = engine_mod.DEFAULT
    engine_mod.DEFAULT = "python" if engine == "python" else old
    try:
        return rates(one, args.seconds, args.repeat)
    finally:
        engine_mod.DEFAULT = old


if __name__ == "__main__":
    main()
