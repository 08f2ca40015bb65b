"""What people read: text reports, figures (sweeps, timelines, studies), study reports and the
Themis paper's reproduction."""

from dse import _lazy_submodules

__getattr__ = _lazy_submodules(__name__)
