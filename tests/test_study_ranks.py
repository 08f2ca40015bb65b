"""Workload studies of a per-rank trace (`dse.explore.study.ranks`) on a space read from a network
file (`dse.explore.study.spaces`, ``network = ...``): every trial's record is what `iterate_ranks` gives
on that trial's topology, the space keeps the file's kinds, NPUs and latencies, a system file fixes
the configuration, and bad input is one line. The trace is the shipped STAGE one (workloads/stage),
copied into the test's folder."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("optuna")

from dse.core.errors import InputError  # noqa: E402
from dse.core.topology import Topology, parse_topology  # noqa: E402
from dse.explore.study.ranks import RankTrace  # noqa: E402
from dse.explore.study.storage import load_study, trial_record  # noqa: E402
from dse.explore.study.studies import load_studies  # noqa: E402
from dse.explore.study.workers import run_study  # noqa: E402
from dse.training.chakra.ranks_run import iterate_ranks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / "workloads" / "stage"
NET = "R2_FC2_SW2.yml"
SYSTEM = "R2_FC2_SW2_s4_ascending_FIFO_roofline_pp300_lm900.json"
TRACE = "gpt_dp2_tp2_pp2"
SPACE = f'[space]\nnetwork = "{NET}"\n[space.bandwidth]\nconstraints = ["sum == 350"]\nminimum = 10.0\n'
WORKLOAD = f'file = "{TRACE}/workload"\ncomm_groups = "{TRACE}/workload.json"\nsystem = "{SYSTEM}"\n'
BASELINE = '[[objectives]]\nmetric = "iteration_time"\nscheduler = "baseline"\nqueue = "fifo"\n'


def _study(folder: Path, workload: str = WORKLOAD, objectives: str = BASELINE, space: str = SPACE) -> Path:
    """A copy of the STAGE files in `folder`, with a space file and a study file beside them."""
    folder.mkdir(exist_ok=True)
    if not (folder / TRACE).exists():
        shutil.copytree(STAGE / TRACE, folder / TRACE)
        for name in (NET, SYSTEM):
            shutil.copy(STAGE / name, folder / name)
    (folder / "space.toml").write_text(space)
    study = folder / "study.toml"
    study.write_text(
        '[study]\nname = "rs"\nspace = "space.toml"\nseed = 1\ntrials = 3\n'
        f'[workload]\n{workload}cost_model = "astra-sim"\n' + objectives
    )
    return study


def _topology(rec: dict) -> Topology:
    """A trial's design with its exact bandwidths (the notation rounds them)."""
    dims = parse_topology(rec["topology"]).dims
    return Topology(tuple(replace(d, bandwidth=b) for d, b in zip(dims, rec["bandwidths_GBps"])))


def test_every_trial_records_what_iterate_ranks_gives_on_its_topology(tmp_path: Path) -> None:
    spec = load_studies(_study(tmp_path))[0]
    assert isinstance(spec.training.workload, RankTrace)
    assert spec.training.workload.fixed == ("baseline", "fifo", 4)  # ascending + FIFO, 4 splits
    assert [o.name for o in spec.objectives] == ["iteration_time_ns_baseline_fifo"]
    url = str(tmp_path / "rs.journal")
    assert run_study(spec, storage=url, quiet=True)["complete"] == 3
    trials = load_study("rs", url).get_trials()
    for t in trials:
        rec = trial_record(t)
        topo = _topology(rec)
        assert sum(rec["bandwidths_GBps"]) == pytest.approx(350.0, rel=1e-12) and min(rec["bandwidths_GBps"]) >= 10
        run = iterate_ranks(
            tmp_path / TRACE / "workload",
            topo,
            system=tmp_path / SYSTEM,
            comm_groups=tmp_path / TRACE / "workload.json",
            cost_model="astra-sim",
        )
        assert t.values == [run.time_ns] == [rec["iteration_baseline_fifo_ns"]]
        last = run.finish_ns_by_rank.index(run.time_ns)
        assert rec["exposed_comm_baseline_fifo_ns"] == run.exposed_ns_by_rank[last]
        assert rec["chunks"] == run.chunks == 4
    assert len({tuple(trial_record(t)["bandwidths_GBps"]) for t in trials}) == 3  # three designs, not one


def test_a_network_space_keeps_the_files_kinds_npus_and_latencies() -> None:
    from dse.explore.study.spaces import SearchSpace

    space = SearchSpace.from_toml(ROOT / "search_spaces" / "stage_r2fc2sw2.toml")
    design, _ = space.first_design()
    net = parse_topology(str(STAGE / NET))
    assert [(d.kind, d.npus, d.latency) for d in design.dims] == [(d.kind, d.npus, d.latency) for d in net.dims]
    assert space.npus == 8 and space.shapes == {3: ((2, 2, 2),)}
    assert sum(d.bandwidth for d in design.dims) == pytest.approx(sum(d.bandwidth for d in net.dims))  # 350 GB/s


