"""Studies, storages and processes under faults (issue 33): a study name bound to its definition,
worker and job caps, network storage timeouts, no password in any message, no leftovers of a
refused run, Ctrl-C on a parallel sweep, and /dev/shm checks that look only at the run's own
entries; plus a few cases of each campaign class of `dse.testing.faults_studies`."""

from __future__ import annotations

import concurrent.futures.process as cfp
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from dse.core.errors import InputError  # noqa: E402
from dse.explore.study import trials as study_trials  # noqa: E402
from dse.explore.study.storage import network_timeouts, open_storage, redact  # noqa: E402
from dse.explore.study.studies import load_studies  # noqa: E402
from dse.explore.study.workers import DEFINITION_ATTR, run_study  # noqa: E402
from dse.explore.sweep import runners  # noqa: E402
from dse.testing import faults_studies as fs  # noqa: E402
from dse.testing.interrupts import RunTree  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OLD = ROOT / "tests" / "data" / "studies" / "bw_split_4d_old_layout.journal"
BW = ROOT / "studies" / "bw_split_4d.toml"


def _one_line(code, err, *words):
    assert code == 2 and err.count("\n") == 1 and err.startswith("dse: error: ") and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ 1. a name bound to its definition


def test_another_definition_under_a_used_name_is_refused_in_one_line(tmp_path, run_cli):
    base, other = fs.study_file(tmp_path, 0, None), fs.study_file(tmp_path, 1, 0)  # time vs bw_utilization
    url = str(tmp_path / "j.journal")
    assert run_cli("study", "run", str(base), "--trials", "2", "--storage", url)[0] == 0
    before = _files(tmp_path)
    code, out, err = run_cli("study", "run", str(other), "--trials", "2", "--storage", url)
    _one_line(code, err, "'c'", "another definition", "objectives", "bw_utilization", "another [study] name")
    assert out == "" and _files(tmp_path) == before
    same = fs.study_file(tmp_path, 2, None)  # another file, the same definition: resumes
    assert run_cli("study", "run", str(same), "--trials", "3", "--storage", url)[0] == 0


def test_a_study_begun_before_definitions_is_checked_then_bound(tmp_path, run_cli):
    old = tmp_path / "old.journal"
    old.write_bytes(OLD.read_bytes())
    name = "bw_split_4d.themis"
    bw = fs.study_file(tmp_path, 0, 0, name=name)  # a maximised utilisation, not the stored time
    _one_line(*run_cli("study", "run", str(bw), "--storage", str(old))[::2], "objectives")
    assert old.read_bytes() == OLD.read_bytes()
    assert run_study(load_studies(BW)[0], trials=5, storage=str(old))["complete"] == 5
    study = optuna.load_study(study_name=name, storage=open_storage(str(old)))
    assert study._storage.get_study_system_attrs(study._study_id)[DEFINITION_ATTR] == load_studies(BW)[0].definition()
    narrower = tmp_path / "narrow.toml"  # now bound: another space is refused, naming the field
    (tmp_path / "space9.toml").write_text(fs.SPACE.read_text().replace("budget = 800.0", "budget = 700.0"))
    narrower.write_text(BW.read_text().replace("../search_spaces/bw_split_4d.toml", "space9.toml"))
    _one_line(*run_cli("study", "run", str(narrower), "--only", name, "--storage", str(old))[::2], "space.bandwidth")


def test_two_commands_racing_to_create_one_name_one_definition_wins(tmp_path):
    """Two `dse study run` of study "c", different definitions, started together on a new journal."""
    files = [fs.study_file(tmp_path, 0, None), fs.study_file(tmp_path, 1, 1)]  # minimise vs maximise time
    url = str(tmp_path / "race.journal")
    procs = [
        fs._dse(["study", "run", str(f), "--trials", str(2 + i), "--storage", url], tmp_path, fs._env())
        for i, f in enumerate(files)
    ]
    runs = [fs._watch(p) for p in procs]
    assert sorted(r[0] for r in runs) == [0, 2], [r[2] for r in runs]
    won = [r[0] for r in runs].index(0)
    _one_line(runs[1 - won][0], runs[1 - won][2], "another definition", "objectives")
    stored, directions, trials = fs.stored_study(url, "c")
    winner = load_studies(files[won])[0]
    assert stored == winner.definition() and directions == winner.directions
    assert [t.state.name for t in trials] == ["COMPLETE"] * (2 + won)


# ------------------------------------------------------------------ 2. worker and job caps


