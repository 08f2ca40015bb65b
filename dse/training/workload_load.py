"""Loading a workload: which reader a path, a name or a spec string goes to (`load_workload`).

The `Workload` model is `dse.training.workloads`; the readers are `dse.training.workload_read` (text
and TOML), `dse.training.generators` and `dse.training.chakra.read`. `load_workload` takes:

- the ASTRA-sim 1.0 text format (`load_workload("x.txt")`): line 1 the parallelism strategy and
  its options (``model_parallel_NPU_group: N``, the checkpoint lists), line 2
  the layer count, then one line per layer, whitespace separated (tabs or runs of spaces)::

      name dependency fwd_compute fwd_type fwd_bytes ig_compute ig_type ig_bytes
           wg_compute wg_type wg_bytes wg_update_time

  compute times in cycles (= ns), bytes per NPU, types NONE/ALLREDUCE/ALLGATHER/REDUCESCATTER/
  ALLTOALL. The activation-recompute lists of line 1 (``checkpoints: 2 0 9
  checkpoint_initiates: 2 17 8``, each a count then layer indices) are kept in `Workload`. A
  damaged line raises `InputError` naming the file and the line number.
- the native TOML form (``*.toml``, see `workloads/*.toml` in the repository)::

      name = "tiny"
      parallelism = "DATA"            # or MODEL, HYBRID (needs model_parallel_group), HYBRID_DLRM, ...
      model_parallel_group = 128      # HYBRID only: NPUs per model-parallel group
      dlrm_last_bottom = 7            # HYBRID_DLRM only (the number after HYBRID_DLRM in ASTRA-sim)
      checkpoints = [0, 9]            # activation recompute: layers whose outputs are kept ...
      checkpoint_initiates = [17, 8]  # ... and the layers whose backward re-runs the forward from them
      layer0_input_gradient = false   # true: a slice of a model, layer 0's input gradient is needed
      origin = "converted from ..."   # free text: where the figures come from
      source_sha256 = "..."           # of the source's figures (`dse.training.workload_formats.figures_sha256`)
      [[layers]]
      name = "conv1"
      fwd_compute = 1000              # ns; every field below is optional (0 / "none")
      fwd_comm = "none"               # none, all_reduce, all_gather, reduce_scatter, all_to_all
      fwd_bytes = 0                   # bytes per NPU
      ig_compute = 1000
      ig_comm = "none"
      ig_bytes = 0
      wg_compute = 1000
      wg_comm = "all_reduce"
      wg_bytes = 1048576
      wg_update = 10                  # ns

- a bundled workload by name (`bundled_workloads`, ``dse workload list``): the Themis artifact's six
  ASTRA-sim 1.0 files converted to TOML by ``dse workload convert``, e.g. ``"gnmt_fp16_fused"``,
  and LIBRA's workloads with their placements (`libra_workloads`);
- the built-in generators, by spec string: ``"resnet152"`` or ``"transformer"``, with options
  after a colon: ``"resnet152:batch=64,efficiency=0.5"``, ``"transformer:layers=8,mp=32"``
  (see `dse.training.generators`);
- a Chakra trace (a ``.et`` file or the prefix of its rank files): a
  `dse.training.chakra.read.ChakraTrace`.

Every form is refused before it is read or built when it is too large (`dse.training.workloads`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from dse.core.errors import InputError
from dse.core.files import read_text
from dse.training import workload_read as read
from dse.training.generators import GENERATORS, generate
from dse.training.workloads import Workload

#: Where the bundled workloads live (package data): TOML files converted by ``dse workload convert``.
BUNDLED_DIR = Path(__file__).resolve().parent.parent / "data" / "workloads"
LIBRA_DIR = BUNDLED_DIR.parent / "libra"


def load_workload(spec: str | Path | Workload | Mapping[str, Any] | Any) -> Workload | Any:
    """A `Workload` from a file (ASTRA-sim text or ``.toml``), a generator spec, a dict or itself;
    or a `dse.training.chakra.read.ChakraTrace` from a Chakra trace (a ``.et`` file or the prefix of one).

    A string that names no existing file is a bundled workload's name (`bundled_workloads`,
    `libra_workloads`, any case) or a generator spec (it starts with ``resnet152`` or ``transformer``).
    """
    if isinstance(spec, Workload):
        return spec
    if type(spec).__name__ == "ChakraTrace":
        return spec
    if isinstance(spec, (str, Path)) and str(spec).strip():
        from dse.training.chakra.read import is_trace_path, load_trace  # the protobuf reader, only for a trace

        if is_trace_path(spec):
            return load_trace(spec)
    if isinstance(spec, Mapping):
        return read.workload_from_mapping(spec, "workload")
    if not isinstance(spec, (str, Path)):
        raise InputError("workload", f"{spec!r} is not a workload", "a file path, a generator spec or a Workload")
    if not str(spec).strip():
        raise InputError("workload", "an empty path", "a workload file, a bundled workload or a generator")
    path = Path(spec)
    if not (path.exists() or path.is_symlink()):  # a broken link or a loop: read_text names the problem
        bundled = bundled_workloads()
        named = {k.lower(): v for k, v in (bundled | libra_workloads()).items()}.get(str(spec).strip().lower())
        if named is not None:  # errors name it as the user did, not its path in the package
            wl = read.load_toml_text(read_text(named, "workload"), str(named))
            return replace(wl, source=f"bundled workload {str(spec).strip()}")
        gen = str(spec).strip().split(":", 1)[0].lower().replace("-", "").replace("_", "")
        if gen in GENERATORS:
            return generate(str(spec))
        raise InputError(
            "workload",
            f"no such file {str(spec)!r}",
            f"a workload file, a bundled workload ({', '.join(bundled)}, and LIBRA's {', '.join(libra_workloads())}; "
            f"dse workload list shows them) or a generator ({', '.join(GENERATORS)})",
        )
    text = read_text(path, "workload")
    if path.suffix.lower() == ".toml" or looks_like_toml(text):
        return read.load_toml_text(text, str(path))
    return read.parse_astra_text(text, str(path))


def libra_workloads() -> dict[str, Path]:
    """LIBRA's workloads with their placements (converted by scripts/convert_libra.py), by name:
    ``libra_gpt_3_4d`` is GPT-3 placed by its communicator file for LIBRA's 4D network."""
    found = sorted(LIBRA_DIR.glob("*.toml"))
    return {f"libra_{p.stem}": p for p in found if p.stem != "networks"}


def bundled_workloads() -> dict[str, Path]:
    """The bundled workloads, name (file stem) -> path, sorted by name."""
    return {p.stem: p for p in sorted(BUNDLED_DIR.glob("*.toml"), key=lambda p: p.stem.lower())}


def looks_like_toml(text: str) -> bool:
    """Whether a workload file's text is the TOML form (it has a ``[[layers]]`` table), whatever its suffix."""
    return bool(re.search(r"^[ \t]*\[\[layers\]\]", text, re.M))  # not \s*: it would span lines, in quadratic time
