"""Per-rank timelines: the Chrome / Perfetto trace (`dse.output.perfetto`) is valid trace-event JSON
whose events are the result's spans to the nanosecond, the same bytes for the same input, and
`dse plot timeline` draws a per-rank result as a panel per class (`dse.output.ranks_timeline`)."""

import json
import os
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dse.core.errors import InputError
from dse.core.topology import parse_topology
from dse.output.perfetto import rank_ranges, ranks_view, trace_events, trace_json, write_trace
from dse.output.ranks_timeline import MAX_CLASSES, draw_ranks_timeline, plot_ranks_file, ranks_plot_data

PNG = b"\x89PNG\r\n\x1a\n"
TOPO = "Ring(4,100,10)_SW(3,50,100)"


def _span(cls, lane, name, a, b):
    return {"cls": cls, "lane": lane, "name": name, "start_ns": a, "end_ns": b}


def result(classes=2):
    """A per-rank result as `dse iterate --json --timeline` prints it: class 0 overlaps two receives
    and two sends on dim 0, and its compute spans touch; fractional nanoseconds on purpose."""
    ranks = [[0, 1, 2, 3, 8], [4, 5, 6, 7, 9, 10, 11]] + [[12 + k] for k in range(classes - 2)]
    spans = [
        _span(0, "compute", "fwd 0", 0, 1000.5),
        _span(0, "compute", "fwd 1", 1000.5, 2500),  # touches fwd 0: same thread
        _span(0, "recv", "recv a", 100, 900),
        _span(0, "recv", "recv b", 200, 400),  # inside recv a: a thread of its own, not nested
        _span(0, "recv", "recv c", 900, 1200),  # starts as recv a ends: recv a's thread
        _span(0, "dim0", "send x", 10, 30.25),
        _span(0, "dim0", "send y", 20, 40),
        _span(0, "comm", "all-reduce", 2500, 4000),
        _span(0, "dim1", "all-reduce", 2500, 3999.75),
        _span(1, "cpu", "launch", 0, 0),  # zero length
        _span(1, "compute", "bwd", 5, 3000),
    ] + [_span(c, "compute", "c", 0, 10 * c) for c in range(2, classes)]
    return {
        "workload": "pipe",
        "topology": TOPO,
        "cost_model": "astra-sim",
        "time_ns": 4000.0,
        "npus": 12,
        "finish_ns_by_rank": [4000.0] * 12,
        "classes": [
            {"index": k, "ranks": rs, "finish_ns": 4000.0 - k, "compute_ns": 2500.0, "exposed_ns": 1500.0}
            for k, rs in enumerate(ranks)
        ],
        "spans": spans,
    }


def check_trace(trace, spans):
    """Every rule of the format the viewers rely on, and the spans kept exactly."""
    assert set(trace) == {"traceEvents", "displayTimeUnit", "otherData"} and trace["displayTimeUnit"] == "ns"
    events = trace["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    meta = [e for e in events if e["ph"] == "M"]
    assert len(xs) + len(meta) == len(events)
    named_pids = {e["pid"] for e in meta if e["name"] == "process_name"}
    named_tids = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    sorted_tids = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_sort_index"}
    assert named_tids == sorted_tids
    per_tid: dict = {}
    for e in xs:
        assert {"ph", "ts", "dur", "pid", "tid", "name", "cat", "args"} <= set(e)
        assert isinstance(e["name"], str) and e["name"] and isinstance(e["ts"], float) and e["dur"] >= 0
        assert e["pid"] in named_pids and (e["pid"], e["tid"]) in named_tids
        a, b = e["args"]["start_ns"], e["args"]["end_ns"]
        assert e["ts"] == a / 1000 and e["dur"] == (b - a) / 1000  # µs, exactly ns / 1000
        per_tid.setdefault((e["pid"], e["tid"]), []).append((a, b, e["ts"], e["ts"] + e["dur"]))
    for items in per_tid.values():  # no two events on a thread overlap (neither partly nor nested)
        items.sort()
        for (_, b, _, end_us), (a2, _, ts2, _) in zip(items, items[1:]):
            assert b <= a2 and end_us <= ts2 + 1e-12 * max(1.0, ts2)
    got = sorted((e["pid"] - 1, e["args"]["start_ns"], e["args"]["end_ns"], e["name"]) for e in xs)
    assert got == sorted((s["cls"], float(s["start_ns"]), float(s["end_ns"]), s["name"]) for s in spans)


def threads(trace, pid):
    return [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name" and e["pid"] == pid]


def test_the_trace_is_valid_and_holds_every_span_exactly():
    r = result()
    trace = json.loads(trace_json(trace_events(r)))
    check_trace(trace, r["spans"])
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert names == {1: "class 0: ranks 0-3,8", 2: "class 1: ranks 4-7,9-11"}
    assert threads(trace, 1) == [
        "compute",
        "communication",
        "receives",
        "receives 2",
        "dim 0 (Ring)",
        "dim 0 (Ring) 2",
        "dim 1 (SW)",
    ]
    assert threads(trace, 2) == ["compute", "CPU"]
    tids = {e["args"]["name"]: e["tid"] for e in trace["traceEvents"] if e["name"] == "thread_name" and e["pid"] == 1}
    by_name = {e["name"]: e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == 1}
    assert by_name["recv c"]["tid"] == by_name["recv a"]["tid"] == tids["receives"]
    assert by_name["recv b"]["tid"] == tids["receives 2"]
    assert by_name["fwd 0"]["tid"] == by_name["fwd 1"]["tid"] == tids["compute"]
    assert by_name["fwd 1"]["ts"] == 1.0005 and by_name["fwd 1"]["dur"] == 1.4995
    assert {e["cat"] for e in trace["traceEvents"] if e["ph"] == "X"} == {"compute", "cpu", "comm", "recv", "network"}
    labels = [e["args"]["labels"] for e in trace["traceEvents"] if e["name"] == "process_labels"]
    assert labels[0] == "5 ranks; finish 4.000 us, compute 2.500 us, exposed 1.500 us"
    assert trace["otherData"]["topology"] == TOPO and trace["otherData"]["npus"] == 12


def test_dimension_names_without_a_readable_topology():
    r = result() | {"topology": "net.yml"}  # a network file is not opened when the trace is written
    trace = trace_events(r)
    assert "dim 0" in threads(trace, 1) and "dim 1" in threads(trace, 1)
    given_topo = trace_events(r, topology=parse_topology("FC(4,100,10)_Ring(3,50,100)"))
    assert "dim 0 (FC)" in threads(given_topo, 1)


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.sampled_from(["compute", "cpu", "comm", "recv", "dim0", "dim2"]),
            st.integers(0, 10_000),
            st.integers(0, 3_000),
            st.sampled_from([0.0, 0.25, 1 / 3]),
        ),
        max_size=60,
    )
)
def test_any_spans_make_a_valid_trace(raw):
    spans = [_span(c, lane, f"n{i}", a + f, a + f + d) for i, (c, lane, a, d, f) in enumerate(raw)]
    r = {"classes": [{"index": k, "ranks": [k]} for k in range(3)], "spans": spans}
    check_trace(json.loads(trace_json(trace_events(r))), spans)


