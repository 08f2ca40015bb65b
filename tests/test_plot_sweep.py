"""`dse plot sweep`: units and labels (dse.core.quantities), the form picked from the data, each
--kind, the refusals, and the figure's axes read back from matplotlib (Agg).

The CSVs are written here, following the sweep CSV contract of issue 36 (unit suffixes, per-dimension
bandwidth and latency columns, `design` beside the `topology` run)."""

from __future__ import annotations

import csv

import pytest

from dse.core.errors import InputError
from dse.core.quantities import axis_label, quantity
from dse.output.plots import plain_number, sweep_figure
from dse.output.sweep_plot_data import CDF_LABEL, MAX_CATEGORIES, hidden_parameters, sweep_plot_data

BASE = {
    "point": "0",
    "design": "2D",
    "topology": "Ring(4,100,20)_SW(8,50,700)",
    "collective": "all_reduce",
    "size_bytes": "1000000",
    "chunks": "64",
    "scheduler": "themis",
    "queue": "scf",
    "cost_model": "paper",
    "latency_mode": "overlapped",
    "active_chunks": "1",
    "seed": "0",
    "bw0_GBps": "100",
    "bw1_GBps": "50",
    "bw2_GBps": "",  # the contract: a column per dimension of the largest topology, empty where a design has none
    "lat0_ns": "20",
    "lat1_ns": "700",
    "lat2_ns": "",
    "total_bw_GBps": "150",
    "time_ns": "1000000",
    "bw_utilization_pct": "50",
    "algbw_GBps": "1",
    "busbw_GBps": "2",
    "crc": "x",
}


def _rows(*cells: dict) -> list[dict[str, str]]:
    """Rows of BASE with `cells` changed (values as text, as a CSV holds them), points numbered."""
    return [{**BASE, **{k: str(v) for k, v in c.items()}, "point": str(i)} for i, c in enumerate(cells)]


def _split(bw0: int, bw1: int, total: int = 300) -> dict:
    """A bandwidth split of a 3D design: dim 2 takes the rest of `total`."""
    bw2 = total - bw0 - bw1
    return {
        "design": "3D",
        "topology": f"Ring(4,{bw0},20)_SW(8,{bw1},700)_SW(4,{bw2},1700)",
        "bw0_GBps": bw0,
        "bw1_GBps": bw1,
        "bw2_GBps": bw2,
        "lat2_ns": 1700,
        "total_bw_GBps": total,
    }


def _write(tmp_path, rows: list[dict[str, str]], name: str = "r.csv"):
    path = tmp_path / name
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture
def figure():
    """Draw a figure with `sweep_figure`; every one drawn is closed after the test."""
    import matplotlib.pyplot as plt

    figs = []

    def draw(data, **kw):
        fig = sweep_figure(data, **kw)
        fig.canvas.draw()  # tick labels and offsets are computed at draw time
        figs.append(fig)
        return fig

    yield draw
    for fig in figs:
        plt.close(fig)


# --- quantities ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "values", "label", "scale"),
    [
        ("iteration_time_ns", None, "iteration time (ms)", 1e-6),
        ("time_ns", [2e5, 9e5], "collective time (µs)", 1e-3),
        ("time_ns", [2.5e9], "collective time (s)", 1e-9),
        ("lat0_ns", [20, 700], "latency of dim 0 (ns)", 1.0),
        ("bw_utilization_pct", None, "BW utilisation (%)", 1.0),
        ("bw_utilization", None, "BW utilisation (%)", 100.0),  # the old name: a 0-1 fraction
        ("gap", None, "gap to the lower bound (%)", 100.0),
        ("gap_pct", None, "gap to the lower bound (%)", 1.0),
        ("exposed_comm_pct", None, "exposed communication (% of iteration)", 1.0),
        ("bw0_GBps", None, "bandwidth of dim 0 (GB/s)", 1.0),
        ("bw12_GBps", None, "bandwidth of dim 12 (GB/s)", 1.0),
        ("total_bw_GBps", None, "total bandwidth (GB/s)", 1.0),
        ("algbw_GBps", None, "algorithm bandwidth (GB/s)", 1.0),
        ("cost_usd", None, "cost ($)", 1.0),
        ("size_bytes", [2**20, 2**30], "size per NPU (GiB)", 2.0**-30),
        ("size_bytes", [1e6, 5e8], "size per NPU (MB)", 1e-6),
        ("chunks", None, "chunks per collective", 1.0),
        ("seed", None, "seed", 1.0),
        ("point", None, "point", 1.0),
        ("design", None, "design", 1.0),
        ("cost_model", None, "cost model", 1.0),
    ],
)
def test_quantity_of_each_column(column, values, label, scale):
    q = quantity(column, values)
    assert q.axis_label == label and q.scale == pytest.approx(scale)