def test_the_shipped_study_runs_from_its_own_folder(tmp_path: Path) -> None:
    spec = load_studies(ROOT / "studies" / "stage_gpt_bandwidth.toml")[0]
    url = str(tmp_path / "shipped.journal")
    assert run_study(spec, trials=2, storage=url, quiet=True)["complete"] == 2
    for t in load_study(spec.name, url).get_trials():
        assert t.values == [trial_record(t)["iteration_baseline_fifo_ns"]]


def test_the_definition_holds_the_files_bytes_not_their_paths(tmp_path: Path) -> None:
    a = load_studies(_study(tmp_path / "a"))[0].definition()
    b = load_studies(_study(tmp_path / "b"))[0].definition()
    assert a == b  # a copy elsewhere is the same study
    groups = tmp_path / "b" / TRACE / "workload.json"
    groups.write_text(groups.read_text() + "\n")
    assert load_studies(tmp_path / "b" / "study.toml")[0].definition()["workload"] != a["workload"]


def test_without_a_system_file_themis_and_the_baseline_are_both_recorded(tmp_path: Path) -> None:
    workload = f'file = "{TRACE}/workload"\ncomm_groups = "{TRACE}/workload.json"\n'
    workload += "chunks = 2\npeak_tflops = 300\nmem_gbps = 900\n"
    spec = load_studies(_study(tmp_path, workload, '[[objectives]]\nmetric = "iteration_time"\n'))[0]
    url = str(tmp_path / "rs.journal")
    run_study(spec, trials=1, storage=url, quiet=True)
    (t,) = load_study("rs", url).get_trials()
    rec = trial_record(t)
    for s, q in (("themis", "scf"), ("baseline", "fifo")):
        run = iterate_ranks(
            tmp_path / TRACE / "workload",
            _topology(rec),
            comm_groups=tmp_path / TRACE / "workload.json",
            scheduler=s,
            queue=q,
            chunks=2,
            peak_tflops=300,
            mem_gbps=900,
        )
        assert rec[f"iteration_{s}_{q}_ns"] == run.time_ns
    assert t.values == [rec["iteration_themis_scf_ns"]]


@pytest.mark.parametrize(
    "workload,objectives,space,match",
    [
        (  # the trace's collectives name groups that only the group file defines
            f'file = "{TRACE}/workload"\nsystem = "{SYSTEM}"\n',
            BASELINE,
            SPACE,
            r"^workload: .*workload\.comm_groups: rank 0: node .* names communicator group '\d+'.*allowed: a workload\.comm_groups file",
        ),
        (WORKLOAD, BASELINE, SPACE.replace(NET, "nope.yml"), r"^space\.network: topology: no such file .*nope\.yml"),
        (
            WORKLOAD,
            BASELINE,
            SPACE.replace("[space]\n", "[space]\nnpus = 8\n"),
            r"^space\.npus: given with space\.network, whose file sets it",
        ),
        (WORKLOAD.replace(TRACE + '/workload"', 'missing"'), BASELINE, SPACE, r"^workload\.file: 'missing' names no"),
        (WORKLOAD + "chunks = 8\n", BASELINE, SPACE, r"^workload\.chunks: given with workload\.system"),
        (WORKLOAD + 'placement = "p.toml"\n', BASELINE, SPACE, r"^workload\.placement: given with a per-rank trace"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, workload: str, objectives: str, space: str, match: str) -> None:
    with pytest.raises(InputError, match=match) as e:
        load_studies(_study(tmp_path, workload, objectives, space))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "objectives,match",
    [
        (
            '[[objectives]]\nmetric = "iteration_time"\n',
            r"measured with themis\+scf, and the system file sets baseline",
        ),
        ('[[objectives]]\nmetric = "libra_iteration_time"\n', r"LIBRA's model of a layer workload"),
    ],
)
def test_objectives_a_trace_cannot_measure_are_refused_before_any_storage(
    tmp_path: Path, objectives: str, match: str
) -> None:
    spec = load_studies(_study(tmp_path, objectives=objectives))[0]
    url = tmp_path / "rs.journal"
    with pytest.raises(InputError, match=r"^space: its first design .* cannot be measured: .*" + match):
        run_study(spec, storage=str(url), quiet=True)
    assert not url.exists()


def test_the_cli_says_a_missing_network_file_in_one_line(tmp_path: Path, run_cli) -> None:
    study = _study(tmp_path, space=SPACE.replace(NET, "gone.yml"))
    code, out, err = run_cli("study", "run", str(study), "--trials", "1")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("dse: error: space.network: topology: no such file") and "gone.yml" in err
    assert not (tmp_path / "out").exists()  # nothing written
