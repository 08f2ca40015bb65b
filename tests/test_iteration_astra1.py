"""Training iterations against ASTRA-sim 1.0 (the Themis artifact's end-to-end runs, to the ns), and
the closed forms and invariants of `dse.iterate`: activation recompute, dimension splitting, bytes
sent, the ideal bound, and bad workload files as one line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from dse import iterate
from dse.core.topology import parse_topology
from dse.training.iteration import IterationResult
from dse.training.placement import group_topology, split_dim
from dse.training.workloads import Layer, Workload

from .conftest import read_csv
from .test_reliability import one_line

#: the CSV's scheduler column -> (scheduler, queue)
SCHEDULERS = {"baseline": ("baseline", "fifo"), "themis_fifo": ("themis", "fifo"), "themis_scf": ("themis", "scf")}
END_TO_END = read_csv("astra-sim-1.0-end-to-end.csv")
THREE_PASS = read_csv("astra-sim-1.0-three-pass.csv")
MIB = 1 << 20


def _id(row: dict[str, str]) -> str:
    """A test id: workload-topology-scheduler."""
    return f"{Path(row.get('workload_file') or row['workload']).stem}-{row['topology']}-{row['scheduler']}"


def _run(row: dict[str, str], passes: int | None = None) -> IterationResult:
    """`iterate` of a reference row on its notation with the row's scheduler (astra-sim-1)."""
    sched, queue = SCHEDULERS[row["scheduler"]]
    n = int(row["passes"]) if passes is None else passes
    wl = Path(row["workload_file"]).stem  # the bundled workload of the artifact's file
    return iterate(wl, row["notation"], scheduler=sched, queue=queue, cost_model="astra-sim-1", iterations=n)


# ----- 1. golden values: one pass --------------------------------------------------------------
def test_reference_files_are_complete() -> None:
    """54 one-pass rows (6 workloads x 3 topologies x 3 schedulers) and 18 three-pass rows."""
    assert len(END_TO_END) == 54 and len(THREE_PASS) == 18
    assert {r["scheduler"] for r in END_TO_END} == set(SCHEDULERS)


@pytest.mark.parametrize("row", END_TO_END, ids=_id)
def test_end_to_end_to_the_ns(row: dict[str, str]) -> None:
    """Every ASTRA-sim 1.0 run: `sim_time` exactly, and the compute it reports."""
    r = _run(row)
    assert r.total_ns == int(row["sim_time_ns"])
    assert r.compute_ns * r.iterations == pytest.approx(float(row["total_comp_us"]) * 1000)


# ----- 2. golden values: three passes ----------------------------------------------------------
@pytest.mark.parametrize("row", THREE_PASS, ids=_id)
def test_three_passes_themis_scf_to_the_ns(row: dict[str, str]) -> None:
    """3-pass Themis SCF: the loads node 0 leaves behind change pass 2 (DATA) or the 2nd collective."""
    r = iterate(
        row["workload"],
        row["topology"],
        scheduler="themis",
        queue="scf",
        cost_model="astra-sim-1",
        iterations=int(row["passes"]),
    )
    assert r.total_ns == int(row["sim_time_ns"])


BASELINE_BUT_MICRO = [
    r for r in END_TO_END if r["scheduler"] == "baseline" and not r["workload_file"].startswith("micro")
]
DLRM_THEMIS_SCF = [r for r in END_TO_END if "DLRM" in r["workload_file"] and r["scheduler"] == "themis_scf"]


@pytest.mark.parametrize("row", BASELINE_BUT_MICRO, ids=_id)
def test_baseline_three_passes_are_three_times_one(row: dict[str, str]) -> None:
    """The baseline keeps no state across collectives: each pass takes as long as the first."""
    assert _run(row, passes=3).total_ns == 3 * int(row["sim_time_ns"])


@pytest.mark.parametrize("row", DLRM_THEMIS_SCF, ids=_id)
def test_dlrm_themis_three_passes_are_three_times_one(row: dict[str, str]) -> None:
    """DLRM: the next pass's all-to-all resets the Themis loads first, so every pass is the same."""
    assert _run(row, passes=3).total_ns == 3 * int(row["sim_time_ns"])


# ----- 3. closed forms and invariants ----------------------------------------------------------
RING_SW = "Ring(4,100,1,links=2)_SW(8,50,1,links=1)"


