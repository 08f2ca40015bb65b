"""Optuna studies of network designs: study files (`studies`), search spaces (`spaces`), objectives
(`objectives`), the trial loop (`trials`) and its parallel workers (`workers`), storages (`storage`,
`storage_urls`, the synced `journal`), resumable samplers (`samplers`), the progress bar
(`progress`), objectives' units (`units`), the read-only dashboard (`dashboard`, `dashboard_guard`),
and studies whose trial is a training iteration (`workload`) or a per-rank trace (`ranks`).

A new objective goes into `objectives` (its name, unit and direction in `OBJECTIVES`); a new
storage kind into `storage` (the URL scheme) with its checks in `storage_urls`.
"""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