def test_same_input_same_bytes_from_a_dict_or_an_object(tmp_path):
    r = result()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert write_trace(r, a) == a
    obj = SimpleNamespace(  # a RanksResult-like object: attributes, span and class objects
        **{k: v for k, v in r.items() if k not in ("spans", "classes")},
        classes=[SimpleNamespace(**c) for c in r["classes"]],
        spans=[SimpleNamespace(**s) for s in reversed(r["spans"])],
    )
    write_trace(obj, b)
    assert a.read_bytes() == b.read_bytes() and a.read_text().endswith("]}\n")
    write_trace(r, b)
    assert a.read_bytes() == b.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json"]  # no temporary file left


def test_the_ranks_result_and_its_json_make_the_same_trace_and_figure(tmp_path):
    from dse.training.chakra.ranks_result import RankClassResult, RanksResult, Span

    r = result()
    r["spans"].append(_span(1, "mem", "load", 7, 70))
    res = RanksResult(
        workload="pipe",
        topology=TOPO,
        cost_model="astra-sim",
        scheduler="baseline",
        queue="fifo",
        chunks=1,
        npus=12,
        time_ns=4000.0,
        finish_ns_by_rank=tuple(r["finish_ns_by_rank"]),
        exposed_ns_by_rank=(1500.0,) * 12,
        compute_ns_by_rank=(2500.0,) * 12,
        classes=tuple(RankClassResult(**(c | {"ranks": tuple(c["ranks"])})) for c in r["classes"]),
        spans=tuple(Span(**s) for s in r["spans"]),
    )
    d = json.loads(json.dumps(res.as_dict(spans=True)))
    assert trace_json(trace_events(res)) == trace_json(trace_events(d))
    assert threads(trace_events(d), 2) == ["compute", "CPU", "memory"]
    f = tmp_path / "r.json"
    f.write_text(json.dumps(res.as_dict()))  # without spans, but marked per-rank
    with pytest.raises(InputError, match="no spans"):
        plot_ranks_file(f, tmp_path / "a.png")
    assert draw_ranks_timeline(d, tmp_path / "t.png").read_bytes()[:8] == PNG  # what `dse iterate --plot` does
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "t.png"]


def test_times_a_class_lacks_come_from_the_per_rank_lists():
    r = result()
    r["classes"] = [c["ranks"] for c in r["classes"]]  # bare lists of ranks
    r["finish_ns_by_rank"] = [float(k) for k in range(12)]
    view = ranks_view(r)
    assert [c.finish_ns for c in view.classes.values()] == [0.0, 4.0] and view.classes[1].compute_ns is None


def test_rank_ranges():
    assert rank_ranges([8, 0, 1, 2, 3]) == "0-3,8" and rank_ranges([5]) == "5" and rank_ranges([2, 3]) == "2-3"
    assert rank_ranges(range(0, 1024, 8)) == "0,8,16,24,32,...,1016 (128 ranks)"


