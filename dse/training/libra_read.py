"""Reading LIBRA's workload and communicator files (Won et al., ISPASS 2024; docs/model.md §13).

- A **workload** file is ASTRA-sim 1.0's layer lines without its two header lines: one line per
  layer, twelve whitespace-separated fields (``name dependency fwd_compute fwd_type fwd_bytes
  ig_compute ig_type ig_bytes wg_compute wg_type wg_bytes wg_update_time``), compute times in ns,
  bytes per NPU, types NONE/ALLREDUCE/ALLGATHER/REDUCESCATTER/ALLTOALL in any case. Each line is
  parsed by the ASTRA-sim 1.0 reader's `parse_layer_line`, so the rules are the same: times and
  byte counts are whole numbers (``805306368``; ``1.5e9`` is refused, as ASTRA-sim 1.0 reads
  integers). Blank lines are skipped. The workload runs dse's model-parallel loop (``HYBRID``:
  each layer's input gradient, then its weight gradient, the order of LIBRA's training loop) with
  ``layer0_input_gradient`` set (LIBRA's loop computes layer 0's input gradient too) and the
  communicator's `Placement` when one is given (without one: ``DATA``, every collective spans
  every dimension).
- A **communicator** file is YAML: ``Forward``, ``InputGrad`` and ``WeightGrad``, each a list of
  one group size per dimension (-1: the dimension is not involved), read into a `Placement`.

Every damaged line is one `InputError` naming ``file:line``. Sizes are checked before anything is
built (`dse.training.workloads.check_layers`, `dse.core.yaml_read`).
"""

from __future__ import annotations

from pathlib import Path

from dse.core.errors import InputError
from dse.core.files import read_text
from dse.core.yaml_read import read_yaml_mapping
from dse.training.placement import Placement
from dse.training.workload_read import parse_layer_line, text_lines
from dse.training.workloads import STRATEGIES, Workload, check_layers

_PREFIX = "libra communicator"


def read_libra_communicator(path: str | Path) -> Placement:
    """LIBRA's communicator file as a `Placement`; a bad key or value names its ``file:line``."""
    entries = read_yaml_mapping(path, "communicator")
    try:
        return Placement.parse({k: e.value for k, e in entries.items()}, _PREFIX)
    except InputError as e:
        key = e.field[len(_PREFIX) + 1 :] if e.field.startswith(_PREFIX + ".") else ""
        entry = entries.get(key)  # a missing slot or slots of different lengths: the file, line 1
        line = entry.line if entry is not None else 1
        raise InputError(f"{path}:{line}: {key or 'communicator'}", e.problem, e.allowed) from None


def read_libra_workload(path: str | Path, communicator: str | Path | Placement | None = None) -> Workload:
    """LIBRA's workload file (the module docstring), with a communicator file or `Placement`."""
    origin = f"LIBRA workload {Path(path).name}"
    if isinstance(communicator, Placement) or communicator is None:
        placement = communicator
    else:
        placement = read_libra_communicator(communicator)
        origin += f", communicator {Path(communicator).name}"
    return parse_libra_workload_text(read_text(path, "workload"), str(path), placement, origin)


def parse_libra_workload_text(
    text: str, source: str = "workload", placement: Placement | None = None, origin: str = ""
) -> Workload:
    """LIBRA's layer lines (no header); errors name `source` and the line number."""
    lines = [(i, ln.split(None, 12)) for i, ln in text_lines(text, source)]
    if not lines:
        raise InputError(f"{source}:1", "no layer lines (an empty file)", "one line of 12 fields per layer")
    check_layers(len(lines), source)
    first_at, first = lines[0]
    if len(first) != 12 and first[0].upper() in STRATEGIES:
        raise InputError(
            f"{source}:{first_at}",
            f"a parallelism line ({first[0]}): LIBRA's workload files have no header lines",
            "an ASTRA-sim 1.0 file is read by load_workload",
        )
    layers = tuple(
        parse_layer_line(toks, lambda p, allowed=None, _n=n: InputError(f"{source}:{_n}", p, allowed))
        for n, toks in lines
    )
    return Workload(
        Path(source).stem if source else "workload",
        "HYBRID" if placement is not None else "DATA",
        layers,
        source=source,
        origin=origin or f"LIBRA workload {Path(source).name}",
        layer0_input_gradient=True,
        placement=placement,
    )
