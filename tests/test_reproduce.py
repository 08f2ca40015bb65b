"""`dse reproduce themis --quick`: every file, the right columns, real figures, and resuming."""

import csv

from dse.reproduce import PAPER_PRESETS, summarize


def _header(path):
    with open(path, newline="") as f:
        return next(csv.reader(f))


def test_quick_reproduction_writes_everything_and_resumes(tmp_path, run_cli):
    out = tmp_path / "rep"
    code, text, err = run_cli("reproduce", "themis", "--quick", "--out", str(out))
    assert code == 0, err
    for name in ("single_allreduce.csv", "chunks.csv", "end_to_end.csv", "summary.md", "utilization.png", "chunks.png",
                 "timeline.png"):
        assert (out / name).exists(), name
    for name in ("utilization.png", "chunks.png", "timeline.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    need = {"topology", "size_bytes", "scheduler", "queue", "time_ns", "bw_utilization", "ideal_ns", "bound_ns", "gap"}
    assert need <= set(_header(out / "single_allreduce.csv"))
    assert need | {"chunks"} <= set(_header(out / "chunks.csv"))
    with open(out / "single_allreduce.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 3 * 4 and {r["topology"] for r in rows} == set(PAPER_PRESETS[:2])
    for r in rows:  # every schedule is at or above the bound, which is at or above the ideal
        assert float(r["ideal_ns"]) <= float(r["bound_ns"]) * (1 + 1e-9)
        assert float(r["bound_ns"]) <= float(r["time_ns"]) * (1 + 1e-9)
    summary = (out / "summary.md").read_text()
    assert "56.31" in summary and "themis+scf" in summary and "Chunk sensitivity" in summary
    assert "Training iterations" in summary and "ResNet-152" in summary
    # a re-run resumes: nothing is evaluated again
    code, text, _ = run_cli("reproduce", "themis", "--quick", "--out", str(out))
    assert code == 0 and "0 evaluated now" in text and "24 already done" in text


def test_summary_means():
    rows = []
    for size, (tb, tt) in {1: (2.0, 1.0), 2: (4.0, 1.0)}.items():
        rows.append({"topology": "T", "size_bytes": size, "schedule": "baseline+fifo", "time_ns": tb, "bw_utilization": 0.5, "gap": 1.0})
        rows.append({"topology": "T", "size_bytes": size, "schedule": "themis+scf", "time_ns": tt, "bw_utilization": 0.9, "gap": 0.1})
    s = summarize(rows)
    f = s.per_topology["T"]["themis+scf"]
    assert f["speedup_mean"] == 3.0 and abs(f["speedup_geomean"] - 8**0.5) < 1e-12
    assert s.overall["baseline+fifo"]["speedup_geomean"] == 1.0


def test_bad_paper_and_model(run_cli):
    code, _, err = run_cli("reproduce", "nccl")
    assert code == 2 and "paper" in err
    code, _, err = run_cli("reproduce", "themis", "--cost-model", "ns3")
    assert code == 2 and "cost_model" in err
