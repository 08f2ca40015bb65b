"""dse's one event engine: `run` takes a network, a graph (or one collective's chunk plans) and the
hooks that plan collectives, and runs them in C (`dse/sim/_engine.c`, built by setup.py) or, without a
compiler, in the pure-Python reference (`dse.sim.engine_ref`, whose docstring is the algorithm). Both
give the same numbers to the bit; the tests hold them equal.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from dse.costs.base import Phase
from dse.sim import engine_ref
from dse.sim.engine_io import EngineGraph, EngineOutput, IssueHooks, LogEntry, NetRules

try:  # the optional C engine (setup.py); engine_ref is the reference
    from dse.sim import _engine
except ImportError:  # pragma: no cover - depends on the build
    _engine = None

ENGINES = ("auto", "c", "python")
#: ``DSE_ENGINE=python`` runs the reference everywhere ``"auto"`` is asked for (the tests without a compiler)
DEFAULT = os.environ.get("DSE_ENGINE", "auto")


def c_engine_built() -> bool:
    """Is the C engine built (setup.py compiles it when a C compiler is there)?"""
    return _engine is not None


def c_engine_module() -> Any:
    """The C engine's extension module (`dse.sim._engine`), or None when it is not built."""
    return _engine


def _graph_args(g: EngineGraph) -> tuple:
    soff, sdst, slag = [0], [], []
    for s in g.succ:
        for x, lag in s:
            sdst.append(x)
            slag.append(lag)
        soff.append(len(sdst))
    return (
        g.kinds,
        g.resources,
        g.durations,
        g.delays,
        soff,
        sdst,
        slag,
        g.end,
        int(g.comm_exclusive),
        int(g.by_id),
        float(g.min_ns),
        int(g.end_before_release),
        g.ideal,
    )


def run(
    net: NetRules,
    graph: EngineGraph | None = None,
    hooks: IssueHooks | None = None,
    *,
    plans: Sequence[tuple[Phase, ...]] | None = None,
    record: bool = False,
    engine: str = "auto",
) -> EngineOutput:
    """Run a graph with its hooks, or (`graph` None) the single collective whose chunks are `plans`.

    `record`: keep every phase as it ran (`EngineOutput.log`). `engine`: ``"auto"`` (C when built),
    ``"c"`` or ``"python"``."""
    if engine == "auto":
        engine = DEFAULT
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if graph is not None and hooks is None:
        raise ValueError("a graph needs hooks to plan its collectives")
    if engine == "c" and _engine is None:
        raise RuntimeError("the C engine is not built (dse/sim/_engine.c; see setup.py)")
    if engine == "python" or _engine is None:
        return engine_ref.run(net, graph, hooks, plans=plans, record=record)
    if graph is None:
        plans = plans if type(plans) is list else list(plans or ())
    out = _engine.run(
        net.ndims,
        net.policy,
        net.slots,
        int(net.shared),
        int(net.dim_tiebreak),
        int(net.issue_priorities),
        int(net.track_lead),
        int(record),
        int(net.tieless),
        plans,
        None if graph is None else _graph_args(graph),
        hooks,
        net.service_order,
    )
    finish, busy, sent, ends, starts, node_ends, compute, cpu, comm, nbytes, log, loop = out
    return EngineOutput(
        finish,
        busy,
        sent,
        ends,
        starts,
        node_ends,
        compute,
        cpu,
        comm,
        nbytes,
        tuple(LogEntry(*e) for e in log) if log is not None else None,
        loop,
    )


def loop_counts(reset: bool = False) -> dict[str, int]:
    """How many runs of the C engine each of its loops made since it was loaded (`EngineOutput.loop`
    names them; the batch's runs count too); `reset` zeroes the counts after reading them. Empty
    without the C engine."""
    return _engine.loop_counts(reset=reset) if _engine is not None else {}


def set_flow(on: bool) -> bool:
    """Whether a single collective may run in the C engine's flow loop (dse/sim/_flow.c; otherwise the
    compact loop runs it, to the same numbers); returns the previous setting. For tests and benchmarks."""
    return bool(_engine.set_flow(on)) if _engine is not None else False
