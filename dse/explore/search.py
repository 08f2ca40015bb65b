"""Design-space search with Optuna: search spaces, studies, workers on shared storage, reports.

A *search space* (``search_spaces/*.toml``, table ``[space]``) describes the networks to consider:
the NPU count; the allowed numbers of dimensions; shapes as ordered factorisations of the NPU count
into allowed dimension sizes (powers of two by default) or an explicit list; the kinds allowed in
each dimension tier; the per-NPU bandwidth, either split under a total budget (each dimension at
least a minimum) or drawn from per-tier ranges; latencies per tier; chunk counts; schedulers and
queues. Tier i is the i-th dimension from the innermost; a topology with fewer dimensions than
tiers gives its outermost dimension the last tier (the scale-out network).

A *study* (``studies/*.toml``) names a space, a workload (collective, size, cost model),
objectives (``time``, ``bw_utilization``, ``cost``, ``gap``; each with the scheduler and queue it
is measured with), constraints (``max`` on any metric, given to Optuna 5 as
``trial.set_constraint``), a sampler (TPE by default, NSGA-II for several objectives, ``random``,
``brute_force`` for small discrete spaces), a seed and hardware prices (`dse.explore.hwcost`). A study file
may hold several ``[[variants]]`` (for example the same space optimised for Themis and for the
baseline); each runs as its own Optuna study named ``name.variant``.

Every trial stores, besides its objective values, the topology's notation, the Themis+SCF and
baseline+FIFO times, Themis's bandwidth utilisation, the fluid (LP) bound and Themis's gap to it,
and the hardware cost: one user attribute holding a dict, the choices its space fixed included
(`dse.explore.storage` describes the layout, and reads studies written before it too). A TPE trial of
`bw_split_4d` appends 9 records to a journal (creation, worker, four weights, TPE's relative
parameters, record, result) where it appended 24, and is fsynced once (`dse.explore.study_journal`). The
fluid bound is cached per design (`fluid_bound`).

`run_study` ends with exactly N complete trials in total, however many workers share the storage
and however often it is interrupted: a worker creates a trial only while holding a lock (a file
lock next to a journal or SQLite file, a PostgreSQL advisory lock otherwise) and only while
complete + running trials are fewer than N; a trial whose worker died is marked failed and replaced
by the next worker started on the same host (each running trial records its worker's host and
process id). A worker that died on another machine leaves its trial running until a worker runs
again on that machine. Every trial's sampler is seeded from the study's seed and the trials
complete before it (`dse.explore.study_samplers`), so a one-worker study interrupted and resumed ends with
the same trials as one never interrupted.

Elsewhere: storages, locks and damaged journals in `dse.explore.storage`; the progress bar in
`dse.explore.study_progress`; reports in `dse.output.study_report` and `dse.output.study_plots`; optuna-dashboard in
`dse.explore.study_dashboard`.

A study file is checked whole before any storage is opened: its space must produce at least one
design the workload's cost model accepts within the work limit (`dse.core.limits`).
"""

from __future__ import annotations

import functools
import math
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.bounds.api import _solve, ideal_ns, types_for_plan
from dse.core.errors import InputError, raise_if_interrupted
from dse.core.files import read_toml
from dse.core.limits import MAX_NPUS, MAX_SPACE_SHAPES
from dse.core.topology import Dim, Topology, parse_kind
from dse.core.units import parse_int, parse_positive
from dse.explore.hwcost import HardwareCost
from dse.explore.storage import (
    FIXED_KEY,
    LAYOUT,
    LAYOUT_ATTR,
    RECORD_ATTR,
    WORKER_ATTR,
    default_storage,
    fail_dead,
    gate,
    load_study,
    me,
    open_storage,
    reading,
    study_names,
    trial_record,
)
from dse.explore.study_progress import CompleteCount, TrialBar, wait_all
from dse.explore.study_samplers import SAMPLERS, ResumableSampler
from dse.output.study_report import Report, metric_name, report_data, write_report  # noqa: F401  (re-exported)
from dse.schedulers import SCHEDULERS, parse_queue
from dse.sim.batch import evaluate_many
from dse.sim.evaluate import evaluate
from dse.sim.spec import CollectiveSpec

