"""Search spaces: the networks a design-space study considers, read from a TOML ``[space]`` table.

A *search space* (``search_spaces/*.toml``, table ``[space]``) describes the networks to consider:
the NPU count; the allowed numbers of dimensions; shapes as ordered factorisations of the NPU count
into allowed dimension sizes (powers of two by default) or an explicit list; the kinds allowed in
each dimension tier; the per-NPU bandwidth, either split under a total budget (each dimension at
least a minimum), drawn from per-tier ranges, or any allocation meeting linear constraints
(``constraints = ["bw0 == 500", "bw0 >= bw1", "bw2 + bw3 == 200"]``, `dse.explore.libra.bw_constraints`:
each trial draws a point of their polytope, so no design breaks them; a study's
``bandwidth_constraints`` replace the space's rule the same way); latencies per tier; chunk
counts; schedulers and queues. Tier i is the i-th dimension from the innermost; a topology with fewer dimensions than
tiers gives its outermost dimension the last tier (the scale-out network).

A space may take its dimensions from an ASTRA-sim 2.x network file instead: ``network =
"net.yml"`` (relative to the space file, `dse.core.network_yaml`) gives the space the file's NPU
count, its one shape, its kinds (one per tier) and its latencies (one tier per dimension), so the
study chooses only what ``[space.bandwidth]`` leaves open: the split of the bandwidth. The file's
own bandwidths are not used (its numbers are in the file's unit, GB/s per NPU; under the
``astra-sim`` cost models a GB is 2^30 B, and a budget or constraint in this space is in that same
unit). Giving ``npus``, ``dims``, ``sizes``, ``shapes``, ``kinds`` or ``[space.latency]`` beside
``network`` is refused in one line (one source for each number).

A space's numbers of dimensions (each of ``dims``, and of each of ``shapes``) are held to the
dimension limit (``DSE_MAX_DIMENSIONS``, `dse.core.topology.check_dimensions`) as the table is read:
one line before any shape is enumerated, so before a study opens its storage.

`SearchSpace.suggest` draws one design from an Optuna trial; studies (`dse.explore.study.studies`) name
a space file and run it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.files import read_toml
from dse.core.limits import MAX_NPUS, MAX_SPACE_SHAPES
from dse.core.network_yaml import is_network_file
from dse.core.topology import Dim, Topology, check_dimensions, parse_kind, parse_topology
from dse.core.units import parse_int, parse_positive
from dse.explore.libra.bw_constraints import BandwidthPolytope
from dse.explore.study.toml_fields import as_list, check_keys, parse_scheduler
from dse.schedulers import parse_queue

SPACE_KEYS = {
    "npus",
    "dims",
    "sizes",
    "shapes",
    "kinds",
    "chunks",
    "schedulers",
    "queues",
    "bandwidth",
    "latency",
    "network",
}
#: what a network file sets in a space (`network` and these are exclusive)
NETWORK_SETS = ("npus", "dims", "sizes", "shapes", "kinds", "latency")
BANDWIDTH_KEYS = {"budget", "minimum", "step", "ranges", "constraints", "maximum"}
LATENCY_KEYS = {"tiers"}
#: the least bandwidth of a dimension under constraints (GB/s): a time needs a bandwidth above 0
DEFAULT_MINIMUM = 1.0


@dataclass(frozen=True)
class SearchSpace:
    """A validated search space (see the module docstring)."""

    npus: int
    shapes: dict[int, tuple[tuple[int, ...], ...]]  # dims -> allowed shapes
    kinds: tuple[tuple[str, ...], ...]  # allowed kinds per tier
    chunks: tuple[int, ...]
    schedulers: tuple[str, ...]
    queues: tuple[str, ...]
    latency_tiers: tuple[float, ...]
    budget: float | None = None
    minimum: float = 0.0
    step: float | None = None
    ranges: tuple[tuple[float, float], ...] | None = None
    #: linear constraints on the per-dimension bandwidths (`dse.explore.libra.bw_constraints`), the space's
    #: one number of dimensions: every design is a point of their polytope
    polytope: BandwidthPolytope | None = None

    @classmethod
    def from_toml(cls, path: str | Path) -> SearchSpace:
        """The space of a space file, which holds one ``[space]`` table."""
        data = read_toml(path, "space file")
        if set(data) != {"space"}:
            extra = sorted(set(data) - {"space"})
            raise InputError(
                f"{extra[0] if extra else 'space'}", "a search space file holds one [space] table", "[space]"
            )
        return cls.from_table(data["space"], Path(path).parent)

    @classmethod
    def from_table(cls, t: dict[str, Any], base: Path | None = None) -> SearchSpace:
        """The space of a ``[space]`` table, checked field by field in the order the fields are listed;
        a ``network`` file is read relative to the folder `base` (the current folder if None)."""
        check_keys(t, SPACE_KEYS, "space")
        if "network" in t:
            t = _network_fields(t, base or Path("."))
        if "npus" not in t:
            raise InputError("space.npus", "missing", "the total NPU count, e.g. 1024")
        npus = parse_int(t["npus"], "space.npus", minimum=2, maximum=MAX_NPUS)
        shapes = _listed_shapes(t["shapes"], npus) if "shapes" in t else _factorised_shapes(t, npus)
        kinds = _parse_kinds(t.get("kinds", ["ring", "fc", "switch"]))
        chunks = tuple(parse_int(c, "space.chunks", minimum=1) for c in as_list(t.get("chunks", [64]), "space.chunks"))
        schedulers = tuple(parse_scheduler(s) for s in as_list(t.get("schedulers", ["themis"]), "space.schedulers"))
        queues = tuple(parse_queue(q) for q in as_list(t.get("queues", ["scf"]), "space.queues"))
        tiers = _parse_latency(t.get("latency", {}))
        bw = _parse_bandwidth(t.get("bandwidth"), min(shapes))
        space = cls(npus, shapes, kinds, chunks, schedulers, queues, tiers, bw.budget, bw.minimum, bw.step, bw.ranges)
        if bw.constraints is not None:
            space = space.constrained(bw.constraints, bw.maximum, "space.bandwidth.constraints")
        return space

    def constrained(
        self, constraints: Any, maximum: float | None = None, field: str = "bandwidth_constraints"
    ) -> SearchSpace:
        """This space with its bandwidths drawn from the polytope of `constraints` (a list of strings;
        each bandwidth at least the space's `minimum`, at most `maximum`) instead of a budget or
        ranges; one number of dimensions."""
        if not isinstance(constraints, list) or not constraints or not all(isinstance(c, str) for c in constraints):
            raise InputError(field, f"{constraints!r}", 'a list of strings, e.g. ["bw0 + bw1 == 800"]')
        if len(self.shapes) != 1:
            raise InputError(field, f"a space of {sorted(self.shapes)} dimensions", "one number of dimensions")
        nd = next(iter(self.shapes))
        if maximum is None and self.ranges is not None:
            maximum = max(hi for _, hi in self.ranges)
        poly = BandwidthPolytope.parse(
            list(constraints), nd, minimum=self.minimum or DEFAULT_MINIMUM, maximum=maximum, field_name=field
        )
        return replace(self, budget=None, step=None, ranges=None, polytope=poly)

    def _tier(self, values: Sequence[Any], i: int, ndims: int) -> Any:
        if i == ndims - 1:
            return values[-1]
        return values[min(i, len(values) - 1)]

    def suggest(self, trial: Any, fixed: dict[str, Any] | None = None) -> tuple[Topology, int, str, str]:
        """Draw one design from `trial` (Optuna define-by-run): topology, chunks, scheduler, queue.

        With a dict `fixed`, a choice with one allowed value is not an Optuna parameter (one journal
        append that tells the sampler nothing) but goes into `fixed` under its parameter's name."""
        nd = _choose(trial, "dims", sorted(self.shapes), fixed)
        shape_names = ["x".join(map(str, s)) for s in self.shapes[nd]]
        shape = self.shapes[nd][shape_names.index(_choose(trial, f"shape_{nd}d", shape_names, fixed))]
        kinds = [_choose(trial, f"kind_{nd}d_{i}", list(self._tier(self.kinds, i, nd)), fixed) for i in range(nd)]
        if self.polytope is not None:  # one u in [0, 1] per free coordinate, mapped into the polytope
            bws = list(
                self.polytope.point([trial.suggest_float(f"bw_{nd}d_{i}", 0.0, 1.0) for i in range(self.polytope.free)])
            )
        elif self.budget is not None:
            kw = {"step": self.step} if self.step else {}
            w = [trial.suggest_float(f"bw_{nd}d_{i}", 0.0, 1.0, **kw) for i in range(nd)]
            total = sum(w)
            share = [x / total for x in w] if total > 0 else [1.0 / nd] * nd
            spare = self.budget - nd * self.minimum
            bws = [self.minimum + spare * s for s in share]
        else:
            assert self.ranges is not None
            bws = []
            for i in range(nd):
                lo, hi = self._tier(self.ranges, i, nd)
                bws.append(trial.suggest_float(f"bw_{nd}d_{i}", lo, hi) if hi > lo else lo)
        lats = [self._tier(self.latency_tiers, i, nd) for i in range(nd)]
        topo = Topology(tuple(Dim(k, p, max(b, 1e-9), lat) for k, p, b, lat in zip(kinds, shape, bws, lats)))
        chunks = _choose(trial, "chunks", list(self.chunks), fixed)
        sched = _choose(trial, "scheduler", list(self.schedulers), fixed)
        queue = _choose(trial, "queue", list(self.queues), fixed)
        return topo, chunks, sched, queue

    def first_design(self) -> tuple[Topology, int]:
        """The space's first design (first shape and kinds, the budget split evenly or each range's
        low end, the most chunks): what a study checks its workload against before it runs."""
        nd = min(self.shapes)
        shape = self.shapes[nd][0]
        if self.polytope is not None:
            bws = list(self.polytope.point([0.5] * self.polytope.free))
        elif self.budget is not None:
            bws = [self.budget / nd] * nd
        else:
            assert self.ranges is not None
            bws = [self._tier(self.ranges, i, nd)[0] for i in range(nd)]
        dims = tuple(
            Dim(self._tier(self.kinds, i, nd)[0], p, b, self._tier(self.latency_tiers, i, nd))
            for i, (p, b) in enumerate(zip(shape, bws))
        )
        return Topology(dims), max(self.chunks)

    def check_discrete(self) -> None:
        """Brute force needs every parameter discrete: a budget split with a weight `step`."""
        if self.polytope is not None:
            raise InputError("space.bandwidth.constraints", "brute force needs a discrete space", "tpe or random")
        if self.budget is not None and self.step is None:
            raise InputError("space.bandwidth.step", "brute force needs a discrete space", "a step, e.g. step = 0.1")
        if self.ranges is not None:
            raise InputError("space.bandwidth.ranges", "brute force needs a discrete space", "budget with a step")


def _network_fields(t: dict[str, Any], base: Path) -> dict[str, Any]:
    """`t` with ``network`` replaced by what its file sets (module docstring): NPUs, the one shape,
    a kind per tier and a latency per tier, checked by the same code as a table that gives them."""
    clash = next((k for k in NETWORK_SETS if k in t), None)
    if clash is not None:
        raise InputError(f"space.{clash}", "given with space.network, whose file sets it", "one of them")
    name = t["network"]
    if not isinstance(name, str) or not is_network_file(name):
        raise InputError("space.network", f"{name!r} is not a network file", "an ASTRA-sim 2.x file, *.yml or *.yaml")
    try:
        topo = parse_topology(str(base / name))
    except InputError as e:  # the reader's field ("topology", or the file and line) under the space's
        raise InputError(f"space.network: {e.field}", e.problem, e.allowed) from None
    rest = {k: v for k, v in t.items() if k != "network"}
    return rest | {
        "npus": topo.npus,
        "shapes": ["x".join(str(d.npus) for d in topo.dims)],
        "kinds": [[d.kind] for d in topo.dims],
        "latency": {"tiers": [d.latency for d in topo.dims]},
    }


def _choose(trial: Any, name: str, choices: list[Any], fixed: dict[str, Any] | None) -> Any:
    """`trial.suggest_categorical(name, choices)`, or with a dict `fixed` and a single choice, that
    choice, recorded in `fixed` (see `SearchSpace.suggest`)."""
    if fixed is not None and len(choices) == 1:
        fixed[name] = choices[0]
        return choices[0]
    return trial.suggest_categorical(name, choices)


# ----------------------------------------------------------------------------- parsing [space]
def _listed_shapes(raw: Any, npus: int) -> dict[int, tuple[tuple[int, ...], ...]]:
    """``shapes = [...]``: each shape must hold `npus` NPUs; grouped by their number of dimensions."""
    shapes = [_parse_shape(s, "space.shapes") for s in as_list(raw, "space.shapes")]
    for s in shapes:
        if math.prod(s) != npus:
            raise InputError("space.shapes", f"{'x'.join(map(str, s))} has {math.prod(s)} NPUs, not {npus}")
    return {d: tuple(s for s in shapes if len(s) == d) for d in sorted({len(s) for s in shapes})}


def _factorised_shapes(t: dict[str, Any], npus: int) -> dict[int, tuple[tuple[int, ...], ...]]:
    """``dims`` and ``sizes`` (powers of two by default): every ordered factorisation of `npus`."""
    dims_allowed = [
        parse_int(d, "space.dims", minimum=1, maximum=40) for d in as_list(t.get("dims", [2, 3, 4]), "space.dims")
    ]
    check_dimensions(max(dims_allowed, default=0), "space.dims")  # before a shape is enumerated
    default_sizes = [2**k for k in range(1, int(math.log2(npus)) + 1)]
    sizes = sorted(
        {
            parse_int(s, "space.sizes", minimum=2, maximum=npus)
            for s in as_list(t.get("sizes", default_sizes), "space.sizes")
        }
    )
    shapes = {}
    budget = [MAX_SPACE_SHAPES]
    for d in sorted(set(dims_allowed)):
        found = tuple(_factorisations(npus, sizes, d, budget))
        if found:
            shapes[d] = found
    if not shapes:
        raise InputError(
            "space",
            f"no shape of {dims_allowed} dimensions multiplies to {npus} NPUs from sizes {sizes}",
            "other dims or sizes",
        )
    return shapes


def _factorisations(n: int, sizes: list[int], d: int, budget: list[int]) -> Iterator[tuple[int, ...]]:
    """Ordered factorisations of `n` into `d` factors from `sizes`, in lexicographic order.

    `budget` ([shapes left]) caps how many a space may hold (`dse.core.limits.MAX_SPACE_SHAPES`)."""
    if d and not sizes[0] ** d <= n <= sizes[-1] ** d:  # no d factors from sizes can make n
        return
    if d == 0:
        if n == 1:
            if budget[0] <= 0:
                raise InputError(
                    "space", f"more than {MAX_SPACE_SHAPES:,} shapes", "fewer dims or sizes, or shapes = [...]"
                )
            budget[0] -= 1
            yield ()
        return
    for s in sizes:
        if n % s == 0:
            for rest in _factorisations(n // s, sizes, d - 1, budget):
                yield (s, *rest)


def _parse_shape(s: Any, field: str) -> tuple[int, ...]:
    parts = str(s).lower().replace("*", "x").split("x")
    check_dimensions(len(parts), field)  # counted before a size is read
    return tuple(parse_int(p.strip(), field, minimum=2) for p in parts)


def _parse_kinds(raw: Any) -> tuple[tuple[str, ...], ...]:
    """``kinds``: one list for every tier, or a list of lists, one per tier."""
    kinds = as_list(raw, "space.kinds")
    if all(isinstance(k, list) for k in kinds):
        return tuple(tuple(parse_kind(k, "space.kinds") for k in as_list(tier, "space.kinds")) for tier in kinds)
    return (tuple(parse_kind(k, "space.kinds") for k in kinds),)


def _parse_latency(lat: Any) -> tuple[float, ...]:
    """``[space.latency]``: the latency of each tier (ns), 0 by default."""
    if not isinstance(lat, dict):
        raise InputError("space.latency", "must be a table", "[space.latency] tiers = [...]")
    check_keys(lat, LATENCY_KEYS, "space.latency")
    return tuple(
        parse_positive(x, "space.latency.tiers", allow_zero=True)
        for x in as_list(lat.get("tiers", [0]), "space.latency.tiers")
    )


@dataclass(frozen=True)
class _Bandwidth:
    """``[space.bandwidth]``: a budget split (each dimension at least `minimum`, weights in steps of
    `step`, if given), per-tier `ranges`, or linear `constraints` (each at least `minimum`, at most
    `maximum`)."""

    budget: float | None = None
    minimum: float = 0.0
    step: float | None = None
    ranges: tuple[tuple[float, float], ...] | None = None
    constraints: Any = None  # the raw list, checked by `SearchSpace.constrained`
    maximum: float | None = None


def _parse_bandwidth(bw: Any, fewest_dims: int) -> _Bandwidth:
    """``[space.bandwidth]``, its budget checked against the space's fewest dimensions."""
    if not isinstance(bw, dict):
        raise InputError("space.bandwidth", "missing", "[space.bandwidth] with budget (and minimum) or ranges")
    check_keys(bw, BANDWIDTH_KEYS, "space.bandwidth")
    if "constraints" in bw:
        return _constrained_bandwidth(bw)
    if "maximum" in bw:
        raise InputError("space.bandwidth.maximum", "given without constraints", "constraints = [...], maximum = ...")
    if ("budget" in bw) == ("ranges" in bw):
        raise InputError(
            "space.bandwidth",
            "give either budget or ranges",
            "budget = 800, minimum = 25; or ranges = [[lo, hi], ...]",
        )
    step = parse_positive(bw["step"], "space.bandwidth.step") if "step" in bw else None
    if step is not None and step > 1:
        raise InputError("space.bandwidth.step", f"{step} is more than 1", "a weight step in (0, 1]")
    if "budget" not in bw:
        return _Bandwidth(step=step, ranges=_parse_ranges(bw["ranges"]))
    budget = parse_positive(bw["budget"], "space.bandwidth.budget")
    minimum = parse_positive(bw.get("minimum", 0), "space.bandwidth.minimum", allow_zero=True)
    need = fewest_dims * minimum
    if need > budget or (need == budget and minimum == 0):
        raise InputError(
            "space.bandwidth",
            f"impossible budget: {fewest_dims} dims x minimum {minimum:g} GB/s exceeds {budget:g} GB/s",
            "a larger budget or a smaller minimum",
        )
    return _Bandwidth(budget, minimum or 0.0, step)


def _constrained_bandwidth(bw: dict[str, Any]) -> _Bandwidth:
    """``constraints = ["bw0 + bw1 == 1000", ...]`` with `minimum` (default `DEFAULT_MINIMUM`) and
    an optional `maximum`: neither budget, step nor ranges."""
    for key in ("budget", "step", "ranges"):
        if key in bw:
            raise InputError(f"space.bandwidth.{key}", "given with constraints", "constraints, minimum and maximum")
    minimum = parse_positive(bw.get("minimum", DEFAULT_MINIMUM), "space.bandwidth.minimum")
    maximum = parse_positive(bw["maximum"], "space.bandwidth.maximum") if "maximum" in bw else None
    return _Bandwidth(minimum=minimum, constraints=bw["constraints"], maximum=maximum)  # checked by `constrained`


def _parse_ranges(raw: Any) -> tuple[tuple[float, float], ...]:
    """``ranges = [[lo, hi], ...]``: one bandwidth range (GB/s) per tier."""
    ranges = []
    for r in as_list(raw, "space.bandwidth.ranges"):
        if not (isinstance(r, list) and len(r) == 2):
            raise InputError("space.bandwidth.ranges", f"{r!r} is not [low, high]", "[[lo, hi], ...] one per tier")
        lo = parse_positive(r[0], "space.bandwidth.ranges")
        hi = parse_positive(r[1], "space.bandwidth.ranges")
        if hi < lo:
            raise InputError("space.bandwidth.ranges", f"[{lo:g}, {hi:g}] is empty", "low <= high")
        ranges.append((lo, hi))
    return tuple(ranges)
