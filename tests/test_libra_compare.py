"""`dse libra-compare` (dse.explore.libra.compare): LIBRA's allocation against a dse study's.

- the issue's target, as a test: on GPT-3, MSFT-1T and Turing-NLG (4D network) under each of
  LIBRA's constraint sets, dse's study (300 seeded TPE trials) finds an allocation whose simulated
  Themis+SCF iteration is at least as fast as LIBRA's own allocation simulated the same way;
- the figures are consistent: LIBRA's allocation meets its constraints, its predicted time is
  LIBRA's model at that allocation, the simulations are `iterate`'s;
- a rerun resumes the studies (no new trial), and bad input is one line with exit 2 and no output;
- the bundled data is what scripts/convert_libra.py makes of LIBRA's files (skipped without ../shared).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("optuna")

from dse.explore.libra.bw_constraints import LIBRA_CONSTRAINTS, parse_constraints  # noqa: E402
from dse.explore.libra.compare import BUNDLED, compare, load_cases  # noqa: E402
from dse.explore.libra.model import libra_iteration_ns  # noqa: E402
from dse.explore.study.storage import load_study  # noqa: E402
from dse.training.iteration import iterate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "workloads" / "libra"


@pytest.mark.parametrize("case", load_cases(), ids=lambda c: c.name)
def test_dse_finds_an_allocation_at_least_as_fast_as_libras(case, tmp_path: Path) -> None:
    r = compare(case, trials=300, seed=0, out=tmp_path)
    assert r.dse.themis_ns <= r.libra_simulated.themis_ns and r.dse_gain >= 0
    rows = parse_constraints(case.constraints, 4)
    for bw in (r.libra.bandwidths, r.dse.bandwidths):
        assert all(c.holds(bw) for c in rows) and min(bw) >= 1.0
    assert r.libra.gap <= 1e-6  # LIBRA's optimum, certified
    assert r.libra.predicted_ns == pytest.approx(libra_iteration_ns(case.workload, case.network, r.libra.bandwidths))


def test_the_simulations_are_iterates_and_a_rerun_resumes(tmp_path: Path) -> None:
    case = load_cases(workloads=("MSFT_1T",), constraint_sets=("multiple_constraints",))[0]
    r = compare(case, trials=20, seed=1, out=tmp_path)
    topo = case.topology(r.libra.bandwidths)
    assert r.libra_simulated.themis_ns == iterate(case.workload, topo, scheduler="themis", queue="scf").time_ns
    assert r.libra_simulated.baseline_ns == iterate(case.workload, topo, scheduler="baseline", queue="fifo").time_ns
    assert r.libra_simulated.cost_usd == pytest.approx(4096 * sum(b * p for b, p in zip(r.libra.bandwidths, PRICES)))
    journal = str(tmp_path / f"libra.{case.name}.journal")
    again = compare(case, trials=20, seed=1, out=tmp_path)
    assert again == r and len(load_study(f"libra.{case.name}", journal).trials) == 20  # no trial run twice


#: LIBRA's 4D prices per dimension ($ per GB/s): link, and for the switch its port and NIC too
PRICES = (2.00001, 4.00002, 4.00003, 7.80004 + 18.00004 + 31.60004)


def test_the_command_prints_json_and_refuses_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "dse", "libra-compare", "--out", str(out), "--trials", "5", "--json"]
    ok = subprocess.run([*cmd, "--workloads", "Turing_NLG", "--constraints", "total_bw_500gbps"], capture_output=True)
    assert ok.returncode == 0, ok.stderr
    rows = json.loads(ok.stdout)
    assert [r["case"] for r in rows] == ["Turing_NLG_4d_total_bw_500gbps"] and rows[0]["trials"] == 5
    for bad, field in (
        (["--network", "5d"], "network"),
        (["--workloads", "BERT"], "workload"),
        (["--constraints", "cheap"], "constraints"),
        (["--cost-model", "nope"], "cost_model"),
        (["--trials", "0"], "--trials"),
        (["--libra", str(tmp_path / "missing")], "missing"),
    ):
        fresh = tmp_path / "fresh"
        res = subprocess.run([*cmd[:4], "--out", str(fresh), *bad], capture_output=True, text=True)
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and field in res.stderr, (bad, res.stderr)
        assert "Traceback" not in res.stderr and not fresh.exists()


@pytest.mark.skipif(not SHARED.is_dir(), reason="LIBRA's files are in ../shared, which a clone does not have")
def test_the_bundled_data_is_libras_files_converted(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "convert_libra.py"), "--libra", str(SHARED), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    for f in sorted(BUNDLED.glob("*.toml")):
        assert (tmp_path / f.name).read_text() == f.read_text(), f.name
    for net in ("4d", "3d"):
        mine, theirs = load_cases(net), load_cases(net, libra_dir=SHARED)
        for a, b in zip(mine, theirs):
            assert a.workload.layers == b.workload.layers and a.workload.placement == b.workload.placement
            assert a.network == b.network and a.prices == b.prices and a.constraints == b.constraints
    assert set(LIBRA_CONSTRAINTS) == {"total_bw_500gbps", "multiple_constraints", "total_bw_1000gbps"}


def _libra_dir(root: Path) -> Path:
    """A small input folder in LIBRA's layout and formats (synthetic figures), for GPT_3 on a 4d network."""
    for sub in ("network", "cost_model", "workload", "communicator"):
        (root / sub).mkdir(parents=True)
    (root / "network/4d_network.yml").write_text(
        "Topology: [ Ring, FullyConnected, Ring, Switch ]\nNpusCount: [ 2, 4, 2, 4 ]\n"
        "CostDimension: [ InterChiplet, InterPackage, InterNode, InterPod ]\n"
    )
    (root / "cost_model/4d_cost_model.yml").write_text(
        "InterChiplet:\n  Link: 2.0\nInterPackage:\n  Link: 4.0\n  Switch: 13.0\nInterNode:\n  Link: 4.0\n"
        "InterPod:\n  Link: 7.8\n  Switch: 18.0\n  Nic: 31.6\n"
    )
    (root / "workload/GPT_3.txt").write_text(
        "a -1 2000000 NONE 0 2000000 ALLREDUCE 67108864 2000000 ALLREDUCE 33554432 10\n"
        "b -1 3000000 NONE 0 3000000 ALLREDUCE 67108864 3000000 ALLREDUCE 134217728 10\n"
    )
    (root / "communicator/GPT_3_4d.yml").write_text(
        "Forward: [ 2, 2, -1, -1 ]\nInputGrad: [ 2, 2, -1, -1 ]\nWeightGrad: [ -1, 2, 2, 4 ]\n"
    )
    return root


