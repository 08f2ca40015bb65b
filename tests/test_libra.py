"""LIBRA's inputs, model and exact optimum (issue 21; docs/model.md §13).

- the readers: synthetic files in LIBRA's format (written to tmp_path), and LIBRA's published
  files in ../shared when present; every damaged file is one `InputError` naming file:line;
- the cost: `HardwareCost.dollars` of the cost model read equals LIBRA's formula, element by
  element (links, switches, NICs of each building block), on both LIBRA networks;
- the model: per-dimension bytes and the no-overlap loop against a line-by-line reimplementation;
- the optimum: closed forms (all free bandwidth to the only busy dimension; a1/b1 = a2/b2 on one
  collective; (√a + √b)²/B on two; √(aβ/(Kα)) for time x cost), a brute-force grid on small
  cases, and (property) never worse than a random allowed allocation, with a certified gap.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.core.errors import InputError
from dse.explore.hwcost import HardwareCost
from dse.explore.libra.bw_constraints import LIBRA_CONSTRAINTS, BandwidthPolytope
from dse.explore.libra.files import LibraNetwork, read_libra_cost_model, read_libra_network, read_libra_prices
from dse.explore.libra.model import (
    libra_collectives,
    libra_iteration_ns,
    libra_messages,
    libra_optimum,
)
from dse.training.libra_read import read_libra_communicator, read_libra_workload
from dse.training.placement import Placement
from dse.training.workloads import Layer, Workload

from .conftest import SHARED

LIBRA = SHARED / "workloads" / "libra"
NEEDS_SHARED = pytest.mark.skipif(not LIBRA.is_dir(), reason=f"LIBRA's files are not in {LIBRA} (../shared is absent)")

NETWORK = "Topology: [ Ring, FullyConnected, Switch ]  # 3D\nNpusCount: [ 4, 8, 16 ]\nCostDimension: [ A, B, C ]\n"
COSTS = "# $ per GB/s\nA:\n  Link: 2.5\nB:\n  Link: 4\n  Switch: 13\nC:\n  Link: 7.5\n  Switch: 18\n  Nic: 31.5\n"
COMM = "# TP-8\nForward: [ 4, 2, -1 ]\nInputGrad: [ 4, 2, -1 ]\nWeightGrad: [ -1, 4, 16 ]\n"
LINES = """Q1 -1 1000 NONE 0 1000 ALLREDUCE 4194304 2000 ALLREDUCE 8388608 10
concat1 -1 500 ALLREDUCE 1048576 500 ALLGATHER 65536 500 NONE 0 10
X1W1b1 -1 3000 REDUCESCATTER 2097152 3000 AllToAll 524288 3000 allreduce 1048576 10""".splitlines()


def write(tmp: Path, name: str, text: str) -> Path:
    (tmp / name).write_text(text)
    return tmp / name


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return {
        "network": write(tmp_path, "net.yml", NETWORK),
        "costs": write(tmp_path, "cost.yml", COSTS),
        "comm": write(tmp_path, "comm.yml", COMM),
        "workload": write(tmp_path, "wl.txt", "\n".join(LINES) + "\n\n"),
    }


# ----- readers ----------------------------------------------------------------------------------
def test_synthetic_files_read(files: dict[str, Path]) -> None:
    net = read_libra_network(files["network"])
    assert net == LibraNetwork(("ring", "fc", "switch"), (4, 8, 16), ("A", "B", "C"))
    assert net.topology([10, 20, 30]).notation() == "Ring(4,10,0)_FC(8,20,0)_SW(16,30,0)"
    assert read_libra_cost_model(files["costs"], net) == HardwareCost(
        link=(2.5, 4.0, 7.5), switch_port=(0.0, 0.0, 18.0), nic=(0.0, 0.0, 31.5), link_fixed=(0.0,)
    )
    assert read_libra_communicator(files["comm"]) == Placement((4, 2, 0), (4, 2, 0), (0, 4, 16))
    wl = read_libra_workload(files["workload"], files["comm"])
    assert (wl.name, wl.parallelism, len(wl.layers), wl.layer0_input_gradient) == (
        "wl",
        "HYBRID",
        3,
        True,
    )  # the model-parallel loop: ig before wg, as LIBRA
    assert wl.placement == Placement((4, 2, 0), (4, 2, 0), (0, 4, 16))
    assert wl.origin == "LIBRA workload wl.txt, communicator comm.yml"
    last = wl.layers[2]
    assert (last.fwd_comm, last.ig_comm, last.wg_comm) == ("reduce_scatter", "all_to_all", "all_reduce")
    assert (last.fwd_compute, last.fwd_bytes, last.wg_update) == (3000.0, 2097152, 10.0)
    assert read_libra_workload(files["workload"]).placement is None


@pytest.mark.parametrize(
    "name,text,where,message",
    [
        ("wl.txt", LINES[0] + "\nK1 -1 10 NONE 0 10 NONE 0 10 NONE\n", "wl.txt:2", "needs 12 fields, got 10"),
        (
            "wl.txt",
            LINES[0] + "\n\nK1 -1 10 NONE 0 10 BCAST 5 10 NONE 0 0\n",
            "wl.txt:3",
            "unknown ig communication type",
        ),
        (
            "wl.txt",
            "K1 -1 10 NONE 0 10 ALLREDUCE 1.5e9 10 NONE 0 0\n",
            "wl.txt:1",
            "ig_bytes '1.5e9' is not an integer",
        ),
        ("wl.txt", "DATA\n1\n" + LINES[0], "wl.txt:1", "LIBRA's workload files have no header lines"),
        ("wl.txt", "\n \n", "wl.txt:1", "no layer lines"),
        (
            "c.yml",
            "Forward: [4, 2, -1]\nInputGrad: [4, 2, -1]\nWeightGrad: [-1, x, 16]\n",
            "c.yml:3: WeightGrad",
            "'x' is not a group size",
        ),
        ("c.yml", "Forward: [4, 2, -1]\nInputGrad: [4, 2, -1]\n", "c.yml:1", "wg: missing"),
        ("c.yml", "Forward: [4, 2\n", "c.yml:2", "not valid YAML"),
        ("c.yml", "Forward: [4]\nForward: [4]\n", "c.yml:2: Forward", "given twice (first on line 1)"),
        ("n.yml", NETWORK.replace("Switch ]", "Torus ]"), "n.yml:1: Topology", "unknown building block 'Torus'"),
        (
            "n.yml",
            NETWORK.replace("16 ]", "16, 2 ]"),
            "n.yml:3",
            "3 building blocks, 4 NPU counts and 3 cost dimensions",
        ),
        ("n.yml", NETWORK.replace("8,", "1.5,"), "n.yml:2: NpusCount", "1.5 is not a number of NPUs"),
        ("n.yml", NETWORK + "Extra: 1\n", "n.yml:4: Extra", "unknown key"),
        ("n.yml", "Topology: [Ring]\n", "n.yml:1: NpusCount", "missing"),
    ],
)
def test_damaged_files_name_file_and_line(tmp_path: Path, name: str, text: str, where: str, message: str) -> None:
    p = write(tmp_path, name, text)
    reader = {"wl.txt": read_libra_workload, "c.yml": read_libra_communicator, "n.yml": read_libra_network}[name]
    with pytest.raises(InputError) as e:
        reader(p)
    assert str(e.value).startswith(f"{tmp_path / where}") and message in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "costs,where,message",
    [
        (COSTS.replace("  Nic: 31.5\n", ""), "cost.yml:7: C", "no Nic price for dimension 2 (switch)"),
        (COSTS.replace("B:\n  Link: 4\n  Switch: 13\n", ""), "cost.yml:1: B", "no Link price for dimension 1"),
        (COSTS.replace("Link: 4", "Link: -4"), "cost.yml:5: B.Link", "-4 is not a price"),
        (COSTS.replace("Link: 4", "Links: 4"), "cost.yml:5: B.Links", "unknown element"),
        (COSTS.replace("A:\n  Link: 2.5", "A: 2.5"), "cost.yml:2: A", "not a table of prices"),
    ],
)
def test_damaged_cost_models_name_file_and_line(tmp_path: Path, costs: str, where: str, message: str) -> None:
    net = read_libra_network(write(tmp_path, "net.yml", NETWORK))
    with pytest.raises(InputError) as e:
        read_libra_cost_model(write(tmp_path, "cost.yml", costs), net)
    assert str(e.value).startswith(f"{tmp_path / where}") and message in str(e.value)


# ----- cost -------------------------------------------------------------------------------------
def libra_cost(network: dict, prices: dict, bw: list[float]) -> float:
    """LIBRA's network cost element by element (its cost_model.py, re-derived): per dimension, the
    building blocks' count times their links' price times the link bandwidth times the links."""
    kinds, npus, tiers = network["Topology"], network["NpusCount"], network["CostDimension"]
    total = 0.0
    for d, (kind, n, tier) in enumerate(zip(kinds, npus, tiers)):
        if kind == "Ring":
            blocks, links, link_bw = math.prod(npus) // n, 2 * n, bw[d] / 2
        elif kind == "FullyConnected":
            blocks, links, link_bw = math.prod(npus) // n, n * (n - 1), bw[d] / (n - 1)
        else:
            blocks, links, link_bw = math.prod(npus[d + 1 :]), math.prod(npus[: d + 1]), bw[d]
        per_link = prices[tier]["Link"] + (prices[tier]["Switch"] + prices[tier]["Nic"] if kind == "Switch" else 0)
        total += blocks * per_link * link_bw * links
    return total


def _cost_pairs(files: dict[str, Path]) -> list[tuple[Path, Path]]:
    pairs = [(files["network"], files["costs"])]
    if LIBRA.is_dir():
        pairs += [(LIBRA / f"network/{n}d_network.yml", LIBRA / f"cost_model/{n}d_cost_model.yml") for n in (3, 4)]
    return pairs


def test_hardware_cost_is_libras_network_cost(files: dict[str, Path]) -> None:
    rng = random.Random(7)
    for net_path, cost_path in _cost_pairs(files):
        net = read_libra_network(net_path)
        prices = read_libra_cost_model(cost_path, net)
        raw_net, raw_prices = yaml.safe_load(net_path.read_text()), yaml.safe_load(cost_path.read_text())
        assert read_libra_prices(cost_path) == {t: {k: float(v) for k, v in p.items()} for t, p in raw_prices.items()}
        for _ in range(20):
            bw = [rng.uniform(0.5, 900.0) for _ in range(net.ndims)]
            assert prices.dollars(net.topology(bw)) == pytest.approx(libra_cost(raw_net, raw_prices, bw), rel=1e-12)


# ----- the model --------------------------------------------------------------------------------
def test_bytes_per_dimension() -> None:
    parts = ((0, 4), (1, 2), (3, 8))
    assert libra_messages("all_reduce", 64, parts, 4) == (96.0, 16.0, 0.0, 14.0)
    assert libra_messages("reduce_scatter", 64, parts, 4) == (48.0, 8.0, 0.0, 7.0)
    assert libra_messages("all_to_all", 64, parts, 4) == (48.0, 32.0, 0.0, 56.0)
    assert libra_messages("all_gather", 64, parts, 4) == (64 * 8 * 2 * 3, 64 * 8, 0.0, 64 * 7)


def loop_by_hand(lines: list[str], comm: dict, npus: list[int], bw: list[float]) -> float:
    """LIBRA's no-overlap loop straight from the text lines (its model.py and no_overlap.py, re-derived)."""

    def coll_time(kind: str, size: float, groups: list[int]) -> float:
        kind, msg = kind.lower(), [0.0] * len(npus)
        order = range(len(npus) - 1, -1, -1) if kind == "allgather" else range(len(npus))
        for d in order:
            p = groups[d]
            if kind == "none" or p < 0:
                continue
            if kind == "allreduce":
                msg[d], size = 2 * size / p * (p - 1), size / p
            elif kind == "reducescatter":
                msg[d], size = size / p * (p - 1), size / p
            elif kind == "alltoall":
                msg[d] = size / p * (p - 1)
            else:
                msg[d], size = size * (p - 1), size * p
        return max(m / b for m, b in zip(msg, bw))

    layers = [ln.split() for ln in lines if ln.strip()]
    t = sum(float(f[2]) + coll_time(f[3], float(f[4]), comm["Forward"]) for f in layers)
    for f in reversed(layers):
        t += float(f[5]) + coll_time(f[6], float(f[7]), comm["InputGrad"])
        t += float(f[8]) + coll_time(f[9], float(f[10]), comm["WeightGrad"])
    return t


