"""Study files: what one design-space study runs, read and checked whole before any storage opens.

A *study* (``studies/*.toml``) names a space (`dse.explore.study.spaces`), a workload (collective,
size, cost model; or a training workload's file, `dse.explore.study.workload`), objectives
(``time``, ``bw_utilization``, ``cost``, ``gap``; each with the
scheduler and queue it is measured with), constraints (``max`` on any metric, given to Optuna 5 as
``trial.set_constraint``; both in `dse.explore.study.objectives`), a sampler (TPE by default, NSGA-II
for several objectives, ``random``, ``brute_force`` for small discrete spaces), a seed and
hardware prices (`dse.explore.hwcost`), and optionally ``bandwidth_constraints`` (linear
(in)equalities over bw0, bw1, ...: `dse.explore.study.spaces.SearchSpace.constrained`). A study file may
hold several ``[[variants]]`` (for
example the same space optimised for Themis and for the baseline); each runs as its own Optuna
study named ``name.variant``.

A study file is checked whole before any storage is opened: its space must produce at least one
design the workload's cost model accepts within the work limit (`dse.core.limits`). Running a
study: `dse.explore.study.workers`; what each trial measures: `dse.explore.study.trials`.

A study's *definition* (`StudySpec.definition`) is what makes its trials comparable, and binds its
name in a storage (`dse.explore.study.workers.create_study`): the objectives (metric, and so its
unit, scheduler, queue, direction), the constraints, the workload (collective, size, cost model;
or a training workload's layers, placement, cost model and chunks), each field of the space (NPUs,
shapes, kinds, chunks, schedulers, queues, latencies, bandwidth rule or polytope) and the hardware
prices. Not in it: the trial count, the workers, the sampler and its seed (resuming with another
count or sampler is legitimate, and mixes no values), and where the files are.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.files import read_toml
from dse.core.limits import check_input
from dse.core.units import parse_int
from dse.costs import get_cost_model, with_calibration
from dse.explore.hwcost import HardwareCost
from dse.explore.libra.files import read_libra_cost_model, read_libra_network
from dse.explore.study.objectives import (
    COLLECTIVE_METRICS,
    WORKLOAD_METRICS,
    Constraint,
    Objective,
    parse_constraints,
    parse_objectives,
)
from dse.explore.study.samplers import SAMPLERS
from dse.explore.study.spaces import SearchSpace
from dse.explore.study.toml_fields import check_keys
from dse.explore.study.workload import WorkloadTarget, parse_workload_target
from dse.sim.spec import CollectiveSpec

STUDY_KEYS = {"study", "workload", "objectives", "constraints", "variants", "cost", "bandwidth_constraints"}


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
    #: a workload study's training workload (None: the study measures one collective)
    training: WorkloadTarget | None = None

    @property
    def directions(self) -> list[str]:
        """Each objective's direction, ``minimize`` or ``maximize``, in order."""
        return [o.direction for o in self.objectives]

    @property
    def closed_form_model(self) -> str:
        """The cost model's name if it is closed form (`nccl`: the schedulers and queues of the
        objectives do not apply, `dse.explore.study.units`), else ``""``."""
        model = get_cost_model(self.cost_model)
        return model.name if model.closed_form else ""

    def definition(self) -> dict[str, str]:
        """The study's definition (module docstring), field by field, each a short text: the value
        itself up to `SHOWN` characters, else a digest of it."""
        sp = self.space
        workload: Any = (
            (self.collective, self.size, self.cost_model) if self.training is None else _canonical(self.training)
        )
        fields = {
            "objectives": ", ".join(f"{o.label} {o.direction}" for o in self.objectives),
            "constraints": ", ".join(f"{c.metric}[{c.scheduler}+{c.queue}] <= {c.maximum!r}" for c in self.constraints),
            "workload": workload,
            "space.npus": sp.npus,
            "space.shapes": sp.shapes,
            "space.kinds": sp.kinds,
            "space.chunks": sp.chunks,
            "space.schedulers": sp.schedulers,
            "space.queues": sp.queues,
            "space.latency": sp.latency_tiers,
            "space.bandwidth": (sp.budget, sp.minimum, sp.step, sp.ranges, sp.polytope),
            "prices": self.prices,
        }
        return {k: _short(v if isinstance(v, str) else json.dumps(_canonical(v))) for k, v in fields.items()}


