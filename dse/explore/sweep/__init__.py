"""Sweeps: a grid of designs evaluated in parallel. `file` reads a sweep file, `axes` expands its
per-dimension axes and bandwidth splits, `sweeps` runs it (`run_sweep`) through `runners` (one
process per job, resumable) into a checked CSV (`csvfile`); `iterations` makes each point a
training iteration.

A new sweep axis is a key of `file`'s `[sweep]` table, expanded in `axes`, with its CSV column
declared where `csvfile` names the columns.
"""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
