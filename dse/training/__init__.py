"""Training workloads: their files (dse's TOML, ASTRA-sim 1.0 text, Chakra traces), placements,
workload graphs, and iterations run on the engine."""

from dse import _lazy_submodules

__getattr__ = _lazy_submodules(__name__)
