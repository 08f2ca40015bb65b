"""LIBRA's network and cost-model files (Won et al., ISPASS 2024; docs/model.md §13).

- A **network** file (YAML): ``Topology`` (Ring, FullyConnected, Switch per dimension, innermost
  first), ``NpusCount`` (NPUs per dimension) and ``CostDimension`` (the price tier of each
  dimension, a key of the cost-model file), read into a `LibraNetwork`.
- A **cost-model** file (YAML): per tier, ``Link``, ``Switch`` and ``Nic`` prices in $ per GB/s.
  LIBRA prices dimension d of bandwidth bw_d (GB/s per NPU) as its building blocks' links:
  a ring of n NPUs has 2n links of bw/2, a fully-connected group n(n-1) links of bw/(n-1), and
  there are N/n of either; a switch dimension is one switch per group of the NPUs up to it, with
  prod(npus[:d+1]) links of bw each, prod(npus[d+1:]) times, and pays Switch and Nic per link too.
  Each way the dimension costs ``N · bw_d · price_d``, with price_d the tier's Link price plus, on a
  switch, its Switch and Nic prices. `read_libra_cost_model` returns exactly that as a
  `dse.explore.hwcost.HardwareCost` with one price per dimension (``link``; ``switch_port`` and
  ``nic`` only on switch dimensions), so `HardwareCost.dollars` is LIBRA's network cost.

Errors are one `InputError` naming ``file:line`` (a switch dimension whose tier has no Switch or Nic
price is LIBRA's own error, here on the tier's line).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.topology import Dim, Topology, check_dimensions
from dse.core.yaml_read import YamlEntry, read_yaml_mapping
from dse.explore.hwcost import HardwareCost

#: LIBRA's building blocks -> dse's dimension kinds
LIBRA_KINDS = {"ring": "ring", "fullyconnected": "fc", "switch": "switch"}
NETWORK_KEYS = ("Topology", "NpusCount", "CostDimension")
PRICE_ELEMENTS = ("Link", "Switch", "Nic")


@dataclass(frozen=True)
class LibraNetwork:
    """LIBRA's network: per dimension (innermost first) a kind (``ring``, ``fc``, ``switch``), its
    NPUs and its price tier."""

    kinds: tuple[str, ...]
    npus: tuple[int, ...]
    tiers: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.kinds or not len(self.kinds) == len(self.npus) == len(self.tiers):
            raise InputError("network", "kinds, npus and tiers of different lengths", "one of each per dimension")
        check_dimensions(len(self.kinds), "network")
        for d, (k, n) in enumerate(zip(self.kinds, self.npus)):
            if k not in ("ring", "fc", "switch"):
                raise InputError(f"network dim {d}", f"kind {k!r}", "ring, fc, switch")
            if isinstance(n, bool) or not isinstance(n, int) or n < 2:
                raise InputError(f"network dim {d}", f"{n!r} NPUs", "an integer >= 2")

    @property
    def ndims(self) -> int:
        """The number of dimensions."""
        return len(self.kinds)

    @property
    def total_npus(self) -> int:
        """The NPU count: the product of every dimension's."""
        return math.prod(self.npus)

    def topology(self, bandwidths: Sequence[float], latencies: Sequence[float] | None = None) -> Topology:
        """The dse topology with these per-NPU bandwidths (GB/s) and latencies (ns; default 0)."""
        if len(bandwidths) != self.ndims or (latencies is not None and len(latencies) != self.ndims):
            raise InputError("bandwidths", f"{len(bandwidths)} values for {self.ndims} dimensions", "one per dimension")
        lat = latencies if latencies is not None else [0.0] * self.ndims
        dims = tuple(Dim(k, n, float(b), float(a)) for k, n, b, a in zip(self.kinds, self.npus, bandwidths, lat))
        return Topology(dims, name="LIBRA " + "_".join(k.upper() for k in self.kinds))