def test_unwritable_traces_are_refused_and_nothing_is_written(tmp_path):
    with pytest.raises(InputError, match="no folder"):
        write_trace(result(), tmp_path / "nosuch" / "t.json")
    with pytest.raises(InputError, match="is a directory"):
        write_trace(result(), tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="FIFO"):
        write_trace(result(), fifo)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


@pytest.mark.parametrize(
    "change,words",
    [
        (lambda r: r.pop("spans"), "no spans"),
        (lambda r: r.pop("classes"), "no list of rank classes"),
        (lambda r: r["spans"].append(_span(7, "compute", "x", 0, 1)), "span 11 has class 7"),
        (lambda r: r["spans"].append(_span(0, "compute", "x", 5, 1)), "before its start"),
        (lambda r: r["spans"].append(_span(0, "compute", "x", -1, 1)), "start_ns is -1"),
        (lambda r: r["classes"].append(dict(r["classes"][0])), "class 0 appears twice"),
    ],
)
def test_bad_results_are_one_line(change, words):
    r = result()
    change(r)
    with pytest.raises(InputError, match=words):
        trace_events(r, field="x.json")


def test_plot_data_has_a_panel_per_class_with_the_same_lanes():
    data = ranks_plot_data(result())
    assert [p.title for p in data.panels] == [
        "class 0 (ranks 0-3,8): finish 4.000 us, compute 2.500 us, exposed 1.500 us",
        "class 1 (ranks 4-7,9-11): finish 3.999 us, compute 2.500 us, exposed 1.500 us",
    ]
    lanes = ["compute", "CPU", "communication", "receives", "dim 0 (Ring)", "dim 1 (SW)"]
    assert all([lane.label for lane in p.lanes] == lanes for p in data.panels)
    recv = data.panels[0].lanes[3]
    assert recv.rows == 2 and sorted((b.start, b.end, b.row) for b in recv.bars) == [
        (100, 900, 0),
        (200, 400, 1),
        (900, 1200, 0),
    ]
    assert data.notes == [] and data.panels[0].time_ns == 4000.0
    assert [label for label, _ in data.panels[1].legend] == ["compute", "CPU"]


def test_plot_caps_the_classes_and_says_so():
    data = ranks_plot_data(result(classes=MAX_CLASSES + 3))
    assert len(data.panels) == MAX_CLASSES
    assert data.notes == [
        f"drawing the first {MAX_CLASSES} of {MAX_CLASSES + 3} rank classes (at most {MAX_CLASSES} classes "
        "and 50,000 spans in a figure; the Perfetto trace, --trace, shows them all)"
    ]
    one = ranks_plot_data(result(), max_spans=3)
    assert len(one.panels) == 1 and sum(len(lane.bars) for lane in one.panels[0].lanes) == 3
    assert one.notes[1] == "class 0: drawing its first 3 of 9 spans (up to 20.00 ns)"


def _one_line(code, out, err, *words):
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("dse: error: "), err
    assert all(w in err for w in words), err


def test_plot_timeline_draws_a_per_rank_result(run_cli, tmp_path):
    f, png, svg = tmp_path / "r.json", tmp_path / "t.png", tmp_path / "t.svg"
    f.write_text(json.dumps(result()))
    code, out, err = run_cli("plot", "timeline", str(f), "--out", str(png))
    assert (code, out, err) == (0, f"{png}\n", "") and png.read_bytes()[:8] == PNG
    assert run_cli("plot", "timeline", str(f), "--out", str(svg))[0] == 0
    text = svg.read_text()
    assert "class 1 (ranks 4-7,9-11)" in text and "dim 0 (Ring)" in text and "time (µs)" in text
    f.write_text(json.dumps(result(classes=MAX_CLASSES + 1)))
    code, out, err = run_cli("plot", "timeline", str(f), "--out", str(png))
    assert code == 0 and out.startswith(f"note: drawing the first {MAX_CLASSES} of {MAX_CLASSES + 1}")


def test_plot_timeline_refuses_a_per_rank_result_without_spans(run_cli, tmp_path):
    f = tmp_path / "r.json"
    r = result()
    del r["spans"]
    f.write_text(json.dumps(r))
    _one_line(*run_cli("plot", "timeline", str(f), "--out", str(tmp_path / "a.png")), "no spans", "--timeline")
    f.write_text(json.dumps(result() | {"spans": []}))
    _one_line(*run_cli("plot", "timeline", str(f), "--out", str(tmp_path / "a.png")), "empty list of spans")
    f.write_text(json.dumps(result() | {"spans": [_span(0, "comm", "x", 1, "soon")]}))
    _one_line(*run_cli("plot", "timeline", str(f), "--out", str(tmp_path / "a.png")), "span 0's end_ns is 'soon'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_plot_timeline_still_draws_an_evaluation(run_cli, tmp_path):
    code, out, _ = run_cli("evaluate", TOPO, "--size", "1MiB", "--chunks", "2", "--json", "--timeline")
    f, png = tmp_path / "e.json", tmp_path / "e.png"
    f.write_text(out)
    assert run_cli("plot", "timeline", str(f), "--out", str(png)) == (0, f"{png}\n", "")
    assert png.read_bytes()[:8] == PNG
