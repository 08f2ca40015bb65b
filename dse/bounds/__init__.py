"""Lower bounds on a collective's time (ideal, LP, ILP, pipeline; `api`): the LP and ILP models
(`flow`), the whole-step floor under the ILP (`grid`), and the searches for a schedule that meets it
(`floor`, which runs those of `floorfit` on the flow's `lattice`)."""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
