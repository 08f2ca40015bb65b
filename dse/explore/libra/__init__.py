"""LIBRA's bandwidth-allocation problem: its network and cost-model files (`files`), its analytic
model of a training iteration and its exact optimum (`model`, `libra_optimum`), the solvers of
that optimum (`solve`, on the incremental LP of `small_lp`), the linear bandwidth constraints and
their polytope (`bw_constraints`: what study spaces sample and sweeps filter by), and LIBRA's
allocation against a study's, both simulated (`compare`).

A new constraint form is parsed in `bw_constraints.parse_constraint`, which every user (study
spaces, sweep axes, LIBRA's optimum) goes through; a new constraint set is an entry of
`bw_constraints.LIBRA_CONSTRAINTS`; a new objective is a name in `model.OBJECTIVES` with its solver
in `solve`, chosen in `model.libra_optimum`.
"""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
