"""A hardware cost model for network designs, in the spirit of LIBRA (Won et al., 2022).

Prices are dollars per GB/s of per-NPU bandwidth, one per dimension tier (tier i is the i-th
dimension from the innermost; a topology with fewer dimensions than tiers gives its outermost
dimension the last tier, as the latency tiers of a search space do). For a dimension d of kind k,
tier t, P NPUs and aggregate per-NPU bandwidth B_d (GB/s)::

    cost_d = B_d · (link[t] + switch_port[t]·[k is a switch] + nic[t])  +  links(k, P) · link_fixed[t]
    links(ring) = 2, links(fc) = P − 1, links(switch) = 1
    total  = N · Σ_d cost_d                       (N = NPUs in the topology)

`link` prices the wires and SerDes, `switch_port` the switch ports a switch dimension needs, `nic`
the network interfaces of scale-out tiers, `link_fixed` what each physical link costs whatever its
bandwidth (so a fully-connected dimension, with P − 1 links per NPU, costs more than a ring of the
same bandwidth). All prices live in the study's TOML `[cost]` table; omitted ones are 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dse.core.errors import InputError
from dse.core.topology import Topology
from dse.core.units import parse_positive

PRICE_KEYS = ("link", "switch_port", "nic", "link_fixed")


@dataclass(frozen=True)
class HardwareCost:
    """Per-tier prices ($ per GB/s per NPU, and $ per link for `link_fixed`)."""

    link: tuple[float, ...] = (0.0,)
    switch_port: tuple[float, ...] = (0.0,)
    nic: tuple[float, ...] = (0.0,)
    link_fixed: tuple[float, ...] = (0.0,)

    @classmethod
    def from_table(cls, table: dict[str, Any] | None, field: str = "cost") -> HardwareCost:
        """Prices from a TOML table: each key a number (every tier) or a list (one per tier)."""
        table = dict(table or {})
        unknown = set(table) - set(PRICE_KEYS)
        if unknown:
            raise InputError(f"{field}.{sorted(unknown)[0]}", "unknown key", ", ".join(PRICE_KEYS))
        prices: dict[str, tuple[float, ...]] = {}
        for key in PRICE_KEYS:
            value = table.get(key, 0.0)
            values = value if isinstance(value, list) else [value]
            if not values:
                raise InputError(f"{field}.{key}", "empty list", "a number or one number per tier")
            prices[key] = tuple(parse_positive(v, f"{field}.{key}", allow_zero=True) for v in values)
        return cls(**prices)

    def dollars(self, topology: Topology) -> float:
        """The total cost of `topology`'s network (see the module docstring)."""
        nd = topology.ndims
        per_npu = 0.0
        for i, dim in enumerate(topology.dims):
            links = {"ring": 2, "fc": dim.npus - 1, "switch": 1}[dim.kind]
            price = _tier(self.link, i, nd) + _tier(self.nic, i, nd)
            if dim.kind == "switch":
                price += _tier(self.switch_port, i, nd)
            per_npu += dim.bandwidth * price + links * _tier(self.link_fixed, i, nd)
        return topology.npus * per_npu


def _tier(values: tuple[float, ...], i: int, ndims: int) -> float:
    """The value of tier i; the outermost dimension takes the last tier."""
    if i == ndims - 1:
        return values[-1]
    return values[min(i, len(values) - 1)]
