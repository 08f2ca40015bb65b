"""Sweep files: a TOML `[sweep]` table of `evaluate()` parameters expanded into points.

Every value is validated with the parsers `evaluate` itself uses, before any point runs, so a bad
file costs one line naming the key (and exit code 2 on the command line) rather than half a sweep.

```toml
[sweep]
topology = ["3D-SW_SW_SW_hetero", "Ring(4,375,20)_SW(8,100,1700)"]   # presets, notations, network files
size = ["100MB", "1GB"]                                              # ints (bytes) or strings
chunks = [16, 64]
schedules = ["baseline+fifo", "themis+scf"]                          # scheduler+queue pairs
bounds = true                                                        # optional: bound_ns and gap_pct
```

Each parameter is a list or a scalar; the points are the Cartesian product of the lists in the
order of `PARAMS` (the last varies fastest), each list in the file's order, so point numbers are
stable. `scheduler` and `queue` multiply like the others; `schedules` instead lists scheduler/queue
pairs (``"themis+scf"`` or ``{scheduler = "themis", queue = "scf"}``) and excludes both.

Per-dimension axes (`dse.explore.sweep.axes`, which documents them in full) vary each topology's
bandwidths and latencies; they come right after ``topology`` in the order (for each topology,
each bandwidth vector, each latency vector, then the other parameters)::

    bandwidth = [375, 175, 150, 100]              # GB/s per NPU per dimension; or a list of vectors
    bandwidth = { total = 800, step = 40, min = 40, max = 400, constraints = ["bw0 >= bw1"] }
    latency = [20, 700, 700, 1700]                # ns per step; or a list of vectors
    bw0 = [100, 200]    lat3 = 1700               # one dimension: a value or a list (not with the above)

A ``workload`` key (one value or a list: anything ``dse iterate`` takes) makes the sweep's points
training iterations (`dse.explore.sweep.iterations`): ``placement`` may go with it; ``size``,
``collective``, ``latency_mode``, ``active_chunks``, ``seed`` and the bounds are then refused,
and ``scheduler`` may also be ``ideal``. A relative file (network, workload, placement) is read
from the sweep file's folder.

The CSV (`dse.explore.sweep.sweeps.columns`): ``point``, ``design`` (the topology as the file names it),
``topology`` (the exact notation that ran, substitutions included), the other parameters,
``bw0_GBps`` .. ``bw{n-1}_GBps``, ``lat0_ns`` .. ``lat{n-1}_ns`` and ``total_bw_GBps`` (n: the
most dimensions of any topology in the sweep; the cells of dimensions a topology does not have
are empty), then the results: for a collective ``time_ns``, ``bw_utilization_pct``,
``algbw_GBps``, ``busbw_GBps`` (and ``bound_ns``, ``gap_pct`` with bounds), for an iteration
`dse.explore.sweep.iterations.RESULT_COLUMNS`; ``crc`` last.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.core.collectives import parse_collective
from dse.core.errors import InputError
from dse.core.files import read_toml
from dse.core.limits import MAX_SWEEP_POINTS
from dse.core.network_yaml import is_network_file
from dse.core.topology import Topology, parse_topology
from dse.core.units import parse_int, parse_positive, parse_size
from dse.costs import get_cost_model, with_calibration
from dse.explore.sweep.axes import Axes, axis_cells, axis_columns, exact_notation, is_axis_key, parse_axes
from dse.explore.sweep.iterations import (
    ITERATION_PARAMS,
    IterationPoint,
    beside,
    check_fits,
    check_keys,
    iteration_points,
)
from dse.schedulers import get_scheduler, parse_queue
from dse.schedulers.lp_guided import too_many_orders
from dse.sim.result import POINT_FIELDS, Point
from dse.sim.spec import CollectiveSpec

#: The `evaluate()` parameters a sweep may vary, in expansion order.
PARAMS: tuple[str, ...] = (
    "topology",
    "collective",
    "size",
    "chunks",
    "scheduler",
    "queue",
    "cost_model",
    "latency_mode",
    "active_chunks",
    "seed",
)
#: Keys of `[sweep]` that are options, not parameters.
OPTIONS: tuple[str, ...] = ("schedules", "bounds", "bounds_time_limit", "bounds_node_limit", "calibration")
DEFAULTS: dict[str, Any] = {
    "collective": "all_reduce",
    "chunks": 64,
    "scheduler": "themis",
    "queue": "scf",
    "cost_model": "paper",
    "latency_mode": None,
    "active_chunks": 1,
    "seed": 0,
}


#: keys besides the collective's parameters and options (iteration sweeps, per-dimension axes)
MORE_KEYS: tuple[str, ...] = ("workload", "placement", "bandwidth", "latency", "bwK", "latK")


@dataclass(frozen=True)
class Sweep:
    """An expanded sweep: its points in order (`Point`s, or `IterationPoint`s when the sweep names
    a workload), whether to add bounds, and the CSV's parameter columns (after ``point``) with
    each point's cells under them."""

    points: tuple[Point | IterationPoint, ...]
    bounds: bool = False
    bounds_time_limit: float = 60.0
    source: str = "<sweep>"
    bounds_node_limit: int = 100
    columns: tuple[str, ...] = ()
    params: tuple[tuple, ...] = ()

    @property
    def iterations(self) -> bool:
        """Whether the points are training iterations."""
        return bool(self.points) and isinstance(self.points[0], IterationPoint)


