"""The argparse pieces every `dse` command shares, kept light so that building the whole parser
(`dse --help`) imports nothing of the simulator.

Help texts that list a registry's names say so with a placeholder, ``{schedulers}``,
``{cost_models}``, ``{queues}`` or ``{collectives}``: `HelpFormatter` fills it in when a help text is
printed, from the registry itself, so the lists never go stale and cost nothing otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable

from dse.core.errors import InputError


def _collectives() -> Iterable[str]:
    from dse.core.collectives import COLLECTIVES

    return COLLECTIVES


def _cost_models() -> Iterable[str]:
    from dse.costs import COST_MODELS

    return COST_MODELS


def _schedulers() -> Iterable[str]:
    from dse.schedulers import SCHEDULERS

    return SCHEDULERS


def _queues() -> Iterable[str]:
    from dse.schedulers import QUEUES

    return QUEUES


#: Placeholder (without its braces) -> the names it stands for.
NAME_LISTS: dict[str, Callable[[], Iterable[str]]] = {
    "collectives": _collectives,
    "cost_models": _cost_models,
    "schedulers": _schedulers,
    "queues": _queues,
}


def fill_names(text: str) -> str:
    """`text` with each placeholder ``{kind}`` of `NAME_LISTS` replaced by its names, comma-separated."""
    for kind, names in NAME_LISTS.items():
        marker = "{" + kind + "}"
        if marker in text:
            text = text.replace(marker, ", ".join(names()))
    return text


def terminal_columns(fallback: int = 80) -> int:
    """`shutil.get_terminal_size().columns` without importing shutil (and with it bz2, lzma...),
    which argparse's formatter does once per argument: $COLUMNS, else the terminal's, else `fallback`."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or fallback


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, with the name-list placeholders of the help texts filled in."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
        **kwargs: object,
    ) -> None:
        if width is None:
            width = terminal_columns() - 2  # what argparse does, through shutil
        super().__init__(prog, indent_increment, max_help_position, width, **kwargs)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        return fill_names(text) if text else text


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2, and fills in name lists."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> None:  # type: ignore[override]
        """A usage error: raised as one `InputError` (`dse.cli.main.main` prints it, exit 2)."""
        raise InputError(self.prog, message)


def add_calibration(p: argparse.ArgumentParser) -> None:
    """`--calibration`: the `nccl` cost model's machine (`cost_model_arg`)."""
    p.add_argument(
        "--calibration",
        default=None,
        metavar="NAME|FILE",
        help="with --cost-model nccl: a bundled machine (dse nccl-tests --help lists them) or a file written "
        "by dse calibrate nccl-tests (default: NCCL's own parameters for Hopper GPUs). NCCL's choice is forced "
        "by the model's name: --cost-model nccl,NCCL_ALGO=ring,NCCL_PROTO=Simple,NCCL_MAX_NCHANNELS=8",
    )


def cost_model_arg(args: argparse.Namespace) -> str:
    """The cost model the command line names: ``--cost-model``, or ``nccl:CALIBRATION`` with
    ``--calibration`` (only the `nccl` model takes one)."""
    model = args.cost_model
    calibration = getattr(args, "calibration", None)
    if calibration is None:
        return model
    base, settings = _nccl_settings(str(model).strip())
    if base.lower() != "nccl":
        raise InputError(
            "--calibration", f"given with --cost-model {model}", "--cost-model nccl --calibration NAME|FILE"
        )
    return f"nccl:{calibration}{settings}"


def _nccl_settings(model: str) -> tuple[str, str]:
    """A cost model's name split before its NCCL settings: (``nccl``, ``,NCCL_ALGO=ring``)."""
    from dse.costs.nccl.env import split_settings

    base, env = split_settings(model)
    return base, env.suffix()


def given_topology(args: argparse.Namespace) -> str | None:
    """The topology the command line names, positional or ``-t``/``--topology`` (None: neither);
    both at once is one `InputError`."""
    if args.topology and args.topology_pos:
        raise InputError("topology", "given twice (positional and --topology)", "one of them")
    return args.topology or args.topology_pos


def add_topology(p: argparse.ArgumentParser) -> None:
    """The topology of a one-collective command: a positional ``TOPOLOGY`` or ``-t``/``--topology``
    (`given_topology` reads them, `required_topology` insists on one)."""
    p.add_argument("topology_pos", nargs="?", metavar="TOPOLOGY", help="preset name or notation")
    p.add_argument("-t", "--topology", help="preset name or notation (same as the positional argument)")


def required_topology(args: argparse.Namespace) -> str:
    """The topology the command line names (`given_topology`); neither given is one `InputError`."""
    spec = given_topology(args)
    if not spec:
        raise InputError(
            "topology", "missing", "a preset name (dse topologies) or a notation such as Ring(4,375,20)_SW(8,100,1700)"
        )
    return spec


def add_collective_options(p: argparse.ArgumentParser, *, seed: bool = True) -> None:
    """The collective's flags (the keywords of `dse.sim.spec.SpecArgs`, ``--seed`` and ``--json``);
    `seed=False` for a command with no randomness (`dse bound`)."""
    p.add_argument(
        "--collective",
        default="all_reduce",
        help="one of {collectives} (default all_reduce); broadcast or reduce with --cost-model nccl",
    )
    p.add_argument("--size", required=True, help="bytes per NPU, e.g. 1GB, 256MiB, 1e9")
    p.add_argument("--chunks", default="64", help="chunks per collective (default 64)")
    p.add_argument("--cost-model", default="paper", help="one of {cost_models} (default paper)")
    add_calibration(p)
    p.add_argument("--latency-mode", default=None, help="overlapped or serialized (default: the cost model's)")
    p.add_argument("--active-chunks", default="1", help="phases a dimension serves at once (default 1)")
    if seed:
        p.add_argument(
            "--seed",
            default="0",
            help="seed of the random scheduler, lp_guided's search and the exact solver (default 0; "
            "with the solver, dse optimal, at most 2^31-1)",
        )
    p.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the table (every number unrounded)"
    )
