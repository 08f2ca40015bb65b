"""The collective a command line names, as the simulator takes it (`dse.sim.spec.SpecArgs`).

Imported by the commands that simulate, when they run: it loads `dse.sim.spec`, which `dse --help`
does not need."""

from __future__ import annotations

import argparse
from typing import Any

from dse.cli.parser import cost_model_arg
from dse.sim.spec import SPEC_KEYS


def spec_args(args: argparse.Namespace) -> dict[str, Any]:
    """The collective's keywords (`SPEC_KEYS`) as the command line gave them, the cost model as
    `cost_model_arg` names it; an inconsistent ``--calibration`` is one `InputError`."""
    out = {key: getattr(args, key) for key in SPEC_KEYS}
    out["cost_model"] = cost_model_arg(args)
    return out
