"""dse: collectives, Themis scheduling, bounds and design-space search for multi-dimensional networks.

`import dse` loads nothing but this file: each public name (`dse.evaluate`, `dse.Topology`, ...)
imports its module on first use (PEP 562), and so does each submodule (`dse.topology`), so a
command loads only what it runs. `dse.evaluate` is the function, as `from .evaluate import
evaluate` made it: importing the submodule `dse.evaluate` later does not replace it (`_Package`).
"""

from __future__ import annotations

import importlib as _importlib
import sys as _sys
import types as _types

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (type checkers read the name)
if TYPE_CHECKING:  # the names for type checkers and IDEs; at run time `__getattr__` imports them
    from typing import Any

    from .batch import BatchResult, evaluate_many
    from .bounds import Bounds, lower_bounds
    from .costs import COST_MODELS, CostModel, get_cost_model
    from .errors import InputError
    from .evaluate import compare, evaluate
    from .iteration import IterationResult, iterate
    from .result import Result
    from .schedulers import SCHEDULERS, Scheduler, get_scheduler
    from .topology import PRESETS, Dim, Topology, parse_topology
    from .workloads import Workload, bundled_workloads, load_workload
del TYPE_CHECKING

__version__ = "0.1.0"

#: Public name -> the submodule (relative to this package) that defines it.
_LAZY: dict[str, str] = {
    "BatchResult": "batch", "evaluate_many": "batch",
    "Bounds": "bounds", "lower_bounds": "bounds",
    "COST_MODELS": "costs", "CostModel": "costs", "get_cost_model": "costs",
    "InputError": "errors",
    "compare": "evaluate", "evaluate": "evaluate",
    "IterationResult": "iteration", "iterate": "iteration",
    "Result": "result",
    "SCHEDULERS": "schedulers", "Scheduler": "schedulers", "get_scheduler": "schedulers",
    "PRESETS": "topology", "Dim": "topology", "Topology": "topology", "parse_topology": "topology",
    "Workload": "workloads", "bundled_workloads": "workloads", "load_workload": "workloads",
}  # fmt: skip

__all__ = [
    "Bounds", "COST_MODELS", "CostModel", "lower_bounds", "Dim", "InputError", "PRESETS", "Result", "SCHEDULERS", "Scheduler",
    "Topology", "compare", "evaluate", "get_cost_model", "get_scheduler", "parse_topology", "__version__",
    "IterationResult", "Workload", "bundled_workloads", "iterate", "load_workload", "BatchResult", "evaluate_many",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    """A public name from its module, or a submodule (`dse.topology`), imported on first use and
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


class _Package(_types.ModuleType):
    """This package's module type: importing a submodule whose name is also a public function of
    the package (`dse.evaluate`) keeps the function as the package's attribute, not the module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, _types.ModuleType) and _LAZY.get(name) == name and value.__name__ == f"{__name__}.{name}":
            value = getattr(value, name)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
