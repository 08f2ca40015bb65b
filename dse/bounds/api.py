"""Lower bounds on a collective's time and the optimality gap (docs/model.md §7): the public entry.

`lower_bounds` validates a collective and returns its `Bounds`: dse's four bounds (ideal, fluid LP,
ILP, pipeline; `dse.bounds.relaxations`, whose docstring says what each is) and, when asked, the
exact problem's proven bound (`dse.bounds.optimal`). gap = T_schedule / T_bound − 1, against
``Bounds.bound_ns``. The names below are this package's public ones, whichever module holds them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Unpack

from dse.bounds.exact import exact_refusal
from dse.bounds.optimal import optimal_for
from dse.bounds.relaxations import (
    Bounds,
    ChunkType,
    bounds_for,
    chunk_types,
    count_types,
    distinct_types,
    fluid_bound_ns,
    ideal_ns,
    ilp_bound,
    lp_bound,
    refuse_closed_form,
    types_for_plan,
)
from dse.core.errors import InputError
from dse.core.topology import Topology
from dse.sim.spec import CollectiveSpec, SpecArgs

SOLVERS = ("highs", "cbc")

__all__ = [
    "SOLVERS",
    "Bounds",
    "ChunkType",
    "bounds_for",
    "chunk_types",
    "count_types",
    "distinct_types",
    "fluid_bound_ns",
    "ideal_ns",
    "ilp_bound",
    "lower_bounds",
    "lp_bound",
    "types_for_plan",
]


def lower_bounds(
    topology: Topology | str | CollectiveSpec,
    *,
    time_limit_s: float = 10.0,
    solver: str = "highs",
    pipeline: bool = True,
    node_limit: int | None = None,
    exact_work: float = 0.0,
    **spec_args: Unpack[SpecArgs],
) -> Bounds:
    """Ideal, fluid-LP, ILP and pipeline bounds of one collective (`dse.bounds.relaxations`).

    `topology` and `spec_args`: the collective, as `evaluate` takes it (`SpecArgs`: collective,
    size, chunks, cost_model, latency_mode, active_chunks), or a `CollectiveSpec`.
    `solver`: ``highs`` (in process, the default) or ``cbc`` (PuLP's bundled binary; used
    automatically when HiGHS is missing). `time_limit_s` bounds each solve (``math.inf``: no time
    limit, only `node_limit`'s); a solve cut short reports the solver's proven dual bound and says
    so in `status`. `pipeline=False` skips the tightened ILP (then `pipeline_ns` equals `ilp_ns`).
    `node_limit` caps each HiGHS solve's branch-and-bound nodes: a limit of work rather than of
    time, so a cut-short bound is the same on every run and every machine (sweeps, reproductions
    and `dse compare` use one). `exact_work` > 0 also solves the exact problem within that much
    CP-SAT work (`dse.bounds.optimal`, deterministic) where it applies (`active_chunks` 1): its
    proven bound is `exact_ns`, and `bound_ns` the higher of it and the pipeline bound, so gaps at
    few chunks become exact.
    """
    spec = CollectiveSpec.parse(topology, **spec_args)
    refuse_closed_form(spec)
    if isinstance(exact_work, bool) or not isinstance(exact_work, (int, float)) or not 0 <= exact_work < math.inf:
        raise InputError("exact_work", f"{exact_work!r}", "a number >= 0 (CP-SAT deterministic seconds; 0: off)")
    if solver not in SOLVERS:
        raise InputError("solver", f"unknown solver {solver!r}", ", ".join(SOLVERS))
    if not (isinstance(time_limit_s, (int, float)) and time_limit_s > 0):
        raise InputError("time_limit_s", f"{time_limit_s!r} is not a positive number of seconds")
    if node_limit is not None and (isinstance(node_limit, bool) or not isinstance(node_limit, int) or node_limit < 1):
        raise InputError("node_limit", f"{node_limit!r} is not a positive integer")
    b = bounds_for(spec, time_limit_s=float(time_limit_s), solver=solver, pipeline=pipeline, node_limit=node_limit)
    return with_exact(b, spec, float(exact_work)) if exact_work and spec.active_chunks == 1 else b


#: how the note of an exact problem too large to solve starts (`with_exact`; `dse compare` prints it)
EXACT_NOT_SOLVED = "exact optimum not solved"


def with_exact(b: Bounds, spec: CollectiveSpec, work: float) -> Bounds:
    """`b` with the exact problem's proven bound, solved within `work` (`dse.bounds.optimal`); an
    exact problem too large to build (`dse.bounds.exact.exact_refusal`, counted first) leaves `b`'s
    bound as it is and adds a note starting with `EXACT_NOT_SOLVED`."""
    refused = exact_refusal(spec)
    if refused is not None:
        return replace(b, notes=(*b.notes, f"{EXACT_NOT_SOLVED}: {refused.problem}; the bound is dse's"))
    best = optimal_for(spec, work=work)
    return replace(b, exact_ns=best.bound_ns, exact_status=best.status)