def test_iteration_time_is_the_no_overlap_loop(files: dict[str, Path]) -> None:
    net = read_libra_network(files["network"])
    wl = read_libra_workload(files["workload"], files["comm"])
    comm = yaml.safe_load(COMM)
    for bw in ([100.0, 50.0, 25.0], [3.0, 700.0, 1.5]):
        assert libra_iteration_ns(wl, net, bw) == pytest.approx(loop_by_hand(LINES, comm, [4, 8, 16], bw), rel=1e-13)
    # no placement: every collective spans every dimension
    every = {k: [4, 8, 16] for k in ("Forward", "InputGrad", "WeightGrad")}
    bare = read_libra_workload(files["workload"])
    assert libra_iteration_ns(bare, net, [10, 20, 30]) == pytest.approx(
        loop_by_hand(LINES, every, [4, 8, 16], [10, 20, 30])
    )
    assert libra_iteration_ns(bare, net.topology([10, 20, 30])) == libra_iteration_ns(bare, net, [10, 20, 30])


@NEEDS_SHARED
@pytest.mark.parametrize("model", ["GPT_3", "MSFT_1T", "Turing_NLG"])
def test_libra_files_give_the_loop_by_hand(model: str) -> None:
    net = read_libra_network(LIBRA / "network/4d_network.yml")
    comm_path = next((LIBRA / "communicator").glob(f"{model}_4[dD].yml"))
    wl = read_libra_workload(LIBRA / f"workload/{model}.txt", comm_path)
    lines = (LIBRA / f"workload/{model}.txt").read_text().splitlines()
    bw = [400.0, 300.0, 200.0, 100.0]
    expected = loop_by_hand(lines, yaml.safe_load(comm_path.read_text()), list(net.npus), bw)
    assert libra_iteration_ns(wl, net, bw) == pytest.approx(expected, rel=1e-13)


