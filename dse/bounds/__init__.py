"""Lower bounds on a collective's time and its optimal schedule.

`api` is the public entry (`lower_bounds`, `Bounds`). dse's four bounds (ideal, LP, ILP, pipeline)
are `relaxations`, on the LP and ILP models of `flow`, the whole-step floor under the ILP (`grid`)
and the searches for a schedule that meets it (`floor`, which runs those of `floorfit` on the flow's
`lattice`). The exact problem is `exact`, its CP-SAT model `exact_model`, solved in a worker process
(`exact_worker` starts and feeds `exact_serve`); `optimal` searches for the optimum and
`optimal_scheduler` replays it as the `optimal` scheduler."""

from dse.core.lazy import lazy_submodules

__getattr__ = lazy_submodules(__name__)
