"""What a study trial writes: few journal records (the record as one user attribute, no parameter for
a choice the space fixes), one fsync per finished trial, the worker recorded first; readers of both
layouts; the cached bound; the long-lived search space (dse.explore.study.storage, dse.explore.study.journal, dse.explore.study.trials)."""

import json
import os
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from dse.core.topology import Dim, Topology  # noqa: E402
from dse.explore.study.journal import needs_sync  # noqa: E402
from dse.explore.study.samplers import ResumableSampler  # noqa: E402
from dse.explore.study.storage import (  # noqa: E402
    FIXED_KEY,
    LAYOUT_ATTR,
    RECORD_ATTR,
    WORKER_ATTR,
    load_study,
    trial_params,
    trial_record,
)
from dse.explore.study.studies import load_studies  # noqa: E402
from dse.explore.study.trials import fluid_bound  # noqa: E402
from dse.explore.study.workers import run_study, summary  # noqa: E402
from dse.output.study_report import report_data  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BW = ROOT / "studies" / "bw_split_4d.toml"
SHAPE = ROOT / "studies" / "shape_1024.toml"
OLD = ROOT / "tests" / "data" / "studies" / "bw_split_4d_old_layout.journal"
NAME = "bw_split_4d.themis"
STUDY_OPS = {0, 1, 2, 3}  # create or delete a study, a study attribute: not a trial's
RECORD = ("topology", "time_themis_ns", "time_baseline_ns", "bw_utilization", "bound_ns", "gap", "cost_usd")
#: the record's columns in a report: each number's unit its suffix (the fractions in %)
COLUMNS = ("topology", "time_themis_ns", "time_baseline_ns", "bw_utilization_pct", "bound_ns", "gap_pct", "cost_usd")


def _records(url):
    return [json.loads(line) for line in Path(url).read_text().splitlines()]


def _per_trial(records):
    """Each trial's records, in order: a creation (op 4) starts one, the others name its trial id."""
    out, ids = {}, 0
    for r in records:
        if r["op_code"] == 4:
            out[ids] = [r]
            ids += 1
        elif r["op_code"] not in STUDY_OPS:
            out[r["trial_id"]].append(r)
    return out


@pytest.fixture(scope="module")
def bw_journal(tmp_path_factory):
    """bw_split_4d.themis, 30 trials (10 random, 20 TPE), one worker."""
    url = str(tmp_path_factory.mktemp("bw") / "b.journal")
    run_study(load_studies(BW)[0], trials=30, storage=url)
    return url


def test_a_tpe_trial_appends_at_most_nine_records(bw_journal):
    trials = _per_trial(_records(bw_journal))
    assert len(trials) == 30
    for tid, recs in trials.items():
        ops = Counter(r["op_code"] for r in recs)
        # creation, worker, 4 weights, TPE's relative parameters (its constant liar; not in the 10
        # random trials), the record, the result: 9 where the layout before wrote 24
        assert sum(ops.values()) <= 9 and ops[5] == 4 and ops[8] == 2 and ops[6] == 1, (tid, ops)
        assert {r["param_name"] for r in recs if r["op_code"] == 5} == {f"bw_4d_{i}" for i in range(4)}
        assert [next(iter(r["user_attr"])) for r in recs if r["op_code"] == 8] == [WORKER_ATTR, RECORD_ATTR]


def test_the_worker_is_recorded_right_after_the_trial_is_created(bw_journal):
    """fail_dead takes a running trial with no worker for a dead one: the worker comes first."""
    for recs in _per_trial(_records(bw_journal)).values():
        assert recs[0]["op_code"] == 4 and recs[1]["op_code"] == 8 and WORKER_ATTR in recs[1]["user_attr"]


