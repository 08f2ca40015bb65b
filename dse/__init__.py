"""dse: collectives, Themis scheduling, bounds and design-space search for multi-dimensional networks."""

from . import lp_guided  # noqa: F401  (registers the lp_guided scheduler)
from .bounds import Bounds, lower_bounds
from .costs import COST_MODELS, CostModel, get_cost_model
from .errors import InputError
from .evaluate import compare, evaluate
from .iteration import IterationResult, iterate
from .result import Result
from .schedulers import SCHEDULERS, Scheduler, get_scheduler
from .topology import PRESETS, Dim, Topology, parse_topology
from .workloads import Workload, bundled_workloads, load_workload

__version__ = "0.1.0"

__all__ = [
    "Bounds", "COST_MODELS", "CostModel", "lower_bounds", "Dim", "InputError", "PRESETS", "Result", "SCHEDULERS", "Scheduler",
    "Topology", "compare", "evaluate", "get_cost_model", "get_scheduler", "parse_topology", "__version__",
    "IterationResult", "Workload", "bundled_workloads", "iterate", "load_workload",
]  # fmt: skip
