"""A fixed service order (queue ``fixed``): per dimension, the sequence in which it serves phases.

So that a given schedule (a solver's, say) can be replayed exactly: each chunk keeps its dimension
order (the scheduler's, e.g. ``scheduler="fixed"`` with ``orders=``), and each dimension gets the
list of chunk ids it serves, one entry per phase it serves, in service order. A chunk's k-th entry
in a dimension's list is its k-th phase there (an all-reduce chunk visits every dimension twice,
reduce-scatter then all-gather, and appears twice in each list). A dimension serves the next entry
of its list only: it stays idle, whatever else waits, until that chunk's phase arrives, then starts
it at once (with ``active_chunks`` > 1, as soon as a slot is also free: entries start in list
order, up to `active_chunks` at a time). Costs, latency, arrivals and releases are the engine's as
for every queue (docs/model.md §6). Chunk ids are the simulated chunks in issue order
(``Result.simulated_chunks`` of them: the ASTRA-sim models' chunking may run more or fewer than
``chunks``).

The form: a sequence per dimension of chunk ids (``[[0, 1, 1, 0], [1, 0, 0, 1]]``), or the same
as text, ``"0,1,1,0|1,0,0,1"`` (``,`` between chunk ids, ``|`` or ``;`` between dimensions).

Validated in two steps, each a one-line `InputError` on the field ``service_order``:
`parse_service_order` (by `dse.sim.spec.RunSpec.parse` and `dse.sim.simulate.simulate`): the form,
one sequence per dimension, ids whole numbers >= 0, and the queue it goes with; then
`check_service_order` (by `simulate`, once the chunks' phases are known): every id a simulated
chunk, and each chunk listed in each dimension's sequence exactly as many times as it has phases
there (what its collective, its order and the cost model give). What remains wrong is a sequence
that contradicts the chunks' orders (a dimension waits for a phase that can only come after one it
has not served yet): the engine finds no event left with entries unserved and reports it
(`dse.sim.engine_io.ServiceStall`), which `stall_error` turns into the same kind of line.
"""

from __future__ import annotations

from collections.abc import Sequence

from dse.core.errors import InputError
from dse.costs.base import Phase
from dse.sim.engine_io import ServiceStall, TimelineEntry

#: per dimension, the chunk ids it serves, in order
ServiceOrder = tuple[tuple[int, ...], ...]
FIELD = "service_order"
FORM = "one sequence of chunk ids per dimension, e.g. [[0, 1, 1, 0], [1, 0, 0, 1]] or '0,1,1,0|1,0,0,1'"


def served_order(timeline: Sequence[TimelineEntry], ndims: int) -> ServiceOrder:
    """The service order a run's timeline shows: per dimension, its phases' chunks in order of their
    starts (the engine's order on equal starts). Served by queue ``fixed``, it replays the run."""
    seqs: list[list[int]] = [[] for _ in range(ndims)]
    for e in sorted(timeline, key=lambda e: e.start):
        seqs[e.dim].append(e.chunk)
    return tuple(tuple(s) for s in seqs)


def parse_service_order(value: object, ndims: int, queue: str = "fixed") -> ServiceOrder | None:
    """The service order of `value` (None: none), for queue `queue` on `ndims` dimensions."""
    if value is None:
        if queue == "fixed":
            raise InputError(FIELD, "queue fixed needs a service order", FORM)
        return None
    if queue != "fixed":
        raise InputError(FIELD, f"given with queue {queue}", "a service order only with queue fixed")
    seqs = _parse_text(value) if isinstance(value, str) else _parse_seqs(value)
    if len(seqs) != ndims:
        raise InputError(FIELD, f"{len(seqs)} sequence(s) for {ndims} dimension(s)", FORM)
    return seqs


def _parse_text(text: str) -> ServiceOrder:
    parts = text.replace(" ", "").replace(";", "|").split("|")
    out = []
    for part in parts:
        items = part.split(",") if part else []
        if not all(i.isascii() and i.isdigit() and len(i) < 10 for i in items):
            raise InputError(FIELD, f"cannot read {part!r} as a sequence of chunk ids", FORM)
        out.append(tuple(int(i) for i in items))
    return tuple(out)


def _parse_seqs(value: object) -> ServiceOrder:
    if not isinstance(value, Sequence) or any(isinstance(s, str) or not isinstance(s, Sequence) for s in value):
        raise InputError(FIELD, f"cannot read {value!r}", FORM)
    out = []
    for d, seq in enumerate(value):
        for c in seq:
            if isinstance(c, bool) or not hasattr(c, "__index__") or not 0 <= c < 2**31:
                raise InputError(FIELD, f"{c!r} in dimension {d}'s sequence is not a chunk id", "whole numbers >= 0")
        out.append(tuple(int(c) for c in seq))
    return tuple(out)


def check_service_order(order: ServiceOrder, plans: Sequence[Sequence[Phase]]) -> None:
    """Refuse an order whose ids are not the chunks of `plans`, or that lists a chunk in a
    dimension's sequence other than once per phase it has there (module docstring)."""
    n, ndims = len(plans), len(order)
    want = [[0] * ndims for _ in range(n)]
    for c, plan in enumerate(plans):
        for ph in plan:
            if 0 <= ph.dim < ndims:
                want[c][ph.dim] += 1
    got = [[0] * ndims for _ in range(n)]
    for d, seq in enumerate(order):
        for c in seq:
            if c >= n:
                what = f"chunk {c} in dimension {d}'s sequence, but {n} chunk(s) run"
                raise InputError(FIELD, what, f"the simulated chunks' ids, 0..{n - 1}")
            got[c][d] += 1
    for c in range(n):
        for d in range(ndims):
            if got[c][d] != want[c][d]:
                dims = ",".join(str(ph.dim) for ph in plans[c])
                raise InputError(
                    FIELD,
                    f"chunk {c} is {got[c][d]} time(s) in dimension {d}'s sequence but has {want[c][d]} phase(s) "
                    f"there (its phases visit dims {dims})",
                    "each chunk once per phase it runs on the dimension",
                )


def stall_error(e: ServiceStall, order: ServiceOrder) -> InputError:
    """The one-line error of a service order the engine could not follow (`ServiceStall`)."""
    if e.entry >= len(order[e.dim]):
        what = f"chunk {e.chunk} waits at dimension {e.dim}, whose sequence has no entry left for it"
    else:
        what = (
            f"dimension {e.dim} waits at entry {e.entry} for chunk {e.chunk}, whose phase there never comes "
            "(the sequences deadlock with the chunks' orders)"
        )
    return InputError(FIELD, what, "sequences some run can follow, e.g. one read off a fifo or scf timeline")