def test_a_placement_that_does_not_fit_the_network_is_refused(files: dict[str, Path]) -> None:
    wl = read_libra_workload(files["workload"], Placement((4, 3, 0), (4, 2, 0), (0, 4, 16)))
    with pytest.raises(InputError, match="a group of 3 NPUs in dimension 1 of 8"):
        libra_iteration_ns(wl, read_libra_network(files["network"]), [1.0, 1.0, 1.0])


# ----- the optimum ------------------------------------------------------------------------------
NET2 = LibraNetwork(("ring", "switch"), (4, 8), ("a", "b"))
NET3 = LibraNetwork(("ring", "fc", "switch"), (4, 4, 8), ("a", "b", "c"))
PRICES3 = HardwareCost(link=(1.0, 2.0, 3.0), switch_port=(0.0, 0.0, 5.0), nic=(0.0, 0.0, 4.0))


def one_layer(groups: tuple[int, ...], nbytes: int = 2**30, compute: float = 0.0, coll: str = "all_reduce") -> Workload:
    layer = Layer("only", fwd_compute=compute, wg_comm=coll, wg_bytes=nbytes)
    zero = (0,) * len(groups)
    return Workload("one", "DATA", (layer,), placement=Placement(zero, zero, groups), layer0_input_gradient=True)


