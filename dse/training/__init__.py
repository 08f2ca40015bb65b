"""Training workloads: their files (dse's TOML, ASTRA-sim 1.0 text, Chakra traces), placements,
workload graphs, and iterations run on the engine."""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
