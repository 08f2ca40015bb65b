#!/usr/bin/env python3
"""Search quality: how many trials TPE and random search need to come within 1 % of the optimum.

Run: .venv/bin/python scripts/search_quality.py [--seeds 5]
The space is search_spaces/quality_4d.toml (11^4 = 14641 bandwidth splits of 4D-Ring_FC_Ring_SW,
1 GB all-reduce, baseline+FIFO, paper model). Every point is first evaluated (the exhaustive optimum, as
`dse sweep` would); then each sampler, seeded per trial as `dse study run` seeds it
(`dse.explore.study.samplers`), runs up to the whole grid's size per seed, and the first trial within 1 % of
the optimum is recorded. Prints the medians over the seeds as a Markdown table.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from pathlib import Path

import optuna

from dse import evaluate
from dse.explore.study.samplers import ResumableSampler
from dse.explore.study.spaces import SearchSpace

SPACE = Path(__file__).resolve().parents[1] / "search_spaces" / "quality_4d.toml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = SearchSpace.from_toml(SPACE)
    steps = [round(i * space.step, 10) for i in range(int(round(1 / space.step)) + 1)]

    def value(trial) -> float:  # the same design evaluation for the grid and the samplers
        topo, chunks, sched, queue = space.suggest(trial)
        return evaluate(topo, size="1GB", chunks=chunks, scheduler=sched, queue=queue).time_ns

    t0 = time.perf_counter()
    nd = len(space.kinds)
    shape = "x".join(map(str, space.shapes[nd][0]))
    grid = list(itertools.product(steps, repeat=nd))
    fixed = {
        "dims": nd,
        f"shape_{nd}d": shape,
        "chunks": space.chunks[0],
        "scheduler": space.schedulers[0],
        "queue": space.queues[0],
    } | {f"kind_{nd}d_{i}": space.kinds[i][0] for i in range(nd)}
    best = min(value(optuna.trial.FixedTrial(fixed | {f"bw_{nd}d_{i}": w[i] for i in range(nd)})) for w in grid)
    print(f"grid: {len(grid)} points, optimum {best / 1e6:.4f} ms, enumerated in {time.perf_counter() - t0:.1f} s")
    rows = []
    for name, kind in (("TPE", "tpe"), ("random", "random")):
        needed = []
        for seed in range(args.seeds):
            sampler = ResumableSampler(kind, seed)  # as `dse study run` seeds it: per trial
            study = optuna.create_study(sampler=sampler)
            hit = None
            for n in range(1, len(grid) + 1):
                sampler.index = n - 1  # the trials complete before this one
                study.optimize(value, n_trials=1)
                if study.best_value <= best * 1.01:
                    hit = n
                    break
            needed.append(hit if hit is not None else len(grid) + 1)  # not reached within the grid's size
        rows.append((name, statistics.median(needed), needed))
    print(f"| sampler | trials to within 1 % (median of {args.seeds} seeds) | share of the grid | per seed |")
    print("|---|---|---|---|")
    for name, med, needed in rows:
        shown = [str(n) if n <= len(grid) else f"> {len(grid)}" for n in needed]
        med_s = f"{med:g}" if med <= len(grid) else f"> {len(grid)}"
        share = f"{100 * med / len(grid):.1f} %" if med <= len(grid) else "> 100 %"
        print(f"| {name} | {med_s} | {share} | {', '.join(shown)} |")


if __name__ == "__main__":
    main()