def test_workers_above_the_process_limit_are_refused_before_anything(tmp_path, run_cli):
    study = fs.study_file(tmp_path, 0, None)
    before = _files(tmp_path)
    code, _, err = run_cli(
        "study", "run", str(study), "--workers", "1000", "--trials", "3", "--storage", str(tmp_path / "j.journal")
    )
    _one_line(code, err, "--workers", "1,000", "256", "DSE_MAX_PROCESSES")
    assert _files(tmp_path) == before


def test_workers_are_clamped_to_the_trials_left_with_a_note(tmp_path):
    study = fs.study_file(tmp_path, 0, None)
    cmd = ["study", "run", str(study), "--workers", "6", "--trials", "2", "--storage", str(tmp_path / "j.journal")]
    code, _, err, most = fs._watch(fs._dse(cmd, tmp_path, fs._env()))
    assert code == 0 and most <= 2
    assert err == "dse: warning: --workers 6: c has 2 trials left to run, so 2 workers start\n"


def test_a_quiet_run_clamps_without_a_note(tmp_path, recwarn):
    spec = load_studies(fs.study_file(tmp_path, 0, None))[0]
    assert run_study(spec, trials=1, workers=4, storage=str(tmp_path / "q.journal"), quiet=True)["complete"] == 1
    assert not [w for w in recwarn if "--workers" in str(w.message)]


def test_jobs_are_capped_and_clamped_to_the_points_left(tmp_path, run_cli):
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\ntopology = "Ring(4,100,10)_SW(4,50,100)"\nsize = ["1MB", "2MB", "3MB"]\n')
    out = tmp_path / "o.csv"
    for jobs, words in (("1000", ("--jobs", "256", "DSE_MAX_PROCESSES")), ("0", ("--jobs",)), ("-2", ("--jobs",))):
        _one_line(*run_cli("sweep", str(spec), "--out", str(out), "--jobs", jobs)[::2], *words)
        assert not out.exists()
    code, _, err, most = fs._watch(fs._dse(["sweep", str(spec), "--out", str(out), "--jobs", "8"], tmp_path, fs._env()))
    assert code == 0 and most <= 3 and err == "dse: warning: --jobs 8: 3 points left to run, so 3 workers\n"
    out.unlink()
    code, _, err = run_cli("sweep", str(spec), "--out", str(out), "--jobs", "-1")  # every core: no note
    assert code == 0 and err == ""


# ------------------------------------------------------------------ 3 and 4. network storages


@pytest.mark.parametrize("behaviour", ["silent", "close"])
def test_a_port_that_never_answers_is_one_line_within_the_connect_timeout(tmp_path, behaviour):
    with fs.fake_server(behaviour) as port:
        url = f"postgresql+psycopg://bob:s3cr3t-pw@127.0.0.1:{port}/db"
        p = fs._dse(["study", "list", "--storage", url], tmp_path, fs._env(DSE_STORAGE_CONNECT_TIMEOUT="2"))
        code, out, err, _ = fs._watch(p, timeout=fs.NETWORK_BOUND_S)
    _one_line(code, err, "bob:***@127.0.0.1")
    assert "s3cr3t" not in out + err and (behaviour != "silent" or "timeout" in err)


def test_network_timeouts_default_env_and_url():
    assert network_timeouts("postgresql://u@h/db") == {"connect_timeout": 10, "options": "-c statement_timeout=60000"}
    os.environ["DSE_STORAGE_CONNECT_TIMEOUT"], os.environ["DSE_STORAGE_STATEMENT_TIMEOUT"] = "0.5", "0"
    try:
        assert network_timeouts("postgresql://u@h/db") == {"connect_timeout": 2}  # libpq's least; 0: no statement limit
        os.environ["DSE_STORAGE_CONNECT_TIMEOUT"] = "soon"
        with pytest.raises(InputError, match="DSE_STORAGE_CONNECT_TIMEOUT"):
            network_timeouts("postgresql://u@h/db")
    finally:
        del os.environ["DSE_STORAGE_CONNECT_TIMEOUT"], os.environ["DSE_STORAGE_STATEMENT_TIMEOUT"]
    mine = "postgresql://u@h/db?connect_timeout=30&options=-c%20statement_timeout%3D5"
    assert network_timeouts(mine) == {}  # the URL's own values are kept


@pytest.mark.parametrize(
    "text, shown",
    [
        ("cannot open 'postgresql://bob:pa:ss/w0rd@h:5/db': x", "cannot open 'postgresql://bob:***@h:5/db': x"),
        ("mysql+pymysql://root:toor@127.0.0.1/x", "mysql+pymysql://root:***@127.0.0.1/x"),
        ("postgresql://h/db?user=u&password=hunter2&x=1", "postgresql://h/db?user=u&password=***&x=1"),
        ("missing '=' after 'host=h password=hunter2'", "missing '=' after 'host=h password=***'"),
        ("sqlite:////tmp/a:b@c.db and a/path:x@y", "sqlite:////tmp/a:b@c.db and a/path:x@y"),
    ],
)
def test_redact_hides_every_password(text, shown):
    assert redact(text) == shown