def test_one_collective_on_one_dimension_takes_all_the_free_bandwidth() -> None:
    r = libra_optimum(one_layer((4, 0)), NET2, ["sum == 100"])
    assert r.bandwidths == pytest.approx((100 - 1e-3, 1e-3), rel=1e-12)
    assert r.predicted_ns == pytest.approx(1.5 * 2**30 / (100 - 1e-3), rel=1e-9)
    assert r.gap <= 1e-7 and r.lower_bound <= r.value


def test_one_collective_on_two_dimensions_balances_them() -> None:
    r = libra_optimum(one_layer((4, 8)), NET2, ["sum == 100"])
    m0, m1 = 2 * 2**30 * 3 / 4, 2 * 2**28 * 7 / 8
    assert r.bandwidths[0] == pytest.approx(100 * m0 / (m0 + m1), rel=1e-6)
    assert r.predicted_ns == pytest.approx((m0 + m1) / 100, rel=1e-7)


def test_two_collectives_on_two_dimensions_split_by_square_roots() -> None:
    layers = (
        Layer("a", fwd_compute=5e6, fwd_comm="all_reduce", fwd_bytes=2**30),
        Layer("b", ig_comm="all_to_all", ig_bytes=3 * 2**28),
    )
    wl = Workload("two", "DATA", layers, placement=Placement((4, 0), (0, 8), (0, 0)), layer0_input_gradient=True)
    a, b = 1.5 * 2**30, 3 * 2**28 * 7 / 8
    r = libra_optimum(wl, NET2, ["bw0 + bw1 == 300"])
    assert r.bandwidths[0] == pytest.approx(300 * math.sqrt(a) / (math.sqrt(a) + math.sqrt(b)), rel=1e-3)
    assert r.value == pytest.approx(5e6 + (math.sqrt(a) + math.sqrt(b)) ** 2 / 300, rel=1e-7)
    assert r.lower_bound <= r.value * (1 + 1e-12) and r.gap <= 1e-7


