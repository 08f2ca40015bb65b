"""The `paper` cost model: the Themis paper's aggregate-bandwidth model (docs/model.md §4.1).

time = steps·α + bytes/B, with B the aggregate per-NPU bandwidth of the dimension (1 GB/s =
1 B/ns) and steps = P−1 (ring), 1 (direct) or ⌈log2 P⌉ (halving-doubling), doubled for an AR phase.
In the default `overlapped` latency mode the dimension is busy for bytes/B only and the chunk
moves on steps·α later; `serialized` holds the dimension for the whole phase.
"""

from __future__ import annotations

from dse.core.collectives import AG, AR, RS
from dse.core.topology import Dim
from dse.costs.base import CostModel, Phase, SimRules


class PaperModel(CostModel):
    """The Themis paper's aggregate-bandwidth model (module docstring)."""

    name = "paper"
    description = "Themis paper: aggregate per-NPU bandwidth, steps x latency (1 GB/s = 1 B/ns)"
    rules = SimRules()  # the defaults: dse's own queue rules, shared bandwidth, the load tracker
    batch_kernel = "paper"

    def bytes_per_ns(self, dim: Dim, collective: str | None = None) -> float:
        """The dimension's aggregate GB/s per NPU, which is bytes per ns."""
        return dim.bandwidth

    def bandwidth_time(self, dim: Dim, kind: str, c: float) -> float:
        """The bandwidth term of a phase of `kind` on a chunk of `c` bytes: bytes sent over the aggregate bandwidth."""
        p = dim.npus
        if kind == AG:
            return c * (p - 1) / dim.bandwidth
        if kind == AR:
            return 2 * c * (p - 1) / p / dim.bandwidth
        return c * (p - 1) / p / dim.bandwidth

    def _make_phase(self, dim: Dim, d: int, kind: str, c: float, latency_mode: str) -> tuple[Phase, float]:
        # The base class's generic version, inlined for this model (it runs for every new phase).
        p, bw = dim.npus, dim.bandwidth
        lat = dim.steps * dim.latency
        if kind == RS:
            sent, c_out, key = c * (p - 1) / p, c / p, c
        elif kind == AG:
            sent, c_out = c * (p - 1), c * p
            key = c_out
        elif kind == AR:
            sent, c_out, key, lat = 2 * c * (p - 1) / p, c, c, 2 * lat
        else:
            sent, c_out, key = c * (p - 1) / p, c, c
        transfer = sent / bw
        if latency_mode == "serialized":
            return Phase(d, kind, transfer + lat, 0.0, key, sent, kind == AR), c_out
        return Phase(d, kind, transfer, lat, key, sent, kind == AR), c_out

    def _phase_cost(self, dim: Dim, kind: str, c: float, latency_mode: str) -> tuple[float, float]:
        transfer = self.bandwidth_time(dim, kind, c)
        lat = dim.steps * dim.latency * (2 if kind == AR else 1)
        if latency_mode == "serialized":
            return transfer + lat, 0.0
        return transfer, lat