def _values(key: str, raw: object) -> list:
    """A list from a list or a scalar; an empty list is an error."""
    vals = list(raw) if isinstance(raw, list) else [raw]
    if not vals:
        raise InputError(f"sweep.{key}", "empty list", "at least one value")
    return vals


def _canonical(key: str, vals: list, parse: Callable[[Any], Any]) -> list:
    """Each distinct value parsed once; the error names the key and the value."""
    out, seen = [], {}
    for v in vals:
        marker = (type(v).__name__, repr(v))
        if marker not in seen:
            try:
                seen[marker] = parse(v)
            except InputError as e:
                raise InputError(f"sweep.{key}", f"{v!r}: {e}") from None
        out.append(seen[marker])
    return out


def _scheduler_name(v: object) -> str:
    if not isinstance(v, str):
        raise InputError("scheduler", f"{v!r} is not a name")
    name = get_scheduler(v).name
    if name == "fixed":
        raise InputError("scheduler", "fixed needs per-point orders, which sweeps do not take", "any other scheduler")
    return name


def _iteration_scheduler(v: object) -> str:
    """A scheduler of a training iteration: any sweep's, or ``ideal`` (every collective at 100 %)."""
    if isinstance(v, str) and v.strip().lower() == "ideal":
        return "ideal"
    return _scheduler_name(v)


def _schedule_pair(v: object, scheduler: Callable[[object], str] = _scheduler_name) -> tuple[str, str]:
    if isinstance(v, str) and v.count("+") == 1:
        s, q = v.split("+")
    elif isinstance(v, dict) and set(v) == {"scheduler", "queue"}:
        s, q = v["scheduler"], v["queue"]
    else:
        raise InputError("schedules", "not a pair", '"scheduler+queue" or {scheduler = ..., queue = ...}')
    return scheduler(s), parse_queue(q)


def _iteration_pair(v: object) -> tuple[str, str]:
    return _schedule_pair(v, _iteration_scheduler)


def _str(parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    def inner(v: object) -> Any:
        """`parse(v)` of a string `v`; anything else is one `InputError`."""
        if not isinstance(v, str):
            raise InputError("value", f"{v!r} is not a string")
        return parse(v)

    return inner


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "topology": _str(lambda v: v.strip()),  # parsed below, once per distinct notation
    "collective": _str(lambda v: parse_collective(v, rooted=True)),  # the model checks rooted ones
    "size": lambda v: parse_size(v),
    "chunks": lambda v: parse_int(v, "chunks", minimum=1),
    "scheduler": _scheduler_name,
    "queue": _str(parse_queue),
    "cost_model": _str(lambda v: get_cost_model(v).label),
    "latency_mode": _str(lambda v: v.strip().lower()),  # checked per model below
    "active_chunks": lambda v: parse_int(v, "active_chunks", minimum=1),
    "seed": lambda v: parse_int(v, "seed", minimum=0),
    "workload": _str(lambda v: v.strip()),  # read and fitted by `check_fits`
    "placement": _str(lambda v: v.strip()),
}


