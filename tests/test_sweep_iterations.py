"""Sweeps over training iterations (dse.explore.sweep.iterations): rows equal `iterate`, workloads in
every form (bundled, LIBRA's, generator, a file beside the sweep, a Chakra trace), placements, the
expansion order, the CSV's columns and units, resume after kill -9, and every refusal."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dse.explore.sweep.file import parse_sweep
from dse.explore.sweep.sweeps import columns, load_sweep, read_rows, run_sweep
from dse.training.iteration import iterate
from dse.training.placement_read import load_placement, with_placement
from dse.training.workload_load import load_workload

ROOT = Path(__file__).resolve().parents[1]
T = "Ring(4,100,500)_FC(8,100,500)_SW(4,50,1000)"  # 4 x 8 leading: tiny_hybrid's group of 32 fits
T2 = "Ring(4,200,500)_SW(8,50,1000)"
T3 = "Ring(4,150,500)_FC(8,80,500)_SW(8,50,1000)"
GPT3_SHAPE = "Ring_FC_Ring_SW 4x8x4x32 375,175,150,100 20,700,700,1700"
PLACEMENT = "[placement]\nfwd = [4, 0, 0]\nig = [4, 0, 0]\nwg = [0, 8, 4]\n"


def _folder(tmp_path, sweep_text, name="s.toml"):
    """A sweep file in cfg/ with tiny_hybrid and a placement beside it; returns its path."""
    cfg = tmp_path / "cfg"
    cfg.mkdir(exist_ok=True)
    shutil.copy(ROOT / "workloads" / "tiny_hybrid.toml", cfg / "tiny.toml")
    (cfg / "place.toml").write_text(PLACEMENT)
    (cfg / name).write_text(sweep_text)
    return cfg / name


def _iterate(r):
    """What `dse iterate` gives for a CSV row's parameters."""
    wl = load_workload(r["workload"])
    if r["placement"]:
        wl = with_placement(wl, load_placement(r["placement"]))
    return iterate(
        wl,
        r["topology"],
        scheduler=r["scheduler"],
        queue=r["queue"],
        cost_model=r["cost_model"],
        chunks=int(r["chunks"]),
    )


