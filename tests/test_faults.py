"""The fault-injection suite: malformed input, damaged files and interrupted runs (dse.testing.faults, dse.testing.interrupts).

Hypothesis drives the malformed inputs and the damage; the interrupted runs are kill -9 and SIGINT,
sent when a sweep (one and two jobs), a study or a reproduction has written a given share of its
output. `scripts/fault_campaign.py`
runs the same checks at a larger scale and counts them for the README.
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dse.testing import faults, interrupts


def fast(n: int) -> settings:
    return settings(
        max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
    )


@pytest.fixture(scope="module", autouse=True)
def small_work_limit():
    """A low work limit: every accepted fuzz case stays quick, and the limit itself gets exercised."""
    old = os.environ.get("DSE_MAX_WORK")
    os.environ["DSE_MAX_WORK"] = "2e5"
    yield
    if old is None:
        del os.environ["DSE_MAX_WORK"]
    else:
        os.environ["DSE_MAX_WORK"] = old


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    return tmp_path_factory.mktemp("faults")


def _fresh(box, name):
    d = box / name
    if d.exists():
        for p in sorted(d.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
    d.mkdir(exist_ok=True)
    return d


@fast(400)
@given(rng=st.randoms(use_true_random=False))
def test_malformed_commands_get_one_line_or_work(rng, box):
    """Mutated topologies, odd sizes, chunk counts, models and options on evaluate, bound, compare."""
    folder = _fresh(box, "cmd")
    argv = faults.notation_argv(rng)
    assert faults.cli_case(argv, folder) == [], argv


@fast(300)
@given(
    kind=st.sampled_from(("sweep", "study", "space", "astra", "workload", "binary")),
    rng=st.randoms(use_true_random=False),
)
def test_malformed_files_get_one_line_and_leave_nothing(kind, rng, box):
    """Mutated sweep, study, space and workload files, and random bytes: exit 0, or one line with no
    output created and no file changed."""
    folder = _fresh(box, "files")
    argv, outputs = faults.file_argv(kind, rng, folder)
    assert faults.cli_case(argv, folder, outputs=outputs) == [], (
        kind,
        (folder / "in.toml").read_bytes()[:400] if (folder / "in.toml").exists() else argv,
    )


@fast(120)
@given(rng=st.randoms(use_true_random=False))
def test_damaged_sweep_csvs_are_repaired_or_left_untouched(rng, box):
    assert faults.csv_case(box, rng) == []


@fast(30)
@given(rng=st.randoms(use_true_random=False))
def test_damaged_journals_are_repaired_or_left_untouched(rng, box):
    assert faults.journal_case(box, rng) == []


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """Uninterrupted outputs of every kill target, computed once (with the default work limit)."""
    folder = tmp_path_factory.mktemp("kill-ref")
    os.environ.pop("DSE_MAX_WORK", None)
    try:
        return {t: interrupts.kill_reference(t, folder) for t in interrupts.KILL_TARGETS}
    finally:
        os.environ["DSE_MAX_WORK"] = "2e5"


# (target, signal, share of the uninterrupted run's output written when the signal is sent)
KILLS = [
    ("sweep1", signal.SIGKILL, 0.3),
    ("sweep1", signal.SIGINT, 0.7),
    ("sweep2", signal.SIGKILL, 0.6),
    ("sweep2", signal.SIGINT, 0.2),
    ("study", signal.SIGKILL, 0.5),
    ("study", signal.SIGINT, 0.8),
    ("reproduce", signal.SIGKILL, 0.4),
    ("reproduce", signal.SIGINT, 0.6),
]


@pytest.mark.parametrize("target, sig, at", KILLS, ids=[f"{t}-{s.name}-{a:.0%}" for t, s, a in KILLS])
def test_interrupted_runs_resume_to_the_uninterrupted_result(target, sig, at, references, tmp_path):
    os.environ.pop("DSE_MAX_WORK", None)
    try:
        assert interrupts.kill_case(target, sig, at, tmp_path, references[target]) == []
    finally:
        os.environ["DSE_MAX_WORK"] = "2e5"


def test_the_damage_generator_makes_both_kinds(tmp_path):
    """The CSV damage covers repairable and foreign damage (so both branches above are exercised)."""
    _, ref = faults.sweep_reference(tmp_path)
    kinds = {faults.damage_csv(ref, random.Random(s))[1] for s in range(40)}
    assert kinds == {True, False}


def test_output_size_skips_a_file_gone_as_it_is_counted(tmp_path, monkeypatch):
    """The interrupted runs poll `output_size` while dse renames its temporary files into place: one gone
    between being listed and its size read is skipped (it raised FileNotFoundError, failing the case)."""
    (tmp_path / "done.csv").write_bytes(b"x" * 10)
    tmp = tmp_path / ".out.csv.1.tmp"
    tmp.write_bytes(b"y" * 5)
    is_file = Path.is_file

    def gone_once_seen(self: Path) -> bool:
        seen = is_file(self)
        if self == tmp:
            tmp.unlink()
        return seen

    monkeypatch.setattr(Path, "is_file", gone_once_seen)
    assert interrupts.output_size(tmp_path) == 10
