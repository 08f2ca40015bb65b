"""Exploring designs: sweep files and parallel sweeps, search spaces, Optuna studies and their
storage, and the hardware cost model."""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