def test_a_multi_objective_trial_writes_what_its_sampler_and_constraint_need(tmp_path):
    url = str(tmp_path / "s.journal")
    run_study(load_studies(SHAPE)[0], trials=12, storage=url)
    for recs in _per_trial(_records(url)).values():
        ops = Counter(r["op_code"] for r in recs)
        attrs = [next(iter(r["system_attr"])) for r in recs if r["op_code"] == 9]
        assert ops[8] == 2 and ops[6] == 1 and sorted(attrs) == ["NSGAIISampler:generation", "constraints:cost"]
        names = {r["param_name"] for r in recs if r["op_code"] == 5}
        assert "scheduler" not in names and "queue" not in names  # one value each in this space


def test_one_fsync_per_finished_trial(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    url = str(tmp_path / "f.journal")
    run_study(load_studies(BW)[0], trials=20, storage=url)
    records = _records(url)
    finishing = [r for r in records if needs_sync(r)]
    assert len(finishing) == 20 + sum(r["op_code"] in STUDY_OPS for r in records)
    assert len(synced) == len(finishing) and len(records) > 8 * 20


def test_which_records_are_synced():
    assert needs_sync({"op_code": 6, "trial_id": 1, "state": 1, "values": [1.0]})  # a trial's result
    assert needs_sync({"op_code": 6, "trial_id": 1, "state": 3, "values": None})  # failed
    assert needs_sync({"op_code": 0, "study_name": "x", "directions": [1]})
    assert needs_sync({"op_code": 4, "study_id": 0, "state": 1, "values": [1.0]})  # added finished
    for running in (
        {"op_code": 4, "study_id": 0},
        {"op_code": 5},
        {"op_code": 8},
        {"op_code": 9},
        {"op_code": 4, "study_id": 0, "state": 4},
    ):
        assert not needs_sync(running)


def test_the_record_round_trips_into_the_report(bw_journal):
    study = load_study(NAME, bw_journal)
    assert study.user_attrs[LAYOUT_ATTR] == 2
    _, rep = report_data(NAME, bw_journal)
    by_number = {t.number: t for t in study.trials}
    for row in rep.rows:
        t = by_number[row["trial"]]
        record = t.user_attrs[RECORD_ATTR]
        assert [row[k] for k in COLUMNS] == [record[k] * (100 if k in ("bw_utilization", "gap") else 1) for k in RECORD]
        fixed = record[FIXED_KEY]
        assert fixed == {
            "dims": 4,
            "shape_4d": "4x8x4x8",
            "kind_4d_0": "ring",
            "kind_4d_1": "fc",
            "kind_4d_2": "ring",
            "kind_4d_3": "switch",
            "chunks": 64,
            "scheduler": "themis",
            "queue": "scf",
        }
        assert {k: row[f"param_{k}"] for k in fixed} == fixed
        assert sorted(t.params) == [f"bw_4d_{i}" for i in range(4)]
    assert summary(NAME, bw_journal)["best_topology"] == trial_record(study.best_trial)["topology"]


def test_a_journal_of_the_old_layout_is_read_and_resumed_in_its_layout(tmp_path):
    """The layout before (7 separate attributes, every choice a parameter): reports read it, a run
    resumes it in that layout, and the trials are those a study begun in the new layout gets."""
    old = tmp_path / "old.journal"
    shutil.copy(OLD, old)
    study = load_study(NAME, str(old))
    assert LAYOUT_ATTR not in study.user_attrs and RECORD_ATTR not in study.trials[0].user_attrs
    _, before = report_data(NAME, str(old))
    assert len(before.rows) == 4 and all(set(COLUMNS) <= set(r) and r["param_chunks"] == 64 for r in before.rows)
    assert run_study(load_studies(BW)[0], trials=8, storage=str(old))["complete"] == 8
    resumed = load_study(NAME, str(old))
    assert LAYOUT_ATTR not in resumed.user_attrs
    assert all("kind_4d_0" in t.params and RECORD_ATTR in t.user_attrs for t in resumed.trials[4:])
    new = str(tmp_path / "new.journal")
    run_study(load_studies(BW)[0], trials=8, storage=new)
    fresh = load_study(NAME, new).trials
    assert [(trial_params(t), t.values, trial_record(t)) for t in resumed.trials] == [
        (trial_params(t), t.values, trial_record(t)) for t in fresh
    ]
    _, after = report_data(NAME, str(old))
    assert after.rows[:4] == before.rows
    assert [list(r.items()) for r in after.rows] == [list(r.items()) for r in report_data(NAME, new)[1].rows]


def test_the_choices_come_in_the_order_the_space_draws_them():
    """A report's columns are the same in both layouts: fixed choices go back where they were drawn."""
    dist = optuna.distributions
    params = {"dims": 2, "shape_2d": "64x16", "kind_2d_0": "fc", "bw_2d_0": 100.0, "bw_2d_1": 50.0, "chunks": 16}
    dists = {
        "dims": dist.CategoricalDistribution([2, 3]),
        "shape_2d": dist.CategoricalDistribution(["64x16", "32x32"]),
        "kind_2d_0": dist.CategoricalDistribution(["fc", "ring"]),
        "bw_2d_0": dist.FloatDistribution(50, 400),
        "bw_2d_1": dist.FloatDistribution(25, 100),
        "chunks": dist.CategoricalDistribution([16, 64]),
    }
    fixed = {"kind_2d_1": "switch", "scheduler": "themis", "queue": "scf"}
    t = optuna.trial.create_trial(
        params=params, distributions=dists, value=1.0, user_attrs={RECORD_ATTR: {"topology": "x", FIXED_KEY: fixed}}
    )
    assert list(trial_params(t)) == [
        "dims",
        "shape_2d",
        "kind_2d_0",
        "kind_2d_1",
        "bw_2d_0",
        "bw_2d_1",
        "chunks",
        "scheduler",
        "queue",
    ]
    assert trial_params(t) == params | fixed and trial_record(t) == {"topology": "x"}


def test_the_cached_bound_is_the_uncached_one_and_depends_on_the_bandwidths():
    rng = random.Random(7)
    kinds, shape, lats = ("ring", "fc", "ring", "switch"), (4, 8, 4, 8), (20, 700, 700, 1700)
    splits = [(375, 175, 150, 100), (25, 25, 25, 725), (206.637, 174.408, 105.259, 313.695)]
    splits += [tuple(25 + 700 * x / sum(w) for x in w) for w in ([rng.random() for _ in range(4)] for _ in range(5))]
    bounds = []
    for bws in splits:
        topo = Topology(tuple(Dim(k, p, b, lat) for k, p, b, lat in zip(kinds, shape, bws, lats)))
        args = (topo, "all_reduce", 10**9, 64, "paper")
        uncached = fluid_bound.__wrapped__(*args)
        assert fluid_bound(*args) == uncached and fluid_bound(*args) == uncached  # a miss, then a hit
        bounds.append(uncached)
    # one shape, other splits, other bounds (800 GB/s in all: the ideal is the same): a bound
    # cannot be cached per shape
    assert len({round(b, 3) for b in bounds[:3]}) == 3


class _Rebuilt(ResumableSampler):
    """The search space worked out by each trial's own fresh sampler, from every trial (as before)."""

    def infer_relative_search_space(self, study, trial):
        return self._inner.infer_relative_search_space(study, trial)


@pytest.mark.parametrize("kind", ["tpe", "nsga2"])
def test_the_long_lived_search_space_draws_the_same_trials(kind):
    def objective(trial):
        x = trial.suggest_float("x", -3, 3)
        c = trial.suggest_categorical("c", ["a", "b", "c"])
        fixed = trial.suggest_categorical("fixed", [1])
        y = trial.suggest_float("y", 0, 1) if c == "a" else 0.0
        return (x - 1) ** 2 + y + fixed if kind == "tpe" else ((x - 1) ** 2 + y, x**2 + (c == "b"))

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    runs = []
    for sampler in (ResumableSampler(kind, 3), _Rebuilt(kind, 3)):
        study = optuna.create_study(sampler=sampler, directions=["minimize"] * (1 if kind == "tpe" else 2))
        for i in range(70):  # NSGA-II's first generation (50) is random
            sampler.index = i
            study.optimize(objective, n_trials=1)
        runs.append([(t.params, t.values) for t in study.trials])
    assert runs[0] == runs[1]
