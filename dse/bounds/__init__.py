"""Lower bounds on a collective's time (ideal, LP, ILP, pipeline) and the schedules that meet the
load-only floor (`floorfit`)."""

from dse import _lazy_submodules

__getattr__ = _lazy_submodules(__name__)
