"""The "dashboard HTTP API" fault class (`dse.testing.faults_dashboard`): a few seeded cases, the
issue's attack replayed on the real command, and a check that the campaign does catch a dashboard
that writes."""

import functools
import json
import random
import select
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("optuna")
pytest.importorskip("optuna_dashboard")

from dse.testing import faults_dashboard  # noqa: E402
from dse.testing.faults_dashboard import ROOT, make_journal, send  # noqa: E402

from .conftest import stop_server


@pytest.mark.parametrize("seed", range(4))
def test_random_requests_leave_the_storage_unchanged(seed, tmp_path):
    assert faults_dashboard.case(random.Random(f"test-{seed}"), tmp_path) == []


def test_the_campaign_catches_a_dashboard_that_writes(tmp_path, monkeypatch):
    """The same case on a dashboard served with --allow-writes: the checks report broken promises."""
    import dse.explore.study.dashboard as dashboard

    writable = functools.partial(dashboard.dashboard_server, allow_writes=True)
    monkeypatch.setattr(dashboard, "dashboard_server", writable)
    problems = [
        p for seed in range(3) for p in faults_dashboard.case(random.Random(f"test-{seed}"), tmp_path / str(seed))
    ]
    assert any("not 403" in p for p in problems), problems


def _attack(port: int, study: int, other: int, trial: int) -> list[int | None]:
    """The requests of issue 33: create, rename, delete twice, delete the other study, tell a trial."""
    js = {"Content-Type": "application/json"}
    requests = [
        ("POST", "/api/studies", {"study_name": "x", "directions": ["minimize"]}),
        ("POST", f"/api/studies/{study}/rename", {"study_name": "renamed"}),
        ("DELETE", f"/api/studies/{study}", {}),
        ("DELETE", f"/api/studies/{study}", {}),
        ("DELETE", f"/api/studies/{other}", {}),
        ("POST", f"/api/trials/{trial}/tell", {"state": "Complete", "values": [1.0]}),
    ]
    return [send(port, m, p, json.dumps(b).encode(), js)[0] for m, p, b in requests]


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_the_issues_attack_on_the_command_changes_nothing(kind, tmp_path, run_cli):
    """`dse study dashboard` as a user runs it, attacked as in the issue: every request 403, the
    storage the same bytes, `dse study list` still shows every trial, nothing on stderr."""
    if kind == "journal":
        url, names = make_journal(tmp_path, (8, 3))
        path = Path(url)
    else:
        from dse.explore.study.studies import load_studies
        from dse.explore.study.workers import run_study

        path = tmp_path / "s.db"
        url = f"sqlite:///{path}"
        specs = load_studies(faults_dashboard.STUDY_FILE)
        run_study(specs[0], trials=3, storage=url)
        run_study(specs[1], trials=2, storage=url)
        names = [s.name for s in specs]
    ids = faults_dashboard.study_and_trial_ids(url, names)
    before = path.read_bytes()
    cmd = [sys.executable, "-m", "dse", "study", "dashboard", names[0], "--storage", url, "--port", "0"]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert select.select([p.stdout], [], [], 120)[0], "no URL printed"
        port = int(p.stdout.readline().split(" at http://127.0.0.1:")[1].split("/")[0])
        answers = _attack(port, ids[names[0]][0], ids[names[1]][0], ids[names[0]][1][-1])
    finally:
        out, err = stop_server(p)
    assert answers == [403] * 6 and p.returncode == 0 and err == ""
    assert path.read_bytes() == before
    code, out, err = run_cli("study", "list", "--storage", url, "--json")
    expected = {names[0]: 8, names[1]: 3} if kind == "journal" else {names[0]: 3, names[1]: 2}
    assert code == 0 and {r["study"]: r["complete"] for r in json.loads(out)} == expected