SPACE_KEYS = {"npus", "dims", "sizes", "shapes", "kinds", "chunks", "schedulers", "queues", "bandwidth", "latency"}
BANDWIDTH_KEYS = {"budget", "minimum", "step", "ranges"}
LATENCY_KEYS = {"tiers"}
METRICS = {"time": "minimize", "bw_utilization": "maximize", "cost": "minimize", "gap": "minimize"}
STUDY_KEYS = {"study", "workload", "objectives", "constraints", "variants", "cost"}


# ----------------------------------------------------------------------------- loading TOML
def _as_list(value: Any, field: str) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise InputError(field, "empty list", "at least one value")
    return values


def _check_keys(table: dict[str, Any], allowed: set[str], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise InputError(f"{where}.{key}", "unknown key", ", ".join(sorted(allowed)))


# ----------------------------------------------------------------------------- search spaces
@dataclass(frozen=True)
class SearchSpace:
    """A validated search space (see the module docstring)."""

    npus: int
    shapes: dict[int, tuple[tuple[int, ...], ...]]  # dims -> allowed shapes
    kinds: tuple[tuple[str, ...], ...]  # allowed kinds per tier
    chunks: tuple[int, ...]
    schedulers: tuple[str, ...]
    queues: tuple[str, ...]
    latency_tiers: tuple[float, ...]
    budget: float | None = None
    minimum: float = 0.0
    step: float | None = None
    ranges: tuple[tuple[float, float], ...] | None = None

    @classmethod
    def from_toml(cls, path: str | Path) -> SearchSpace:
        data = read_toml(path, "space file")
        if set(data) != {"space"}:
            extra = sorted(set(data) - {"space"})
            raise InputError(
                f"{extra[0] if extra else 'space'}", "a search space file holds one [space] table", "[space]"
            )
        return cls.from_table(data["space"])

    @classmethod
    def from_table(cls, t: dict[str, Any]) -> SearchSpace:
        _check_keys(t, SPACE_KEYS, "space")
        if "npus" not in t:
            raise InputError("space.npus", "missing", "the total NPU count, e.g. 1024")
        npus = parse_int(t["npus"], "space.npus", minimum=2, maximum=MAX_NPUS)
        if "shapes" in t:
            shapes_l = [_parse_shape(s, "space.shapes") for s in _as_list(t["shapes"], "space.shapes")]
            for s in shapes_l:
                if math.prod(s) != npus:
                    raise InputError("space.shapes", f"{'x'.join(map(str, s))} has {math.prod(s)} NPUs, not {npus}")
            dims_allowed = sorted({len(s) for s in shapes_l})
            shapes = {d: tuple(s for s in shapes_l if len(s) == d) for d in dims_allowed}
        else:
            dims_allowed = [
                parse_int(d, "space.dims", minimum=1, maximum=40)
                for d in _as_list(t.get("dims", [2, 3, 4]), "space.dims")
            ]
            default_sizes = [2**k for k in range(1, int(math.log2(npus)) + 1)]
            sizes = sorted(
                {
                    parse_int(s, "space.sizes", minimum=2, maximum=npus)
                    for s in _as_list(t.get("sizes", default_sizes), "space.sizes")
                }
            )
            shapes = {}
            budget = [MAX_SPACE_SHAPES]
            for d in sorted(set(dims_allowed)):
                found = tuple(_factorisations(npus, sizes, d, budget))
                if found:
                    shapes[d] = found
            if not shapes:
                raise InputError(
                    "space",
                    f"no shape of {dims_allowed} dimensions multiplies to {npus} NPUs from sizes {sizes}",
                    "other dims or sizes",
                )
        kinds_raw = t.get("kinds", ["ring", "fc", "switch"])
        kinds_l = _as_list(kinds_raw, "space.kinds")
        if all(isinstance(k, list) for k in kinds_l):
            kinds = tuple(
                tuple(parse_kind(k, "space.kinds") for k in _as_list(tier, "space.kinds")) for tier in kinds_l
            )
        else:
            kinds = (tuple(parse_kind(k, "space.kinds") for k in kinds_l),)
        chunks = tuple(parse_int(c, "space.chunks", minimum=1) for c in _as_list(t.get("chunks", [64]), "space.chunks"))
        schedulers = tuple(_parse_scheduler(s) for s in _as_list(t.get("schedulers", ["themis"]), "space.schedulers"))
        queues = tuple(parse_queue(q) for q in _as_list(t.get("queues", ["scf"]), "space.queues"))
        lat = t.get("latency", {})
        if not isinstance(lat, dict):
            raise InputError("space.latency", "must be a table", "[space.latency] tiers = [...]")
        _check_keys(lat, LATENCY_KEYS, "space.latency")
        tiers = tuple(
            parse_positive(x, "space.latency.tiers", allow_zero=True)
            for x in _as_list(lat.get("tiers", [0]), "space.latency.tiers")
        )
        bw = t.get("bandwidth")
        if not isinstance(bw, dict):
            raise InputError("space.bandwidth", "missing", "[space.bandwidth] with budget (and minimum) or ranges")
        _check_keys(bw, BANDWIDTH_KEYS, "space.bandwidth")
        if ("budget" in bw) == ("ranges" in bw):
            raise InputError(
                "space.bandwidth",
                "give either budget or ranges",
                "budget = 800, minimum = 25; or ranges = [[lo, hi], ...]",
            )
        step = parse_positive(bw["step"], "space.bandwidth.step") if "step" in bw else None
        if step is not None and step > 1:
            raise InputError("space.bandwidth.step", f"{step} is more than 1", "a weight step in (0, 1]")
        budget = minimum = None
        ranges = None
        if "budget" in bw:
            budget = parse_positive(bw["budget"], "space.bandwidth.budget")
            minimum = parse_positive(bw.get("minimum", 0), "space.bandwidth.minimum", allow_zero=True)
            need = min(shapes) * minimum
            if need > budget or (need == budget and minimum == 0):
                raise InputError(
                    "space.bandwidth",
                    f"impossible budget: {min(shapes)} dims x minimum {minimum:g} GB/s exceeds {budget:g} GB/s",
                    "a larger budget or a smaller minimum",
                )
        else:
            ranges = []
            for r in _as_list(bw["ranges"], "space.bandwidth.ranges"):
                if not (isinstance(r, list) and len(r) == 2):
                    raise InputError(
                        "space.bandwidth.ranges", f"{r!r} is not [low, high]", "[[lo, hi], ...] one per tier"
                    )
                lo = parse_positive(r[0], "space.bandwidth.ranges")
                hi = parse_positive(r[1], "space.bandwidth.ranges")
                if hi < lo:
                    raise InputError("space.bandwidth.ranges", f"[{lo:g}, {hi:g}] is empty", "low <= high")
                ranges.append((lo, hi))
            ranges = tuple(ranges)
        return cls(npus, shapes, kinds, chunks, schedulers, queues, tiers, budget, minimum or 0.0, step, ranges)

    def _tier(self, values: Sequence[Any], i: int, ndims: int) -> Any:
        if i == ndims - 1:
            return values[-1]
        return values[min(i, len(values) - 1)]

    def suggest(self, trial: Any, fixed: dict[str, Any] | None = None) -> tuple[Topology, int, str, str]:
        """Draw one design from `trial` (Optuna define-by-run): topology, chunks, scheduler, queue.

        With a dict `fixed`, a choice with one allowed value is not an Optuna parameter (one journal
        append that tells the sampler nothing) but goes into `fixed` under its parameter's name."""
        nd = _choose(trial, "dims", sorted(self.shapes), fixed)
        shape_names = ["x".join(map(str, s)) for s in self.shapes[nd]]
        shape = self.shapes[nd][shape_names.index(_choose(trial, f"shape_{nd}d", shape_names, fixed))]
        kinds = [_choose(trial, f"kind_{nd}d_{i}", list(self._tier(self.kinds, i, nd)), fixed) for i in range(nd)]
        if self.budget is not None:
            kw = {"step": self.step} if self.step else {}
            w = [trial.suggest_float(f"bw_{nd}d_{i}", 0.0, 1.0, **kw) for i in range(nd)]
            total = sum(w)
            share = [x / total for x in w] if total > 0 else [1.0 / nd] * nd
            spare = self.budget - nd * self.minimum
            bws = [self.minimum + spare * s for s in share]
        else:
            assert self.ranges is not None
            bws = []
            for i in range(nd):
                lo, hi = self._tier(self.ranges, i, nd)
                bws.append(trial.suggest_float(f"bw_{nd}d_{i}", lo, hi) if hi > lo else lo)
        lats = [self._tier(self.latency_tiers, i, nd) for i in range(nd)]
        topo = Topology(tuple(Dim(k, p, max(b, 1e-9), lat) for k, p, b, lat in zip(kinds, shape, bws, lats)))
        chunks = _choose(trial, "chunks", list(self.chunks), fixed)
        sched = _choose(trial, "scheduler", list(self.schedulers), fixed)
        queue = _choose(trial, "queue", list(self.queues), fixed)
        return topo, chunks, sched, queue

    def first_design(self) -> tuple[Topology, int]:
        """The space's first design (first shape and kinds, the budget split evenly or each range's
        low end, the most chunks): what a study checks its workload against before it runs."""
        nd = min(self.shapes)
        shape = self.shapes[nd][0]
        if self.budget is not None:
            bws = [self.budget / nd] * nd
        else:
            assert self.ranges is not None
            bws = [self._tier(self.ranges, i, nd)[0] for i in range(nd)]
        dims = tuple(
            Dim(self._tier(self.kinds, i, nd)[0], p, b, self._tier(self.latency_tiers, i, nd))
            for i, (p, b) in enumerate(zip(shape, bws))
        )
        return Topology(dims), max(self.chunks)

    def check_discrete(self) -> None:
        """Brute force needs every parameter discrete: a budget split with a weight `step`."""
        if self.budget is not None and self.step is None:
            raise InputError("space.bandwidth.step", "brute force needs a discrete space", "a step, e.g. step = 0.1")
        if self.ranges is not None:
            raise InputError("space.bandwidth.ranges", "brute force needs a discrete space", "budget with a step")


def _choose(trial: Any, name: str, choices: list[Any], fixed: dict[str, Any] | None) -> Any:
    """`trial.suggest_categorical(name, choices)`, or with a dict `fixed` and a single choice, that
    choice, recorded in `fixed` (see `SearchSpace.suggest`)."""
    if fixed is not None and len(choices) == 1:
        fixed[name] = choices[0]
        return choices[0]
    return trial.suggest_categorical(name, choices)


def _factorisations(n: int, sizes: list[int], d: int, budget: list[int]) -> Iterator[tuple[int, ...]]:
    """Ordered factorisations of `n` into `d` factors from `sizes`, in lexicographic order.

    `budget` ([shapes left]) caps how many a space may hold (`dse.core.limits.MAX_SPACE_SHAPES`)."""
    if d and not sizes[0] ** d <= n <= sizes[-1] ** d:  # no d factors from sizes can make n
        return
    if d == 0:
        if n == 1:
            if budget[0] <= 0:
                raise InputError(
                    "space", f"more than {MAX_SPACE_SHAPES:,} shapes", "fewer dims or sizes, or shapes = [...]"
                )
            budget[0] -= 1
            yield ()
        return
    for s in sizes:
        if n % s == 0:
            for rest in _factorisations(n // s, sizes, d - 1, budget):
                yield (s, *rest)


def _parse_shape(s: Any, field: str) -> tuple[int, ...]:
    parts = str(s).lower().replace("*", "x").split("x")
    return tuple(parse_int(p.strip(), field, minimum=2) for p in parts)


def _parse_scheduler(name: Any) -> str:
    key = str(name).strip().lower().replace("-", "_")
    if key not in SCHEDULERS or key == "fixed":
        raise InputError("scheduler", f"unknown scheduler {name!r}", ", ".join(s for s in SCHEDULERS if s != "fixed"))
    return key


# ----------------------------------------------------------------------------- studies
@dataclass(frozen=True)
class Objective:
    metric: str
    direction: str
    scheduler: str
    queue: str

    @property
    def label(self) -> str:
        return self.metric if self.metric == "cost" else f"{self.metric}[{self.scheduler}+{self.queue}]"

    @property
    def name(self) -> str:
        """The objective's name in reports and Optuna's metric name: ``time_ns_themis_scf``, ``cost``."""
        return metric_name(self.metric, self.scheduler, self.queue)


@dataclass(frozen=True)
class Constraint:
    metric: str
    maximum: float
    scheduler: str = "themis"
    queue: str = "scf"


@dataclass(frozen=True)
class StudySpec:
    """One Optuna study: a space, a workload, objectives, constraints, a sampler and a seed."""

    name: str
    space: SearchSpace
    collective: str
    size: int
    cost_model: str
    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...]
    sampler: str
    seed: int
    trials: int
    prices: HardwareCost
    source: str = ""
    out_dir: str = "studies/out"

    @property
    def directions(self) -> list[str]:
        return [o.direction for o in self.objectives]


def load_studies(path: str | Path) -> list[StudySpec]:
    """The studies a study file defines: one, or one per ``[[variants]]`` entry."""
    data = read_toml(path, "study file")
    _check_keys(data, STUDY_KEYS, "study file")
    st = data.get("study")
    if not isinstance(st, dict):
        raise InputError("study", "missing", "a [study] table with name and space")
    _check_keys(st, {"name", "space", "sampler", "seed", "trials"}, "study")
    for key in ("name", "space"):
        if key not in st:
            raise InputError(f"study.{key}", "missing")
    name = str(st["name"]).strip()
    if not name or any(c in name for c in "/\\ "):
        raise InputError("study.name", f"{name!r} is not a usable name", "letters, digits, _ - .")
    space_path = Path(path).parent / str(st["space"])
    space = SearchSpace.from_toml(space_path)
    wl = data.get("workload", {})
    if not isinstance(wl, dict):
        raise InputError("workload", f"{wl!r} is not a table", "[workload] collective, size, cost_model")
    _check_keys(wl, {"collective", "size", "cost_model"}, "workload")
    probe = CollectiveSpec.parse(
        "Ring(2,1,0)",
        collective=wl.get("collective", "all_reduce"),
        size=wl.get("size", "1GB"),
        chunks=1,
        cost_model=wl.get("cost_model", "paper"),
    )
    design, most = space.first_design()
    try:  # before any storage exists: a workload no design of the space can run is refused here
        CollectiveSpec.parse(
            design, collective=probe.collective, size=probe.size, chunks=most, cost_model=probe.cost_model
        )
    except InputError as e:
        raise InputError("workload", f"the space's first design {design.notation()} cannot run it: {e}") from None
    seed = parse_int(st.get("seed", 0), "study.seed", minimum=0)
    trials = parse_int(st.get("trials", 100), "study.trials", minimum=1)
    prices = HardwareCost.from_table(data.get("cost"))
    variants = data.get("variants")
    if variants is None:
        variants = [{"name": None, "objectives": data.get("objectives"), "constraints": data.get("constraints", [])}]
    elif not isinstance(variants, list) or not variants:
        raise InputError("variants", "empty", "[[variants]] tables with name and objectives")
    out = []
    for v in variants:
        _check_keys(v, {"name", "objectives", "constraints", "sampler"}, "variants")
        objs = _parse_objectives(v.get("objectives") if v.get("objectives") is not None else data.get("objectives"))
        cons = _parse_constraints(v.get("constraints", data.get("constraints", [])))
        sampler = str(v.get("sampler", st.get("sampler", "tpe" if len(objs) == 1 else "nsga2"))).lower()
        if sampler not in SAMPLERS:
            raise InputError("study.sampler", f"unknown sampler {sampler!r}", ", ".join(SAMPLERS))
        if sampler == "brute_force":
            space.check_discrete()
        vname = name if v.get("name") is None else f"{name}.{v['name']}"
        out.append(
            StudySpec(
                vname,
                space,
                probe.collective,
                probe.size,
                probe.cost_model.name,
                objs,
                cons,
                sampler,
                seed,
                trials,
                prices,
                str(path),
                str(Path(path).parent / "out"),
            )
        )
    return out


def _parse_objectives(raw: Any) -> tuple[Objective, ...]:
    if not raw:
        raise InputError(
            "objectives", "missing or empty", "[[objectives]] with metric = time, bw_utilization, cost or gap"
        )
    out = []
    for o in _as_list(raw, "objectives"):
        if not isinstance(o, dict):
            raise InputError("objectives", f"{o!r} is not a table", "[[objectives]] metric = ...")
        _check_keys(o, {"metric", "direction", "scheduler", "queue"}, "objectives")
        metric = str(o.get("metric", "")).lower()
        if metric not in METRICS:
            raise InputError("objectives.metric", f"unknown metric {metric!r}", ", ".join(METRICS))
        direction = str(o.get("direction", METRICS[metric])).lower()
        if direction not in ("minimize", "maximize"):
            raise InputError("objectives.direction", f"unknown direction {direction!r}", "minimize, maximize")
        out.append(
            Objective(
                metric, direction, _parse_scheduler(o.get("scheduler", "themis")), parse_queue(o.get("queue", "scf"))
            )
        )
    return tuple(out)


def _parse_constraints(raw: Any) -> tuple[Constraint, ...]:
    out = []
    for c in raw or []:
        if not isinstance(c, dict):
            raise InputError("constraints", f"{c!r} is not a table", "[[constraints]] metric = ..., max = ...")
        _check_keys(c, {"metric", "max", "scheduler", "queue"}, "constraints")
        metric = str(c.get("metric", "")).lower()
        if metric not in METRICS:
            raise InputError("constraints.metric", f"unknown metric {metric!r}", ", ".join(METRICS))
        if "max" not in c:
            raise InputError("constraints.max", "missing", "the largest allowed value")
        out.append(
            Constraint(
                metric,
                float(parse_positive(c["max"], "constraints.max", allow_zero=True)),
                _parse_scheduler(c.get("scheduler", "themis")),
                parse_queue(c.get("queue", "scf")),
            )
        )
    return tuple(out)


# ----------------------------------------------------------------------------- one trial
def measure(spec: StudySpec, topo: Topology, chunks: int) -> dict[str, Any]:
    """Everything a trial records about one design (see the module docstring)."""
    common = dict(topology=topo, collective=spec.collective, size=spec.size, chunks=chunks, cost_model=spec.cost_model)
    both = evaluate_many(
        [dict(common, scheduler="themis", queue="scf"), dict(common, scheduler="baseline", queue="fifo")]
    )
    themis, base = both.result(0), both.result(1)
    lp = fluid_bound(topo, spec.collective, spec.size, chunks, spec.cost_model)
    return {
        "topology": topo.notation(),
        "time_themis_ns": themis.time_ns,
        "time_baseline_ns": base.time_ns,
        "bw_utilization": themis.bw_utilization,
        "bound_ns": lp,
        "gap": themis.time_ns / lp - 1.0,
        "cost_usd": spec.prices.dollars(topo),
    }


@functools.lru_cache(maxsize=4096)
def fluid_bound(topo: Topology, collective: str, size: int, chunks: int, cost_model: str) -> float:
    """The fluid (LP) bound of one design, or the ideal where that is higher (ns), cached per design.

    The LP weighs each dimension's load, which is its bytes over its bandwidth: two designs of one
    shape, collective, size, chunk count and cost model with other bandwidths have other bounds,
    so a design (the exact topology, bandwidths and latencies included) is the widest valid key.
    What does not depend on the bandwidths (the chunk plan and the orders) costs some 15 µs of the
    1 ms a bound takes. A hit needs a design seen before in this process: a discrete space's, a
    repeated draw, or the first (random) trials of a study's variants, which share their seeds."""
    cspec = CollectiveSpec.parse(topo, collective=collective, size=size, chunks=chunks, cost_model=cost_model)
    plan = cspec.cost_model.chunking(cspec.collective, cspec.size, cspec.chunks, topo, baseline=False)
    types = types_for_plan(cspec.cost_model, topo, cspec.collective, plan, cspec.latency_mode)
    return max(ideal_ns(cspec), _solve(types, 1, relax=True, solver="highs", time_limit_s=5.0).bound)


def metric_value(
    spec: StudySpec, topo: Topology, chunks: int, metric: str, scheduler: str, queue: str, record: dict[str, Any]
) -> float:
    """One objective or constraint value, reusing what `measure` already computed."""
    if metric == "cost":
        return record["cost_usd"]
    if scheduler == "themis" and queue == "scf":
        t, u = record["time_themis_ns"], record["bw_utilization"]
    elif scheduler == "baseline" and queue == "fifo" and metric == "time":
        t, u = record["time_baseline_ns"], None
    else:
        r = evaluate(
            topo,
            collective=spec.collective,
            size=spec.size,
            chunks=chunks,
            cost_model=spec.cost_model,
            scheduler=scheduler,
            queue=queue,
        )
        t, u = r.time_ns, r.bw_utilization
    if metric == "time":
        return t
    if metric == "gap":
        return t / record["bound_ns"] - 1.0
    if u is None:
        u = evaluate(
            topo,
            collective=spec.collective,
            size=spec.size,
            chunks=chunks,
            cost_model=spec.cost_model,
            scheduler=scheduler,
            queue=queue,
        ).bw_utilization
    return u


def objective(spec: StudySpec, trial: Any, layout: int = LAYOUT) -> list[float]:
    """The Optuna objective: draw a design, measure it, record it, return the objective values.

    The record is one user attribute (`dse.explore.storage.RECORD_ATTR`), written once everything is
    measured; `layout` 1 (a study begun before that layout) keeps every choice an Optuna parameter."""
    fixed: dict[str, Any] | None = {} if layout >= 2 else None
    topo, chunks, sched, queue = spec.space.suggest(trial, fixed)
    record = measure(spec, topo, chunks)
    for c in spec.constraints:
        trial.set_constraint(
            c.metric, metric_value(spec, topo, chunks, c.metric, c.scheduler, c.queue, record) - c.maximum
        )
    values = []
    for o in spec.objectives:
        # the space's own scheduler choice applies to objectives that name the default
        s, q = (sched, queue) if (o.scheduler, o.queue) == ("themis", "scf") else (o.scheduler, o.queue)
        values.append(metric_value(spec, topo, chunks, o.metric, s, q, record))
    trial.set_user_attr(RECORD_ATTR, record | ({FIXED_KEY: fixed} if fixed else {}))
    return values


# ----------------------------------------------------------------------------- workers
def create_study(spec: StudySpec, url: str, *, repair: bool = False) -> Any:
    """Create the study on `url`, or load it if it exists (under the storage's gate)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = open_storage(url, repair=repair)
    with gate(url, spec.name), reading(url):
        study = optuna.create_study(
            study_name=spec.name,
            storage=storage,
            directions=spec.directions,
            sampler=ResumableSampler(spec.sampler, spec.seed),
            load_if_exists=True,
        )
        labels = [o.label for o in spec.objectives]
        if study.user_attrs.get("objectives") != labels:
            study.set_user_attr("objectives", labels)
        names = [o.name for o in spec.objectives]
        if study.metric_names != names:  # the names reports and optuna-dashboard show
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # experimental in Optuna
                study.set_metric_names(names)
        if LAYOUT_ATTR not in study.user_attrs and not study.get_trials(deepcopy=False):
            study.set_user_attr(LAYOUT_ATTR, LAYOUT)
    return study


def layout(study: Any) -> int:
    """How a study's trials are written (`dse.explore.storage.LAYOUT`); 1 for a study begun before layouts."""
    return int(study.user_attrs.get(LAYOUT_ATTR, 1))


def work(spec: StudySpec, url: str, trials: int, progress: Callable[[int], None] | None = None) -> int:
    """One worker: run trials until the study has `trials` complete ones; returns how many it ran.

    `progress` is called with the complete trials counted before each new one and at the end.
    Ctrl-C marks the trial in hand failed (the next run replaces it) before it stops the worker."""
    from optuna.trial import TrialState

    study = create_study(spec, url, repair=True)
    sampler = study.sampler
    written = layout(study)
    done = failures = 0
    while True:
        raise_if_interrupted()
        with gate(url, spec.name), reading(url):
            fail_dead(study)
            states = [t.state for t in study.get_trials(deepcopy=False)]
            complete = states.count(TrialState.COMPLETE)
            running = states.count(TrialState.RUNNING)
            if progress is not None:
                progress(complete)
            if complete + running >= trials or sampler.exhausted:
                return done
            sampler.index = complete
            trial = study.ask()
            trial.set_user_attr(WORKER_ATTR, me())
        try:
            values = objective(spec, trial, written)
        except InputError as e:  # a design the cost model rejects: failed, replaced by another
            study.tell(trial, state=TrialState.FAIL)
            failures += 1
            if failures >= 20:
                raise InputError("space", f"20 designs in a row were rejected; the last: {e}") from None
            continue
        except KeyboardInterrupt:
            study.tell(trial, state=TrialState.FAIL)
            raise
        failures = 0
        study.tell(trial, values)
        done += 1


def run_study(
    spec: StudySpec, *, trials: int | None = None, workers: int = 1, storage: str | None = None, progress: bool = False
) -> dict[str, Any]:
    """Run `spec` until it has `trials` complete trials, with `workers` processes on one storage.

    With several workers, this process waits for them; if one dies, it finishes the study itself
    (the dead worker's trial is failed and replaced) and says so. Ctrl-C stops every worker.
    `progress`: a bar of the complete trials on stderr (`dse.explore.study_progress`). The result adds to
    `summary` the trials run here, the storage, the complete trials before the run and the target."""
    url = default_storage(spec.out_dir, spec.name) if storage is None else storage
    n = trials if trials is not None else spec.trials
    study = create_study(spec, url, repair=True)  # created once, before the workers race for it
    from optuna.trial import TrialState

    before = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    bar = TrialBar(spec.name, n, before) if progress and before < n else None
    try:
        ran = _run(spec, url, n, workers if before < n else 1, bar)
    finally:
        if bar is not None:
            bar.close()
    return summary(spec.name, url) | {"ran_here": ran, "storage": url, "complete_before": before, "asked": n}


def _run(spec: StudySpec, url: str, n: int, workers: int, bar: TrialBar | None) -> int:
    """The trials this process ran (-1: several workers ran them)."""
    if workers <= 1:
        return work(spec, url, n, bar.show if bar else None)
    codes = _run_workers(spec, url, n, workers, CompleteCount(spec.name, url).show_on(bar) if bar else None)
    if not any(codes):
        return -1
    short = summary(spec.name, url)["complete"] < n
    warnings.warn(
        f"{sum(1 for c in codes if c)} of {workers} workers ended early (exit codes {codes}); "
        + ("this process finishes the study" if short else "the others finished the study"),
        stacklevel=3,
    )
    return work(spec, url, n, bar.show if bar else None) if short else -1


def _run_workers(spec: StudySpec, url: str, n: int, workers: int, poll: Callable[[], None] | None = None) -> list[int]:
    """Start `workers` worker processes and wait for them (calling `poll` meanwhile, if given); on
    Ctrl-C, interrupt and reap them."""
    cmd = [
        sys.executable,
        "-m",
        "dse",
        "study",
        "run",
        spec.source,
        "--trials",
        str(n),
        "--storage",
        url,
        "--only",
        spec.name,
        "--workers",
        "1",
        "--quiet",
    ]
    procs = [subprocess.Popen(cmd) for _ in range(workers)]
    try:
        return wait_all(procs, poll)
    except BaseException:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        raise


def summary(name: str, url: str) -> dict[str, Any]:
    from optuna.trial import TrialState

    study = load_study(name, url)
    trials = study.get_trials(deepcopy=False)
    out: dict[str, Any] = {
        "study": name,
        "complete": sum(t.state == TrialState.COMPLETE for t in trials),
        "failed": sum(t.state == TrialState.FAIL for t in trials),
        "running": sum(t.state == TrialState.RUNNING for t in trials),
    }
    if out["complete"]:
        if len(study.directions) == 1:
            best = study.best_trial
            out["best_value"] = best.value
            out["best_topology"] = trial_record(best).get("topology")
            out["best_trial"] = best.number
        else:
            out["pareto_size"] = len(study.best_trials)
    return out


def list_studies(url: str) -> list[dict[str, Any]]:
    """`summary` of every study on a storage, with the storage."""
    return [summary(name, url) | {"storage": url} for name in study_names(url)]