def parse_sweep(table: dict[str, Any], source: str = "<sweep>", base: Path | None = None) -> Sweep:
    """Validate a `[sweep]` table and expand it into its points (see the module docstring). A
    relative ASTRA-sim network file among the topologies (and a workload or placement file) is read
    from `base` (the sweep file's folder), as a study space's ``network`` is."""
    iterations = "workload" in table
    params = ITERATION_PARAMS if iterations else PARAMS
    unknown = [k for k in table if k not in params and k not in OPTIONS and not is_axis_key(k)]
    check_keys(table)  # a collective's key in an iteration sweep, or placement alone
    if unknown:
        raise InputError(f"sweep.{unknown[0]}", "unknown key", ", ".join(PARAMS + OPTIONS + MORE_KEYS))
    for key in ("topology",) if iterations else ("topology", "size"):
        if key not in table:
            raise InputError(f"sweep.{key}", "missing", "a value or a list of values")
    if "schedules" in table and ("scheduler" in table or "queue" in table):
        raise InputError("sweep.schedules", "given with scheduler or queue", "either schedules or scheduler/queue")
    lists = _lists(table, params, base, iterations)
    if "schedules" in table:
        pair = _iteration_pair if iterations else _schedule_pair
        pairs = _canonical("schedules", _values("schedules", table["schedules"]), pair)
    else:
        pairs = list(itertools.product(lists["scheduler"], lists["queue"]))
    designs = _designs(lists["topology"], base)
    others = len(pairs) * math.prod(len(lists[k]) for k in params if k not in ("topology", "scheduler", "queue"))
    axes = parse_axes(table, designs, others * len(designs))
    n = len(designs) * len(axes.bandwidth) * len(axes.latency) * others
    if n > MAX_SWEEP_POINTS:
        raise InputError(
            "sweep", f"{n:,} points", f"at most {MAX_SWEEP_POINTS:,} per sweep file (split it into several)"
        )
    variants, topos = _variants(designs, axes)
    ndims = max(t.ndims for t in designs.values())
    if iterations:
        check_fits(lists["workload"], lists["placement"], designs)
        runs = list(iteration_points(variants, lists, pairs))
        columns = ("design", *ITERATION_PARAMS, *axis_columns(ndims))
        return Sweep(tuple(p for p, _ in runs), source=source, columns=columns, params=tuple(c for _, c in runs))
    bounds = table.get("bounds", False)
    if not isinstance(bounds, bool):
        raise InputError("sweep.bounds", f"{bounds!r} is not a boolean", "true or false")
    limit = parse_positive(table.get("bounds_time_limit", 60.0), "sweep.bounds_time_limit")
    nodes = parse_int(table.get("bounds_node_limit", 100), "sweep.bounds_node_limit", minimum=1)
    if bounds and any(get_cost_model(m).closed_form for m in lists["cost_model"]):
        raise InputError(
            "sweep.bounds", "true with a closed-form cost model (nccl)", "bounds = false, or paper / astra-sim"
        )
    points = list(_expand(variants, topos, lists, pairs))
    columns = ("design", *POINT_FIELDS, *axis_columns(ndims))
    return Sweep(tuple(p for p, _ in points), bounds, limit, source, nodes, columns, tuple(c for _, c in points))


def _lists(table: dict[str, Any], params: tuple[str, ...], base: Path | None, iterations: bool) -> dict[str, list]:
    """Each parameter's values, parsed (a workload or placement file resolved beside `base`)."""
    lists: dict[str, list] = {}
    for key in params:
        raw = table.get(key, DEFAULTS.get(key))
        if raw is None:
            lists[key] = [None if key != "placement" else ""]
            continue
        parse = _iteration_scheduler if key == "scheduler" and iterations else _PARSERS[key]
        if key == "cost_model":
            raw = with_calibration(_values(key, raw), table.get("calibration"), base, "sweep.calibration")
        lists[key] = _canonical(key, _values(key, raw), parse)
        if key in ("workload", "placement"):
            lists[key] = list(dict.fromkeys(beside(v, base, key == "placement") for v in lists[key]))
    return lists