def test_time_x_cost_closed_form() -> None:
    # T = K + a/b0 with bw1 fixed; C = N(α b0 + β'): (K + a/b)(αb + β) is least at b = sqrt(aβ/(Kα))
    K, a = 2e6, 1.5 * 2**30
    prices = HardwareCost(link=(1.0, 2.0), switch_port=(0.0, 3.0), nic=(0.0, 4.0))
    r = libra_optimum(
        one_layer((4, 0), compute=K), NET2, ["bw1 == 10", "bw0 <= 1000"], objective="time_x_cost", prices=prices
    )
    alpha, beta = 32 * 1.0, 32 * 9.0 * 10
    b = math.sqrt(a * beta / (K * alpha))
    assert r.bandwidths == pytest.approx((b, 10.0), rel=1e-3)
    assert r.value == pytest.approx((K + a / b) * (alpha * b + beta) / 1e10, rel=1e-7)
    assert r.cost_usd == pytest.approx(alpha * r.bandwidths[0] + beta, rel=1e-12) and r.gap <= 1e-7


def three_dim_workload() -> Workload:
    layers = (
        Layer("a", fwd_compute=1e6, fwd_comm="all_reduce", fwd_bytes=2**29, wg_comm="all_reduce", wg_bytes=2**30),
        Layer("b", ig_compute=3e5, ig_comm="all_gather", ig_bytes=2**22, wg_comm="reduce_scatter", wg_bytes=2**28),
    )
    return Workload(
        "three", "DATA", layers, placement=Placement((4, 2, 0), (2, 4, 0), (0, 4, 8)), layer0_input_gradient=True
    )