def _list(entries: dict[str, YamlEntry], key: str, path: str | Path) -> tuple[list[Any], int]:
    entry = entries.get(key)
    if entry is None:
        raise InputError(f"{path}:1: {key}", "missing", ", ".join(NETWORK_KEYS))
    if not isinstance(entry.value, list) or not entry.value:
        raise InputError(f"{path}:{entry.line}: {key}", f"{entry.value!r} is not a list", "one entry per dimension")
    return entry.value, entry.line


def read_libra_network(path: str | Path) -> LibraNetwork:
    """LIBRA's network file as a `LibraNetwork` (the module docstring)."""
    entries = read_yaml_mapping(path, "network")
    for key, e in entries.items():
        if key not in NETWORK_KEYS:
            raise InputError(f"{path}:{e.line}: {key}", "unknown key", ", ".join(NETWORK_KEYS))
    (topo, t_at), (npus, n_at), (tiers, c_at) = (_list(entries, k, path) for k in NETWORK_KEYS)
    kinds = []
    for t in topo:
        kind = LIBRA_KINDS.get(str(t).lower())
        if kind is None:
            raise InputError(
                f"{path}:{t_at}: Topology", f"unknown building block {t!r}", "Ring, FullyConnected, Switch"
            )
        kinds.append(kind)
    for n in npus:
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise InputError(f"{path}:{n_at}: NpusCount", f"{n!r} is not a number of NPUs", "integers >= 2")
    if not len(kinds) == len(npus) == len(tiers):
        raise InputError(
            f"{path}:{c_at}",
            f"{len(kinds)} building blocks, {len(npus)} NPU counts and {len(tiers)} cost dimensions",
            "one of each per dimension",
        )
    return LibraNetwork(tuple(kinds), tuple(npus), tuple(str(t) for t in tiers))


def read_libra_prices(path: str | Path) -> dict[str, dict[str, float]]:
    """LIBRA's cost-model file as tier -> element (Link, Switch, Nic) -> $ per GB/s (each > 0)."""
    return _read_prices(path)[0]


def _read_prices(path: str | Path) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """The prices per tier, and each tier's line."""
    entries = read_yaml_mapping(path, "cost model")
    out: dict[str, dict[str, float]] = {}
    for tier, e in entries.items():
        if not isinstance(e.value, dict):
            raise InputError(f"{path}:{e.line}: {tier}", f"{e.value!r} is not a table of prices", "Link, Switch, Nic")
        prices = {}
        for element, price in e.value.items():
            where = f"{path}:{e.lines.get(str(element), e.line)}: {tier}.{element}"
            if element not in PRICE_ELEMENTS:
                raise InputError(where, "unknown element", ", ".join(PRICE_ELEMENTS))
            if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 < price < math.inf:
                raise InputError(where, f"{price!r} is not a price", "a positive number ($ per GB/s)")
            prices[str(element)] = float(price)
        out[tier] = prices
    return out, {tier: e.line for tier, e in entries.items()}


def read_libra_cost_model(path: str | Path, network: LibraNetwork) -> HardwareCost:
    """LIBRA's cost model for `network` as a `HardwareCost` whose `dollars` is LIBRA's network cost."""
    prices, lines = _read_prices(path)
    link, switch, nic = [], [], []
    for d, (kind, tier) in enumerate(zip(network.kinds, network.tiers)):
        got = prices.get(tier)
        line = lines.get(tier, 1)
        needed = ("Link", "Switch", "Nic") if kind == "switch" else ("Link",)
        lacking = [el for el in needed if got is None or el not in got]
        if lacking:
            raise InputError(
                f"{path}:{line}: {tier}",
                f"no {' or '.join(lacking)} price for dimension {d} ({kind})",
                "Link for every tier; Switch and Nic too for a switch dimension's tier",
            )
        assert got is not None
        link.append(got["Link"])
        switch.append(got["Switch"] if kind == "switch" else 0.0)
        nic.append(got["Nic"] if kind == "switch" else 0.0)
    return HardwareCost(link=tuple(link), switch_port=tuple(switch), nic=tuple(nic), link_fixed=(0.0,))
