"""Training workloads: the model (`workloads`), its loader (`workload_load`: files in dse's TOML or
ASTRA-sim 1.0 text, bundled names, generators, Chakra traces in `chakra`), placements, workload
graphs, and iterations run on the engine.

A new workload format gets a reader module and one branch in `workload_load.load_workload`."""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
