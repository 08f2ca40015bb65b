"""Exploring designs: Optuna studies with their search spaces and storages (`study`), sweep files
and parallel sweeps (`sweep`), LIBRA's bandwidth allocation (`libra`), and the hardware cost model
(`hwcost`)."""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
