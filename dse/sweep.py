"""Parallel sweeps: many `evaluate()` points, in batches over joblib, into a resumable CSV.

Nothing is lost: each batch's rows are appended and flushed as soon as it arrives, so a sweep killed
at any moment keeps every finished batch. Running the same sweep again reads the CSV, repairs a
damaged (partial) last line, checks that every row belongs to this sweep and evaluates only the
missing points, so the file ends with exactly one row per point (`point` is its index in the sweep
file's expansion). Rows appear in completion order; sort by `point` for the sweep's order.

The work is spread by joblib (`loky` processes by default, or a `dask.distributed` cluster) in
batches of points, so the per-task overhead stays small next to ~0.1-1 ms per point.
"""

from __future__ import annotations

import csv
import io
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .bounds import lower_bounds
from .errors import InputError
from .evaluate import evaluate
from .sweepfile import Point, Sweep, load_sweep, parse_sweep  # noqa: F401  (re-exported)
from .topology import Topology, parse_topology

RESULT_COLUMNS: tuple[str, ...] = ("time_ns", "bw_utilization", "algbw_GBps", "busbw_GBps")
BOUND_COLUMNS: tuple[str, ...] = ("bound_ns", "gap")

#: A runner takes the batch function and the batches and yields each batch's rows, in any order.
Runner = Callable[[Callable[..., list[list]], list[list[tuple[int, Point]]]], Iterable[list[list]]]


def columns(bounds: bool) -> tuple[str, ...]:
    """The CSV header: `point`, the parameters, the results (and the bound columns if asked)."""
    return ("point",) + Point._fields + RESULT_COLUMNS + (BOUND_COLUMNS if bounds else ())


# ---------------------------------------------------------------- the work of one batch (in a worker)


@lru_cache(maxsize=64)
def _topology(spec: str) -> Topology:
    return parse_topology(spec)


@lru_cache(maxsize=4096)
def _bound_ns(key: tuple, time_limit_s: float, node_limit: int | None = None) -> float:
    topo, coll, size, chunks, model, mode, active = key
    b = lower_bounds(_topology(topo), collective=coll, size=size, chunks=chunks, cost_model=model,
                     latency_mode=mode, active_chunks=active, time_limit_s=time_limit_s,
                     node_limit=node_limit)  # fmt: skip
    return b.bound_ns


def evaluate_point(p: Point) -> list:
    """The result columns of one point (as `evaluate` returns them, unrounded)."""
    r = evaluate(
        _topology(p.topology), collective=p.collective, size=p.size_bytes, chunks=p.chunks,
        scheduler=p.scheduler, queue=p.queue, cost_model=p.cost_model, latency_mode=p.latency_mode,
        active_chunks=p.active_chunks, seed=p.seed,
    )  # fmt: skip
    return [r.time_ns, r.bw_utilization, r.algbw_GBps, r.busbw_GBps]


def run_batch(
    batch: Sequence[tuple[int, Point]], bounds: bool = False, time_limit_s: float = 60.0, node_limit: int | None = 100
) -> list[list]:
    """Full CSV rows for a batch of (index, point); bounds are cached per bound key in the worker."""
    rows = []
    for i, p in batch:
        res = evaluate_point(p)
        row = [i, *p, *res]
        if bounds:
            try:
                b = _bound_ns(p.bound_key(), time_limit_s, node_limit)
                row += [b, res[0] / b - 1.0]
            except InputError:  # no bound for this configuration: leave the cells empty
                row += ["", ""]
        rows.append(row)
    return rows


# ---------------------------------------------------------------- the CSV: read, repair, append


def _fmt(points: Sequence[Point], i: int) -> list[str]:
    return [str(i), *map(str, points[i])]


def read_done(path: Path, header: Sequence[str], points: Sequence[Point]) -> set[int]:
    """Indices already in `path`, after truncating a damaged last line; fails on a foreign file.

    A missing or empty file (or one holding only part of a header) is fresh: it gets the header.
    """
    if not path.exists():
        return set()
    with open(path, "rb") as f:
        data = f.read()
    end = data.rfind(b"\n") + 1  # drop a last line cut short (no newline) ...
    head = _csv_lines([header]).encode()
    if end == 0 and data and not head.startswith(data):
        raise InputError("out", f"{path} exists and is not a sweep CSV", "a new file, or the sweep that wrote it")
    lines = data[:end].decode("utf-8", errors="replace").splitlines()
    if len(lines) > 1 and not _row_ok(next(csv.reader([lines[-1]]), []), header, points):
        end -= len(lines[-1].encode()) + 1  # ... or a complete one that does not parse
        lines.pop()
    if end != len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
    if not lines:
        return set()
    found = next(csv.reader([lines[0]]))
    if found != list(header):
        raise InputError("out", f"{path} exists with other columns", "a new file, or the sweep that wrote it")
    done: set[int] = set()
    for n, row in enumerate(csv.reader(lines[1:]), start=2):
        if not _row_ok(row, header, points):
            raise InputError("out", f"{path} line {n} is not a point of this sweep", "a new file, or the sweep that wrote it")
        done.add(int(row[0]))
    return done


def _row_ok(row: list[str], header: Sequence[str], points: Sequence[Point]) -> bool:
    """Right width, a valid point index, and that point's parameters (and numeric results)."""
    if len(row) != len(header) or not row[0].isdigit() or int(row[0]) >= len(points):
        return False
    nparams = 1 + len(Point._fields)
    if row[:nparams] != _fmt(points, int(row[0])):
        return False
    try:
        [float(x) for x in row[nparams:] if x != ""]
    except ValueError:
        return False
    return True


