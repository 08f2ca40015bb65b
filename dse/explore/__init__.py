"""Exploring designs: sweep files and parallel sweeps, search spaces, Optuna studies and their
storage, and the hardware cost model."""

from dse import _lazy_submodules

__getattr__ = _lazy_submodules(__name__)