def test_axis_label_in_a_given_unit_and_the_kinds():
    assert axis_label("iteration_time_ns", "ms") == "iteration time (ms)"
    assert axis_label("iteration_time_ns", "s") == "iteration time (s)"
    assert axis_label("bw_utilization_pct") == "BW utilisation (%)"
    assert (
        axis_label("bw0_GBps") == "bandwidth of dim 0 (GB/s)"
        and axis_label("total_bw_GBps") == "total bandwidth (GB/s)"
    )
    assert quantity("time_ns").show(2.5e6) == pytest.approx(2.5) and quantity("bw_utilization").show(0.5) == 50
    kinds = {c: quantity(c).kind for c in ("time_ns", "gap", "busbw_GBps", "cost_usd", "size_bytes", "chunks", "queue")}
    assert kinds == {
        "time_ns": "time",
        "gap": "percent",
        "busbw_GBps": "bandwidth",
        "cost_usd": "money",
        "size_bytes": "size",
        "chunks": "count",
        "queue": "text",
    }


def test_plain_numbers_never_use_exponents():
    assert [plain_number(v) for v in (0, 250, 0.125, 1e6, 3_107_840.4, 12.3456)] == [
        "0",
        "250",
        "0.125",
        "1,000,000",
        "3,107,840",
        "12.35",
    ]


# --- forms and values ---------------------------------------------------------------------------


def test_the_form_follows_the_x_column():
    rows = _rows({"chunks": 2, "design": "A"}, {"chunks": 4, "design": "B"})
    assert sweep_plot_data(rows, "chunks", "time_ns", hue="design").kind == "line"
    assert sweep_plot_data(rows, "design", "time_ns").kind == "bar"
    assert sweep_plot_data(rows, "seed", "time_ns", hue="design").kind == "line"  # a count is numeric


def test_line_values_in_ms_and_percent_averaged_on_request():
    rows = _rows(
        {"chunks": 4, "seed": 0, "time_ns": 1e6, "bw_utilization_pct": 40},
        {"chunks": 4, "seed": 1, "time_ns": 3e6, "bw_utilization_pct": 60},
        {"chunks": 2, "seed": 0, "time_ns": 5e6, "bw_utilization_pct": 20},
        {"chunks": 2, "seed": 1, "time_ns": 7e6, "bw_utilization_pct": 30},
    )
    with pytest.raises(InputError, match="differ in seed"):
        sweep_plot_data(rows, "chunks", "time_ns")
    data = sweep_plot_data(rows, "chunks", "time_ns", mean=True)
    (line,) = data.panels[""]
    assert line.x == [2, 4] and line.y == [6.0, 2.0] and line.n == [2, 2]  # ns -> ms, x sorted
    assert (data.x_label, data.y_label, data.averaged) == ("chunks per collective", "collective time (ms)", ("seed",))
    data = sweep_plot_data(rows, "chunks", "bw_utilization_pct", hue="seed")
    assert [(s.label, s.y) for s in data.panels[""]] == [("0", [20.0, 40.0]), ("1", [30.0, 60.0])]


