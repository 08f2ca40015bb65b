"""Shared test helpers: paths to the calibration data and a CLI runner."""

from __future__ import annotations

import csv
import math
import signal
import struct
import subprocess
import tarfile
from pathlib import Path

import pytest
from hypothesis import settings

from dse.testing.interrupts import default_sigint

# Property tests explore the same examples on every run (derandomized, no example database), so a
# test's outcome never depends on luck or on what an earlier run stored; they still cover hundreds
# of cases each.
settings.register_profile("dse", derandomize=True, database=None)
settings.load_profile("dse")

# The Ctrl-C tests send SIGINT to the commands they start: SIGINT must not be ignored here (as it
# is when the suite runs in the background of a shell script), since every child would inherit that.
default_sigint()

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared"
#: ASTRA-sim 2.x's per-rank reference workloads (../shared; the tests that read them skip without it)
P2P = SHARED / "workloads" / "astra-sim-2-p2p"


@pytest.fixture(scope="session")
def p2p_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The per-rank reference traces (`P2P`'s stage_ets.tar.gz), extracted once into a folder of the suite's own."""
    folder = tmp_path_factory.mktemp("p2p_ets")
    with tarfile.open(P2P / "stage_ets.tar.gz") as tar:
        tar.extractall(folder, filter="data")
    return folder


def stop_server(p: subprocess.Popen, timeout: float = 60.0) -> tuple[str, str]:
    """Ctrl-C a server a test started and return its (stdout, stderr); if it does not stop in time it is
    killed and the timeout raised: the server must not outlive the test."""
    p.send_signal(signal.SIGINT)
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise


def bits(x):
    """`x` with every float as its bit pattern (every NaN alike): == holds to the bit."""
    if isinstance(x, float):
        return "nan" if math.isnan(x) else struct.pack("<d", x)
    if isinstance(x, (tuple, list)):
        return tuple(bits(v) for v in x)
    return x


def read_csv(name: str) -> list[dict[str, str]]:
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def run_cli(capsys):
    """Run `dse` in process: returns (exit code, stdout, stderr)."""
    from dse.cli.main import main

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
