"""Sweeps: a grid of designs evaluated in parallel. `file` reads a sweep file, `axes` expands its
per-dimension axes and bandwidth splits, `sweeps` runs it (`run_sweep`) through `runners` (one
process per job, resumable) into a checked CSV (`csvfile`); `iterations` makes each point a
training iteration.

A new sweep axis of an `evaluate()` parameter is a key in `file.PARAMS` (the expansion order),
with its default in `file.DEFAULTS`, its parser in `file._PARSERS` and its place in `file._expand`
(its CSV column follows `dse.sim.result.Point`'s fields); a new per-dimension axis goes into `axes`
(`is_axis_key`, `parse_axes`, `axis_columns`).
"""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