def _csv_lines(rows: Iterable[list]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


# ---------------------------------------------------------------- running


def auto_batch(n: int, jobs: int) -> int:
    """Points per task: about four tasks per worker, 1 to 200 points each."""
    return max(1, min(200, math.ceil(n / (max(jobs, 1) * 4))))


def make_batches(todo: Sequence[tuple[int, Point]], size: int, group_bounds: bool) -> list[list[tuple[int, Point]]]:
    """Consecutive batches of `size`; with bounds, points sharing a bound stay in one batch."""
    if not group_bounds:
        return [list(todo[k : k + size]) for k in range(0, len(todo), size)]
    groups: dict[tuple, list[tuple[int, Point]]] = {}
    for ip in todo:
        groups.setdefault(ip[1].bound_key(), []).append(ip)
    batches: list[list[tuple[int, Point]]] = [[]]
    for g in groups.values():
        if batches[-1] and len(batches[-1]) + len(g) > size:
            batches.append([])
        batches[-1].extend(g)
    return [b for b in batches if b]


def joblib_runner(jobs: int, backend: str = "loky", scheduler_address: str | None = None) -> Runner:
    """A runner over joblib: `loky` processes, or joblib's `dask` backend on a distributed client.

    With `dask` and no address, a local cluster of `jobs` workers is started for the run.
    """
    try:
        from joblib import Parallel, delayed, parallel_config
    except ImportError:  # pragma: no cover
        raise InputError("backend", "joblib is not installed", "pip install joblib") from None
    if backend not in ("loky", "dask"):
        raise InputError("backend", f"unknown backend {backend!r}", "loky, dask")
    if backend == "dask":
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise InputError("backend", "dask is not installed", "pip install 'dse[dask]'") from None

    def run(func: Callable[..., list[list]], batches: list[list[tuple[int, Point]]]) -> Iterator[list[list]]:
        tasks = (delayed(func)(b) for b in batches)
        if backend == "loky":
            yield from Parallel(n_jobs=jobs, return_as="generator_unordered")(tasks)
            return
        from distributed import Client

        try:
            client = Client(scheduler_address, timeout="10s") if scheduler_address else Client(
                n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)  # fmt: skip
        except OSError as e:
            raise InputError("scheduler_address", f"cannot reach {scheduler_address!r}: {e}") from None
        try:
            with parallel_config(backend="dask"):
                yield from Parallel(n_jobs=-1, return_as="generator_unordered")(tasks)
        finally:
            client.close()

    return run


def run_sweep(
    sweep: "Sweep | str | Path",
    out_path: "str | Path",
    *,
    jobs: int = 1,
    backend: str = "loky",
    scheduler_address: str | None = None,
    batch: int | None = None,
    runner: Runner | None = None,
    progress: bool | None = None,
) -> dict[str, int]:
    """Evaluate every point of `sweep` not yet in `out_path`, appending rows as batches finish.

    `sweep`: a `Sweep` or a sweep file. `jobs`: worker processes (loky) or, for dask without an
    address, local workers. `batch`: points per task (default `auto_batch`). `runner`: replaces the
    joblib runner (it gets the batch function and the batches, yields row lists). `progress`: a tqdm
    bar on stderr; None shows it only when stderr is a terminal. Returns counts: points, done
    before, evaluated now.
    """
    if not isinstance(sweep, Sweep):
        sweep = load_sweep(sweep)
    jobs = int(jobs)
    if jobs == 0 or jobs < -1:
        raise InputError("jobs", f"{jobs} workers", "an integer >= 1, or -1 for every core")
    out = Path(out_path)
    points = sweep.points
    header = columns(sweep.bounds)
    done = read_done(out, header, points)
    todo = [(i, p) for i, p in enumerate(points) if i not in done]
    counts = {"points": len(points), "done_before": len(done), "evaluated": 0}
    if not out.exists() or out.stat().st_size == 0:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", newline="") as f:
            f.write(_csv_lines([header]))
    if not todo:
        return counts
    njobs = (os.cpu_count() or 1) if jobs == -1 else jobs
    size = batch if batch else auto_batch(len(todo), njobs)
    if size < 1:
        raise InputError("batch", f"{size} points per task", "an integer >= 1")
    batches = make_batches(todo, size, sweep.bounds)
    run = runner or joblib_runner(jobs, backend, scheduler_address)
    func = _BatchFunc(sweep.bounds, sweep.bounds_time_limit, sweep.bounds_node_limit)
    bar = _progress(len(points), len(done)) if (progress if progress is not None else sys.stderr.isatty()) else None
    try:
        with open(out, "a", newline="") as f:
            for rows in run(func, batches):
                f.write(_csv_lines(rows))
                f.flush()
                counts["evaluated"] += len(rows)
                if bar is not None:
                    bar.update(len(rows))
    finally:
        if bar is not None:
            bar.close()
    return counts


class _BatchFunc:
    """`run_batch` with the sweep's bound options bound, picklable for any backend."""

    def __init__(self, bounds: bool, time_limit_s: float, node_limit: int | None = None) -> None:
        self.bounds, self.time_limit_s, self.node_limit = bounds, time_limit_s, node_limit

    def __call__(self, batch: Sequence[tuple[int, Point]]) -> list[list]:
        return run_batch(batch, self.bounds, self.time_limit_s, self.node_limit)


def _progress(total: int, initial: int) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, initial=initial, unit="pt", file=sys.stderr, dynamic_ncols=True)


def read_rows(path: "str | Path") -> list[dict[str, str]]:
    """A sweep CSV as dicts, sorted by `point`."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise InputError("csv", f"cannot read {str(path)!r}: {e.strerror or e}") from None
    if rows and "point" in rows[0]:
        rows.sort(key=lambda r: int(r["point"]) if r["point"].isdigit() else -1)
    return rows
