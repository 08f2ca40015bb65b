"""dse: collectives, Themis scheduling, bounds and design-space search for multi-dimensional networks.

`import dse` loads nothing but this file: each public name (`dse.evaluate`, `dse.Topology`, ...)
imports its module on first use (PEP 562), and so does each layer package (`dse.core`, `dse.sim`),
so a command loads only what it runs. The layers, lowest first: core, costs, schedulers, sim,
bounds, training, explore, output, cli (docs/architecture.md).
"""

from __future__ import annotations

import importlib as _importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers read the name)
if TYPE_CHECKING:  # the names for type checkers and IDEs; at run time `__getattr__` imports them
    from typing import Any

    from dse.bounds.api import Bounds, lower_bounds
    from dse.bounds.optimal import OptimalSchedule, optimal_schedule
    from dse.core.errors import InputError
    from dse.core.presets import PRESETS
    from dse.core.topology import Dim, Topology, parse_topology
    from dse.costs import COST_MODELS, CostModel, get_cost_model
    from dse.schedulers import SCHEDULERS, Scheduler, get_scheduler
    from dse.sim.batch import BatchResult, evaluate_many
    from dse.sim.evaluate import compare, evaluate
    from dse.sim.result import Result
    from dse.training.iteration import IterationResult, iterate
    from dse.training.workload_load import bundled_workloads, load_workload
    from dse.training.workloads import Workload
del TYPE_CHECKING

__version__ = "0.1.0"

#: Public name -> the submodule (relative to this package) that defines it.
_LAZY: dict[str, str] = {
    "BatchResult": "sim.batch",
    "evaluate_many": "sim.batch",
    "Bounds": "bounds.api",
    "lower_bounds": "bounds.api",
    "OptimalSchedule": "bounds.optimal",
    "optimal_schedule": "bounds.optimal",
    "COST_MODELS": "costs",
    "CostModel": "costs",
    "get_cost_model": "costs",
    "InputError": "core.errors",
    "compare": "sim.evaluate",
    "evaluate": "sim.evaluate",
    "IterationResult": "training.iteration",
    "iterate": "training.iteration",
    "Result": "sim.result",
    "SCHEDULERS": "schedulers",
    "Scheduler": "schedulers",
    "get_scheduler": "schedulers",
    "PRESETS": "core.presets",
    "Dim": "core.topology",
    "Topology": "core.topology",
    "parse_topology": "core.topology",
    "Workload": "training.workloads",
    "bundled_workloads": "training.workload_load",
    "load_workload": "training.workload_load",
}

__all__ = [
    "Bounds",
    "COST_MODELS",
    "CostModel",
    "lower_bounds",
    "OptimalSchedule",
    "optimal_schedule",
    "Dim",
    "InputError",
    "PRESETS",
    "Result",
    "SCHEDULERS",
    "Scheduler",
    "Topology",
    "compare",
    "evaluate",
    "get_cost_model",
    "get_scheduler",
    "parse_topology",
    "__version__",
    "IterationResult",
    "Workload",
    "bundled_workloads",
    "iterate",
    "load_workload",
    "BatchResult",
    "evaluate_many",
]


def __getattr__(name: str) -> Any:
    """A public name from its module, or a layer package (`dse.core`), imported on first use and
    then kept in this module's namespace; anything else is an AttributeError."""
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(_importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value  # after the import, which may have bound the submodule to the same name
        return value
    if name.isidentifier() and not name.startswith("_"):
        try:
            return _importlib.import_module(f".{name}", __name__)  # the import binds it here too
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise  # the submodule exists but something it imports does not
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The names loaded so far and every public name, loaded or not."""
    return sorted(set(globals()) | set(_LAZY))
