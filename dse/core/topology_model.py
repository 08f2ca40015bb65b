"""The topology model: `Dim`, `Topology` and the notation parser (docs/model.md §3).

A topology is an ordered list of dimensions, innermost (fastest) first. Each dimension's
`bandwidth` is the aggregate uni-directional bandwidth one NPU has into it, in GB/s (the Themis
paper's "Aggr BW/NPU"); `latency` is ns per algorithm step.

Two notations are accepted wherever a topology is asked for::

    Ring(4,375,20)_FC(8,175,700)_Ring(4,150,700)_SW(8,100,1700)
    Ring_FC_Ring_SW 4x8x4x8 375,175,150,100 20,700,700,1700

The first takes optional keywords after the three numbers: ``links=`` (links per NPU, used by the
`astra-sim-1` model), ``nic=`` and ``router=`` (ns), ``algorithm=`` (``ring``, ``direct``,
``halving_doubling``). In the second form the parts are separated by spaces or ``;`` and the
latency part may be left out (0 ns).

A topology has at most ``input_limit("dimensions")`` dimensions (10 by default, the environment
variable ``DSE_MAX_DIMENSIONS`` raises it; `check_dimensions`): `parse_topology` counts them in
every form (notation, paper form, preset, `Topology`) before any dimension is parsed, and refuses
more in one line. Built-in presets are not held to it as they are built, only when named.

The named presets (`dse.core.presets`) are built from this model; `dse.core.topology.parse_topology`
reads every form a user may give, presets included.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from dse.core.errors import InputError
from dse.core.limits import MAX_BANDWIDTH, MAX_NPUS, MAX_NS, MIN_BANDWIDTH, check_input
from dse.core.units import parse_int, parse_positive

KINDS = ("ring", "fc", "switch")
ALGORITHMS = ("ring", "direct", "halving_doubling")
DEFAULT_ALGORITHM = {"ring": "ring", "fc": "direct", "switch": "halving_doubling"}
_KIND_ALIASES = {
    "ring": "ring",
    "fc": "fc",
    "fullyconnected": "fc",
    "fully_connected": "fc",
    "sw": "switch",
    "switch": "switch",
}
_ALGO_ALIASES = {
    "ring": "ring",
    "direct": "direct",
    "halving_doubling": "halving_doubling",
    "halvingdoubling": "halving_doubling",
    "hd": "halving_doubling",
}
_NOTATION_KIND = {"ring": "Ring", "fc": "FC", "switch": "SW"}
KIND_CHOICES = "Ring, FC (or FullyConnected), SW (or Switch)"


def parse_kind(text: str, field_name: str = "kind") -> str:
    """The canonical kind (`ring`, `fc`, `switch`) of a case-insensitive name or alias."""
    kind = _KIND_ALIASES.get(str(text).strip().lower())
    if kind is None:
        raise InputError(field_name, f"unknown kind {text!r}", KIND_CHOICES)
    return kind


@dataclass(frozen=True)
class Dim:
    """One network dimension as one NPU sees it.

    `bandwidth` is aggregate GB/s per NPU into this dimension, `latency` ns per algorithm step.
    `links` (links per NPU) and `nic_latency`/`router_latency` (ns) are only needed by the
    `astra-sim-1` cost model; per-link bandwidth there is bandwidth / links.
    """

    kind: str
    npus: int
    bandwidth: float
    latency: float = 0.0
    algorithm: str | None = None
    links: int | None = None
    nic_latency: float = 0.0
    router_latency: float = 0.0

    if TYPE_CHECKING:
        # what the constructor takes: numbers, or decimal strings (the notation's), which
        # `__post_init__` checks and converts to the fields' types
        def __init__(
            self,
            kind: str,
            npus: int | str,
            bandwidth: float | str,
            latency: float | str = 0.0,
            algorithm: str | None = None,
            links: int | str | None = None,
            nic_latency: float | str = 0.0,
            router_latency: float | str = 0.0,
        ) -> None: ...

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", parse_kind(self.kind))
        object.__setattr__(self, "npus", parse_int(self.npus, "npus", minimum=1, maximum=MAX_NPUS))
        bw = parse_positive(self.bandwidth, "bandwidth", maximum=MAX_BANDWIDTH)
        if bw < MIN_BANDWIDTH:
            raise InputError(
                "bandwidth", f"{self.bandwidth!r} GB/s is too small", f"{MIN_BANDWIDTH:g} to {MAX_BANDWIDTH:g} GB/s"
            )
        object.__setattr__(self, "bandwidth", bw)
        object.__setattr__(self, "latency", parse_positive(self.latency, "latency", allow_zero=True, maximum=MAX_NS))
        algo = self.algorithm if self.algorithm is not None else DEFAULT_ALGORITHM[self.kind]
        canon = _ALGO_ALIASES.get(str(algo).strip().lower())
        if canon is None:
            raise InputError("algorithm", f"unknown algorithm {algo!r}", ", ".join(ALGORITHMS))
        object.__setattr__(self, "algorithm", canon)
        if self.links is not None:
            object.__setattr__(self, "links", parse_int(self.links, "links", minimum=1))
        object.__setattr__(
            self, "nic_latency", parse_positive(self.nic_latency, "nic", allow_zero=True, maximum=MAX_NS)
        )
        object.__setattr__(
            self, "router_latency", parse_positive(self.router_latency, "router", allow_zero=True, maximum=MAX_NS)
        )

    @property
    def steps(self) -> int:
        """Algorithm steps of one reduce-scatter (or all-gather) phase on this dimension."""
        if self.algorithm == "ring":
            return self.npus - 1
        if self.algorithm == "direct":
            return 1
        return max(1, math.ceil(math.log2(self.npus)))

    def notation(self, *, exact: bool = False) -> str:
        """This dimension in the ``Kind(npus,bandwidth,latency[,key=value...])`` notation: numbers
        to 6 significant digits (for people), or with `exact` every number that needs it in full
        (``123.456789012``), so that it reads back bit for bit."""
        num = _exact if exact else (lambda x: f"{x:g}")
        args = [str(self.npus), num(self.bandwidth), num(self.latency)]
        if self.algorithm != DEFAULT_ALGORITHM[self.kind]:
            args.append(f"algorithm={self.algorithm}")
        if self.links is not None:
            args.append(f"links={self.links}")
        if self.nic_latency:
            args.append(f"nic={num(self.nic_latency)}")
        if self.router_latency:
            args.append(f"router={num(self.router_latency)}")
        return f"{_NOTATION_KIND[self.kind]}({','.join(args)})"


def _exact(x: float) -> str:
    """`x` as ``:g`` writes it when that reads back as `x`, else its shortest exact form (`repr`)."""
    short = f"{x:g}"
    return short if float(short) == x else repr(float(x))


@dataclass(frozen=True)
class Topology:
    """An ordered tuple of dimensions, innermost first; `name` is a preset's name if any.

    Dimensions of one NPU are dropped with a warning; at least one dimension must remain, and the
    NPUs multiply to at most 2^40 (`dse.core.limits.MAX_NPUS`).
    """

    dims: tuple[Dim, ...]
    name: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        dims = tuple(self.dims)
        for d in dims:
            if not isinstance(d, Dim):
                raise InputError("topology", f"{d!r} is not a Dim")
        kept = tuple(d for d in dims if d.npus > 1)
        if not kept:
            raise InputError("topology", "no dimension with 2 or more NPUs", "at least one dim with npus >= 2")
        npus = 1
        for d in kept:
            npus *= d.npus
            if npus > MAX_NPUS:
                raise InputError(
                    "topology", f"more than 2^40 NPUs ({len(kept)} dimensions)", "at most 2^40 NPUs in all"
                )
        if len(kept) < len(dims):
            warnings.warn("dropping dimension(s) with 1 NPU", stacklevel=3)
        object.__setattr__(self, "dims", kept)

    def __hash__(self) -> int:
        """The dims' hash (the name is not compared), worked out once: topologies key the caches of
        every evaluation."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.dims,))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        """The fields, without the remembered hash (another process hashes strings otherwise)."""
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    @property
    def ndims(self) -> int:
        """The number of dimensions."""
        return len(self.dims)

    @property
    def npus(self) -> int:
        """Total NPU count: the product of the dimension sizes."""
        return math.prod(d.npus for d in self.dims)

    @property
    def shape(self) -> tuple[int, ...]:
        """The NPUs of each dimension, innermost first."""
        return tuple(d.npus for d in self.dims)

    @property
    def bandwidths(self) -> tuple[float, ...]:
        """Each dimension's aggregate GB/s per NPU, innermost first."""
        return tuple(d.bandwidth for d in self.dims)

    @property
    def total_bandwidth(self) -> float:
        """Σ_d B_d, GB/s per NPU."""
        return sum(d.bandwidth for d in self.dims)

    def notation(self, *, exact: bool = False) -> str:
        """The topology in the ``Ring(4,375,20)_FC(8,175,700)`` notation (`Dim.notation`: with
        `exact`, it reads back bit for bit)."""
        return "_".join(d.notation(exact=exact) for d in self.dims)

    def label(self) -> str:
        """The preset name if there is one, else the notation."""
        return self.name or self.notation()

    def kinds_label(self) -> str:
        """The dimensions' kinds as the notation writes them, e.g. ``Ring_FC_SW``."""
        return "_".join(_NOTATION_KIND[d.kind] for d in self.dims)

    def with_latency(self, latency_ns: float | Sequence[float]) -> Topology:
        """A copy with every dimension's link latency replaced (one value, or one per dimension).

        E.g. ``PRESETS["2D-SW_SW"].with_latency(1)``: the Themis artifact's 1 ns network (the preset
        ``2D-SW_SW@artifact``). A named topology's copy is labelled ``"{name}@{latency}ns"``
        (``"2D-SW_SW@1ns"``, or ``"2D-SW_SW@1/2ns"`` per dimension) for reports; that label is not a
        preset name, and `notation()` still round-trips. An unnamed topology stays unnamed.
        """
        if isinstance(latency_ns, (str, bytes)) or not isinstance(latency_ns, Sequence):
            values = [latency_ns] * self.ndims
            tag = f"{parse_positive(latency_ns, 'latency', allow_zero=True):g}"
        else:
            values = list(latency_ns)
            if len(values) != self.ndims:
                raise InputError(
                    "latency", f"{len(values)} latencies for {self.ndims} dimensions", "one value, or one per dimension"
                )
            tag = "/".join(f"{parse_positive(v, 'latency', allow_zero=True):g}" for v in values)
        dims = tuple(
            replace(d, latency=parse_positive(v, "latency", allow_zero=True, maximum=MAX_NS))  # as `Dim` reads it
            for d, v in zip(self.dims, values)
        )
        return Topology(dims, name=f"{self.name}@{tag}ns" if self.name else None)

    @classmethod
    def from_paper(
        cls,
        *,
        kinds: str | list[str],
        shape: str | list[int],
        bandwidth: str | list[float],
        latency: str | list[float] | None = None,
        name: str | None = None,
    ) -> Topology:
        """The paper's form: kinds ``Ring_FC_Ring_SW``, shape ``4x8x4x8``, bandwidths, latencies."""
        ks = kinds.split("_") if isinstance(kinds, str) else list(kinds)
        ps = re.split(r"[xX*,]", shape) if isinstance(shape, str) else list(shape)
        bs: Sequence[str | float] = bandwidth.split(",") if isinstance(bandwidth, str) else list(bandwidth)
        if latency is None:
            ls: list = [0.0] * len(ks)
        else:
            ls = latency.split(",") if isinstance(latency, str) else list(latency)
        n = len(ks)
        check_dimensions(n)
        for fname, seq in (("shape", ps), ("bandwidth", bs), ("latency", ls)):
            if len(seq) != n:
                raise InputError(
                    "topology", f"{len(ks)} kinds but {len(seq)} {fname} values", "one value per dimension"
                )
        dims = tuple(
            Dim(parse_kind(k), parse_int(str(p).strip(), "npus", minimum=1), b, lat)
            for k, p, b, lat in zip(ks, ps, bs, ls)
        )
        return cls(dims, name=name)