def _recompute_workload(checkpoints: tuple[int, ...] = (), initiates: tuple[int, ...] = ()) -> Workload:
    """Four layers, each slot with a collective: fwd/ig on the model-parallel ring, wg on the switch."""
    layers = tuple(
        Layer(
            f"l{i}",
            fwd_compute=1000.0 * (i + 1),
            fwd_comm="all_reduce",
            fwd_bytes=MIB,
            ig_compute=500.0,
            ig_comm="all_reduce",
            ig_bytes=MIB,
            wg_compute=300.0,
            wg_comm="all_reduce",
            wg_bytes=4 * MIB,
            wg_update=10.0,
        )
        for i in range(4)
    )
    return Workload(
        "recompute",
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
        layers,
        model_parallel_group=4,
        checkpoints=checkpoints,
        checkpoint_initiates=initiates,
    )


@pytest.mark.parametrize("cost_model", ["paper", "astra-sim-1"])
def test_recompute_doubles_forward_compute_and_collectives(cost_model: str) -> None:
    """Checkpoint 0, recompute before I_2: the forward of layers 0..1 runs twice (compute and fwd ARs)."""
    plain = _recompute_workload()
    rc = _recompute_workload(checkpoints=(0,), initiates=(2,))
    a = iterate(plain, RING_SW, cost_model=cost_model)
    b = iterate(rc, RING_SW, cost_model=cost_model)
    assert b.compute_ns - a.compute_ns == pytest.approx(sum(plain.layers[i].fwd_compute for i in (0, 1)))
    fa = Counter(c.layer for c in a.collectives if c.slot == "fwd")
    fb = Counter(c.layer for c in b.collectives if c.slot == "fwd")
    assert fa == {f"l{i}": 1 for i in range(4)}
    assert fb == {"l0": 2, "l1": 2, "l2": 1, "l3": 1}

    def others(r: IterationResult) -> Counter:
        return Counter((c.layer, c.slot) for c in r.collectives if c.slot != "fwd")

    assert others(a) == others(b)  # ig and wg collectives are not repeated
    assert b.total_ns >= a.total_ns


SPLIT_AUTO = "SW(16,150,1,links=6)_SW(64,100,1,links=1)"
SPLIT_BY_HAND = "SW(16,150,1,links=6)_SW(8,100,1,links=1)_SW(8,100,1,links=1)"


def _hybrid_128() -> Workload:
    """A hybrid workload whose model-parallel group (128) is no prefix of 16 x 64."""
    layers = tuple(
        Layer(
            f"l{i}",
            fwd_compute=2000.0,
            fwd_comm="all_reduce",
            fwd_bytes=(i + 1) * 4 * MIB,
            ig_compute=1500.0,
            ig_comm="all_gather" if i % 2 else "all_reduce",
            ig_bytes=3 * MIB,
            wg_compute=1000.0,
            wg_comm="all_reduce",
            wg_bytes=(5 + i) * 2 * MIB,
            wg_update=7.0,
        )
        for i in range(5)
    )
    return Workload("hybrid128", "HYBRID_TRANSFORMER", layers, model_parallel_group=128, layer0_input_gradient=True)


@pytest.mark.parametrize("cost_model", ["paper", "astra-sim-1"])
@pytest.mark.parametrize("scheduler, queue", [("baseline", "fifo"), ("themis", "scf")])
def test_dimension_split_equals_the_hand_written_split(cost_model: str, scheduler: str, queue: str) -> None:
    """A group of 128 on 16 x 64 runs on 16 x 8 x 8 (switches keep bandwidth and links): the same times."""
    wl = _hybrid_128()
    auto = iterate(wl, SPLIT_AUTO, scheduler=scheduler, queue=queue, cost_model=cost_model)
    hand = iterate(wl, SPLIT_BY_HAND, scheduler=scheduler, queue=queue, cost_model=cost_model)
    assert auto.logical_topology == parse_topology(SPLIT_BY_HAND).notation() and hand.logical_topology == ""
    assert auto.total_ns == hand.total_ns
    assert auto.bytes_sent == hand.bytes_sent


def test_fc_split_scales_bandwidth_and_links_by_peers() -> None:
    """FC(8) into 2 x 4: each part has k-1 of the 7 peers, so (k-1)/(P-1) of the bandwidth and links."""
    fc = parse_topology("FC(8,175,1,links=7)").dims[0]
    a, b = split_dim(fc, 2)
    assert (a.kind, a.npus, a.bandwidth, a.links) == ("fc", 2, pytest.approx(175 * 1 / 7), 1)
    assert (b.kind, b.npus, b.bandwidth, b.links) == ("fc", 4, pytest.approx(175 * 3 / 7), 3)
    assert a.bandwidth == pytest.approx(25.0) and b.bandwidth == pytest.approx(75.0)
    assert a.latency == b.latency == fc.latency and a.algorithm == b.algorithm == fc.algorithm
    logical, k = group_topology(parse_topology("FC(8,175,1,links=7)_SW(8,50,1,links=1)"), 2)
    assert k == 1 and logical.shape == (2, 4, 8) and logical.dims[:2] == (a, b)