def test_an_old_csv_reads_its_fractions_as_percent():
    old = [
        {"point": "0", "topology": "2D-SW_SW", "chunks": "2", "time_ns": "10", "bw_utilization": "0.25", "gap": "0.5"},
        {"point": "1", "topology": "2D-SW_SW", "chunks": "4", "time_ns": "20", "bw_utilization": "0.75", "gap": "0.1"},
    ]
    data = sweep_plot_data(old, "chunks", "bw_utilization")
    assert data.y_label == "BW utilisation (%)" and data.panels[""][0].y == [25.0, 75.0]
    data = sweep_plot_data(old, "chunks", "gap")
    assert data.y_label == "gap to the lower bound (%)" and data.panels[""][0].y == pytest.approx([50.0, 10.0])
    assert sweep_plot_data(old, "chunks", "time_ns").y_label == "collective time (ns)"


def test_line_figure_axes_carry_quantity_and_unit(figure):
    rows = _rows(
        *({"size_bytes": s, "scheduler": sc, "time_ns": t} for s, sc, t in [(2**20, "a", 4e5), (2**21, "a", 8e5)]),
        *({"size_bytes": s, "scheduler": sc, "time_ns": t} for s, sc, t in [(2**20, "b", 2e5), (2**21, "b", 3e5)]),
    )
    rows = [{**r, "queue": "fifo" if r["scheduler"] == "a" else "scf"} for r in rows]  # a queue that goes with it
    data = sweep_plot_data(rows, "size_bytes", "time_ns", hue="scheduler")
    fig = figure(data, logx=True)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "size per NPU (MiB)" and ax.get_ylabel() == "collective time (µs)"
    assert [list(line.get_xdata()) for line in ax.lines] == [[1.0, 2.0], [1.0, 2.0]]
    assert [list(line.get_ydata()) for line in ax.lines] == [[400.0, 800.0], [200.0, 300.0]]
    legend = ax.get_legend()
    assert legend.get_title().get_text() == "scheduler" and [t.get_text() for t in legend.get_texts()] == ["a", "b"]


def test_ticks_are_plain_numbers_without_an_offset(figure):
    rows = _rows(*({"chunks": c, "time_ns": 1e6, "cost": 1_000_000 + 500_000 * c} for c in range(1, 5)))
    rows = [{**{k: v for k, v in r.items() if k != "cost"}, "cost_usd": r["cost"]} for r in rows]
    fig = figure(sweep_plot_data(rows, "chunks", "cost_usd"))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ax.get_ylabel() == "cost ($)" and ax.yaxis.get_offset_text().get_text() == ""
    assert labels and all("e" not in t for t in labels) and any("," in t for t in labels)


def test_bars_group_by_hue_and_lie_down_for_long_names(figure):
    cells = [
        {"design": d, "scheduler": s, "queue": q, "time_ns": t}
        for d, s, q, t in [
            ("A", "baseline", "fifo", 3e6),
            ("A", "themis", "scf", 2e6),
            ("B", "baseline", "fifo", 5e6),
            ("B", "themis", "scf", 4e6),
        ]
    ]
    data = sweep_plot_data(_rows(*cells), "design", "time_ns", hue="scheduler")
    assert data.kind == "bar" and data.categories == ["A", "B"]
    assert [(s.label, s.x, s.y) for s in data.panels[""]] == [
        ("baseline", ["A", "B"], [3.0, 5.0]),
        ("themis", ["A", "B"], [2.0, 4.0]),
    ]
    ax = figure(data).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["A", "B"] and ax.get_ylabel() == "collective time (ms)"
    assert sorted(round(p.get_height(), 9) for p in ax.patches) == [2.0, 3.0, 4.0, 5.0]
    long = [{**c, "design": c["design"] + "-Ring_FC_Ring_SW-with-a-long-name"} for c in cells]
    ax = figure(sweep_plot_data(_rows(*long), "design", "time_ns", hue="scheduler")).axes[0]
    assert ax.get_xlabel() == "collective time (ms)" and ax.get_ylabel() == "design"  # horizontal bars
    assert sorted(round(p.get_width(), 9) for p in ax.patches) == [2.0, 3.0, 4.0, 5.0]