def test_redact_hides_the_urls_password_wherever_the_driver_repeats_it():
    url = "postgresql://u:p%40ss%20word@h/db"
    assert redact("auth failed for 'p@ss word' (p%40ss%20word)", url) == "auth failed for '***' (***)"


@pytest.mark.parametrize("command", [["study", "list"], ["study", "run", str(BW), "--trials", "1"]])
def test_mysql_and_postgres_errors_never_print_the_password(tmp_path, run_cli, command):
    for url in ("mysql://root:Sup3rS3cret@127.0.0.1:1/db", "postgresql+psycopg2://root:Sup3rS3cret@127.0.0.1:1/db"):
        code, out, err = run_cli(*command, "--storage", url)
        _one_line(code, err, "root:***@127.0.0.1")
        assert "Sup3rS3cret" not in out + err


# ------------------------------------------------------------------ 5. nothing left by a refused run


def test_an_in_memory_or_foreign_sqlite_storage_leaves_no_lock(tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("not a database\n")
    for url in ("sqlite:///:memory:", "sqlite://", ":memory:", f"sqlite:///{tmp_path / 'notes.txt'}"):
        for command in (["study", "run", str(BW), "--trials", "1"], ["study", "list"]):
            _one_line(*run_cli(*command, "--storage", url)[::2], "storage")
    assert _files(tmp_path) == {"notes.txt": b"not a database\n"}


def test_a_study_none_of_whose_designs_can_be_measured_leaves_no_journal(tmp_path, run_cli, monkeypatch):
    """An objective scheduled by lp_guided needs some 300 simulations per design: over the work limit
    at measurement, though the study file loads. Refused by the probe, before any storage."""
    study = tmp_path / "lp.toml"
    study.write_text(
        f'[study]\nname = "lp"\nspace = "{fs.SPACE}"\n[workload]\nsize = "1GB"\n'
        '[[objectives]]\nmetric = "time"\nscheduler = "lp_guided"\n'
    )
    monkeypatch.setenv("DSE_MAX_WORK", "5000")
    _one_line(*run_cli("study", "run", str(study), "--trials", "1")[::2], "first design", "cannot be measured")
    assert _files(tmp_path) == {"lp.toml": study.read_bytes()}

    def rejected(*args):
        raise InputError("cost_model", "rejects every design")

    monkeypatch.setattr(study_trials, "measure", rejected)  # the probe measures before any storage opens
    with pytest.raises(InputError, match="first design .* cannot be measured: cost_model: rejects"):
        run_study(load_studies(fs.study_file(tmp_path, 0, None))[0], trials=1, storage=str(tmp_path / "x.journal"))
    assert not (tmp_path / "x.journal").exists()


# ------------------------------------------------------------------ 6. Ctrl-C on a parallel sweep


def _slow(x: int) -> int:
    time.sleep(0.05)
    return x


def test_a_pool_stopped_early_leaves_no_management_thread_for_the_exit_hook():
    """The traceback came from concurrent.futures' exit hook writing to a wake-up pipe the pool's
    management thread was closing at that moment: `_stop` now waits for that thread."""
    gen = runners.process_runner(2)(_slow, list(range(40)))
    next(iter(gen))
    gen.close()  # as a Ctrl-C in the consumer does
    managers = [t for t in threading.enumerate() if isinstance(t, cfp._ExecutorManagerThread)]
    assert managers == [] and all(w._closed for w in list(cfp._threads_wakeups.values()))


def test_ctrl_c_on_a_two_job_sweep_is_one_line_and_exit_130(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(
        '[sweep]\ntopology = ["4D-Ring_FC_Ring_SW", "3D-SW_SW_SW_hetero"]\nsize = ["1MB", "2MB", "3MB", "4MB"]\n'
        f"chunks = [64, 256, 1024]\nseed = {list(range(200))}\n"
    )
    for k in range(3):
        out = tmp_path / f"o{k}.csv"
        p = subprocess.Popen(
            [sys.executable, "-m", "dse", "sweep", str(spec), "--out", str(out), "--jobs", "2"],
            env=fs._env(),
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        while p.poll() is None and (not out.exists() or out.stat().st_size < 20_000 * (k + 1)):
            time.sleep(0.01)
        assert p.poll() is None, "the sweep ended before it was interrupted"
        os.killpg(p.pid, signal.SIGINT)
        err = p.communicate(timeout=120)[1]
        assert p.returncode == 130 and err.count("\n") == 1 and err.startswith("dse: interrupted"), err


# ------------------------------------------------------------------ 7. /dev/shm: only the run's own entries


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or not os.path.isdir("/proc/self/fd"), reason="Linux only")
def test_shm_leftovers_are_only_what_the_run_made(tmp_path):
    tag = f"dsetest{random.Random().randrange(10**9)}"
    before = set(os.listdir("/dev/shm"))
    code = (
        "import os, sys, time\n"
        f"open('/dev/shm/{tag}_named_%d' % os.getpid(), 'w').close()\n"
        f"f = open('/dev/shm/{tag}_held', 'w')\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        unrelated = Path(f"/dev/shm/{tag}_other")  # made meanwhile by a process outside the run
        unrelated.write_text("")
        tree = RunTree(p.pid)
        tree.scan()
        p.communicate("")
        assert tree.leftovers(before) == sorted([f"{tag}_held", f"{tag}_named_{p.pid}"])
    finally:
        for name in os.listdir("/dev/shm"):
            if name.startswith(tag):
                os.unlink(f"/dev/shm/{name}")


# ------------------------------------------------------------------ the campaign classes, a few cases each


@pytest.mark.parametrize("kind", sorted(fs.CAMPAIGN))
@pytest.mark.parametrize("seed", [0, 1])
def test_campaign_cases(kind, seed, tmp_path):
    _, _, case = fs.CAMPAIGN[kind]
    assert case(random.Random(f"test-{kind}-{seed}"), tmp_path) == []


def test_workers_get_the_storage_through_the_environment_not_the_command_line(tmp_path, monkeypatch):
    """A database password must not show in `ps`: workers read DSE_STORAGE, their argv has no URL."""
    from dse.explore.study import workers as study_workers

    seen: list[tuple[list[str], dict[str, str]]] = []

    class Done:
        def __init__(self, cmd, env):
            seen.append((cmd, env))

        def poll(self):
            return 0

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(study_workers.subprocess, "Popen", lambda cmd, env: Done(cmd, env))
    monkeypatch.setattr(study_workers, "wait_all", lambda procs, poll: [0 for _ in procs])
    spec = load_studies(BW)[0]
    url = "postgresql+psycopg://alice:s3cret-pw@127.0.0.1:9/db"
    study_workers._run_workers(spec, url, 4, 2)
    assert len(seen) == 2
    for cmd, env in seen:
        assert not any("s3cret" in part for part in cmd) and "--storage" not in cmd
        assert env["DSE_STORAGE"] == url


def test_dse_storage_stands_for_the_option(tmp_path, run_cli, monkeypatch):
    """`dse study list` with DSE_STORAGE set reads that storage, as --storage would."""
    journal = tmp_path / "s.journal"
    run_study(load_studies(BW)[0], trials=2, storage=str(journal))
    monkeypatch.setenv("DSE_STORAGE", str(journal))
    code, out, err = run_cli("study", "list")
    assert code == 0 and str(journal) in out and "bw_split_4d" in out, (out, err)


def test_a_database_failing_mid_run_is_one_run_error_line_without_the_password():
    """A statement timeout or a dropped connection after the storage opened: `RunError`, one line."""
    import sqlalchemy.exc

    from dse.core.errors import RunError
    from dse.explore.study.workers import storage_failures

    url = "postgresql+psycopg://alice:s3cret-pw@db.example/x"
    with pytest.raises(RunError) as e, storage_failures(url):
        raise sqlalchemy.exc.OperationalError("UPDATE trials", {}, Exception("canceling statement\nDETAIL: s3cret-pw"))
    msg = str(e.value)
    assert "\n" not in msg and "s3cret" not in msg and "alice:***@" in msg and "OperationalError" in msg
    with pytest.raises(KeyError), storage_failures(url):  # anything else passes through unchanged
        raise KeyError("x")


@pytest.mark.parametrize("kind", ["fifo", "sparse", "long-first-line"])
def test_a_storage_that_is_no_journal_is_refused_without_a_lock_beside_it(tmp_path, run_cli, kind):
    """A FIFO, a 100 GB sparse file or a first line past 1 MiB: one line, nothing read past the
    check, and no ``.flock`` left beside a file dse did not write."""
    path = tmp_path / "r.journal"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(100 * 2**30)
    else:
        path.write_bytes(b'{"op_code": 0, "x": "' + b"a" * (2 << 20) + b'"}\n')
    code, _, err = run_cli("study", "report", "anything", "--storage", str(path), "--out", str(tmp_path / "rep"))
    _one_line(code, err, "r.journal")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.journal"]
