"""`dse reproduce themis --quick`: every file, the right columns, real figures, and resuming."""

import csv

from dse.core.topology import parse_topology
from dse.output.reproduce import PAPER_PRESETS, summarize, summary_markdown, topology_for


def _header(path):
    with open(path, newline="") as f:
        return next(csv.reader(f))


def test_quick_reproduction_writes_everything_and_resumes(tmp_path, run_cli):
    out = tmp_path / "rep"
    code, text, err = run_cli("reproduce", "themis", "--quick", "--out", str(out), "--progress")
    assert code == 0, err
    # each part's bar says what it is (the sweeps' own bars carry no label)
    for label in ("single all-reduce (paper)", "chunk sensitivity (paper)", "training iterations (paper)"):
        assert label in err
    for name in (
        "single_allreduce.csv",
        "chunks.csv",
        "end_to_end.csv",
        "summary.md",
        "utilization.png",
        "chunks.png",
        "timeline.png",
    ):
        assert (out / name).exists(), name
    for name in ("utilization.png", "chunks.png", "timeline.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    need = {"topology", "size_bytes", "scheduler", "queue", "time_ns", "bw_utilization_pct", "ideal_ns", "bound_ns"}
    need.add("gap_pct")  # units in the names: percent
    assert need <= set(_header(out / "single_allreduce.csv"))
    assert need | {"chunks"} <= set(_header(out / "chunks.csv"))
    with open(out / "single_allreduce.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 3 * 4 and {r["topology"] for r in rows} == set(PAPER_PRESETS[:2])
    for r in rows:  # every schedule is at or above the bound, which is at or above the ideal
        assert float(r["ideal_ns"]) <= float(r["bound_ns"]) * (1 + 1e-9)
        assert float(r["bound_ns"]) <= float(r["time_ns"]) * (1 + 1e-9)
        assert 0 < float(r["bw_utilization_pct"]) <= 100  # percent, as the name says
        gap = 100 * (float(r["time_ns"]) / float(r["bound_ns"]) - 1)
        assert abs(float(r["gap_pct"]) - gap) <= 1e-9 * max(1.0, gap)
    summary = (out / "summary.md").read_text()
    assert "themis+scf" in summary and "Chunk sensitivity" in summary
    assert "Training iterations" in summary and "ResNet-152" in summary
    # a 2-topology mean is not set beside the paper's 6-topology figures as if comparable
    assert "56.31" not in summary and "95.14" not in summary and "1.72x" not in summary
    assert "## Overall (quick run: 2 of 6 topologies, 3 of 19 sizes; not comparable with the paper's means)" in summary
    assert "Quick run: 2 of 6 topologies. The paper column" in summary
    # the exact notation of every topology run is recorded and printed
    with open(out / "chunks.csv", newline="") as f:
        ran = {r["topology"] for r in rows} | {r["topology"] for r in csv.DictReader(f)}
    for name in ran:
        cell = f"`{topology_for(name, 'paper').notation()}`"
        assert cell in summary and cell in text
    with open(out / "end_to_end.csv", newline="") as f:
        e2e = list(csv.DictReader(f))
    assert {r["notation"] for r in e2e} == {topology_for(n, "paper").notation() for n in PAPER_PRESETS[:2]}
    # a re-run resumes: nothing is evaluated again, and no bar is drawn when stderr is not a terminal
    code, text, err = run_cli("reproduce", "themis", "--quick", "--out", str(out))
    assert code == 0 and "0 evaluated now" in text and "24 already done" in text
    assert "training iterations" not in err and "%|" not in err


def test_quick_astra_sim_1_runs_and_prints_the_artifact_variants(tmp_path, run_cli):
    out = tmp_path / "rep1"
    code, text, err = run_cli("reproduce", "themis", "--quick", "--cost-model", "astra-sim-1", "--out", str(out))
    assert code == 0, err
    with open(out / "single_allreduce.csv", newline="") as f:
        notations = {r["notation"] for r in csv.DictReader(f)}
    assert notations == {parse_topology(f"{n}@artifact").notation() for n in PAPER_PRESETS[:2]}
    for n in PAPER_PRESETS[:2]:
        assert f"| {n} | {n}@artifact: Themis artifact" in text
        assert f"`{parse_topology(n + '@artifact').notation()}`" in text
    with open(out / "end_to_end.csv", newline="") as f:  # the iterations run the same variants
        assert {r["notation"] for r in csv.DictReader(f)} == notations


def test_full_summary_sets_the_paper_beside_the_means():
    rows = [
        {"topology": "T", "size_bytes": 1, "schedule": sc, "time_ns": t, "bw_utilization": 0.5, "gap": 0.1}
        for sc, t in (("baseline+fifo", 2.0), ("themis+scf", 1.0))
    ]
    full = summary_markdown(summarize(rows), [], "paper")
    assert "56.31 %" in full and "95.14 %" in full and "1.72x" in full and "not comparable" not in full
    quick = summary_markdown(summarize(rows), [], "paper", quick=True)
    assert "56.31" not in quick and "not comparable with the paper's means" in quick


def test_summary_means():
    rows = []
    for size, (tb, tt) in {1: (2.0, 1.0), 2: (4.0, 1.0)}.items():
        rows.append(
            {
                "topology": "T",
                "size_bytes": size,
                "schedule": "baseline+fifo",
                "time_ns": tb,
                "bw_utilization": 0.5,
                "gap": 1.0,
            }
        )
        rows.append(
            {
                "topology": "T",
                "size_bytes": size,
                "schedule": "themis+scf",
                "time_ns": tt,
                "bw_utilization": 0.9,
                "gap": 0.1,
            }
        )
    s = summarize(rows)
    f = s.per_topology["T"]["themis+scf"]
    assert f["speedup_mean"] == 3.0 and abs(f["speedup_geomean"] - 8**0.5) < 1e-12
    assert s.overall["baseline+fifo"]["speedup_geomean"] == 1.0


def test_bad_paper_and_model(run_cli):
    code, _, err = run_cli("reproduce", "nccl")
    assert code == 2 and "paper" in err
    code, _, err = run_cli("reproduce", "themis", "--cost-model", "ns3")
    assert code == 2 and "cost_model" in err
