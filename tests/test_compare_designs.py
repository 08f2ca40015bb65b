"""`dse compare-designs`: each design's figures are `iterate`'s, the speed-up is t_first / t, the JSON
fields carry their units, --cost prices each network with the study price model, --placement is
applied as `dse iterate` applies it, --plot draws the split of each iteration, and bad input is one
line with exit code 2 before any design runs."""

from __future__ import annotations

import json

import pytest

from dse.core.topology import parse_topology
from dse.training.iteration import iterate

WORKLOAD = "gnmt_fp16_fused"  # bundled, data-parallel: fits any design
DESIGNS = ("2D-SW_SW", "3D-FC_Ring_SW", "Ring(4,100,20)_SW(8,50,700)")
PRICES = """
[cost]
link = [1.0, 2.0]
switch_port = [0.0, 3.0]
nic = [0.0, 4.0]
link_fixed = [5.0, 6.0]
"""


def _one_line(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (code, out, err)
    for n in needles:
        assert n in err, (n, err)


@pytest.fixture(scope="module")
def expected():
    """`iterate` on each design, as `dse iterate` runs it (themis, scf, paper, 64 chunks)."""
    return [iterate(WORKLOAD, d) for d in DESIGNS]


def test_json_rows_are_iterates_figures_in_their_units(run_cli, expected):
    code, out, err = run_cli("compare-designs", WORKLOAD, *DESIGNS, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert (d["workload"], d["scheduler"], d["queue"], d["cost_model"], d["chunks"], d["placement"]) == (
        WORKLOAD,
        "themis",
        "scf",
        "paper",
        64,
        None,
    )
    assert "paper model" in d["bw_utilization_note"] and "t_first / t" in d["speedup_note"]
    first = expected[0].time_ns
    for row, res, spec in zip(d["designs"], expected, DESIGNS):
        assert set(row) == {
            "design",
            "topology",
            "npus",
            "iteration_time_ns",
            "compute_ns",
            "comm_ns",
            "exposed_comm_ns",
            "exposed_comm_pct",
            "bw_utilization_pct",
            "speedup",
        }  # no cost_usd without --cost
        topo = parse_topology(spec)
        assert (row["design"], row["topology"], row["npus"]) == (spec, topo.notation(), topo.npus)
        assert row["iteration_time_ns"] == res.time_ns and row["compute_ns"] == res.compute_ns
        assert row["comm_ns"] == res.comm_ns and row["exposed_comm_ns"] == res.exposed_comm_ns
        assert row["exposed_comm_pct"] == pytest.approx(100 * res.exposed_comm_ns / res.time_ns, rel=1e-12)
        assert row["bw_utilization_pct"] == pytest.approx(100 * res.bw_utilization, rel=1e-12)
        assert row["speedup"] == pytest.approx(first / res.time_ns, rel=1e-12)
    assert d["designs"][0]["speedup"] == 1.0
    assert len({r["iteration_time_ns"] for r in d["designs"]}) == 3  # the designs really differ


def test_the_table_prints_the_same_numbers_with_units(run_cli, expected):
    code, out, err = run_cli("compare-designs", WORKLOAD, *DESIGNS)
    assert code == 0, err
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("design"))
    for h in ("iteration time (ms)", "exposed comm. (ms)", "exposed (%)", "BW utilisation (%)", "speed-up (x)"):
        assert h in header
    assert "cost ($)" not in header
    first = expected[0].time_ns
    for spec, res in zip(DESIGNS, expected):
        cells = next(line for line in lines if line.startswith(spec + " ")).split()[-6:]
        assert cells == [
            str(parse_topology(spec).npus),
            f"{res.time_ns / 1e6:,.3f}",
            f"{res.exposed_comm_ns / 1e6:,.3f}",
            f"{100 * res.exposed_comm_ns / res.time_ns:.1f}",
            f"{100 * res.bw_utilization:.1f}",
            f"{first / res.time_ns:.3f}",
        ]
    assert any("BW utilisation (paper model)" in line for line in lines)


def test_cost_is_the_study_price_model(run_cli, tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    design = "Ring(4,100,20)_SW(8,50,700)"
    code, out, err = run_cli("compare-designs", WORKLOAD, design, "2D-SW_SW", "--cost", str(prices), "--json")
    assert code == 0, err
    rows = json.loads(out)["designs"]
    # per NPU: ring dim 0 (tier 0) 100 GB/s x $1 + 2 links x $5; switch dim 1 (the outermost: the
    # last tier) 50 GB/s x ($2 + $4 nic + $3 port) + 1 link x $6; 32 NPUs
    assert rows[0]["cost_usd"] == pytest.approx(32 * (100 * 1 + 2 * 5 + 50 * (2 + 4 + 3) + 6))
    # 2D-SW_SW: SW(16,150)_SW(64,100): 1024 x (150 x (1 + 0) + 5 + 100 x 9 + 6)
    assert rows[1]["cost_usd"] == pytest.approx(1024 * (150 * 1 + 5 + 100 * 9 + 6))
    code, out, _ = run_cli("compare-designs", WORKLOAD, design, "--cost", str(prices))
    assert code == 0 and "cost ($)" in out and f"{32 * 566:,}" in out
    bare = tmp_path / "bare.toml"  # a file of price keys alone is a price table too
    bare.write_text("link = 2.0\n")
    code, out, _ = run_cli("compare-designs", WORKLOAD, design, "--cost", str(bare), "--json")
    assert code == 0 and json.loads(out)["designs"][0]["cost_usd"] == pytest.approx(32 * (2 * 100 + 2 * 50))


def test_a_placement_is_applied_as_dse_iterate_applies_it(run_cli, tmp_path):
    from dse.training.placement_read import load_placement, with_placement
    from dse.training.workload_load import load_workload

    place = tmp_path / "place.toml"
    place.write_text("[placement]\nfwd = [4, 4, 0, 0]\nig = [4, 4, 0, 0]\nwg = [0, 2, 4, 8]\n")
    wl = "workloads/tiny_hybrid.toml"
    code, out, err = run_cli(
        "compare-designs", wl, "4D-Ring_FC_Ring_SW", "4D-Ring_SW_SW_SW", "--placement", str(place), "--json"
    )
    assert code == 0, err
    d = json.loads(out)
    placed = with_placement(load_workload(wl), load_placement(place, "--placement"))
    for row, spec in zip(d["designs"], ("4D-Ring_FC_Ring_SW", "4D-Ring_SW_SW_SW")):
        assert row["iteration_time_ns"] == iterate(placed, spec).time_ns
    assert d["designs"][0]["iteration_time_ns"] != iterate(wl, "4D-Ring_FC_Ring_SW").time_ns  # it mattered
    assert d["placement"] == str(place)


def test_other_scheduler_queue_model_and_chunks_reach_iterate(run_cli):
    args = ("--scheduler", "baseline", "--queue", "fifo", "--cost-model", "astra-sim", "--chunks", "16")
    code, out, err = run_cli("compare-designs", WORKLOAD, "2D-SW_SW", *args, "--json")
    assert code == 0, err
    d = json.loads(out)
    res = iterate(WORKLOAD, "2D-SW_SW", scheduler="baseline", queue="fifo", cost_model="astra-sim", chunks=16)
    assert (d["scheduler"], d["queue"], d["cost_model"], d["chunks"]) == ("baseline", "fifo", "astra-sim", 16)
    assert d["designs"][0]["iteration_time_ns"] == res.time_ns and "astra-sim" in d["bw_utilization_note"]


def test_the_plot_splits_each_iteration_and_prices_it(run_cli, tmp_path, expected):
    import matplotlib.pyplot as plt

    from dse.output.compare_designs import check_designs, compare_designs, comparison_figure

    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    png = tmp_path / "designs.png"
    code, out, err = run_cli("compare-designs", WORKLOAD, *DESIGNS, "--cost", str(prices), "--plot", str(png))
    assert code == 0 and out.splitlines()[-1] == str(png) and png.read_bytes()[:4] == b"\x89PNG"
    cmp = compare_designs(check_designs(WORKLOAD, DESIGNS, cost=str(prices)))
    fig = comparison_figure(cmp)
    try:
        times, costs = fig.axes
        assert times.get_xlabel() == "iteration time (ms)" and costs.get_xlabel() == "cost ($)"
        widths = [p.get_width() for p in times.patches]
        compute = [(r.time_ns - r.exposed_comm_ns) / 1e6 for r in expected]
        exposed = [r.exposed_comm_ns / 1e6 for r in expected]
        assert widths == pytest.approx(compute + exposed)  # compute bars, then exposed communication
        assert [p.get_width() for p in costs.patches] == pytest.approx([r.cost_usd for r in cmp.rows])
        assert [t.get_text() for t in times.get_yticklabels()][0] == DESIGNS[0]  # the first design on top
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert legend == ["compute (communication overlapped with it)", "exposed communication"]
    finally:
        plt.close(fig)


def test_bad_input_is_one_line_before_any_run(run_cli, tmp_path, monkeypatch):
    import dse.training.iteration as iteration

    def never(*a, **k):
        raise AssertionError("a design ran before every input was checked")

    monkeypatch.setattr(iteration, "iterate", never)
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    png = tmp_path / "f.png"
    cases = [
        (("nope.toml", "2D-SW_SW"), ("workload",)),
        ((WORKLOAD, "2D-SW_SW", "Ring(4,x)"), ("topology", "Ring(4,x)")),  # the last design: still before any run
        ((WORKLOAD, "2D-SW_SW", "2D-SW_SW"), ("'2D-SW_SW' given twice",)),
        (("libra_gpt_3_4d", "4D-Ring_FC_Ring_SW", "2D-SW_SW"), ("4x8x4x32", "--placement")),  # does not fit
        ((WORKLOAD, "2D-SW_SW", "--scheduler", "nope"), ("scheduler", "nope")),
        ((WORKLOAD, "2D-SW_SW", "--queue", "nope"), ("queue",)),
        ((WORKLOAD, "2D-SW_SW", "--cost-model", "nope"), ("cost_model", "unknown cost model")),
        ((WORKLOAD, "2D-SW_SW", "--chunks", "0"), ("--chunks", ">= 1")),
        ((WORKLOAD, "2D-SW_SW", "--plot", str(tmp_path / "f.jpg")), ("--plot", ".png or .svg")),
        ((WORKLOAD, "2D-SW_SW", "--cost", str(tmp_path / "missing.toml")), ("--cost", "no such file")),
        ((WORKLOAD, "2D-SW_SW", "--cost", "studies/sweeps/sizes.toml"), ("--cost", "no [cost] table")),
        ((WORKLOAD, "2D-SW_SW", "--placement", "studies/shape_1024.toml"), ("[placement]",)),
        (
            ("workloads/chakra/a_ar1g.0.et", "2D-SW_SW", "--placement", "dse/data/libra/gpt_3_4d.toml"),
            ("Chakra trace",),
        ),
        ((WORKLOAD, "2D-SW_SW", "--plot", str(png)), ()),  # everything right: the (patched) run is reached
    ]
    bad_price = tmp_path / "bad.toml"
    bad_price.write_text("[cost]\nlink = -1\n")
    cases.append(((WORKLOAD, "2D-SW_SW", "--cost", str(bad_price)), ("cost.link",)))
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[cost]\nwire = 1\n")
    cases.append(((WORKLOAD, "2D-SW_SW", "--cost", str(unknown)), ("cost.wire", "unknown key")))
    for args, needles in cases:
        argv = ("compare-designs", *args, *(() if "--plot" in args else ("--plot", str(png))))
        if not needles:
            with pytest.raises(AssertionError, match="before every input was checked"):
                run_cli(*argv)
        else:
            _one_line(*run_cli(*argv), *needles)
        assert not png.exists()


def test_a_chakra_trace_runs_as_dse_iterate_runs_it(run_cli):
    trace = "workloads/chakra/a_ar1g.0.et"
    code, out, err = run_cli("compare-designs", trace, "2D-SW_SW", "3D-FC_Ring_SW", "--json")
    assert code == 0, err
    rows = json.loads(out)["designs"]
    assert [r["iteration_time_ns"] for r in rows] == [iterate(trace, t).time_ns for t in ("2D-SW_SW", "3D-FC_Ring_SW")]