SHOWN = 80  # characters of a definition's field kept as they are (longer ones are digested)


def _short(text: str) -> str:
    if len(text) <= SHOWN:
        return text
    return f"sha256:{hashlib.sha256(text.encode()).hexdigest()[:16]} of {len(text)} characters"


def _canonical(x: Any) -> Any:
    """`x` as JSON values that are the same in every process: a dataclass as its compared fields
    (a file's path or a note is not one), a dict by its sorted keys, a float as its repr."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _canonical(getattr(x, f.name)) for f in dataclasses.fields(x) if f.compare}
    if isinstance(x, dict):
        return [[_canonical(k), _canonical(v)] for k, v in sorted(x.items(), key=lambda kv: repr(kv[0]))]
    if isinstance(x, (list, tuple)):
        return [_canonical(v) for v in x]
    if isinstance(x, float):
        return repr(x)
    if x is None or isinstance(x, (str, int)):
        return x
    return repr(x)


def load_studies(path: str | Path) -> list[StudySpec]:
    """The studies a study file defines: one, or one per ``[[variants]]`` entry."""
    data = read_toml(path, "study file")
    check_keys(data, STUDY_KEYS, "study file")
    st = _study_table(data)
    name = _study_name(st)
    space = SearchSpace.from_toml(Path(path).parent / str(st["space"]))
    check_input("dimensions", max(space.shapes), "space.dims", "dimensions")  # before a design is built
    table = data.get("workload", {})
    training = _training(table, space, Path(path).parent) if isinstance(table, dict) and "file" in table else None
    probe = _workload(table, space, Path(path).parent) if training is None else None
    seed = parse_int(st.get("seed", 0), "study.seed", minimum=0)
    trials = parse_int(st.get("trials", 100), "study.trials", minimum=1)
    prices = _prices(data.get("cost"), Path(path).parent)
    out = []
    allowed = COLLECTIVE_METRICS if training is None else WORKLOAD_METRICS
    for v in _variant_tables(data):
        variant = _variant(v, data, st, space, allowed)
        out.append(
            StudySpec(
                name if variant.name is None else f"{name}.{variant.name}",
                variant.space,
                probe.collective if probe else "",
                probe.size if probe else 0,
                probe.cost_model.label if probe else training.cost_model,  # type: ignore[union-attr]
                variant.objectives,
                variant.constraints,
                variant.sampler,
                seed,
                trials,
                prices,
                str(path),
                str(Path(path).parent / "out"),
                training,
            )
        )
    return out


def _training(table: dict[str, Any], space: SearchSpace, base: Path) -> WorkloadTarget:
    """A workload study's ``[workload]``, run once on the space's first design: a workload (or a
    placement) no design of the space can run is refused before any storage exists."""
    target = parse_workload_target(table, base)
    design, _ = space.first_design()
    try:
        target.iterate(design, "themis", "scf")
    except InputError as e:
        raise InputError("workload", f"the space's first design {design.notation()} cannot run it: {e}") from None
    return target


def _prices(table: Any, base: Path) -> HardwareCost:
    """``[cost]``: dse's prices per tier, or LIBRA's files as they are (``libra_cost_model`` and the
    ``libra_network`` whose price tiers it names, relative to the study file)."""
    if not isinstance(table, dict) or not ({"libra_cost_model", "libra_network"} & set(table)):
        return HardwareCost.from_table(table)
    check_keys(table, {"libra_cost_model", "libra_network"}, "cost")
    if set(table) != {"libra_cost_model", "libra_network"}:
        raise InputError("cost", "libra_cost_model without libra_network, or the other way", "both files")
    network = read_libra_network(base / str(table["libra_network"]))
    return read_libra_cost_model(base / str(table["libra_cost_model"]), network)


def _study_table(data: dict[str, Any]) -> dict[str, Any]:
    """The ``[study]`` table, with its name and space."""
    st = data.get("study")
    if not isinstance(st, dict):
        raise InputError("study", "missing", "a [study] table with name and space")
    check_keys(st, {"name", "space", "sampler", "seed", "trials"}, "study")
    for key in ("name", "space"):
        if key not in st:
            raise InputError(f"study.{key}", "missing")
    return st


def _study_name(st: dict[str, Any]) -> str:
    """The study's name, which names its Optuna studies and its files: no slash or space."""
    name = str(st["name"]).strip()
    if not name or any(c in name for c in "/\\ "):
        raise InputError("study.name", f"{name!r} is not a usable name", "letters, digits, _ - .")
    return name


