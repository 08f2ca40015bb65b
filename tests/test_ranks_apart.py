"""dse.training.chakra.ranks_apart: a collective on whole dimensions whose members issue it at different times.

Golden values: `finish_ns_by_rank` of ASTRA-sim 2.x runs in ../shared/reference/astra-sim-2-p2p.csv
(rows arlate_r0_100us_16MiB_R4SW4, arlate_r0_100us_16MiB_FC4R4, p2p_sendvscoll_16MiB_Ring_8,
p2p_sendvscoll_16MiB_Switch_8: 16 MiB all-reduce on all NPUs, 4 splits, ascending, FIFO, endpoint
delay 10 ns; the networks of ../shared/workloads/astra-sim-2-p2p/configs/network/ in dse's notation),
copied here so that they run without ../shared. The tests that read ../shared skip without it.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.costs import get_cost_model
from dse.costs.astra_sim import AstraSimModel
from dse.costs.base import CostModel
from dse.schedulers import get_scheduler
from dse.training.chakra.ranks_apart import NeverFinishes, apart_ends
from dse.training.chakra.ranks_costs import RankCosts
from dse.training.workload_graph import COMM, Node
from dse.training.workloads import ALL

from .conftest import P2P, SHARED

TOPOLOGIES = {
    "R4_SW4": "Ring(4,100,500)_Switch(4,50,1000)",
    "FC4_R4": "FC(4,150,300)_Ring(4,50,700)",
    "R2_FC4_SW4": "Ring(2,200,200)_FC(4,100,500)_Switch(4,50,1000)",
    "Ring_8": "Ring(8,50,500)",
    "Switch_8": "Switch(8,50,500)",
    "FC_8": "FC(8,50,500)",
    "R2_R2_R2": "Ring(2,100,500)_Ring(2,100,500)_Ring(2,100,500)",
    "R4_FC4_SW2": "Ring(4,100,500)_FC(4,150,300)_Switch(2,50,1000)",
}
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
MIB = 2**20


def _costs(
    topology: str, scheduler: str = "baseline", queue: str = "fifo", splits: int = 4, model: CostModel | None = None
) -> RankCosts:
    return RankCosts(
        parse_topology(TOPOLOGIES[topology]),
        model or get_cost_model("astra-sim"),
        get_scheduler(scheduler),
        queue,
        splits,
        MIB,
        {},
    )


def _node(collective: str = "all_reduce", size: int = 16 * MIB, scope: object = ALL) -> Node:
    return Node(COMM, "AR", collective=collective, size=size, scope=scope)


def _scopes(ndims: int) -> list[object]:
    """Every dimension, and (on more than one) every set of all dimensions but one (involved_dim)."""
    if ndims == 1:
        return [ALL]
    return [ALL] + [tuple(d for d in range(ndims) if d != k) for k in range(ndims)]


def _together(costs: RankCosts, node: Node) -> tuple[list[float], float]:
    members = costs.members(0, node, "")
    return apart_ends(costs, node, members, [0.0] * len(members)), costs._shared_ns(node, members, "")


# ----- all members together: the collective's time alone, for every member -------------------------------
@pytest.mark.parametrize(
    "scheduler,queue", [("baseline", "fifo"), ("baseline", "scf"), ("themis", "fifo"), ("themis", "scf")]
)
@pytest.mark.parametrize("topology", ["R4_SW4", "FC4_R4", "R2_FC4_SW4", "Ring_8", "Switch_8", "FC_8"])
def test_together_every_member_ends_at_the_time_alone(topology: str, scheduler: str, queue: str) -> None:
    for splits, size in itertools.product((1, 4), (16 * MIB, 3_000_001)):
        costs = _costs(topology, scheduler, queue, splits)
        for coll, scope in itertools.product(COLLECTIVES, _scopes(costs.topology.ndims)):
            ends, alone = _together(costs, _node(coll, size, scope))
            assert ends == [alone] * len(ends), (coll, size, splits, scope)


@pytest.mark.parametrize("topology", ["R4_SW4", "R2_FC4_SW4", "R4_FC4_SW2"])
def test_together_with_sixteen_splits_and_reductions(topology: str) -> None:
    model = AstraSimModel(local_mem_bytes_per_s=900e9)  # local-mem-bw 900: bundles that reduce wait
    for scheduler, coll in itertools.product(("baseline", "themis"), COLLECTIVES):
        ends, alone = _together(_costs(topology, scheduler, "fifo", 16, model), _node(coll, 5_000_003))
        assert ends == [alone] * len(ends), (scheduler, coll)


# ----- issued apart: ASTRA-sim 2.x's runs, every rank to the ns -------------------------------------------
GOLDEN = {  # row: (topology, the late rank's issue, finish_ns_by_rank)
    "arlate_r0_100us_16MiB_R4SW4": (
        "R4_SW4",
        100_000.0,
        "346680;336415;326150;336415;299281;292772;286263;292772;304164;297655;291146;297655;292399;285890;279381;285890",
    ),
    "arlate_r0_100us_16MiB_FC4R4": (
        "FC4_R4",
        100_000.0,
        "247908;247908;247908;247908;231162;231162;231162;231162;236744;236744;236744;236744;242326;242326;242326;242326",
    ),
    # rank 0's send of 16 MiB to rank 1 holds its communication slot for 313,000 / 313,500 ns first
    "p2p_sendvscoll_16MiB_Ring_8": ("Ring_8", 313_000.0, "888440;816585;826850;837115;847380;857645;867910;878175"),
    "p2p_sendvscoll_16MiB_Switch_8": ("Switch_8", 313_500.0, "884644;844582;864113;824051;873879;833817;853348;813286"),
}


@pytest.mark.parametrize("row", sorted(GOLDEN))
def test_rank_zero_late_matches_astra_sim(row: str) -> None:
    topology, late, finish = GOLDEN[row]
    costs = _costs(topology)
    members = tuple(range(costs.npus))
    starts = [late] + [0.0] * (costs.npus - 1)
    assert apart_ends(costs, _node(), members, starts) == [float(x) for x in finish.split(";")]


def test_a_common_shift_shifts_every_end() -> None:
    costs = _costs("R4_SW4")
    members = tuple(range(costs.npus))
    starts = [float(7_000 * (r % 3)) for r in members]
    base = apart_ends(costs, _node(), members, starts)
    assert apart_ends(costs, _node(), members, [s + 12_345 for s in starts]) == [e + 12_345 for e in base]
    assert len(set(base)) > 1 and max(base) <= max(starts) + costs._shared_ns(_node(), members, "")


def test_early_members_finish_first_and_the_late_one_at_its_time_alone() -> None:
    costs = _costs("Ring_8")
    members = tuple(range(8))
    ends = apart_ends(costs, _node(), members, [50_000.0] + [0.0] * 7)
    alone = costs._shared_ns(_node(), members, "")
    assert ends[0] == 50_000.0 + alone
    assert all(e < ends[0] for e in ends[1:])


def test_an_involved_dimension_runs_on_its_own_members() -> None:
    costs = _costs("R4_SW4")
    node = _node(scope=(1,))  # the switch dimension only: ranks 0, 4, 8, 12
    members = costs.members(0, node, "")
    assert members == (0, 4, 8, 12)
    ends = apart_ends(costs, node, members, [20_000.0, 0.0, 0.0, 0.0])
    assert ends[0] == 20_000.0 + costs._shared_ns(node, members, "") and min(ends) < ends[0]


# ----- never finishes -------------------------------------------------------------------------------------
@pytest.mark.parametrize("topology", ["R2_R2_R2", "R4_FC4_SW2"])
def test_three_dimensions_with_one_rank_late_never_finish(topology: str) -> None:
    costs = _costs(topology)
    members = tuple(range(costs.npus))
    with pytest.raises(NeverFinishes, match=r"the all_reduce 'AR' on \d+ NPUs, issued apart .* never finishes") as err:
        apart_ends(costs, _node(), members, [100_000.0] + [0.0] * (costs.npus - 1))
    assert isinstance(err.value, InputError) and err.value.ranks == members  # no rank finishes, as in ASTRA-sim


def test_three_dimensions_with_one_nanosecond_late_finish() -> None:
    costs = _costs("R2_R2_R2")
    ends = apart_ends(costs, _node(), tuple(range(8)), [1.0] + [0.0] * 7)
    assert max(ends) == 1.0 + costs._shared_ns(_node(), tuple(range(8)), "")


def test_starts_must_match_members() -> None:
    with pytest.raises(InputError, match="starts: 2 start times for 8 members"):
        apart_ends(_costs("Ring_8"), _node(), tuple(range(8)), [0.0, 1.0])


# ----- through the per-rank simulator, with ASTRA-sim's own files (needs ../shared) -------------------------
REF = SHARED / "reference" / "astra-sim-2-p2p.csv"
needs_shared = pytest.mark.skipif(not REF.exists(), reason="needs ../shared (reference runs and traces)")


def _wired(monkeypatch: pytest.MonkeyPatch) -> None:
    """`RankCosts.collective_ends` with `apart_ends` for a collective on whole dimensions issued apart."""
    before = RankCosts.collective_ends

    def ends(self: RankCosts, node: Node, members: tuple[int, ...], group: str, starts: list[float]) -> list[float]:
        whole = not group or len(members) == self.npus
        if whole and self.model.name == "astra-sim" and min(starts) != max(starts):
            return apart_ends(self, node, members, starts)
        return before(self, node, members, group, starts)

    monkeypatch.setattr(RankCosts, "collective_ends", ends)


def _row(name: str) -> dict[str, str]:
    with open(REF, newline="") as f:
        return next(r for r in csv.DictReader(f) if r["workload"] == name)


@needs_shared
@pytest.mark.parametrize("name", [*sorted(GOLDEN), "p2p_sendvscoll_16MiB_R4_FC4_SW2"])
def test_reference_rows_through_the_simulator(name: str, p2p_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dse.training.chakra.ranks_run import iterate_ranks

    _wired(monkeypatch)
    row = _row(name)
    run = (p2p_traces / name / name, P2P / row["net_cfg"])
    if not row["finish_ns_by_rank"]:  # ASTRA-sim never finished it: every rank holds unreleased nodes
        with pytest.raises(InputError, match="the all_reduce 'AR_ALL' on 32 NPUs, issued apart .* never finishes"):
            iterate_ranks(*run, system=P2P / row["sys_cfg"], cost_model="astra-sim")
        return
    res = iterate_ranks(*run, system=P2P / row["sys_cfg"], cost_model="astra-sim")
    assert list(res.finish_ns_by_rank) == [float(x) for x in row["finish_ns_by_rank"].split(";")]