def test_bytes_sent_do_not_depend_on_the_scheduler() -> None:
    """DATA, five collectives of four kinds: what one NPU sends is the schedule's business, not its amount."""
    kinds = [
        ("all_reduce", 64 * MIB),
        ("all_gather", 3 * MIB),
        ("reduce_scatter", 10 * MIB),
        ("all_reduce", MIB // 2),
        ("all_to_all", 8 * MIB),
    ]
    layers = tuple(
        Layer(f"l{i}", fwd_compute=1000.0, ig_compute=800.0, wg_compute=600.0, wg_comm=c, wg_bytes=b)
        for i, (c, b) in enumerate(kinds)
    )
    wl = Workload("data5", "DATA", layers)
    for topo in ("2D-SW_SW", "3D-FC_Ring_SW", "4D-Ring_FC_Ring_SW"):
        base = iterate(wl, topo, scheduler="baseline", queue="fifo")
        themis = iterate(wl, topo, scheduler="themis", queue="scf")
        assert len(base.collectives) == len(themis.collectives) == 5
        assert base.bytes_sent > 0
        assert themis.bytes_sent == pytest.approx(base.bytes_sent, rel=1e-12)


@pytest.mark.parametrize("topo", ["2D-SW_SW", "4D-Ring_FC_Ring_SW"])
def test_no_schedule_beats_ideal(topo: str) -> None:
    """GNMT: every collective at 100 % bandwidth without queues is a lower bound of both schedules."""
    ideal = iterate("gnmt_fp16_fused", topo, scheduler="ideal")
    themis = iterate("gnmt_fp16_fused", topo, scheduler="themis", queue="scf")
    base = iterate("gnmt_fp16_fused", topo, scheduler="baseline", queue="fifo")
    assert ideal.compute_ns == pytest.approx(themis.compute_ns) == pytest.approx(base.compute_ns)
    assert ideal.compute_ns <= ideal.time_ns <= themis.time_ns and ideal.time_ns <= base.time_ns


# ----- 4. bad workload files: one line, exit 2 -------------------------------------------------
LAYERS = [
    "l0 -1 100 NONE 0 100 NONE 0 100 ALLREDUCE 1048576 10",
    "l1 -1 100 ALLREDUCE 1048576 100 NONE 0 100 ALLREDUCE 1048576 10",
    "l2 -1 100 NONE 0 100 NONE 0 100 ALLREDUCE 1048576 10",
]


def _astra_file(tmp_path: Path, name: str, header: str) -> Path:
    """An ASTRA-sim 1.0 text workload of the three `LAYERS` under `header`."""
    p = tmp_path / name
    p.write_text("\n".join([header, str(len(LAYERS)), *LAYERS]) + "\n")
    return p


HYB = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group:"


@pytest.mark.parametrize(
    "name, header, topo, words",
    [
        (
            "initiate_below.txt",
            f"{HYB} 4 checkpoints: 1 2 checkpoint_initiates: 1 1",
            "2D-SW_SW",
            ["checkpoint_initiates"],
        ),
        ("no_layer.txt", f"{HYB} 4 checkpoints: 1 9 checkpoint_initiates: 1 2", "2D-SW_SW", ["checkpoints"]),
        ("group48.txt", f"{HYB} 48", "4D-Ring_FC_Ring_SW", ["model_parallel_NPU_group", "48"]),
    ],
)
def test_bad_workload_file_is_one_line(
    run_cli: Callable[..., tuple[int, str, str]], tmp_path: Path, name: str, header: str, topo: str, words: list[str]
) -> None:
    """A recompute without a checkpoint below, a checkpoint that is no layer, a group no split gives:
    exit 2, one line naming the file's line 1 and the option (the paper preset, and its ASTRA-sim 1.0 twin)."""
    path = _astra_file(tmp_path, name, header)
    for model, variant in (("paper", ""), ("astra-sim-1", "@artifact")):
        code, out, err = run_cli("iterate", str(path), "-t", topo + variant, "--cost-model", model)
        one_line(code, err, f"{path}:1")
        assert out == ""
        for w in words:
            assert w in err, err