def _workload(wl: Any, space: SearchSpace, base: Path) -> CollectiveSpec:
    """The ``[workload]`` table, parsed on a probe topology, then checked on the space's first design:
    a workload no design of the space can run is refused before any storage exists."""
    if not isinstance(wl, dict):
        raise InputError("workload", f"{wl!r} is not a table", "[workload] collective, size, cost_model")
    check_keys(wl, {"collective", "size", "cost_model", "calibration"}, "workload")
    (model,) = with_calibration([wl.get("cost_model", "paper")], wl.get("calibration"), base, "workload.calibration")
    probe = CollectiveSpec.parse(
        "Ring(2,1,0)",
        collective=wl.get("collective", "all_reduce"),
        size=wl.get("size", "1GB"),
        chunks=1,
        cost_model=model,
    )
    design, most = space.first_design()
    try:
        CollectiveSpec.parse(
            design, collective=probe.collective, size=probe.size, chunks=most, cost_model=probe.cost_model
        )
    except InputError as e:
        raise InputError("workload", f"the space's first design {design.notation()} cannot run it: {e}") from None
    return probe


def _variant_tables(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``[[variants]]`` tables; without any, one unnamed variant of the file's objectives."""
    variants = data.get("variants")
    if variants is None:
        return [{"name": None, "objectives": data.get("objectives"), "constraints": data.get("constraints", [])}]
    if not isinstance(variants, list) or not variants:
        raise InputError("variants", "empty", "[[variants]] tables with name and objectives")
    return variants


@dataclass(frozen=True)
class _Variant:
    """What a variant sets (its own, else the file's): name (None: the study's), objectives,
    constraints and sampler."""

    name: Any
    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...]
    sampler: str
    space: SearchSpace


def _variant(
    v: dict[str, Any], data: dict[str, Any], st: dict[str, Any], space: SearchSpace, allowed: tuple[str, ...]
) -> _Variant:
    """One variant, its metrics among `allowed`; brute force is refused unless the space is discrete."""
    check_keys(v, {"name", "objectives", "constraints", "sampler", "bandwidth_constraints"}, "variants")
    bw = v.get("bandwidth_constraints", data.get("bandwidth_constraints"))
    if bw is not None:
        space = space.constrained(bw)
    objs = parse_objectives(v.get("objectives") if v.get("objectives") is not None else data.get("objectives"), allowed)
    cons = parse_constraints(v.get("constraints", data.get("constraints", [])), allowed)
    sampler = str(v.get("sampler", st.get("sampler", "tpe" if len(objs) == 1 else "nsga2"))).lower()
    if sampler not in SAMPLERS:
        raise InputError("study.sampler", f"unknown sampler {sampler!r}", ", ".join(SAMPLERS))
    if sampler == "brute_force":
        space.check_discrete()
    return _Variant(v.get("name"), objs, cons, sampler, space)
