"""Parallel sweeps: many `evaluate()` points, in batches over worker processes, into a resumable CSV.

Nothing is lost: each batch's rows are appended with one write as soon as it arrives, so a sweep
killed at any moment keeps every finished batch. Running the same sweep again checks the CSV,
repairs what a kill (or other damage to its own rows) left, refuses a file that is not this sweep's
without touching it (`dse.explore.sweep.csvfile`), and evaluates only the missing points, so the file ends with
exactly one row per point (`point` is its index in the sweep file's expansion). Rows appear in
completion order; sort by `point` for the sweep's order (with one job they come in that order).

The work is spread in batches of points by a runner (`dse.explore.sweep.runners`: forked worker processes by
default, or a `dask.distributed` cluster), so the per-task overhead stays small next to the
points' own work; a training iteration (`dse.explore.sweep.iterations`) is a task of its own. Workers
return each point's results and the parent writes them after the point's parameter cells
(`Sweep.params`).

Workers (`check_jobs`): ``jobs`` above `dse.core.limits.input_limit("processes")` (256,
``DSE_MAX_PROCESSES``) is refused in one line before the CSV is touched; -1 (every core) is capped
at that limit silently; and no more workers start than points are left to run (a note says so
when an explicit ``jobs`` is lowered, none for -1).
"""

from __future__ import annotations

import csv
import io
import math
import os
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from dse.bounds.api import lower_bounds
from dse.core.errors import InputError, raise_if_interrupted
from dse.core.files import read_text
from dse.core.limits import check_input, input_limit
from dse.core.progress import progress_bar, wanted
from dse.core.topology import Topology, parse_topology
from dse.explore.sweep.csvfile import SweepFile
from dse.explore.sweep.file import Point, Sweep, load_sweep, parse_sweep  # noqa: F401  (re-exported)
from dse.explore.sweep.iterations import RESULT_COLUMNS as ITERATION_RESULTS
from dse.explore.sweep.iterations import IterationPoint, iterate_point
from dse.explore.sweep.runners import Runner, get_runner
from dse.sim.batch import evaluate_many
from dse.sim.evaluate import evaluate
from dse.sim.spec import SPEC_KEYS

RESULT_COLUMNS: tuple[str, ...] = ("time_ns", "bw_utilization_pct", "algbw_GBps", "busbw_GBps")
BOUND_COLUMNS: tuple[str, ...] = ("bound_ns", "gap_pct")


def columns(sweep: Sweep) -> tuple[str, ...]:
    """The CSV's columns: `point`, the parameters (`Sweep.columns`), the results (a collective's, and
    the bound columns if asked, or a training iteration's); the file adds a last column, `crc`
    (`dse.explore.sweep.csvfile`)."""
    if sweep.iterations:
        return ("point", *sweep.columns, *ITERATION_RESULTS)
    return ("point", *sweep.columns, *RESULT_COLUMNS, *(BOUND_COLUMNS if sweep.bounds else ()))


# ---------------------------------------------------------------- the work of one batch (in a worker)


@lru_cache(maxsize=64)
def _topology(spec: str) -> Topology:
    return parse_topology(spec)


@lru_cache(maxsize=4096)
def _bound_ns(key: tuple, time_limit_s: float, node_limit: int | None = None) -> float:
    topo, *spec = key
    b = lower_bounds(_topology(topo), time_limit_s=time_limit_s, node_limit=node_limit, **dict(zip(SPEC_KEYS, spec)))
    return b.bound_ns


def evaluate_point(p: Point) -> list:
    """The result columns of one point (as `evaluate` returns them, unrounded; utilisation in %)."""
    r = evaluate(_topology(p.topology), **p.run_args())
    return [r.time_ns, 100.0 * r.bw_utilization, r.algbw_GBps, r.busbw_GBps]


def evaluate_points(points: Sequence[Point]) -> list[list]:
    """The result columns of many points, evaluated together (`dse.evaluate_many`: points of one
    shape run in one compiled call, whatever their sizes, chunks, bandwidths and latencies); each as
    `evaluate_point` gives it."""
    res = evaluate_many([{"topology": _topology(p.topology), **p.run_args()} for p in points])
    out = []
    for k in range(len(points)):
        m = res.metrics(k)
        out.append([res.time_ns[k], 100.0 * m.bw_utilization, m.algbw_GBps, m.busbw_GBps])
    return out


def run_batch(
    batch: Sequence[tuple[int, Point]], bounds: bool = False, time_limit_s: float = 60.0, node_limit: int | None = 100
) -> list[list]:
    """``[index, *results]`` for a batch of (index, point); bounds are cached per bound key in the
    worker. The parent puts each point's parameter cells between the two (`run_sweep`)."""
    rows = []
    for (i, p), res in zip(batch, evaluate_points([p for _, p in batch])):
        row = [i, *res]
        if bounds:
            try:
                b = _bound_ns(p.bound_key(), time_limit_s, node_limit)
                row += [b, 100.0 * (res[0] / b - 1.0)]
            except InputError:  # no bound for this configuration: leave the cells empty
                row += ["", ""]
        rows.append(row)
    return rows


def run_iteration_batch(batch: Sequence[tuple[int, IterationPoint]]) -> list[list]:
    """``[index, *results]`` for a batch of training-iteration points (`dse.explore.sweep.iterations`)."""
    return [[i, *iterate_point(p, _topology(p.topology))] for i, p in batch]


# ---------------------------------------------------------------- running