def test_a_numeric_x_as_bars_is_sorted_and_shown_in_its_unit():
    rows = _rows({"size_bytes": 4_000_000, "time_ns": 2e6}, {"size_bytes": 1_000_000, "time_ns": 1e6})
    data = sweep_plot_data(rows, "size_bytes", "time_ns", kind="bar")
    assert data.categories == ["1", "4"] and data.x_label == "size per NPU (MB)" and data.panels[""][0].y == [1.0, 2.0]


def test_scatter_draws_every_row_with_a_colour_scale_for_a_numeric_hue(figure):
    splits = [(b0, b1) for b0 in (25, 50, 75) for b1 in (25, 50, 75, 100)]
    rows = _rows(*({**_split(b0, b1), "time_ns": 1e6 * (b0 + b1)} for b0, b1 in splits))
    data = sweep_plot_data(rows, "bw0_GBps", "time_ns", hue="bw1_GBps", kind="scatter")
    assert data.colour_scale is False  # 4 values: a legend
    assert [s.label for s in data.panels[""]] == ["25", "50", "75", "100"]
    many = [(b0, b1) for b0 in (25, 50) for b1 in range(25, 250, 25)]  # 9 values of bw1: a colour scale
    rows = _rows(*({**_split(b0, b1), "time_ns": 1e6 * (b0 + b1)} for b0, b1 in many))
    data = sweep_plot_data(rows, "bw0_GBps", "time_ns", hue="bw1_GBps", kind="scatter")
    (s,) = data.panels[""]
    assert data.colour_scale and len(s.x) == len(many) and s.c == [float(b1) for _, b1 in many]
    assert s.y == [float(b0 + b1) for b0, b1 in many]  # ms
    fig = figure(data)
    ax, bar = fig.axes
    assert (ax.get_xlabel(), ax.get_ylabel(), bar.get_ylabel()) == (
        "bandwidth of dim 0 (GB/s)",
        "collective time (ms)",
        "bandwidth of dim 1 (GB/s)",
    )
    assert len(ax.collections[0].get_offsets()) == len(many)


def test_cdf_is_the_share_of_points_at_or_below_each_value(figure):
    cells = [("a", 3e6), ("a", 1e6), ("a", 2e6), ("b", 5e6), ("b", 4e6)]
    rows = _rows(*({"scheduler": s, "time_ns": t, "seed": i} for i, (s, t) in enumerate(cells)))
    data = sweep_plot_data(rows, None, "time_ns", hue="scheduler", kind="cdf")
    a, b = data.panels[""]
    assert a.x == [1.0, 2.0, 3.0] and a.y == pytest.approx([100 / 3, 200 / 3, 100])
    assert b.x == [4.0, 5.0] and b.y == [50.0, 100.0]
    ax = figure(data).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("collective time (ms)", CDF_LABEL)
    assert list(ax.lines[0].get_xdata()) == [1.0, 1.0, 2.0, 3.0]  # the step starts at 0 % before the least
    assert list(ax.lines[0].get_ydata()) == pytest.approx([0, 100 / 3, 200 / 3, 100])


# --- which columns a refusal names --------------------------------------------------------------


def test_a_bandwidth_sweep_names_the_free_dimensions_not_what_follows():
    rows = _rows(*(_split(b0, b1) for b0 in (50, 100) for b1 in (50, 100, 150)))
    assert hidden_parameters(rows, ["bw0_GBps"], ["time_ns"]) == ["bw1_GBps", "bw2_GBps"]  # not topology
    with pytest.raises(InputError) as e:
        sweep_plot_data(rows, "bw0_GBps", "time_ns")
    msg = str(e.value)
    assert "bw1_GBps, bw2_GBps" in msg and "topology" not in msg and "total_bw" not in msg
    assert "--kind scatter" in msg and "--mean" in msg and "--hue" in msg
    assert sweep_plot_data(rows, "bw0_GBps", "time_ns", hue="bw1_GBps").averaged == ()  # bw2 follows
    assert sweep_plot_data(rows, "bw0_GBps", "time_ns", kind="scatter").averaged == ()  # every row drawn