def test_rows_equal_iterate_for_every_workload_form(tmp_path, monkeypatch):
    f = _folder(
        tmp_path,
        "[sweep]\n"
        f'topology = ["{T}"]\n'
        'workload = ["tiny.toml", "microAllReduce", "transformer:layers=2,mp=4", '
        f'"{ROOT}/workloads/chakra/a_ar1g"]\n'
        'schedules = ["baseline+fifo", "themis+scf", "ideal+scf"]\n'
        "chunks = 16\n",
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the file beside the sweep is read from any folder
    s = load_sweep(os.path.relpath(f))
    out = tmp_path / "r.csv"
    assert run_sweep(s, out)["evaluated"] == 4 * 3
    rows = read_rows(out)
    assert [r["workload"] for r in rows[::3]] == [
        os.path.join("..", "cfg", "tiny.toml"),
        "microAllReduce",
        "transformer:layers=2,mp=4",
        f"{ROOT}/workloads/chakra/a_ar1g",
    ]
    assert [r["scheduler"] for r in rows[:3]] == ["baseline", "themis", "ideal"]
    for r in rows:
        it = _iterate(r)
        assert float(r["iteration_time_ns"]) == it.time_ns and float(r["compute_ns"]) == it.compute_ns
        assert float(r["comm_ns"]) == it.comm_ns and float(r["exposed_comm_ns"]) == it.exposed_comm_ns
        assert float(r["exposed_comm_pct"]) == pytest.approx(100 * it.exposed_comm_ns / it.time_ns, rel=1e-15)
        assert float(r["bw_utilization_pct"]) == 100 * it.bw_utilization
        assert 0 <= float(r["exposed_comm_pct"]) <= 100 and 0 < float(r["bw_utilization_pct"]) <= 100
        assert r["design"] == r["topology"] == T and r["placement"] == "" and r["chunks"] == "16"
    # Themis does not lose to the baseline, and 100 % bandwidth to neither, on the tiny workload
    base, themis, ideal = (float(r["iteration_time_ns"]) for r in rows[:3])
    assert ideal <= themis <= base


def test_placements_bundled_libra_workloads_and_the_expansion_order(tmp_path):
    f = _folder(
        tmp_path,
        f'[sweep]\ntopology = ["{T}", "{T3}"]\nbw0 = [100, 400]\nworkload = "tiny.toml"\n'
        'placement = ["place.toml"]\nchunks = [4, 8]\nschedules = ["baseline+fifo", "themis+scf"]\n',
    )
    s = load_sweep(f)
    ps = s.points
    assert len(ps) == 2 * 2 * 2 * 2
    # topology, then its bw0, then chunks, then the schedule (the last fastest)
    assert [p.chunks for p in ps[:4]] == [4, 4, 8, 8] and [p.scheduler for p in ps[:2]] == ["baseline", "themis"]
    assert [row[0] for row in s.params] == [T] * 8 + [T3] * 8
    assert [float(row[8]) for row in s.params[::4]] == [100.0, 400.0, 100.0, 400.0]  # bw0_GBps
    assert {p.placement for p in ps} == {os.path.relpath(f.parent / "place.toml")}
    out = tmp_path / "r.csv"
    run_sweep(s, out, jobs=2)
    rows = read_rows(out)
    for r in rows[:4] + rows[-2:]:
        assert float(r["iteration_time_ns"]) == _iterate(r).time_ns
    # LIBRA's GPT-3, bundled, on the shape its placement needs
    g = parse_sweep({"topology": GPT3_SHAPE, "workload": "libra_gpt_3_4d", "scheduler": "themis"})
    run_sweep(g, tmp_path / "g.csv")
    (r,) = read_rows(tmp_path / "g.csv")
    assert float(r["iteration_time_ns"]) == iterate("libra_gpt_3_4d", GPT3_SHAPE).time_ns
    assert [float(r[f"bw{k}_GBps"]) for k in range(4)] == [375.0, 175.0, 150.0, 100.0]
    assert float(r["total_bw_GBps"]) == 800.0 and r["lat3_ns"] == "1700.0"


def test_the_iteration_csv_columns(tmp_path):
    s = parse_sweep({"topology": [T, T2], "workload": "microAllReduce"})
    assert columns(s) == (
        "point", "design", "topology", "workload", "placement", "chunks", "scheduler", "queue", "cost_model",
        "bw0_GBps", "bw1_GBps", "bw2_GBps", "lat0_ns", "lat1_ns", "lat2_ns", "total_bw_GBps",
        "iteration_time_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "exposed_comm_pct", "bw_utilization_pct",
    )  # fmt: skip
    out = tmp_path / "r.csv"
    run_sweep(s, out)
    r2 = read_rows(out)[1]
    assert (r2["bw2_GBps"], r2["lat2_ns"], r2["total_bw_GBps"]) == ("", "", "250.0")
    assert out.read_text().splitlines()[0].endswith(",bw_utilization_pct,crc")


def test_an_iteration_sweep_resumes_after_kill_9_without_doubling(tmp_path):
    """Killed after some rows, then run twice: one row per point, each equal to an uninterrupted run's."""
    f = tmp_path / "s.toml"
    bws = ", ".join(str(50 + k) for k in range(200))
    f.write_text(f'[sweep]\ntopology = "{GPT3_SHAPE}"\nbw3 = [{bws}]\nworkload = "libra_gpt_3_4d"\n')
    out = tmp_path / "r.csv"
    cmd = [sys.executable, "-m", "dse", "sweep", str(f), "--out", str(out), "--jobs", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.time() + 60
    while time.time() < deadline and (not out.exists() or out.read_text().count("\n") < 4):
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = out.read_text().count("\n") - 1
    assert 3 <= before < 200, "the sweep should be killed mid-way"
    for _ in range(2):
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("200 points, 200 already there, 0 evaluated")
    whole = tmp_path / "whole.csv"
    run_sweep(load_sweep(f), whole)
    assert sorted(out.read_text().splitlines()) == sorted(whole.read_text().splitlines())


REFUSED = [
    ('workload = "microAllReduce"\nsize = "1MB"', "sweep.size: does not apply to a training iteration"),
    ('workload = "microAllReduce"\ncollective = "all_gather"', "sweep.collective: does not apply"),
    ('workload = "microAllReduce"\nseed = [0, 1]', "sweep.seed: does not apply"),
    ('workload = "microAllReduce"\nbounds = true', "sweep.bounds: does not apply"),
    ('workload = "microAllReduce"\nlatency_mode = "serial"', "sweep.latency_mode: does not apply"),
    ('size = "1MB"\nplacement = "place.toml"', "sweep.placement: given without workload"),
    ('workload = "nosuch.toml"', "no such file"),
    ('workload = "not_a_bundled_name"', "no such file 'not_a_bundled_name'"),
    ('workload = "microAllReduce"\nplacement = "nosuch.toml"', "nosuch.toml"),
    ('workload = "tiny.toml"\nplacement = "bad.toml"', "placement"),
    (f'workload = "{ROOT}/workloads/chakra/a_ar1g"\nplacement = "place.toml"', "a Chakra trace"),
    ('workload = ["microAllReduce", "libra_gpt_3_4d"]', "workload 'libra_gpt_3_4d' on topology"),
    ('workload = "tiny.toml"\nplacement = "place.toml"\ntopology = ["T", "2D-SW_SW"]', "on topology '2D-SW_SW'"),
    ('workload = "microAllReduce"\nscheduler = "fixed"', "sweep.scheduler"),
    ('workload = "microAllReduce"\nschedules = ["ideal+nope"]', "sweep.schedules"),
    ("workload = []", "sweep.workload: empty list"),
    ("workload = 5", "sweep.workload: 5"),
]


@pytest.mark.parametrize("keys, message", REFUSED)
def test_refusals_are_one_line_exit_2_and_write_nothing(tmp_path, run_cli, keys, message):
    if "topology" not in keys:
        keys = f'topology = "T"\n{keys}'
    text = keys.replace('"T"', f'"{T}"')
    f = _folder(tmp_path, f"[sweep]\n{text}\n")
    (f.parent / "bad.toml").write_text("[placement]\nfwd = [3, 0, 0]\nig = [4, 0, 0]\nwg = [0, 8, 4]\n")
    out = tmp_path / "r.csv"
    code, stdout, err = run_cli("sweep", str(f), "--out", str(out))
    assert code == 2 and stdout == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err
    assert not out.exists()
