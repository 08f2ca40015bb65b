"""The base layer: units, input errors, limits, files, topologies and collectives. Imports nothing
else of dse; every other layer builds on it."""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