_DIM_RE = re.compile(r"^\s*([A-Za-z_]+)\s*\((.*)\)\s*$")
_KEYWORDS = {
    "links": "links",
    "nic": "nic_latency",
    "router": "router_latency",
    "algorithm": "algorithm",
    "algo": "algorithm",
}
NOTATION_HELP = "e.g. Ring(4,375,20)_FC(8,175,700) or 'Ring_FC 4x8 375,175 20,700' or a preset name"


def _split_top(text: str) -> list[str]:
    """Split on '_' outside parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "_" and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _parse_dim(token: str) -> Dim:
    m = _DIM_RE.match(token)
    if not m:
        raise InputError("topology", f"cannot read {token.strip()!r} as a dimension", NOTATION_HELP)
    kind = parse_kind(m.group(1), "topology kind")
    args = [a.strip() for a in m.group(2).split(",")]
    positional: list[str] = []
    kw: dict[str, str] = {}
    for a in args:
        if "=" in a:
            key, _, val = a.partition("=")
            key = key.strip().lower()
            if key not in _KEYWORDS:
                raise InputError(
                    "topology", f"unknown keyword {key!r} in {token.strip()!r}", ", ".join(sorted(_KEYWORDS))
                )
            if _KEYWORDS[key] in kw:
                same = [k for k, v in _KEYWORDS.items() if v == _KEYWORDS[key]]
                raise InputError(
                    "topology", f"{' or '.join(same)} given twice in {token.strip()!r}", "each keyword once"
                )
            kw[_KEYWORDS[key]] = val.strip()
        elif kw:
            raise InputError("topology", f"positional value after a keyword in {token.strip()!r}", NOTATION_HELP)
        else:
            positional.append(a)
    if len(positional) != 3 or any(not p for p in positional):
        raise InputError(
            "topology", f"{token.strip()!r} needs three numbers: npus, bandwidth GB/s, latency ns", NOTATION_HELP
        )
    try:
        return Dim(kind, positional[0], positional[1], positional[2], **kw)
    except InputError as e:
        raise InputError(f"topology {token.strip()}: {e.field}", e.problem, e.allowed) from None


def check_dimensions(ndims: int, field: str = "topology") -> None:
    """Refuse more dimensions than ``input_limit("dimensions")`` (``DSE_MAX_DIMENSIONS``) in one
    line naming the limit and how to raise it: what enumerates orders or subsets of the dimensions
    (bounds, the exact problem, lp_guided) counts its work first, but a topology's size is capped
    where it enters, before any dimension is read."""
    check_input("dimensions", ndims, field, "dimensions")


def notation_dims(text: str) -> tuple[Dim, ...]:
    """The dimensions of a ``Kind(npus,bandwidth,latency)_...`` notation as written, those of 1 NPU
    included (a `Topology` drops them); held to the dimension limit like `parse_notation`."""
    tokens = _split_top(text)
    check_dimensions(len(tokens))
    return tuple(_parse_dim(tok) for tok in tokens)


def parse_notation(text: str, *, check: bool = True) -> Topology:
    """A `Topology` from the ``Kind(npus,bandwidth,latency)_...`` notation; with `check` (the
    default) its dimensions are counted against the limit (`check_dimensions`) before any is parsed."""
    tokens = _split_top(text)
    if check:
        check_dimensions(len(tokens))
    return Topology(tuple(_parse_dim(tok) for tok in tokens))
