"""Every class of the second fault campaign (`CAMPAIGN` tables of `dse.testing.faults_*`) under
hypothesis: each case function draws all its choices (which file is crafted, decompression ratios,
which special file, which write fails, which requests the dashboard gets, which dimensions, which
engine argument is mutated) from a `random.Random` that hypothesis controls, so a failing case
shrinks to a small one. A few examples per class (the campaign script runs hundreds, seeded); the
profile in conftest.py makes the runs deterministic."""

from __future__ import annotations

import importlib
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MODULES = ("files", "traces", "ranks", "dims", "dashboard", "studies", "engine")
#: Examples per class: the slow classes (whole studies in subprocesses) get fewer.
EXAMPLES = {"concurrent studies of one name": 1, "short writes and full disks": 2, "mutated engine calls": 25}


def _classes() -> list[tuple[str, object]]:
    out = []
    for name in MODULES:
        try:
            module = importlib.import_module(f"dse.testing.faults_{name}")
        except ImportError as e:  # the dashboard's class needs the optional optuna-dashboard
            pytest.skip(f"dse.testing.faults_{name}: {e}", allow_module_level=True)
        out += [(kind, entry[2]) for kind, entry in module.CAMPAIGN.items()]
    return out


CLASSES = _classes()


def test_every_campaign_module_is_covered():
    """The campaign script runs exactly these modules' classes (a new module must be added to both)."""
    import runpy

    script = runpy.run_path(str(Path(__file__).parents[1] / "scripts" / "fault_campaign.py"), run_name="x")
    assert tuple(script["CAMPAIGN_MODULES"]) == MODULES
    assert len({kind for kind, _ in CLASSES}) == len(CLASSES) == 11


@pytest.mark.parametrize("kind, case", CLASSES, ids=[k for k, _ in CLASSES])
def test_campaign_class_under_hypothesis(kind, case):
    @settings(max_examples=EXAMPLES.get(kind, 3), deadline=None, suppress_health_check=list(HealthCheck))
    @given(rng=st.randoms(use_true_random=False))
    def run(rng: random.Random) -> None:
        folder = Path(tempfile.mkdtemp(prefix="dse-campaign-"))
        try:
            assert case(rng, folder) == []
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    run()
