"""The base layer: units, input errors, limits, files, topologies and collectives. Imports nothing
else of dse; every other layer builds on it."""

from dse import _lazy_submodules

__getattr__ = _lazy_submodules(__name__)