def auto_batch(n: int, jobs: int) -> int:
    """Points per task: about four tasks per worker, 1 to 200 points each."""
    return max(1, min(200, math.ceil(n / (max(jobs, 1) * 4))))


def make_batches(todo: Sequence[tuple[int, Any]], size: int, group_bounds: bool) -> list[list[tuple[int, Any]]]:
    """Consecutive batches of `size`; with bounds, points sharing a bound stay in one batch."""
    if not group_bounds:
        return [list(todo[k : k + size]) for k in range(0, len(todo), size)]
    groups: dict[tuple, list[tuple[int, Any]]] = {}
    for ip in todo:
        groups.setdefault(ip[1].bound_key(), []).append(ip)
    batches: list[list[tuple[int, Any]]] = [[]]
    for g in groups.values():
        if batches[-1] and len(batches[-1]) + len(g) > size:
            batches.append([])
        batches[-1].extend(g)
    return [b for b in batches if b]


def run_sweep(
    sweep: Sweep | str | Path,
    out_path: str | Path,
    *,
    jobs: int = 1,
    backend: str = "processes",
    scheduler_address: str | None = None,
    batch: int | None = None,
    runner: Runner | None = None,
    progress: bool | None = None,
    label: str | None = None,
) -> dict[str, int]:
    """Evaluate every point of `sweep` not yet in `out_path`, appending rows as batches finish.

    `sweep`: a `Sweep` or a sweep file. `jobs`: worker processes (-1: every core). `backend`:
    ``processes`` or ``dask`` (`dse.explore.sweep.runners`). `batch`: points per task (default `auto_batch`;
    one training iteration per task).
    `runner`: replaces the backend's (it gets the batch function and the batches, yields row lists).
    `progress`: a tqdm bar on stderr, labelled `label`; None shows it only when stderr is a terminal. Returns counts:
    points, done before, evaluated now. The output is checked (and repaired, or refused untouched)
    before anything runs, and locked while the sweep writes it (`dse.explore.sweep.csvfile`).
    """
    if not isinstance(sweep, Sweep):
        sweep = load_sweep(sweep)
    njobs = check_jobs(jobs)
    if batch is not None and batch < 1:
        raise InputError("batch", f"{batch} points per task", "an integer >= 1")
    if runner is None:
        get_runner(backend, njobs, scheduler_address)  # an unknown backend is refused before the CSV is touched
    points = sweep.points
    with SweepFile(out_path, columns(sweep), sweep.params) as out:
        done = out.open()
        todo = [(i, p) for i, p in enumerate(points) if i not in done]
        counts = {"points": len(points), "done_before": len(done), "evaluated": 0}
        if not todo:
            return counts
        njobs = _workers(jobs, njobs, len(todo))
        run = runner or get_runner(backend, njobs, scheduler_address)
        size = batch or (1 if sweep.iterations else auto_batch(len(todo), njobs))
        batches = make_batches(todo, size, sweep.bounds)
        func = _BatchFunc(sweep.bounds, sweep.bounds_time_limit, sweep.bounds_node_limit, sweep.iterations)
        bar = progress_bar(len(points), initial=len(done), desc=label, unit="pt") if wanted(progress) else None
        results = iter(run(func, batches))
        try:
            for rows in results:
                out.append([[r[0], *sweep.params[r[0]], *r[1:]] for r in rows])
                raise_if_interrupted()
                counts["evaluated"] += len(rows)
                if bar is not None:
                    bar.update(len(rows))
        finally:
            close = getattr(results, "close", None)
            if close is not None:  # stop the workers now, not whenever the generator is collected
                close()
            if bar is not None:
                bar.close()
    return counts


def _workers(jobs: int, njobs: int, left: int) -> int:
    """No more workers than points `left`; a note when an explicit `jobs` is lowered."""
    if njobs <= left:
        return njobs
    if jobs != -1:
        many = "s" * (left > 1)
        warnings.warn(f"--jobs {jobs}: {left} point{many} left to run, so {left} worker{many}", stacklevel=3)
    return left


def check_jobs(jobs: int, field: str = "jobs") -> int:
    """The worker processes `jobs` asks for: -1 is every core (at most the process limit);
    0, below -1 or above `input_limit("processes")` (``DSE_MAX_PROCESSES``) is one line."""
    jobs = int(jobs)
    if jobs == 0 or jobs < -1:
        raise InputError(field, f"{jobs} workers", "an integer >= 1, or -1 for every core")
    if jobs == -1:
        return min(os.cpu_count() or 1, input_limit("processes"))
    check_input("processes", jobs, field, "worker processes")
    return jobs


class _BatchFunc:
    """`run_batch` with the sweep's bound options bound (or `run_iteration_batch`), picklable for any backend."""

    def __init__(
        self, bounds: bool, time_limit_s: float, node_limit: int | None = None, iterations: bool = False
    ) -> None:
        self.bounds, self.time_limit_s, self.node_limit = bounds, time_limit_s, node_limit
        self.iterations = iterations

    def __call__(self, batch: Sequence[tuple[int, Any]]) -> list[list]:
        if self.iterations:
            return run_iteration_batch(batch)
        return run_batch(batch, self.bounds, self.time_limit_s, self.node_limit)


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """A sweep CSV as dicts, sorted by `point`."""
    text = read_text(path, "csv", limit="table_bytes")  # special files and sizes refused before reading
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise InputError("csv", f"{str(path)!r} is not a readable CSV: {e}", "a CSV dse sweep wrote") from None
    if rows and "point" in rows[0]:
        rows.sort(key=lambda r: int(r["point"]) if r["point"].isdigit() else -1)
    return rows
