"""Every rank's finish time against ASTRA-sim 2.x's per-rank runs (../shared/reference/astra-sim-2-p2p.csv,
astra-sim-2-stage.csv), through `dse.training.chakra.ranks_run.iterate_ranks` with ASTRA-sim's own files.

Skipped without ../shared (the reference runs and their traces are not part of a clone).
Rows where a collective's members issue it at different times (`arlate_*`: one rank 100 us late;
`p2p_sendvscoll_*`: a send holding one member's slot) run ASTRA-sim's step-by-step replay
(`dse.training.chakra.ranks_apart`); where ASTRA-sim never finished (every rank reports unreleased nodes),
dse refuses the run as never finishing.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dse.core.errors import InputError
from dse.training.chakra.ranks_run import iterate_ranks

from .conftest import P2P, SHARED

REF = SHARED / "reference"
STAGE = SHARED / "workloads" / "stage"
STAGE_CFG = SHARED / "workloads" / "stage-configs"
pytestmark = pytest.mark.skipif(not (REF / "astra-sim-2-p2p.csv").exists(), reason="needs ../shared (reference runs)")

#: runs ASTRA-sim never finished (every rank reports unreleased nodes): dse says so, in one line
HANGS = ("p2p_sendvscoll_16MiB_R4_FC4_SW2",)
#: a receive no send matches: ASTRA-sim leaves the rank unfinished, dse refuses the trace
UNMATCHED = ("p2p_tagmismatch_", "p2p_sizemismatch_")


def _rows(name: str) -> list[dict[str, str]]:
    if not (REF / name).exists():
        return []
    with open(REF / name, newline="") as f:
        return list(csv.DictReader(f))


P2P_ROWS = [r for r in _rows("astra-sim-2-p2p.csv") if r["task"] != "verify"]
STAGE_ROWS = _rows("astra-sim-2-stage.csv")


def _finish(row: dict[str, str]) -> list[float | None]:
    return [float(x) if x else None for x in row["finish_ns_by_rank"].split(";")]


@pytest.mark.parametrize("row", P2P_ROWS, ids=[r["run_id"] for r in P2P_ROWS])
def test_p2p_rows(row: dict[str, str], p2p_traces: Path) -> None:
    wl = row["workload"]
    groups = p2p_traces / "comm_groups_16_4.json" if "_pg_" in wl else None
    kw = dict(system=P2P / row["sys_cfg"], comm_groups=groups, cost_model="astra-sim")
    if wl.startswith(UNMATCHED):
        with pytest.raises(InputError, match=r"rank 0: node 0 .* that no receive takes"):
            iterate_ranks(p2p_traces / wl / wl, P2P / row["net_cfg"], **kw)
        return
    if wl.startswith(HANGS):
        assert all(w is None for w in _finish(row))
        with pytest.raises(InputError, match=r"rank \d+: node \d+ .*never finishes"):
            iterate_ranks(p2p_traces / wl / wl, P2P / row["net_cfg"], **kw)
        return
    res = iterate_ranks(p2p_traces / wl / wl, P2P / row["net_cfg"], **kw)
    every = iterate_ranks(p2p_traces / wl / wl, P2P / row["net_cfg"], by_class=False, **kw)
    # one rank per class where exact: the same numbers
    assert (every.finish_ns_by_rank, every.compute_ns_by_rank) == (res.finish_ns_by_rank, res.compute_ns_by_rank)
    assert (every.collectives, every.messages) == (res.collectives, res.messages)
    assert list(res.finish_ns_by_rank) == _finish(row)


@pytest.mark.parametrize("row", STAGE_ROWS, ids=[r["run_id"] for r in STAGE_ROWS])
def test_stage_rows(row: dict[str, str]) -> None:
    wl = row["workload"]
    res = iterate_ranks(
        STAGE / wl / "workload",
        STAGE_CFG / "network" / f"{row['topology']}.yml",
        system=STAGE_CFG / "system" / row["sys_cfg"],
        comm_groups=STAGE / wl / "workload.json",
        cost_model="astra-sim",
    )
    assert list(res.finish_ns_by_rank) == _finish(row)
    assert [str(int(x)) for x in res.exposed_ns_by_rank] == row["exposed_ns_by_rank"].split(";")
    assert any(n.startswith("simulated ") for n in res.notes)  # one rank per class