def test_columns_that_a_design_fixes_never_count():
    d2 = {"design": "2D"}
    d3 = _split(100, 100)
    rows = _rows(*({**d, "chunks": c, "time_ns": 1e6 * c} for d in (d2, d3) for c in (2, 4)))
    assert sweep_plot_data(rows, "design", "time_ns", kind="bar", mean=True).averaged == ("chunks",)
    with pytest.raises(InputError, match=r"differ in design, which"):
        sweep_plot_data(rows, "chunks", "time_ns")
    assert sweep_plot_data(rows, "chunks", "time_ns", hue="design").averaged == ()


def test_a_queue_that_goes_with_its_scheduler_is_not_named():
    rows = _rows(
        {"scheduler": "baseline", "queue": "fifo", "chunks": 2},
        {"scheduler": "themis", "queue": "scf", "chunks": 2},
    )
    with pytest.raises(InputError, match=r"differ in scheduler, which") as e:
        sweep_plot_data(rows, "chunks", "time_ns")
    assert "queue" not in str(e.value)


def test_without_a_design_column_the_topology_is_a_parameter():
    rows = [{k: v for k, v in r.items() if k != "design"} for r in _rows({"topology": "A"}, {"topology": "B"})]
    with pytest.raises(InputError, match="differ in topology"):
        sweep_plot_data(rows, "chunks", "time_ns")


# --- the command line ---------------------------------------------------------------------------


