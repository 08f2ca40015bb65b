"""What a person reads of a study: each objective named with its unit, values in that unit,
bandwidths in GB/s. One table (`UNITS`) serves the terminal (`dse study run|list|show`), the
report's CSV columns and figures (`dse.output.study_report`, `dse.output.study_plots`) and the
dashboard (`dse.explore.study.dashboard_guard.StudyView`, through `dashboard_trials`).

The journal keeps what studies have always stored, so a study run before reads the same: each
value in its metric's stored unit (times in ns, BW utilisation and gap as fractions, cost in $,
time x cost in ns·$) under its objective id, Optuna's metric name (`dse.explore.study.objectives
.metric_name`, e.g. ``time_ns_themis_scf``). Samplers see those numbers, so nothing shown changes
what a study draws. Every view converts when it shows:

===================== =================================== =======================================
metric                shown as (`Shown.name`)             CSV column (`Shown.column`)
===================== =================================== =======================================
time                  time (ms) with themis+scf           time_themis_scf_ns
iteration_time        iteration time (ms) with themis+scf iteration_time_themis_scf_ns
libra_iteration_time  LIBRA-model iteration time (ms)     libra_iteration_time_ns
bw_utilization        BW utilisation (%) with themis+scf  bw_utilization_themis_scf_pct (0-100)
gap                   gap (%) with themis+scf             gap_themis_scf_pct (0-100)
cost                  cost ($)                            cost_usd
iteration_time_x_cost time x cost (ms·$) with themis+scf  iteration_time_x_cost_themis_scf_ms_usd
===================== =================================== =======================================

"themis+scf" is the scheduler and queue the objective is measured with. A study under a
closed-form cost model (`nccl`, whose collectives take NCCL's algorithms, not a chunk schedule)
is measured with that model whatever the scheduler: its study attribute `CLOSED_FORM_ATTR` names
the model, and every view shows it in the scheduler's place (`study_objectives`, `record_columns`):
``time (ms) with nccl``, column ``time_nccl_ns``. The stored ids stay as they are, so a study
begun before reads and resumes the same. A CSV column's suffix is the unit of the number in it
(`_ns`, `_pct`, `_usd`; ``_ms_usd``: ms·$, as printed and plotted).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dse.core.errors import InputError
from dse.core.quantities import quantity
from dse.core.topology import parse_topology
from dse.explore.study.objectives import METRIC_PREFIX, metric_name
from dse.explore.study.storage import trial_params, trial_record

DEFINITION_ATTR = "dse_definition"  # a study's definition (`StudySpec.definition`), a system attribute
CLOSED_FORM_ATTR = "dse_closed_form_model"  # the closed-form cost model a study is measured with (nccl)
METRIC_NAMES_ATTR = "study:metric_names"  # Optuna's system attribute of `Study.metric_names`
BW_PARAM = re.compile(r"^bw_\d+d_\d+$")  # a space's sampled bandwidth parameters (weights or GB/s)
_OLD_LABEL = re.compile(r"^(\w+)\[(\w+)\+(\w+)\]$")  # Objective.label: time[themis+scf]
_CONSTRAINT = re.compile(r"(\w+)\[(\w+)\+(\w+)\] <= ([^,\s]+)")  # one constraint of a definition
_SCHEDULED = re.compile(r"(time|iteration|exposed_comm)_[a-z]+(?:_[a-z]+)?_ns")  # a record's key per schedule


@dataclass(frozen=True)
class Unit:
    """How a metric is shown: its quantity, the unit shown and the factor from the stored value;
    the unit suffix of its CSV column and the factor from the stored value to that column."""

    label: str
    unit: str
    scale: float
    suffix: str
    column_scale: float


UNITS: dict[str, Unit] = {
    "time": Unit("time", "ms", 1e-6, "ns", 1.0),
    "iteration_time": Unit("iteration time", "ms", 1e-6, "ns", 1.0),
    "libra_iteration_time": Unit("LIBRA-model iteration time", "ms", 1e-6, "ns", 1.0),
    "bw_utilization": Unit("BW utilisation", "%", 100.0, "pct", 100.0),
    "gap": Unit("gap", "%", 100.0, "pct", 100.0),
    "cost": Unit("cost", "$", 1.0, "usd", 1.0),
    "iteration_time_x_cost": Unit("time x cost", "ms·$", 1e-6, "ms_usd", 1e-6),
}


@dataclass(frozen=True)
class Shown:
    """One objective as people read it. `id`: its stored name; `metric`: None for a name dse did not
    write (shown as it is, unscaled); `how`: ``themis+scf``, or empty for a metric measured without
    a scheduler (cost, LIBRA's model)."""

    id: str
    metric: str | None = None
    how: str = ""

    @property
    def unit(self) -> Unit:
        """The metric's `Unit`; for a name dse did not write, the name itself, unscaled."""
        return UNITS[self.metric] if self.metric else Unit(self.id, "", 1.0, "", 1.0)

    @property
    def quantity(self) -> str:
        """The quantity and its unit: ``time (ms)``, ``cost ($)``."""
        u = self.unit
        return f"{u.label} ({u.unit})" if u.unit else u.label

    @property
    def name(self) -> str:
        """What the terminal, the figures and the dashboard call it: ``time (ms) with themis+scf``."""
        return f"{self.quantity} with {self.how}" if self.how else self.quantity

    @property
    def column(self) -> str:
        """Its CSV column, the unit as the suffix: ``time_themis_scf_ns``, ``cost_usd``."""
        if not self.metric:
            return self.id
        how = "_" + self.how.replace("+", "_") if self.how else ""
        return f"{self.metric}{how}_{self.unit.suffix}"

    def value(self, stored: float) -> float:
        """A stored value in the unit shown."""
        return stored * self.unit.scale

    def text(self, stored: float) -> str:
        """A stored value as the terminal prints it, in the unit `name` gives (no unit after it)."""
        v = self.value(stored)
        return f"{v:,.0f}" if self.metric == "cost" and math.isfinite(v) and abs(v) >= 100 else number(v)


def shown(metric_id: str) -> Shown:
    """The `Shown` of an objective id (`dse.explore.study.objectives.metric_name`'s inverse)."""
    for metric, prefix in sorted(METRIC_PREFIX.items(), key=lambda kv: -len(kv[1])):
        if metric_id == prefix:
            return Shown(metric_id, metric)
        if metric_id.startswith(prefix + "_"):
            scheduler, _, queue = metric_id[len(prefix) + 1 :].rpartition("_")
            if scheduler and queue:
                return Shown(metric_id, metric, f"{scheduler}+{queue}")
    return Shown(metric_id)


def closed_form_model(system_attrs: dict[str, Any]) -> str:
    """The closed-form cost model a study is measured with (`CLOSED_FORM_ATTR`), or ``""``."""
    model = system_attrs.get(CLOSED_FORM_ATTR)
    return model if isinstance(model, str) else ""


def as_shown(objective: str | Shown, model: str = "") -> Shown:
    """An objective id (or its `Shown`) as people read it; under a closed-form `model`, measured
    with that model in the scheduler's place (module docstring)."""
    s = objective if isinstance(objective, Shown) else shown(objective)
    return dataclasses.replace(s, how=model) if model and s.how else s


def study_objectives(study: Any) -> list[Shown]:
    """An Optuna study's objectives as people read them (`study_ids`, `as_shown`)."""
    model = closed_form_model(study._storage.get_study_system_attrs(study._study_id))
    return [as_shown(i, model) for i in study_ids(study)]


def number(v: float) -> str:
    """`v` with 4 significant digits, thousands separated, and no exponent from 0.001 to 1e6."""
    if not math.isfinite(v) or v == 0:
        return "0" if v == 0 else str(v)
    a = abs(v)
    if 1e-3 <= a < 1e6:
        return f"{v:,.{max(0, 3 - math.floor(math.log10(a)))}f}"
    return f"{v:.4g}"


def objective_ids(metric_names: Sequence[str] | None, labels: Sequence[Any] | None, n: int) -> list[str]:
    """A study's objective ids: its Optuna metric names, else derived from the labels that studies
    without metric names keep in their user attribute ``objectives``, else
    ``objective_<i>``."""
    if metric_names and len(metric_names) == n:
        return list(metric_names)
    labels = labels or []
    out = []
    for i in range(n):
        label = str(labels[i]) if i < len(labels) else ""
        m = _OLD_LABEL.match(label)
        if label == "cost" or (m and m.group(1) in METRIC_PREFIX):
            out.append(metric_name(*m.groups()) if m else "cost")
        else:
            out.append(f"objective_{i}")
    return out


def study_ids(study: Any) -> list[str]:
    """`objective_ids` of an Optuna study."""
    return objective_ids(study.metric_names, study.user_attrs.get("objectives"), len(study.directions))


def bandwidths(trial: Any) -> list[float]:
    """Per-dimension bandwidth (GB/s per NPU, innermost first) of a trial's design: the record's
    exact ones where it holds them, else read from its topology's notation."""
    record = trial_record(trial)
    exact = record.get("bandwidths_GBps")
    if isinstance(exact, list) and all(isinstance(b, (int, float)) for b in exact):
        return [float(b) for b in exact]
    notation = record.get("topology")
    if not notation:
        return []
    try:
        return [d.bandwidth for d in parse_topology(str(notation)).dims]
    except InputError:  # not a topology dse wrote: no bandwidths rather than no report
        return []


def record_columns(record: dict[str, Any], model: str = "") -> dict[str, Any]:
    """A trial's record as CSV columns, each number's unit its suffix: the fractions
    ``bw_utilization`` and ``gap`` become ``bw_utilization_pct`` and ``gap_pct`` (0-100); the
    exact bandwidths are left to the ``bw<i>_GBps`` columns; every other key already ends in its
    unit (``_ns``, ``_usd``) or is a count or a text. Under a closed-form `model` a time per
    schedule (``time_themis_ns``, ``iteration_baseline_fifo_ns``) is one time with that model
    (``time_nccl_ns``); a schedule's time unlike the first one's keeps its own column."""
    out: dict[str, Any] = {}
    for k, v in record.items():
        if k == "bandwidths_GBps":
            continue
        if model and (m := _SCHEDULED.fullmatch(k)):
            key = f"{m.group(1)}_{model}_ns"
            out.setdefault(key, v)
            if out[key] != v:
                out[k] = v
        elif k in ("bw_utilization", "gap") and isinstance(v, (int, float)):
            out[f"{k}_pct"] = v * 100.0
        else:
            out[k] = v
    return out


def column_label(column: str, value: Any) -> tuple[str, Any]:
    """A CSV column and its value as the dashboard shows them (`dse.core.quantities`): a number in
    its column's unit shown, named with it (``time_themis_ns`` -> ``time themis (ms)`` and the value
    in ms; ``cost_usd`` -> ``cost ($)``; ``bw_utilization_pct`` -> ``BW utilisation (%)``); a text or
    count as it is."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return column, value
    q = quantity(column)
    return (q.axis_label, q.show(value)) if q.unit else (column, value)


def bandwidth_param(i: int) -> str:
    """The name the dashboard gives dimension i's bandwidth."""
    return f"bw{i} (GB/s)"


def dashboard_trials(trials: Sequence[Any], ids: Sequence[str], model: str = "") -> list[Any]:
    """Copies of `trials` as the dashboard shows them: objective values in the unit `Shown.name`
    gives; the sampled bandwidth parameters (a budget split's weights) replaced by each dimension's
    GB/s (``bw0 (GB/s)`` ..., one range per dimension over `trials`, so importances and plots
    compare them); the record as user attributes named with units (``time themis (ms)``,
    ``cost ($)``), with the topology and the choices the space fixed; constraints (value minus
    limit) in the unit of their metric; a closed-form `model`'s times as `record_columns` names
    them. The stored trials are not changed."""
    from optuna.distributions import FloatDistribution

    scales = [shown(i).unit.scale for i in ids]
    bws = [bandwidths(t) for t in trials]
    ranges: dict[int, tuple[float, float]] = {}
    for row in bws:
        for i, b in enumerate(row):
            lo, hi = ranges.get(i, (b, b))
            ranges[i] = (min(lo, b), max(hi, b))
    out = []
    for t, row in zip(trials, bws):
        c = copy.copy(t)
        if t.values is not None and len(t.values) == len(scales):
            c._values = [v * s for v, s in zip(t.values, scales)]
        c._params = {k: v for k, v in t.params.items() if not BW_PARAM.match(k)}
        c._distributions = {k: d for k, d in t.distributions.items() if k in c._params}
        for i, b in enumerate(row):
            c._params[bandwidth_param(i)] = b
            c._distributions[bandwidth_param(i)] = FloatDistribution(*ranges[i])
        c._user_attrs = _dashboard_attrs(t, model)
        c._system_attrs = _dashboard_constraints(t)
        out.append(c)
    return out


def _dashboard_attrs(trial: Any, model: str) -> dict[str, Any]:
    """A trial's user attributes for the dashboard (see `dashboard_trials`)."""
    record = trial_record(trial)
    attrs = {k: v for k, v in trial.user_attrs.items() if k not in record and not isinstance(v, dict)}
    for k, v in record_columns(record, model).items():
        name, value = column_label(k, v)
        attrs[name] = value
    fixed = {k: v for k, v in trial_params(trial).items() if k not in trial.params}
    return attrs | fixed


def _dashboard_constraints(trial: Any) -> dict[str, Any]:
    """A trial's system attributes with its constraints as the list optuna-dashboard reads
    (``constraints``), each in its metric's shown unit."""
    cons = trial.constraints
    attrs = {k: v for k, v in trial.system_attrs.items() if not k.startswith("constraints")}
    if cons:
        attrs["constraints"] = [v * (UNITS[k].scale if k in UNITS else 1.0) for k, v in cons.items()]
    return attrs


def dashboard_study_attrs(system_attrs: dict[str, Any], user_attrs: dict[str, Any], n: int) -> dict[str, Any]:
    """A study's system attributes with its metric names as the dashboard shows them (`Shown.name`)."""
    ids = objective_ids(system_attrs.get(METRIC_NAMES_ATTR), user_attrs.get("objectives"), n)
    model = closed_form_model(system_attrs)
    return system_attrs | {METRIC_NAMES_ATTR: [as_shown(i, model).name for i in ids]}


def constraint_limits(system_attrs: dict[str, Any], trials: Sequence[Any], ids: Sequence[str]) -> dict[str, float]:
    """The largest allowed value (stored unit) of each constrained objective, by objective id: read
    from the study's definition, else (a study with no stored definition) worked out
    from a trial's objective value and its constraint (value minus limit) for ``cost``."""
    definition = system_attrs.get(DEFINITION_ATTR)
    text = definition.get("constraints", "") if isinstance(definition, dict) else ""
    out = {}
    for metric, scheduler, queue, limit in _CONSTRAINT.findall(str(text)):
        try:
            out[metric_name(metric, scheduler, queue)] = float(limit)
        except ValueError:
            continue
    if out or "cost" not in ids:
        return out
    k = list(ids).index("cost")
    for t in trials:
        if "cost" in t.constraints and t.values is not None:
            return {"cost": t.values[k] - t.constraints["cost"]}
    return {}
