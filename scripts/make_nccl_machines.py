#!/usr/bin/env python3
"""Make the bundled calibrations of the measured GPU machines: dse/data/nccl/machines/<name>.toml.

Run: .venv/bin/python scripts/make_nccl_machines.py          (rewrites the files)
     .venv/bin/python scripts/make_nccl_machines.py --check  (exit 1 if a file is not what it would write)

Each machine is a topology preset of the same name (dse/core/presets.py) with the `system_of` fields a
topology does not carry, fitted (`dse.costs.nccl.calibration.calibrate`) on the public nccl-tests output
dse ships for it (dse/data/nccl/, each file's `# source:` line names where it was published), or with
NCCL's defaults where none is published as a table. Rerun it after the model or the fit changes: the
output depends only on the repository (no randomness, fixed solver starts), so a rerun with nothing
changed rewrites the same bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dse.core.files import write_atomic  # noqa: E402
from dse.core.presets import PRESET_INFO  # noqa: E402
from dse.costs.nccl.calibration import (  # noqa: E402
    BUNDLED,
    MACHINES_DIR,
    Calibration,
    calibrate,
    calibration_text,
    default_calibration,
)

DATA = Path(__file__).resolve().parents[1] / "dse" / "data" / "nccl"
COMMAND = "scripts/make_nccl_machines.py"


class Machine(NamedTuple):
    """A bundled machine: its preset `name`, the fields a topology does not carry, the logs in
    dse/data/nccl it is fitted on (none: NCCL's defaults) and its sources."""

    name: str
    generation: str
    nvls: bool
    network: str
    cpu: str
    nics_per_node: int | None
    logs: tuple[str, ...]
    sources: tuple[str, ...]


MACHINES: tuple[Machine, ...] = (
    Machine(
        "HGX-H100", "hopper", True, "ib", "intel", None,
        ("dgxc_dgxh100_1node_allreduce.txt",),
        (
            "NVIDIA, 'Introducing NVIDIA HGX H100' (developer blog, 2022) and the Hopper architecture page: 8 H100 "
            "on NVSwitch, 18 NVLink 4 links = 450 GB/s one way per GPU",
            "NVIDIA DGX H100 datasheet: 2 Intel Xeon Platinum 8480C a node (the cpu field)",
            "fitted on NVIDIA's DGX H100 nccl-tests sample, all_reduce 8 B-16 GB, 8 ranks: "
            "https://github.com/NVIDIA/dgxc-benchmarking/blob/841f5466cd86b66abd48049e839c563776f6d716/nccl/README.md",
            "held out in scripts/validate_nccl.py: AWS p5 one node (aws-samples/awsome-distributed-training @7217859)",
        ),
    ),
    Machine(
        "H800-node", "hopper", True, "ib", "other", None,
        (),
        (
            "https://github.com/NVIDIA/nccl/issues/1374: one 8 x H800 node, NVLink 200 GB/s one way (8 links); "
            "NVLS all_reduce busbw 215 GB/s (prose only: no table, so NCCL's defaults, 0 rows)",
            "https://github.com/NVIDIA/nccl-tests/issues/153: H800 nodes with NVSwitch (NVLink 4, 8 links)",
        ),
    ),
    Machine(
        "DGX-A100-HDRx3", "ampere", False, "ib", "intel", 4,
        ("ncclt119_3xdgxa100_hdr.txt",),
        (
            "https://github.com/NVIDIA/nccl-tests/issues/119: 3 servers of 8 A100-SXM4-40GB (NVSwitch, NVLink 3, "
            "300 GB/s one way per GPU), 2 Intel Xeon Platinum 8358 and 4 HDR InfiniBand NICs (200 Gb/s) each; "
            "all_reduce busbw 84.8 GB/s average, 96 GB/s peak",
            "fitted on the 22 rows of that issue's table that are public (22-86 MB, 24 ranks, out-of-place)",
        ),
    ),
)  # fmt: skip


def build(machine: Machine) -> Calibration:
    """The calibration of `machine`: fitted on its logs, or NCCL's defaults without any."""
    topology = PRESET_INFO[machine.name].topology
    fields = {
        "generation": machine.generation,
        "nvls": machine.nvls,
        "network": machine.network,
        "cpu": machine.cpu,
        "nics_per_node": machine.nics_per_node,
    }
    if machine.logs:
        calib = calibrate([DATA / f for f in machine.logs], topology, **fields)  # type: ignore[arg-type]
    else:
        calib = default_calibration(topology, **fields)  # type: ignore[arg-type]
    return dataclasses.replace(calib, name=machine.name, sources=machine.sources)


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check, compare) every bundled machine's file; print one line per machine."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    p.add_argument("--out", default=str(MACHINES_DIR), help="folder of the files (default: dse's own)")
    args = p.parse_args(argv)
    assert tuple(m.name for m in MACHINES) == BUNDLED, "MACHINES and calibration.BUNDLED must name the same"
    out = Path(args.out)
    stale = []
    for machine in MACHINES:
        calib = build(machine)
        text = calibration_text(calib, command=COMMAND)
        path = out / f"{machine.name}.toml"
        if args.check:
            same = path.is_file() and path.read_text(encoding="utf-8") == text
            stale += [] if same else [path]
        else:
            out.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text, str(path))
        print(f"{machine.name}: {calib.rows} rows, fit error {100 * calib.fit_gm:.2f} % -> {path}")
    if stale:
        print(f"not up to date (rerun {COMMAND}): {', '.join(map(str, stale))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
