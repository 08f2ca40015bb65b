"""Shared test helpers: paths to the calibration data and a CLI runner."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared"


def read_csv(name: str) -> list[dict[str, str]]:
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def run_cli(capsys):
    """Run `dse` in process: returns (exit code, stdout, stderr)."""
    from dse.cli import main

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