def _one_line(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (code, out, err)
    for n in needles:
        assert n in err, (n, err)


def test_every_kind_writes_a_figure(run_cli, tmp_path):
    cells = [(b0, b1, s, c) for b0 in (50, 100) for b1 in (50, 100) for s in ("a", "b") for c in (2, 4, 8)]
    rows = _rows(
        *({**_split(b0, b1), "scheduler": s, "chunks": c, "time_ns": 1e6 * (c + b0 / b1)} for b0, b1, s, c in cells)
    )
    csv_path = _write(tmp_path, rows)
    runs = {
        "line": ["--x", "chunks", "--y", "time_ns", "--hue", "scheduler,bw0_GBps,bw1_GBps"],
        "bar": ["--x", "scheduler", "--y", "bw_utilization_pct", "--mean"],
        "scatter": ["--kind", "scatter", "--x", "bw0_GBps", "--y", "bw_utilization_pct", "--hue", "scheduler"],
        "cdf": ["--kind", "cdf", "--y", "time_ns", "--hue", "scheduler", "--facet", "bw0_GBps"],
        "svg": ["--kind", "scatter", "--x", "total_bw_GBps", "--y", "time_ns"],
    }
    for name, args in runs.items():
        out = tmp_path / f"{name}.{'svg' if name == 'svg' else 'png'}"
        code, stdout, err = run_cli("plot", "sweep", str(csv_path), *args, "--out", str(out))
        assert code == 0 and stdout.splitlines()[-1] == str(out), (name, stdout, err)
        head = out.read_bytes()[:5]
        assert head == (b"<?xml" if name == "svg" else b"\x89PNG\r"), name


def test_more_than_50_categories_are_refused_in_one_line(run_cli, tmp_path):
    n = MAX_CATEGORIES + 1
    rows = _rows(*({**_split(10 + i, 50), "design": f"D{i}"} for i in range(n)))
    csv_path = _write(tmp_path, rows)
    png = tmp_path / "f.png"
    _one_line(
        *run_cli("plot", "sweep", str(csv_path), "--x", "topology", "--y", "time_ns", "--out", str(png)),
        f"{n} categories of topology",
        "--kind scatter",
    )
    _one_line(
        *run_cli("plot", "sweep", str(csv_path), "--x", "design", "--y", "time_ns", "--kind", "bar", "--out", str(png)),
        "categories",
    )
    assert not png.exists()
    code, _, _ = run_cli(
        "plot", "sweep", str(csv_path), "--x", "bw0_GBps", "--y", "time_ns", "--kind", "scatter", "--out", str(png)
    )
    assert code == 0 and png.exists()


def test_bad_requests_are_one_line_and_write_nothing(run_cli, tmp_path):
    rows = _rows(*({"design": f"D{i % 3}", "chunks": 2 ** (i % 4), "seed": i} for i in range(24)))
    csv_path = _write(tmp_path, rows)
    png = tmp_path / "f.png"

    def bad(*args: str, needles: tuple[str, ...]) -> None:
        _one_line(*run_cli("plot", "sweep", str(csv_path), *args, "--out", str(png)), *needles)
        assert not png.exists()

    bad("--kind", "cdf", "--x", "chunks", "--y", "time_ns", needles=("--x", "cdf"))
    bad("--y", "time_ns", needles=("--x: missing", "--kind cdf"))
    bad("--kind", "line", "--x", "design", "--y", "time_ns", needles=("'D0'", "not a number", "--kind bar"))
    bad("--kind", "scatter", "--x", "design", "--y", "time_ns", needles=("not a number",))
    bad("--kind", "scatter", "--x", "chunks", "--y", "time_ns", "--mean", needles=("--mean", "every row"))
    bad("--x", "design", "--y", "time_ns", "--mean", "--logx", needles=("--logx", "bar"))
    bad("--x", "chunks", "--y", "time_ns", "--hue", "seed", needles=("24 values of seed", "colour scale"))
    bad("--kind", "cdf", "--y", "time_ns", "--facet", "seed", needles=("24 panels",))
    bad("--x", "chunks", "--y", "design", needles=("--y", "not a number"))
    bad("--x", "chunks", "--y", "nope", needles=("--y: no column 'nope'",))
    bad("--x", "chunks", "--y", "", needles=("--y", "names 0 columns"))
    bad("--x", "chunks,seed", "--y", "time_ns", needles=("--x", "names 2 columns"))
    bad("--x", "chunks", "--y", "bw_utilization", needles=("this CSV names it bw_utilization_pct",))  # an old name
    bad("--x", "chunks", "--y", "time_ns", "--kind", "pie", needles=("pie",))


def test_rows_without_the_x_dimension_are_left_out_with_a_note(run_cli, tmp_path):
    csv_path = _write(tmp_path, _rows({"chunks": 2}, {**_split(100, 100), "chunks": 2, "time_ns": 2e6}))
    png = tmp_path / "f.png"
    code, out, _ = run_cli(
        "plot", "sweep", str(csv_path), "--kind", "scatter", "--x", "bw2_GBps", "--y", "time_ns", "--out", str(png)
    )
    assert code == 0 and out.splitlines() == [
        "note: 1 row(s) with an empty bw2_GBps or time_ns cell are left out",
        str(png),
    ]


def test_long_category_labels_are_wrapped_between_dimensions_or_at_spaces():
    from dse.output.plots import wrap_label

    assert wrap_label("2D-SW_SW") == "2D-SW_SW"
    assert wrap_label("Ring_FC_Ring_SW 4x8x4x32 375,175,150,100 20,700,700,1700") == (
        "Ring_FC_Ring_SW 4x8x4x32\n375,175,150,100 20,700,700,1700"
    )
    notation = "Ring(4,375,20,links=2)_FC(8,175,700,links=7)_Ring(4,150,700,links=6)_SW(8,100,1700,links=1)"
    assert wrap_label(notation).split("\n") == [
        "Ring(4,375,20,links=2)_",
        "FC(8,175,700,links=7)_",
        "Ring(4,150,700,links=6)_",
        "SW(8,100,1700,links=1)",
    ]
    assert wrap_label(notation).replace("\n", "") == notation


def test_a_time_x_cost_column_reads_in_ms_dollars():
    """A study report's time x cost column (already in ms·$) is one quantity, not a cost in $."""
    q = quantity("iteration_time_x_cost_themis_scf_ms_usd")
    assert (q.unit, q.scale) == ("ms·$", 1.0)
    assert axis_label("iteration_time_x_cost_themis_scf_ms_usd", q.unit).endswith("(ms·$)")
    assert quantity("cost_usd").unit == "$"