@pytest.mark.parametrize("objective", ["time", "time_x_cost"])
def test_the_optimum_beats_a_fine_grid(objective: str) -> None:
    wl, total = three_dim_workload(), 120.0
    r = libra_optimum(wl, NET3, ["sum == 120"], objective=objective, prices=PRICES3)
    assert r.gap <= 1e-7 and abs(sum(r.bandwidths) - total) <= 1e-9 * total
    g = np.arange(0.1, total, 0.1)
    b0, b1 = np.meshgrid(g, g)
    b2 = total - b0 - b1
    ok = b2 >= 0.1
    b0, b1, b2 = b0[ok], b1[ok], b2[ok]
    t = np.full_like(b0, 1e6 + 3e5)
    for c in libra_collectives(wl, NET3):
        t = t + np.max(np.stack([m / b for m, b in zip(c.per_dim, (b0, b1, b2))]), axis=0)
    if objective == "time_x_cost":
        t = t * 128 * (1.0 * b0 + 2.0 * b1 + 12.0 * b2) / 1e10
    assert r.lower_bound <= t.min() and r.value <= t.min() * (1 + 1e-12) + (r.value - r.lower_bound)
    assert r.value >= t.min() * (1 - 2e-3)  # the grid's best is close


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]), st.integers(1, 2**30)),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.sampled_from([(4, 0, 0), (0, 4, 8), (2, 2, 2), (4, 4, 8), (0, 2, 0)]), min_size=3, max_size=3),
    st.sampled_from(list(LIBRA_CONSTRAINTS.values()) + [("bw0 >= 2*bw2", "sum <= 700", "bw1 >= 5")]),
    st.sampled_from(["time", "time_x_cost"]),
    st.integers(0, 2**31),
)
def test_the_optimum_is_never_worse_than_an_allowed_allocation(colls, groups, cons, objective, seed) -> None:
    net = LibraNetwork(("ring", "fc", "ring", "switch"), (4, 4, 2, 8), ("a", "b", "c", "d"))
    prices = HardwareCost(link=(1.0, 2.0, 2.5, 3.0), switch_port=(0.0, 0.0, 0.0, 5.0), nic=(0.0, 0.0, 0.0, 4.0))
    groups = [g[:2] + (min(g[1], 2), g[2]) for g in groups]
    layers = tuple(Layer(f"l{i}", fwd_compute=1e5 * (i + 1), wg_comm=c, wg_bytes=n) for i, (c, n) in enumerate(colls))
    wl = Workload("r", "DATA", layers, placement=Placement(*groups), layer0_input_gradient=True)
    poly = BandwidthPolytope.parse(cons, 4)
    r = libra_optimum(wl, net, poly, objective=objective, prices=prices)
    assert r.gap <= 1e-7 and poly.contains(r.bandwidths)
    rng = random.Random(seed)
    for _ in range(20):
        bw = poly.point([rng.random() for _ in range(poly.free)])
        t = libra_iteration_ns(wl, net, bw)
        v = t if objective == "time" else t * prices.dollars(net.topology(bw)) / 1e10
        # certified: no allocation beats the lower bound, nor the value by more than the gap
        assert r.lower_bound <= v * (1 + 1e-12) and r.value <= v * (1 + 1e-12) + (r.value - r.lower_bound)


@NEEDS_SHARED
def test_libra_optimum_on_gpt3_multiple_constraints() -> None:
    """LIBRA's shipped configuration: 4D network, GPT-3, multiple_constraints, performance."""
    net = read_libra_network(LIBRA / "network/4d_network.yml")
    prices = read_libra_cost_model(LIBRA / "cost_model/4d_cost_model.yml", net)
    wl = read_libra_workload(LIBRA / "workload/GPT_3.txt", LIBRA / "communicator/GPT_3_4d.yml")
    r = libra_optimum(wl, net, LIBRA_CONSTRAINTS["multiple_constraints"], prices=prices)
    assert r.bandwidths[:2] == (500.0, 300.0) and r.gap <= 1e-7
    assert sum(r.bandwidths) == pytest.approx(1000.0, rel=1e-12)
    for u in np.linspace(0, 1, 101):
        bw = BandwidthPolytope.parse(LIBRA_CONSTRAINTS["multiple_constraints"], 4).point([float(u)])
        assert r.value <= libra_iteration_ns(wl, net, bw) * (1 + 1e-12)