def _designs(specs: list[str], base: Path | None) -> dict[str, Topology]:
    """The sweep's topologies as the file names them (network files resolved beside `base`), parsed."""
    designs: dict[str, Topology] = {}
    for t in dict.fromkeys(_beside(t, base) for t in specs):
        try:
            designs[t] = parse_topology(t)
        except InputError as e:
            raise InputError("sweep.topology", f"{t!r}: {e}") from None
    return designs


def _variants(designs: dict[str, Topology], axes: Axes) -> tuple[list[tuple[str, str, tuple]], dict[str, Topology]]:
    """(design, what the worker runs, (exact notation, *axis cells)) for every design and
    substitution, and every topology run by what runs it. Without axes a point runs its design as
    the file names it; with them, the exact notation of the substituted copy."""
    ndims = max(t.ndims for t in designs.values())
    variants, topos = [], {}
    for name, design in designs.items():
        for topo in axes.variants(design):
            notation = exact_notation(topo)
            spec = notation if axes.swept else name
            topos[spec] = topo
            variants.append((name, spec, (notation, *axis_cells(topo, ndims))))
    return variants, topos


def _expand(
    variants: list[tuple[str, str, tuple]],
    topos: dict[str, Topology],
    lists: dict[str, list],
    pairs: list[tuple[str, str]],
) -> Iterator[tuple[Point, tuple]]:
    """The Cartesian product in `PARAMS` order, each point with its CSV parameter cells; the model
    resolves and checks the latency mode, and every distinct collective is checked against the
    work limit for its schedule (`dse.core.limits`)."""
    modes: dict[tuple, str] = {}
    checked: set[tuple] = set()
    rest = list(
        itertools.product(
            lists["collective"],
            lists["size"],
            lists["chunks"],
            pairs,
            lists["cost_model"],
            lists["latency_mode"],
            lists["active_chunks"],
            lists["seed"],
        )
    )
    for design, t, (notation, *cells) in variants:
        for coll, size, chunks, (s, q), model, mode, active, seed in rest:
            key = (t, coll, model, mode, active)
            if key not in modes:
                try:
                    modes[key] = get_cost_model(model).check(topos[t], coll, mode, active)
                except InputError as e:
                    raise InputError("sweep", f"topology {t!r}, collective {coll}, cost_model {model}: {e}") from None
            run = (t, coll, size, chunks, s, q, model, modes[key], active)
            if run not in checked:
                checked.add(run)
                _check_run(topos[t], coll, size, chunks, s, q, model, modes[key], active)
            yield (
                Point(t, coll, size, chunks, s, q, model, modes[key], active, seed),
                (design, notation, coll, size, chunks, s, q, model, modes[key], active, seed, *cells),
            )


def _check_run(
    topo: Topology, coll: str, size: int, chunks: int, sched: str, queue: str, model: str, mode: str, active: int
) -> None:
    """What `evaluate` would refuse at run time, refused before the sweep starts."""
    where = (
        f"topology {topo.notation() if topo.name is None else topo.name}, size {size}, chunks {chunks}, {sched}+{queue}"
    )
    try:
        spec = CollectiveSpec.parse(
            topo, collective=coll, size=size, chunks=chunks, cost_model=model, latency_mode=mode, active_chunks=active
        )
        spec.check_work(queue=queue, extra_simulations=get_scheduler(sched).simulations())
        if sched == "lp_guided" and (why := too_many_orders(topo.ndims)):
            raise InputError("scheduler", why, "at most 8 dimensions, or another scheduler")
    except InputError as e:
        raise InputError("sweep", f"{where}: {e}") from None


def _beside(spec: str, base: Path | None) -> str:
    """A relative network-file path, read from `base`: the path from the working folder to it (what
    the points, and the CSV, then name); any other topology as it is."""
    if base is None or not is_network_file(spec) or Path(spec).is_absolute():
        return spec
    return os.path.relpath(base / spec)


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file; any problem is one `InputError` line naming the key."""
    doc = read_toml(path, "sweep file")
    path = Path(path)
    extra = [k for k in doc if k != "sweep"]
    if extra:
        raise InputError(extra[0], "unknown table or key at the top level of the sweep file", "[sweep]")
    if not isinstance(doc.get("sweep"), dict):
        raise InputError("sweep", f"{path.name} has no [sweep] table", "a [sweep] table of evaluate() parameters")
    return parse_sweep(doc["sweep"], str(path), path.parent)
