"""`dse study run`'s progress bar: complete trials out of the target per study, on a terminal (also
one that reports a size of 0x0), never double-counted with several workers, nothing in CI."""

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

pytest.importorskip("optuna")

from dse.explore.study.progress import FALLBACK_COLUMNS, FALLBACK_ROWS, TrialBar, bar_shape  # noqa: E402
from dse.explore.study.workers import summary  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BW = ROOT / "studies" / "bw_split_4d.toml"
THEMIS = "bw_split_4d.themis"


def _counts(err: str, name: str) -> list[tuple[int, int]]:
    """Every (done, total) the bar of study `name` showed."""
    return [(int(a), int(b)) for a, b in re.findall(rf"{re.escape(name)}:\s+\d+%\|[^|]*\|\s*(\d+)/(\d+)", err)]


def test_the_bar_counts_complete_trials_to_the_target_and_resumes(run_cli, tmp_path):
    url = str(tmp_path / "p.journal")
    code, out, err = run_cli("study", "run", str(BW), "--only", THEMIS, "--trials", "5", "--storage", url, "--progress")
    assert code == 0 and len(out.splitlines()) == 1
    shown = _counts(err, THEMIS)
    assert shown[0] == (0, 5) and shown[-1] == (5, 5) and "trial" in err
    code, _, err = run_cli("study", "run", str(BW), "--only", THEMIS, "--trials", "8", "--storage", url, "--progress")
    shown = _counts(err, THEMIS)
    assert code == 0 and shown[0] == (5, 8) and shown[-1] == (8, 8)


def test_one_bar_per_variant(run_cli, tmp_path):
    code, _, err = run_cli(
        "study", "run", str(BW), "--trials", "3", "--storage", str(tmp_path / "v.journal"), "--progress"
    )
    assert code == 0
    assert _counts(err, "bw_split_4d.themis")[-1] == (3, 3) and _counts(err, "bw_split_4d.baseline")[-1] == (3, 3)


def test_several_workers_show_one_bar_in_the_parent(run_cli, tmp_path):
    url = str(tmp_path / "w.journal")
    code, _, err = run_cli(
        "study", "run", str(BW), "--only", THEMIS, "--trials", "40", "--workers", "2", "--storage", url, "--progress"
    )
    shown = _counts(err, THEMIS)
    done = [d for d, _ in shown]
    assert code == 0 and shown and all(total == 40 for _, total in shown)
    assert done == sorted(done) and done[-1] == 40 == summary(THEMIS, url)["complete"]


def test_the_parent_counts_complete_trials_on_the_storage(tmp_path):
    """What the parent of several workers polls: complete trials only, each once, from any process."""
    import optuna

    from dse.explore.study.progress import CompleteCount
    from dse.explore.study.storage import open_storage
    from dse.explore.study.studies import load_studies
    from dse.explore.study.workers import run_study

    url = str(tmp_path / "c.journal")
    run_study(load_studies(BW)[0], trials=3, storage=url)
    count = CompleteCount(THEMIS, url)
    assert count() == 3
    study = optuna.load_study(study_name=THEMIS, storage=open_storage(url))
    study.tell(study.ask(), state=optuna.trial.TrialState.FAIL)  # a failed and a running trial: not complete
    study.ask()
    run_study(load_studies(BW)[0], trials=5, storage=url)  # another storage handle adds two
    assert count() == 5 == summary(THEMIS, url)["complete"]


def test_no_bar_when_stderr_is_not_a_terminal(run_cli, tmp_path):
    url = str(tmp_path / "q.journal")
    code, out, err = run_cli("study", "run", str(BW), "--only", THEMIS, "--trials", "3", "--storage", url)
    assert code == 0 and err == "" and out.startswith(f"{THEMIS}: 3 complete trials")
    code, _, err = run_cli(
        "study", "run", str(BW), "--only", THEMIS, "--trials", "4", "--storage", url, "--progress", "--quiet"
    )
    assert code == 0 and err == ""


def test_no_bar_when_nothing_is_left_to_run(run_cli, tmp_path):
    url = str(tmp_path / "n.journal")
    run_cli("study", "run", str(BW), "--only", THEMIS, "--trials", "3", "--storage", url)
    code, _, err = run_cli("study", "run", str(BW), "--only", THEMIS, "--trials", "3", "--storage", url, "--progress")
    assert code == 0 and err == ""


def _pty(cols: int, rows: int) -> tuple[int, int]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return master, slave


def test_bar_shape_of_a_terminal_a_sizeless_terminal_and_a_pipe(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    for size, want in (((100, 30), (100, 30)), ((0, 0), (FALLBACK_COLUMNS, FALLBACK_ROWS))):
        master, slave = _pty(*size)
        with os.fdopen(slave, "w") as stream:
            assert bar_shape(stream) == want
        os.close(master)
    assert bar_shape(io.StringIO()) == (FALLBACK_COLUMNS, FALLBACK_ROWS)
    monkeypatch.setenv("COLUMNS", "120")
    assert bar_shape(io.StringIO())[0] == 120


def test_the_bar_never_passes_its_total_nor_goes_back():
    stream = io.StringIO()
    bar = TrialBar("s", 4, 1, stream)
    assert bar.n == 1
    bar.show(2)
    bar.show(1)
    assert bar.n == 2
    bar.show(7)
    assert bar.n == 4
    bar.close()
    shown = _counts(stream.getvalue(), "s")
    assert shown[0] == (1, 4) and shown[-1] == (4, 4) and max(d for d, _ in shown) == 4


def test_a_terminal_of_size_0x0_gets_a_bar_by_default(tmp_path):
    """A pty without a size: tqdm alone draws nothing there; dse's bar draws 80 columns."""
    master, slave = _pty(0, 0)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    cmd = [
        sys.executable,
        "-m",
        "dse",
        "study",
        "run",
        str(BW),
        "--only",
        THEMIS,
        "--trials",
        "4",
        "--storage",
        str(tmp_path / "t.journal"),
    ]
    p = subprocess.Popen(cmd, cwd=ROOT, stdin=slave, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    while select.select([master], [], [], 120)[0]:  # a safety net for a hung child, not a measurement
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out, _ = p.communicate(timeout=120)
    text = seen.decode()
    assert p.returncode == 0 and out.decode().startswith(f"{THEMIS}: 4 complete trials")
    shown = _counts(text, THEMIS)
    assert shown[-1] == (4, 4)
    last = text.rstrip().split("\r")[-1]
    assert len(last) == FALLBACK_COLUMNS and "100%" in last
