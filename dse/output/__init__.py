"""What people read: text reports, figures (sweeps, timelines, studies), study reports and the
Themis paper's reproduction."""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
