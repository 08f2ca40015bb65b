"""Timeline figures: `dse evaluate --plot` and `dse plot timeline`, lanes that are the result's timeline,
a legend of exactly the colours drawn, and bad files refused in one line."""

import json
from collections import Counter

import pytest

from dse import evaluate
from dse.core.topology import parse_topology
from dse.output.timeline_plot import json_timeline_data, result_timeline_data, time_unit

TOPO = "Ring(4,375,20)_FC(8,175,700)_SW(8,100,1700)"
PNG = b"\x89PNG\r\n\x1a\n"


def _bars(data):
    return {lane.dim: Counter((b.chunk, b.kind, b.start, b.end) for b in lane.bars) for lane in data.lanes}


def _colours(data):
    return {b.color for lane in data.lanes for b in lane.bars}


@pytest.mark.parametrize("model,active", [("paper", 1), ("astra-sim", 1), ("astra-sim", 4), ("paper", 3)])
def test_one_lane_per_dimension_holding_the_timeline(model, active):
    topo = parse_topology(TOPO)
    r = evaluate(topo, size="64MiB", chunks=8, cost_model=model, active_chunks=active, timeline=True)
    data = result_timeline_data(r, topo)
    assert [lane.label for lane in data.lanes] == [
        "dim 0: Ring(4) 375 GB/s",
        "dim 1: FC(8) 175 GB/s",
        "dim 2: SW(8) 100 GB/s",
    ]
    shared = model == "paper" and active > 1  # phases share the bandwidth: a bar is the whole phase
    assert data.shared == shared
    want = {
        d: Counter((e.chunk, e.kind, e.start, e.end if shared else e.start + e.busy) for e in r.timeline if e.dim == d)
        for d in range(3)
    }
    assert _bars(data) == want
    # the legend has exactly the colours drawn, one entry each
    assert {c for _, c in data.legend} == _colours(data) and len(data.legend) == len(_colours(data))
    assert [label for label, _ in data.legend] == ["reduce-scatter phase", "all-gather phase"]
    for lane in data.lanes:  # bars on one row never overlap; overlapping phases get rows of their own
        by_row: dict[int, list] = {}
        for b in lane.bars:
            by_row.setdefault(b.row, []).append((b.start, b.end))
        for spans in by_row.values():
            spans.sort()
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        assert lane.rows == len(by_row) and (active > 1 or lane.rows == 1)
        if not shared:
            assert lane.rows <= active


def test_astra_sim_baseline_draws_its_all_reduce_phase_in_the_legend():
    topo = parse_topology("3D-SW_SW_SW_hetero")
    r = evaluate(
        topo, size="64MiB", chunks=4, scheduler="baseline", queue="fifo", cost_model="astra-sim", timeline=True
    )
    data = result_timeline_data(r, topo)
    assert "all-reduce phase" in [label for label, _ in data.legend]
    assert {c for _, c in data.legend} == _colours(data)


def test_reproduction_timeline_legend_matches_its_colours(tmp_path):
    from dse.output.reproduce_figures import draw_timeline, timeline_data

    panels = timeline_data("paper")
    assert len(panels) == 2
    for p in panels:  # the paper model has no all-reduce phase: no green in the legend
        assert {c for _, c in p.legend} == _colours(p) and "all-reduce phase" not in dict(p.legend)
    out = draw_timeline(panels, tmp_path / "timeline.png")
    assert out.read_bytes()[:8] == PNG


def test_time_axis_unit():
    assert time_unit(9.4e6) == ("ms", 1e6) and time_unit(22_742) == ("µs", 1e3) and time_unit(500) == ("ns", 1.0)


def test_evaluate_plot_writes_the_figure_and_prints_the_table(run_cli, tmp_path):
    png, svg = tmp_path / "t.png", tmp_path / "t.svg"
    code, out, err = run_cli("evaluate", TOPO, "--size", "64MiB", "--chunks", "8", "--plot", str(png))
    assert code == 0 and err == "" and "BW utilisation" in out and "busy %" in out
    assert png.read_bytes()[:8] == PNG
    code, out, _ = run_cli("evaluate", TOPO, "--size", "64MiB", "--chunks", "8", "--plot", str(svg), "--json")
    assert code == 0 and "timeline" not in json.loads(out)  # the JSON is as without --plot
    text = svg.read_text()
    assert text.startswith("<?xml") and "<svg" in text and "dim 0: Ring(4) 375 GB/s" in text


def test_plot_timeline_from_json(run_cli, tmp_path):
    code, out, _ = run_cli(
        "evaluate",
        TOPO,
        "--size",
        "64MiB",
        "--chunks",
        "8",
        "--cost-model",
        "astra-sim",
        "--active-chunks",
        "2",
        "--json",
        "--timeline",
    )
    d = json.loads(out)
    topo = parse_topology(TOPO)
    r = evaluate(topo, size="64MiB", chunks=8, cost_model="astra-sim", active_chunks=2, timeline=True)
    assert _bars(json_timeline_data(d)) == _bars(result_timeline_data(r, topo))
    f = tmp_path / "r.json"
    f.write_text(out)
    png = tmp_path / "fig.png"
    code, out, err = run_cli("plot", "timeline", str(f), "--out", str(png))
    assert code == 0 and err == "" and out.strip() == str(png) and png.read_bytes()[:8] == PNG


def _one_line(code, out, err, *words):
    assert (
        code == 2 and out == "" and err.count("\n") == 1 and err.startswith("dse: error: ") and "Traceback" not in err
    )
    assert all(w in err for w in words), err


def test_bad_files_are_refused_in_one_line(run_cli, tmp_path):
    code, out, _ = run_cli("evaluate", TOPO, "--size", "64MiB", "--chunks", "4", "--json")
    assert code == 0
    no_tl = tmp_path / "plain.json"
    no_tl.write_text(out)
    with_tl = tmp_path / "tl.json"
    with_tl.write_text(run_cli("evaluate", TOPO, "--size", "64MiB", "--chunks", "4", "--json", "--timeline")[1])
    _one_line(*run_cli("plot", "timeline", str(no_tl), "--out", str(tmp_path / "a.png")), "no timeline", "--timeline")
    _one_line(*run_cli("plot", "timeline", str(with_tl), "--out", str(tmp_path / "a.pdf")), ".png or .svg")
    _one_line(*run_cli("evaluate", TOPO, "--size", "1GB", "--plot", str(tmp_path / "a.jpg")), "plot", ".png or .svg")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _one_line(*run_cli("plot", "timeline", str(bad), "--out", str(tmp_path / "a.png")), "not valid JSON")
    broken = json.loads(with_tl.read_text())
    broken["timeline"][0]["dim"] = 7
    bad.write_text(json.dumps(broken))
    _one_line(*run_cli("plot", "timeline", str(bad), "--out", str(tmp_path / "a.png")), "dim 7")
    _one_line(
        *run_cli("plot", "timeline", str(tmp_path / "missing.json"), "--out", str(tmp_path / "a.png")), "no such file"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.json",
        "plain.json",
        "tl.json",
    ]  # no figure, no temp file
