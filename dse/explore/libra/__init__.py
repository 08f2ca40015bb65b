"""LIBRA's bandwidth-allocation problem: its files (`files`), its cost model and objective
(`model`), the exact optimum (`solve`, on the incremental LP of `small_lp`), the linear bandwidth
constraints and the polytope that studies and sweeps sample (`bw_constraints`), and LIBRA's
allocation against a study's, both simulated (`compare`).

A new constraint form goes into `bw_constraints` (parsed once, then checked by every user).
"""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