def test_bad_calls_are_one_line() -> None:
    with pytest.raises(InputError, match="objective"):
        libra_optimum(one_layer((4, 0)), NET2, ["sum == 10"], objective="speed")
    with pytest.raises(InputError, match="prices: none given"):
        libra_optimum(one_layer((4, 0)), NET2, ["sum == 10"], objective="time_x_cost")
    with pytest.raises(InputError, match="a polytope of 3 dimensions"):
        libra_optimum(one_layer((4, 0)), NET2, BandwidthPolytope.parse(["sum == 10"], 3))
    with pytest.raises(InputError, match="model-parallel group"):
        libra_iteration_ns(Workload("h", "HYBRID", (Layer("x", wg_comm="all_reduce", wg_bytes=8),), 4), NET2, [1, 1])


def test_a_flat_objective_stops_at_the_lp_budget_with_an_honest_gap() -> None:
    """No compute and constraints that scale: T x C is the same along every ray, so the whole
    cost range must be covered; the budget stops the search and the gap says how far it got."""
    r = libra_optimum(
        one_layer((4, 8), compute=0.0),
        NET2,
        ["bw0 >= bw1", "sum <= 700"],
        objective="time_x_cost",
        prices=HardwareCost(link=(1.0, 2.0)),
        max_lps=300,
    )
    assert 300 <= r.lps <= 310 and 0 < r.lower_bound <= r.value
    assert 1e-7 < r.gap < 1e-2
    bw = BandwidthPolytope.parse(["bw0 >= bw1", "sum <= 700"], 2).point([0.3, 0.6])
    v = (
        libra_iteration_ns(one_layer((4, 8), compute=0.0), NET2, bw)
        * HardwareCost(link=(1.0, 2.0)).dollars(NET2.topology(bw))
        / 1e10
    )
    assert r.lower_bound <= v


def test_each_cost_level_gives_a_line_under_v_everywhere() -> None:
    """The certificate of time x cost: the LP's value and its cost row's dual at one level bound
    v, the least time at a cost, at every other level (docstring of dse.explore.libra.solve)."""
    from dse.explore.libra.model import cost_coefficients, libra_compute_ns
    from dse.explore.libra.solve import CuttingPlanes, LibraProblem

    wl = three_dim_workload()
    poly = BandwidthPolytope.parse(["sum <= 300", "bw0 >= bw2"], 3)
    per_dim = [c.per_dim for c in libra_collectives(wl, NET3)]
    problem = LibraProblem.build(poly, per_dim, libra_compute_ns(wl), cost_coefficients(PRICES3, NET3))
    cp = CuttingPlanes(problem, 10_000)
    kappas = np.linspace(2e3, 1.2e5, 9)
    levels = [cp.solve(1e-9, float(k)) for k in kappas]
    assert any(lv.slope < 0 for lv in levels)
    for lv in levels:
        assert lv.lower <= lv.time <= lv.lower * (1 + 1e-9)
        for other in levels:
            assert lv.lower + lv.slope * (other.kappa - lv.kappa) <= other.lower * (1 + 1e-9)  # v within 1e-9


def test_a_polytope_survives_pickling() -> None:
    """Studies hand the polytope to worker processes."""
    import pickle

    p = BandwidthPolytope.parse(LIBRA_CONSTRAINTS["multiple_constraints"], 4)
    q = pickle.loads(pickle.dumps(p))
    assert q == p and q.free == 1 and q.point([0.25]) == p.point([0.25])
