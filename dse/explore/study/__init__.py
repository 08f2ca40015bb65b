"""Optuna studies of network designs: study files (`studies`), search spaces (`spaces`), objectives
(`objectives`), the trial loop (`trials`) and its parallel workers (`workers`), storages (`storage`,
`storage_urls`, the synced `journal`), resumable samplers (`samplers`), the progress bar
(`progress`), objectives' units (`units`), the read-only dashboard (`dashboard`, `dashboard_guard`),
and studies whose trial is a training iteration (`workload`) or a per-rank trace (`ranks`).

A new objective is a metric: its name and default direction in `objectives.METRICS`, its id prefix
in `objectives.METRIC_PREFIX`, listed in `objectives.COLLECTIVE_METRICS` or `WORKLOAD_METRICS`, its
unit in `units.UNITS`, and its value measured in `trials.metric_value` (a collective study) or
`workload.workload_metric` (a workload study). A new storage kind is a URL scheme in
`storage.open_storage`, with its lock in `storage.storage_lock`.
"""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
