"""Small things a newcomer meets in the first hour: no "-0.00 %", what all-to-all's numbers mean,
`dse bound` without a seed and with compare's work limit, help on every --json, and `dse plot sweep`
refusing to average rows silently."""

import json

import pytest

from dse.cli.main import build_parser
from dse.explore.sweep.file import parse_sweep
from dse.explore.sweep.sweeps import read_rows, run_sweep
from dse.output.plots import sweep_plot_data, varying_columns
from dse.output.report import ComparisonRow, comparison_text, format_percent


@pytest.mark.parametrize(
    "x,text",
    [
        (-1e-12, "0.00 %"),
        (-0.00004, "0.00 %"),
        (0.0, "0.00 %"),
        (0.00005, "0.01 %"),
        (-0.0051, "-0.51 %"),
        (0.6006, "60.06 %"),
    ],
)
def test_format_percent_has_no_negative_zero(x, text):
    assert format_percent(x) == text


def test_a_gap_of_float_noise_prints_zero():
    rows = [
        ComparisonRow("baseline", "fifo", 2.5e6, 0.9, 1.0, -1e-12),
        ComparisonRow("themis", "scf", 2.5e6, 0.9, 1.0, 0.0),
    ]
    text = comparison_text(rows, "title")
    gaps = [line.split()[-2] for line in text.splitlines()[3:]]
    assert gaps == ["0.00", "0.00"]


def test_all_to_all_compare_says_what_bound_and_utilisation_mean(run_cli):
    code, out, _ = run_cli(
        "compare", "Ring(4,100,10)_SW(4,50,100)", "--size", "64MB", "--chunks", "4", "--collective", "all_to_all"
    )
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert code == 0 and len(notes) == 1 and "ascending order" in notes[0] and "ideal" in notes[0]
    code, out, _ = run_cli("compare", "Ring(4,100,10)_SW(4,50,100)", "--size", "64MB", "--chunks", "4")
    assert code == 0 and "ascending order" not in out


def test_bound_takes_no_seed(run_cli):
    code, out, err = run_cli("bound", "Ring(4,100,10)", "--size", "1MB", "--seed", "3")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--seed" in err


def test_bound_has_compares_node_limit_and_prints_the_same_bound(run_cli):
    assert build_parser().parse_args(["bound", "X", "--size", "1GB"]).node_limit == "100"
    args = ("3D-SW_SW_SW_homo", "--size", "1GB", "--json")
    b = json.loads(run_cli("bound", *args)[1])
    c = json.loads(run_cli("compare", *args)[1])["bound"]
    assert b["status"] == c["status"] == "node_limit"  # the limit is reached: both stop at the same place
    assert b["bound_ns"] == c["bound_ns"] and b["pipeline_ns"] == c["pipeline_ns"]
    code, out, _ = run_cli("bound", *args[:-1], "--node-limit", "none", "--no-pipeline", "--chunks", "4")
    assert code == 0 and "solver    highs, optimal" in out


def test_every_json_flag_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in ("evaluate", "compare", "bound"):
        flags = {o: a for a in sub.choices[name]._actions for o in a.option_strings}
        assert flags["--json"].help and "JSON" in flags["--json"].help
    assert "--seed" not in {o for a in sub.choices["bound"]._actions for o in a.option_strings}
    node = next(a for a in sub.choices["bound"]._actions if "--node-limit" in a.option_strings)
    assert "100" in node.help and "compare" in node.help


def _rows(**vary):
    base = {
        "point": "0",
        "topology": "T",
        "chunks": "2",
        "scheduler": "random",
        "seed": "0",
        "time_ns": "1",
        "crc": "x",
    }
    out = []
    for i, (chunks, seed, y) in enumerate(vary["cells"]):
        out.append({**base, "point": str(i), "chunks": chunks, "seed": seed, "time_ns": y, "crc": f"c{i}"})
    return out


def test_sweep_plot_refuses_rows_that_differ_in_a_hidden_parameter():
    rows = _rows(cells=[("2", "0", "10"), ("2", "1", "20"), ("4", "0", "30"), ("4", "1", "50")])
    assert varying_columns(rows, ["chunks"], ["time_ns"]) == ["seed"]  # point, crc and outputs never count
    assert varying_columns(rows, ["chunks", "seed"]) == []
    with pytest.raises(Exception) as e:
        sweep_plot_data(rows, "chunks", "time_ns")
    assert "seed" in str(e.value) and "--mean" in str(e.value) and "--hue" in str(e.value)
    data = sweep_plot_data(rows, "chunks", "time_ns", hue="seed")  # shown: nothing averaged
    assert data.averaged == () and [line.y for line in data.panels[""]] == [[10, 30], [20, 50]]
    data = sweep_plot_data(rows, "chunks", "time_ns", mean=True)
    assert data.averaged == ("seed",) and data.panels[""][0].y == [15, 40] and data.panels[""][0].n == [2, 2]


def test_sweep_plot_of_distinct_points_needs_nothing():
    rows = _rows(cells=[("2", "0", "10"), ("4", "0", "30")])
    assert sweep_plot_data(rows, "chunks", "time_ns").averaged == ()


def test_plot_sweep_cli_refuses_then_averages_on_request(run_cli, tmp_path):
    s = parse_sweep(
        {
            "topology": "2D-SW_SW",
            "size": "1MB",
            "chunks": [2, 4],
            "scheduler": "random",
            "queue": "fifo",
            "seed": [0, 1, 2],
        }
    )
    csv = tmp_path / "r.csv"
    run_sweep(s, csv, jobs=1)
    assert len(read_rows(csv)) == 6
    png = tmp_path / "f.png"
    code, out, err = run_cli("plot", "sweep", str(csv), "--x", "chunks", "--y", "time_ns", "--out", str(png))
    assert code == 2 and out == "" and err.count("\n") == 1 and "seed" in err and not png.exists()
    code, out, err = run_cli("plot", "sweep", str(csv), "--x", "chunks", "--y", "time_ns", "--mean", "--out", str(png))
    assert code == 0 and out.splitlines() == [
        "note: each point averages the rows that differ in seed (up to 3 rows)",
        str(png),
    ]
    code, out, _ = run_cli(
        "plot", "sweep", str(csv), "--x", "chunks", "--y", "time_ns", "--hue", "seed", "--out", str(png)
    )
    assert code == 0 and out.splitlines() == [str(png)]