def test_libras_own_files_are_read_as_they_are_and_damage_is_one_line(tmp_path: Path) -> None:
    libra = _libra_dir(tmp_path / "libra")
    case = load_cases("4d", ("GPT_3",), ("multiple_constraints",), libra)[0]
    assert case.network.npus == (2, 4, 2, 4) and case.workload.placement.wg == (0, 2, 2, 4)
    assert case.prices.dollars(case.topology((500.0, 300.0, 100.0, 100.0))) == pytest.approx(
        64 * (500 * 2.0 + 300 * 4.0 + 100 * 4.0 + 100 * (7.8 + 18.0 + 31.6))
    )
    r = compare(case, trials=30, out=tmp_path / "o")
    assert r.libra.bandwidths[:2] == pytest.approx((500.0, 300.0)) and r.libra.gap <= 1e-6
    cmd = [sys.executable, "-m", "dse", "libra-compare", "--libra", str(libra), "--workloads", "GPT_3"]
    (libra / "workload/GPT_3.txt").write_text("a -1 2000000 NONE 0 2000000 ALLREDUCE 67108864 2000000 SUM 3 10\n")
    res = subprocess.run([*cmd, "--out", str(tmp_path / "bad")], capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "GPT_3.txt:1" in res.stderr, res.stderr
    assert not (tmp_path / "bad").exists()


def test_a_study_prices_designs_with_libras_cost_model_file(tmp_path: Path) -> None:
    from dse.explore.study.studies import load_studies

    libra = _libra_dir(tmp_path / "libra")
    (tmp_path / "space.toml").write_text(
        '[space]\nnpus = 64\nshapes = ["2x4x2x4"]\nkinds = [["ring"], ["fc"], ["ring"], ["switch"]]\n'
        '[space.bandwidth]\nconstraints = ["sum == 1000"]\n'
    )
    (tmp_path / "study.toml").write_text(
        '[study]\nname = "s"\nspace = "space.toml"\n[workload]\nfile = "libra_gpt_3_4d"\n'
        '[cost]\nlibra_cost_model = "libra/cost_model/4d_cost_model.yml"\nlibra_network = "libra/network/4d_network.yml"\n'
        '[[objectives]]\nmetric = "cost"\n'
    )
    with pytest.raises(Exception, match="cannot run it"):  # libra_gpt_3_4d's placement is for 4x8x4x32
        load_studies(tmp_path / "study.toml")
    text = (tmp_path / "study.toml").read_text().replace('"libra_gpt_3_4d"', '"libra/w.toml"')
    (tmp_path / "study.toml").write_text(text)
    from dse.training.libra_read import read_libra_workload
    from dse.training.workload_formats import to_toml

    wl = read_libra_workload(libra / "workload/GPT_3.txt", libra / "communicator/GPT_3_4d.yml")
    (libra / "w.toml").write_text(to_toml(wl))
    spec = load_studies(tmp_path / "study.toml")[0]
    assert spec.prices == load_cases("4d", ("GPT_3",), ("multiple_constraints",), libra)[0].prices
