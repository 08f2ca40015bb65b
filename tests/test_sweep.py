"""Sweeps: expansion, values equal to evaluate(), resume after kill -9, repair, dask, bad input, plots."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dse
from dse.explore.sweep.sweeps import load_sweep, parse_sweep, read_rows, run_sweep

ROOT = Path(__file__).resolve().parents[1]


def _write(tmp_path, text, name="s.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_product_expansion_order_and_pairs():
    s = parse_sweep(
        {
            "topology": ["2D-SW_SW", "3D-FC_Ring_SW"],
            "size": [1000000, "2MB"],
            "chunks": [4, 8],
            "scheduler": ["baseline", "themis"],
            "queue": "fifo",
        }
    )
    assert len(s.points) == 16
    assert [p.topology for p in s.points[:8]] == ["2D-SW_SW"] * 8
    assert s.points[0].size_bytes == 1000000 and s.points[8 // 2].size_bytes == 2000000
    assert (s.points[0].chunks, s.points[0].scheduler, s.points[1].scheduler) == (4, "baseline", "themis")
    s2 = parse_sweep(
        {"topology": "2D-SW_SW", "size": "1MB", "schedules": ["baseline+fifo", {"scheduler": "themis", "queue": "scf"}]}
    )
    assert [(p.scheduler, p.queue) for p in s2.points] == [("baseline", "fifo"), ("themis", "scf")]


def test_shipped_studies_expand():
    assert len(load_sweep(ROOT / "studies/sweeps/chunk_sensitivity.toml").points) == 64
    sizes = load_sweep(ROOT / "studies/sweeps/sizes.toml").points
    assert len({p.size_bytes for p in sizes}) == 19 and len({p.topology for p in sizes}) == 6
    assert min(p.size_bytes for p in sizes) == 10**8 and max(p.size_bytes for p in sizes) == 10**9
    designs = load_sweep(ROOT / "studies/sweeps/designs_gpt3.toml")
    assert len(designs.points) == 6 and designs.iterations
    assert {sum(row[8:12]) for row in designs.params} == {800.0}  # bw0..bw3: one total, three splits
    assert len({row[0] for row in designs.params}) == 3
    splits = load_sweep(ROOT / "studies/sweeps/bw_splits_4d.toml")
    assert len(splits.points) == 969 and {row[0] for row in splits.params} == {"4D-Ring_FC_Ring_SW"}


def _check_values(path, sweep):
    rows = read_rows(path)
    assert [int(r["point"]) for r in rows] == list(range(len(sweep.points)))
    for r, p in zip(rows, sweep.points):
        res = dse.evaluate(
            p.topology,
            collective=p.collective,
            size=p.size_bytes,
            chunks=p.chunks,
            scheduler=p.scheduler,
            queue=p.queue,
            cost_model=p.cost_model,
            seed=p.seed,
        )
        assert float(r["time_ns"]) == res.time_ns and float(r["bw_utilization_pct"]) == 100 * res.bw_utilization
        assert float(r["busbw_GBps"]) == res.busbw_GBps


def test_csv_equals_evaluate_and_rerun_adds_nothing(tmp_path):
    s = parse_sweep(
        {
            "topology": "3D-FC_Ring_SW",
            "size": ["10MB", "20MB"],
            "chunks": [4, 16],
            "schedules": ["baseline+fifo", "themis+scf", "random+fifo"],
            "seed": [0, 1],
        }
    )
    out = tmp_path / "r.csv"
    c = run_sweep(s, out, jobs=2, batch=3)
    assert c["evaluated"] == 24
    _check_values(out, s)
    assert run_sweep(s, out, jobs=1)["evaluated"] == 0 and len(read_rows(out)) == 24


def test_damaged_last_line_is_repaired(tmp_path):
    s = parse_sweep({"topology": "2D-SW_SW", "size": "1MB", "chunks": [1, 2, 4, 8, 16]})
    out = tmp_path / "r.csv"
    run_sweep(s, out, jobs=1)
    data = out.read_bytes()
    lines = data.splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:-2]) + lines[-2][:7])  # lose a row and cut the next one
    c = run_sweep(s, out, jobs=1)
    assert c["evaluated"] == 2 and c["done_before"] == 3
    _check_values(out, s)
    assert out.read_text().count("point,") == 1


def test_foreign_csv_is_refused(tmp_path, run_cli):
    f = _write(tmp_path, '[sweep]\ntopology = "2D-SW_SW"\nsize = "1MB"\nchunks = [2, 4]\n')
    out = tmp_path / "r.csv"
    out.write_text("a,b\n1,2\n")
    code, _, err = run_cli("sweep", str(f), "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and "other columns" in err
    out.unlink()
    assert run_cli("sweep", str(f), "--out", str(out))[0] == 0
    g = _write(tmp_path, '[sweep]\ntopology = "2D-SW_SW"\nsize = "2MB"\nchunks = [2, 4]\n', "g.toml")
    code, _, err = run_cli("sweep", str(g), "--out", str(out))
    assert code == 2 and "not a point of this sweep" in err


def test_resume_after_kill_9(tmp_path):
    f = _write(
        tmp_path,
        '[sweep]\ntopology = ["4D-Ring_FC_Ring_SW", "3D-SW_SW_SW_hetero"]\n'
        'size = ["100MB", "200MB", "300MB", "400MB", "500MB"]\nchunks = [64, 128, 256, 512]\n'
        'schedules = ["themis+scf", "themis+fifo", "baseline+fifo", "round_robin+scf"]\nseed = [0, 1, 2]\n',
    )
    out = tmp_path / "r.csv"
    cmd = [sys.executable, "-m", "dse", "sweep", str(f), "--out", str(out), "--jobs", "2", "--batch", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.time() + 60
    while time.time() < deadline and (not out.exists() or out.read_text().count("\n") < 6):
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    n_before = out.read_text().count("\n") - 1
    assert 5 <= n_before < 480, "the sweep should be killed mid-way"
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    s = load_sweep(f)
    rows = read_rows(out)
    assert len(rows) == len(s.points) == 480
    sample = parse_sweep(
        {"topology": "4D-Ring_FC_Ring_SW", "size": "100MB", "chunks": 64, "schedules": ["themis+scf"], "seed": 0}
    ).points[0]
    assert rows[0]["point"] == "0" and sample == s.points[0]
    assert float(rows[0]["time_ns"]) == dse.evaluate("4D-Ring_FC_Ring_SW", size="100MB", chunks=64).time_ns


def test_dask_backend_on_local_cluster(tmp_path):
    distributed = pytest.importorskip("distributed", reason="dask[distributed] not installed: pip install 'dse[dask]'")
    s = parse_sweep(
        {"topology": "2D-SW_SW", "size": ["1MB", "2MB"], "chunks": [2, 4], "schedules": ["baseline+fifo", "themis+scf"]}
    )
    try:
        cluster = distributed.LocalCluster(
            n_workers=1, processes=False, host="127.0.0.1", protocol="tcp://", dashboard_address=None
        )
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"cannot start a dask LocalCluster here: {e}")
    with cluster:
        out = tmp_path / "d.csv"
        run_sweep(s, out, backend="dask", scheduler_address=cluster.scheduler_address)
    _check_values(out, s)


@pytest.mark.parametrize(
    "text, word",
    [
        ("[sweep\ntopology = 1", "not valid TOML"),
        ('[sweep]\ntopology = "2D-SW_SW"\nsize = "1MB"\nchunk = 4\n', "sweep.chunk"),
        ('[sweep]\ntopology = "2D-SW_SW"\nsize = []\n', "sweep.size"),
        ('[sweep]\ntopology = "2D-SW_SW"\nsize = "1MB"\nscheduler = ["themis", "nope"]\n', "sweep.scheduler"),
        ('[sweep]\ntopology = "Nope"\nsize = "1MB"\n', "sweep.topology"),
        ('[sweep]\ntopology = "2D-SW_SW"\nsize = "1XB"\n', "sweep.size"),
    ],
)
def test_bad_sweep_files_exit_2_one_line_no_csv(tmp_path, run_cli, text, word):
    f = _write(tmp_path, text)
    out = tmp_path / "r.csv"
    code, _, err = run_cli("sweep", str(f), "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and word in err and "Traceback" not in err
    assert not out.exists()


def test_bounds_columns(tmp_path):
    s = parse_sweep(
        {
            "topology": "2D-SW_SW",
            "size": "1MB",
            "chunks": [2, 4],
            "schedules": ["baseline+fifo", "themis+scf"],
            "bounds": True,
            "bounds_node_limit": 100,
        }
    )
    out = tmp_path / "b.csv"
    run_sweep(s, out, jobs=1)
    rows = read_rows(out)
    for r in rows:
        assert float(r["time_ns"]) >= float(r["bound_ns"]) * (1 - 1e-9)
        assert float(r["gap_pct"]) == pytest.approx(100 * (float(r["time_ns"]) / float(r["bound_ns"]) - 1))


def test_plot_writes_png(tmp_path, run_cli):
    s = parse_sweep(
        {
            "topology": ["2D-SW_SW", "3D-FC_Ring_SW"],
            "size": "1MB",
            "chunks": [2, 4, 8],
            "schedules": ["baseline+fifo", "themis+scf"],
        }
    )
    out = tmp_path / "r.csv"
    run_sweep(s, out, jobs=1)
    from dse.output.plots import sweep_plot_data

    data = sweep_plot_data(read_rows(out), "chunks", "bw_utilization_pct", "scheduler", "design")
    assert list(data.panels) == ["2D-SW_SW", "3D-FC_Ring_SW"] and data.panels["2D-SW_SW"][0].x == [2, 4, 8]
    png = tmp_path / "fig.png"
    code, _, err = run_cli(
        "plot",
        "sweep",
        str(out),
        "--x",
        "chunks",
        "--y",
        "bw_utilization_pct",
        "--hue",
        "scheduler",
        "--facet",
        "design",
        "--out",
        str(png),
    )
    assert code == 0 and png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    code, _, err = run_cli("plot", "sweep", str(out), "--x", "nope", "--y", "bw_utilization_pct", "--out", str(png))
    assert code == 2 and "nope" in err
