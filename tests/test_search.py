"""Design-space search: spaces, studies on journal/SQLite/PostgreSQL storage, exact trial counts."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from dse.core.errors import InputError  # noqa: E402
from dse.core.topology import parse_topology  # noqa: E402
from dse.explore.hwcost import HardwareCost  # noqa: E402
from dse.explore.study.spaces import SearchSpace  # noqa: E402
from dse.explore.study.storage import trial_record  # noqa: E402
from dse.explore.study.studies import load_studies  # noqa: E402
from dse.explore.study.workers import run_study, summary  # noqa: E402
from dse.output.study_report import write_report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BW = ROOT / "studies" / "bw_split_4d.toml"
SHAPE = ROOT / "studies" / "shape_1024.toml"
PG_URL = os.environ.get("DSE_TEST_POSTGRES_URL")


def test_shipped_files_load():
    specs = load_studies(BW)
    assert [s.name for s in specs] == ["bw_split_4d.themis", "bw_split_4d.baseline"]
    shape = load_studies(SHAPE)[0]
    assert shape.sampler == "nsga2" and len(shape.objectives) == 2 and shape.constraints
    # ordered factorisations of 1024 into sizes 2..64: 3 in 2D, 27 in 3D, 80 in 4D
    assert {d: len(v) for d, v in shape.space.shapes.items()} == {2: 3, 3: 27, 4: 80}
    for f in (ROOT / "search_spaces").glob("*.toml"):
        SearchSpace.from_toml(f)


def _write(tmp_path, text, name="space.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD_BW = "[space.bandwidth]\nbudget = 100\nminimum = 10\n"


@pytest.mark.parametrize(
    "text,field",
    [
        ("[space]\nnpus = 16\nshapes = []\n" + GOOD_BW, "space.shapes"),
        ("[space]\nnpus = 16\ndims = [2]\nsizes = [3]\n" + GOOD_BW, "space"),
        ("[space]\nnpus = 16\ndims = [4]\n[space.bandwidth]\nbudget = 30\nminimum = 10\n", "space.bandwidth"),
        ("[space]\nnpus = 16\ncolour = 'red'\n" + GOOD_BW, "space.colour"),
        ("[space]\nnpus = 16\n[space.bandwidth]\nbudget = 100\nwhatever = 1\n", "space.bandwidth.whatever"),
        ("[space\nnpus = 16\n", "space.toml"),
        ("[space]\nnpus = 16\nkinds = ['mesh']\n" + GOOD_BW, "space.kinds"),
        ("[space]\nnpus = 16\nchunks = []\n" + GOOD_BW, "space.chunks"),
        ("[space]\nnpus = 16\n", "space.bandwidth"),
    ],
)
def test_bad_spaces(tmp_path, text, field):
    with pytest.raises(InputError) as e:
        SearchSpace.from_toml(_write(tmp_path, text))
    assert field in str(e.value) and "\n" not in str(e.value)


def test_bad_study_files(tmp_path):
    _write(tmp_path, "[space]\nnpus = 16\n" + GOOD_BW, "s.toml")
    cases = {
        "[study]\nname = 'x'\nspace = 's.toml'\n[[objectives]]\nmetric = 'speed'\n": "objectives.metric",
        "[study]\nname = 'x'\nspace = 's.toml'\nsampler = 'cmaes'\n[[objectives]]\nmetric = 'time'\n": "study.sampler",
        "[study]\nname = 'x'\nspace = 's.toml'\n": "objectives",
        "[study]\nname = 'x'\nspace = 'nope.toml'\n[[objectives]]\nmetric = 'time'\n": "nope.toml",
        "[study]\nname = 'x'\nspace = 's.toml'\nextra = 1\n[[objectives]]\nmetric = 'time'\n": "study.extra",
        "[study]\nname = 'x'\nspace = 's.toml'\nsampler = 'brute_force'\n[[objectives]]\nmetric = 'time'\n": "step",
    }
    for text, field in cases.items():
        with pytest.raises(InputError) as e:
            load_studies(_write(tmp_path, text, "study.toml"))
        assert field in str(e.value), (text, e.value)


def test_hardware_cost_formula():
    prices = HardwareCost.from_table({"link": [1, 2], "switch_port": [0, 3], "nic": [0, 5], "link_fixed": [10, 100]})
    t = parse_topology("FC(4,100,0)_SW(8,50,0)")
    fc = 100 * 1 + 3 * 10  # bandwidth x link price + (P-1) links x fixed
    sw = 50 * (2 + 3 + 5) + 1 * 100  # link + switch port + NIC, one link
    assert prices.dollars(t) == pytest.approx(32 * (fc + sw))


def _count(name, url):
    return summary(name, url)


def test_study_reaches_exactly_n_and_resumes(tmp_path):
    spec = load_studies(BW)[0]
    url = str(tmp_path / "s.journal")
    assert run_study(spec, trials=12, storage=url)["complete"] == 12
    again = run_study(spec, trials=12, storage=url)
    assert again["complete"] == 12 and again["ran_here"] == 0
    more = run_study(spec, trials=20, storage=url)
    assert more["complete"] == 20 and more["ran_here"] == 8
    study = optuna.load_study(
        study_name=spec.name, storage=__import__("dse.explore.study.storage").explore.study.storage.open_storage(url)
    )
    record = trial_record(study.best_trial)
    for key in ("topology", "time_themis_ns", "time_baseline_ns", "bw_utilization", "bound_ns", "gap", "cost_usd"):
        assert key in record
    assert record["bound_ns"] <= record["time_themis_ns"]
    assert parse_topology(record["topology"]).npus == 1024


def test_same_seed_same_best(tmp_path):
    spec = load_studies(BW)[0]
    a = run_study(spec, trials=25, storage=str(tmp_path / "a.journal"))
    b = run_study(spec, trials=25, storage=str(tmp_path / "b.journal"))
    assert (a["best_trial"], a["best_value"], a["best_topology"]) == (
        b["best_trial"],
        b["best_value"],
        b["best_topology"],
    )


def test_sqlite_storage(tmp_path):
    pytest.importorskip("sqlalchemy")
    spec = load_studies(BW)[1]
    assert run_study(spec, trials=5, storage=f"sqlite:///{tmp_path / 's.db'}")["complete"] == 5


def _numbers_unique(name, url):
    from dse.explore.study.storage import open_storage

    study = optuna.load_study(study_name=name, storage=open_storage(url))
    trials = study.get_trials(deepcopy=False)
    numbers = [t.number for t in trials]
    return len(numbers) == len(set(numbers)), trials


def test_two_workers_on_a_journal_file(tmp_path):
    spec = load_studies(BW)[0]
    url = str(tmp_path / "w.journal")
    res = run_study(spec, trials=30, workers=2, storage=url)
    assert res["complete"] == 30 and res["running"] == 0
    unique, trials = _numbers_unique(spec.name, url)
    assert unique and sum(t.state.name == "COMPLETE" for t in trials) == 30


def test_killed_worker_then_rerun_gives_exactly_n(tmp_path):
    spec = load_studies(BW)[0]
    url = str(tmp_path / "k.journal")
    cmd = [
        sys.executable,
        "-m",
        "dse",
        "study",
        "run",
        str(BW),
        "--only",
        spec.name,
        "--trials",
        "400",
        "--storage",
        url,
        "--quiet",
    ]
    p = subprocess.Popen(cmd, cwd=ROOT)
    deadline = time.time() + 60
    while time.time() < deadline:
        time.sleep(0.3)
        try:
            if Path(url).exists() and summary(spec.name, url)["complete"] >= 5:
                break
        except InputError:  # the journal exists a moment before the study is written into it
            continue
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    before = summary(spec.name, url)
    assert 5 <= before["complete"] < 400
    after = run_study(spec, trials=before["complete"] + 10, storage=url)
    assert after["complete"] == before["complete"] + 10 and after["running"] == 0


@pytest.mark.skipif(
    not PG_URL, reason="DSE_TEST_POSTGRES_URL is not set (.ci/run starts a PostgreSQL server and sets it)"
)
def test_two_workers_on_postgresql():
    pytest.importorskip("psycopg")
    from dse.explore.study.storage import open_storage

    spec = load_studies(BW)[1]
    try:  # a fresh study: the CI server is throw-away, a developer's may hold an older run
        optuna.delete_study(study_name=spec.name, storage=open_storage(PG_URL))
    except KeyError:
        pass
    res = run_study(spec, trials=24, workers=2, storage=PG_URL)
    assert res["complete"] == 24 and res["running"] == 0
    unique, trials = _numbers_unique(spec.name, PG_URL)
    assert unique and sum(t.state.name == "COMPLETE" for t in trials) == 24


def test_report_writes_csv_and_figures(tmp_path):
    spec = load_studies(SHAPE)[0]
    url = str(tmp_path / "r.journal")
    run_study(spec, trials=40, storage=url)
    rep = write_report(spec.name, url, tmp_path / "rep")
    assert rep.multi and (tmp_path / "rep" / "pareto.csv").exists() and (tmp_path / "rep" / "trials.csv").exists()
    pngs = [f for f in rep.files if f.endswith(".png")]
    assert pngs and all(Path(f).stat().st_size > 1000 for f in pngs)
    assert len(rep.rows) == 40 and rep.best


def test_study_cli(tmp_path, run_cli):
    import json

    url = str(tmp_path / "c.journal")
    code, out, _ = run_cli("study", "run", str(BW), "--trials", "6", "--storage", url, "--json")
    res = json.loads(out)
    assert code == 0 and [r["complete"] for r in res] == [6, 6]
    code, out, _ = run_cli("study", "list", "--storage", url, "--json")
    assert code == 0 and {r["study"] for r in json.loads(out)} == {"bw_split_4d.themis", "bw_split_4d.baseline"}
    code, out, _ = run_cli("study", "report", "bw_split_4d.themis", "--storage", url, "--out", str(tmp_path / "rep"))
    assert code == 0 and (tmp_path / "rep" / "best.csv").exists() and (tmp_path / "rep" / "history.png").exists()


@pytest.mark.parametrize(
    "args,field",
    [
        (["study", "run", "nope.toml"], "nope.toml"),
        (["study", "run", str(BW), "--trials", "0"], "--trials"),
        (["study", "run", str(BW), "--storage", "redis://x"], "storage"),
        (["study", "report", "missing", "--storage", "/nonexistent/x.journal", "--out", "/tmp/x"], ""),
    ],
)
def test_study_cli_bad_input(tmp_path, run_cli, args, field):
    code, out, err = run_cli(*args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and field in err


def test_brute_force_visits_the_whole_discrete_space(tmp_path):
    (tmp_path / "tiny.toml").write_text(
        "[space]\nnpus = 64\nshapes = ['4x16']\nkinds = [['ring', 'switch'], ['switch']]\nchunks = [16]\n"
        "[space.bandwidth]\nbudget = 300\nminimum = 20\nstep = 0.5\n[space.latency]\ntiers = [20, 700]\n"
    )
    (tmp_path / "study.toml").write_text(
        "[study]\nname = 'tiny'\nspace = 'tiny.toml'\nsampler = 'brute_force'\nseed = 3\n"
        "[[objectives]]\nmetric = 'time'\n"
    )
    spec = load_studies(tmp_path / "study.toml")[0]
    res = run_study(spec, trials=18, storage=str(tmp_path / "b.journal"))  # 2 kinds x 3 x 3 weights
    from dse.explore.study.storage import open_storage

    study = optuna.load_study(study_name="tiny", storage=open_storage(str(tmp_path / "b.journal")))
    seen = {tuple(sorted(t.params.items())) for t in study.trials}
    assert res["complete"] == 18 and len(seen) == 18
    # the brute-force best is the true optimum of the grid
    assert res["best_value"] == min(t.value for t in study.trials)


def test_bad_space_through_the_cli(tmp_path, run_cli):
    (tmp_path / "s.toml").write_text("[space]\nnpus = 16\ndims = [4]\n[space.bandwidth]\nbudget = 30\nminimum = 10\n")
    (tmp_path / "st.toml").write_text("[study]\nname = 'x'\nspace = 's.toml'\n[[objectives]]\nmetric = 'time'\n")
    code, out, err = run_cli("study", "run", str(tmp_path / "st.toml"), "--storage", str(tmp_path / "x.journal"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "impossible budget" in err
    assert not (tmp_path / "x.journal").exists()
