"""`CollectiveSpec`: one collective on one topology under one cost model, validated in one place.

`evaluate`, `lower_bounds` and everything above them parse their user-facing arguments here, so a
bad value gets the same one-line message wherever it enters. Parsing also refuses a collective
whose simulation would exceed the work limit (`dse.core.limits`), before anything is allocated for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from dse.core.collectives import ALL_REDUCE, parse_collective
from dse.core.errors import InputError
from dse.core.limits import check_work
from dse.core.topology import Topology, parse_topology
from dse.core.units import parse_int, parse_size
from dse.costs import CostModel, get_cost_model

#: ASTRA-sim's smallest-first rule scans a queue for its place: about chunks^2 x phases / this.
_SCAN_DIVISOR = 1e4


@dataclass(frozen=True)
class CollectiveSpec:
    """A validated collective: topology, collective name, bytes per NPU, chunks, cost model, modes."""

    topology: Topology
    collective: str
    size: int
    chunks: int
    cost_model: CostModel
    latency_mode: str
    active_chunks: int

    @classmethod
    def parse(
        cls,
        topology: Topology | str,
        *,
        collective: str = "all_reduce",
        size: int | float | str,
        chunks: int = 64,
        cost_model: str | CostModel = "paper",
        latency_mode: str | None = None,
        active_chunks: int = 1,
        work_check: bool = True,
    ) -> CollectiveSpec:
        """Validate everything once and check the work limit (`work_check=False`: the caller will,
        with the queue and scheduler it knows, `check_work`)."""
        topo = parse_topology(topology)
        coll = parse_collective(collective)
        nbytes = parse_size(size)
        nchunks = parse_int(chunks, "chunks", minimum=1)
        if nchunks > nbytes:
            raise InputError(
                "chunks", f"{nchunks} chunks of a {nbytes}-byte collective", f"at most one chunk per byte, <= {nbytes}"
            )
        model = get_cost_model(cost_model)
        active = parse_int(active_chunks, "active_chunks", minimum=1, maximum=2**31 - 1)
        mode = model.check(topo, coll, latency_mode, active)
        spec = cls(topo, coll, nbytes, nchunks, model, mode, active)
        if work_check:
            spec.check_work()
        return spec

    def check_work(self, *, queue: str | None = None, extra_simulations: int = 0) -> None:
        """Refuse the run if its `simulation_steps` exceed the work limit.

        `extra_simulations`: event loops a scheduler runs to choose its orders (lp_guided); each costs
        about a quarter of a whole evaluation, the C loop without the per-chunk Python around it."""
        steps, what = simulation_steps(self.topology, self.collective, self.chunks, self.cost_model, queue)
        if extra_simulations:
            steps, what = steps * (1 + 0.25 * extra_simulations), f"{what}, and {extra_simulations} trial simulations"
        check_work(steps, what)


def simulation_steps(
    topology: Topology, collective: str, chunks: int, model: CostModel, queue: str | None = None
) -> tuple[float, str]:
    """Estimated steps of one simulation, and where they come from (see `dse.core.limits`).

    Chunk-phases, plus the packets the cost model replays, plus (with ASTRA-sim's smallest-first
    rule, `queue` "scf") the queue scans that grow with the square of the chunks."""
    phases = 2 * topology.ndims if collective == ALL_REDUCE else topology.ndims
    steps = float(chunks) * phases
    what = [f"{chunks:,} chunks x {phases} phases"]
    if queue == "scf" and model.scf_rule == "astra-sim":
        scan = float(chunks) ** 2 * phases / _SCAN_DIVISOR
        steps += scan
        if scan >= 0.1 * steps:
            what.append("the smallest-first queue scans of ASTRA-sim's rule")
    replay = model.replay_steps(topology, collective, chunks)
    if replay:
        steps += replay
        if replay >= 0.1 * steps:
            what.append(f"{model.name}'s packet replays")
    return steps, ", ".join(what)
