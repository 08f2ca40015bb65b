"""Calibrations of the `nccl` model: a GPU machine kind and the `NcclParams` fitted for it, as a file.

A `Calibration` carries what `system_of` needs beyond a dse topology (generation, NVLS, network kind,
CPU, NVLink and NIC counts), the fitted `NcclParams` (every field), and where the fit came from: the
nccl-tests logs (file name and SHA-256), the rows fitted, the geometric-mean error on them, and the
sources of the machine's description. `calibrate` makes one from nccl-tests logs (`dse.costs.nccl.fit`);
`default_calibration` one with NCCL's own parameters (no rows). `write_calibration` and
`read_calibration` keep it in a TOML file (`FORMAT`; units in the key names; None values left out)
that reads back equal, every float bit for bit. `resolve_calibration` takes a bundled machine's name
(`BUNDLED`, files in dse/data/nccl/machines/, made by scripts/make_nccl_machines.py) or a file path.

Applying a calibration to another topology (`Calibration.params_for`): the tiers it was fitted on
(the node's fabric; the network when it spanned nodes) carry over onto NCCL's defaults for the new
system (`dse.costs.nccl.fit.transfer`), as the held-out scale cases of scripts/validate_nccl.py do.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from dse.core.errors import InputError
from dse.core.files import read_bytes, read_toml, write_atomic
from dse.core.topology import Topology, parse_notation
from dse.costs.nccl.env import NcclEnv
from dse.costs.nccl.log_runs import printed_release
from dse.costs.nccl.logs import NcclTestsRun, implied_ranks, parse_nccl_tests
from dse.costs.nccl.model import NcclParams, NcclSystem, default_params
from dse.costs.nccl.system import MACHINE_DEFAULTS, MachineArgs, system_of

if TYPE_CHECKING:  # the fit needs numpy: imported where a fit runs, not by reading a calibration
    from dse.costs.nccl.fit import RowError

FORMAT = "dse-nccl-calibration-1"
#: The measured machines dse ships a calibration for (dse/data/nccl/machines/<name>.toml), each
#: also a topology preset of the same name (`dse topologies`).
BUNDLED: tuple[str, ...] = ("HGX-H100", "H800-node", "DGX-A100-HDRx3")
MACHINES_DIR = Path(__file__).resolve().parents[2] / "data" / "nccl" / "machines"
#: The keys of a calibration file, in the order they are written ([params] last).
_KEYS = (
    "format", "name", "topology", "generation", "nvls", "network", "cpu", "nvlink_links", "nics_per_node",
    "single_gpu_nodes", "nccl_version", "rows", "fit_gm_fraction", "logs", "sources",
)  # fmt: skip
_OPTIONAL = ("nvlink_links", "nics_per_node", "single_gpu_nodes", "nccl_version")
_PARAM_FIELDS = tuple(f.name for f in fields(NcclParams))
#: `NcclParams` fields added after files of this format were first written, each with the value that
#: predicts what such a file predicted when it was written (a file without it still loads, unchanged).
_ADDED_PARAMS: dict[str, float] = {
    "e_min_multi": 0.0, "ring_ll128_max_GBps": math.inf, "tree_max_GBps": math.inf, "tree_ll128_max_GBps": math.inf,
}  # fmt: skip
_LAT3 = tuple(f.name for f in fields(NcclParams) if f.type == "Lat3")
_LOG_ENTRY = re.compile(r"^(.+) sha256:([0-9a-f]{64})$")
_MAX_TEXT = 100_000  # characters of one string in the file (sources are a few hundred)


@dataclass(frozen=True)
class Calibration:
    """A GPU machine kind and the model parameters fitted for it.

    `name` is "" for a user's file, the preset's name for a bundled one; `topology` the exact dse
    notation of the system it was fitted on; `generation` .. `nics_per_node` the `system_of` fields
    a topology does not carry; `params` every `NcclParams` field; `logs` one "<file name>
    sha256:<hex>" per log fitted (empty for NCCL's defaults); `rows` the rows fitted; `fit_gm` the
    geometric-mean time error on them (a fraction; 0 with no rows); `sources` where the machine's
    description and data come from; `single_gpu_nodes`: nodes of one GPU (written only when true);
    `nccl_version` the NCCL release whose tuner values apply ("" the newest restated; written when set)."""

    name: str
    topology: str
    generation: str
    nvls: bool
    network: str
    cpu: str
    nvlink_links: int | None
    nics_per_node: int | None
    params: NcclParams
    logs: tuple[str, ...]
    rows: int
    fit_gm: float
    sources: tuple[str, ...]
    single_gpu_nodes: bool = False
    nccl_version: str = ""

    def system(self, topology: Topology) -> NcclSystem:
        """The `NcclSystem` of `topology` with this calibration's machine fields (`system_of`); on a
        one-node topology the NIC count is dropped (one node has no network)."""
        machine = self.machine()
        if topology.ndims == 1 and not self.single_gpu_nodes:
            machine["nics_per_node"] = None
        return system_of(topology, **machine)

    def machine(self) -> MachineArgs:
        """The machine fields, as `system_of`'s keywords."""
        return MachineArgs(
            generation=self.generation,
            nvls=self.nvls,
            network=self.network,
            cpu=self.cpu,
            nvlink_links=self.nvlink_links,
            nics_per_node=self.nics_per_node,
            single_gpu_nodes=self.single_gpu_nodes,
            nccl_version=self.nccl_version,
        )

    def fitted_system(self) -> NcclSystem:
        """The system the parameters were fitted on: `topology` with every machine field (a NIC
        count on a one-node topology is an `InputError` here)."""
        return system_of(parse_notation(self.topology, check=False), **self.machine())

    def params_for(self, system: NcclSystem) -> NcclParams:
        """The parameters to predict `system` with: `params` itself on the fitted system; on another,
        NCCL's defaults for it with the fitted tiers carried over (module docstring): the fabric's
        when the fitted system had 2+ GPUs a node, the network's when it had 2+ nodes."""
        fitted = self.fitted_system()
        if system == fitted:
            return self.params
        out = default_params(system)
        if self.rows == 0:
            return out
        from dse.costs.nccl.fit import transfer

        if fitted.gpus_per_node > 1:
            out = transfer(self.params, out, "intra")
        if fitted.nodes > 1:
            out = transfer(self.params, out, "inter")
        return out


def calibrate(
    logs: Sequence[str | Path],
    topology: Topology,
    *,
    collective: str | None = None,
    settings: NcclEnv | None = None,
    **machine: Unpack[MachineArgs],
) -> Calibration:
    """A calibration fitted on the nccl-tests `logs` (every test in each file) for `topology` with
    these machine fields (`calibrate_details`)."""
    return calibrate_details(logs, topology, collective=collective, settings=settings, **machine)[0]


def calibrate_details(
    logs: Sequence[str | Path],
    topology: Topology,
    *,
    collective: str | None = None,
    settings: NcclEnv | None = None,
    held_out: bool = False,
    **machine: Unpack[MachineArgs],
) -> tuple[Calibration, list[RowError], tuple[str, ...], list[RowError] | None]:
    """`calibrate`, with each fitted row's error under the fitted parameters, each row skipped
    ("FILE:LINE (SIZE B): why", `dse.costs.nccl.fit.row_skips`) and, if `held_out`, each row's
    error when fitted on the other half of the sizes (`dse.costs.nccl.fit.held_out_errors`). Each
    log is read size-limited; every run's rank count (its rank lines, else the one its busbw/algbw
    ratio implies; unknown for broadcast and reduce without rank lines) must be the topology's GPUs. `collective`
    (dse.costs.nccl.logs.COLLECTIVES' names) is the test of every run whose log does not name it
    (nccl-tests before 2.13 prints no name; a pasted table has none); a log naming another is
    refused. Each row is timed as its run was made: the NCCL settings its log shows, else `settings`
    (None: NCCL's choice; `dse.costs.nccl.fit.samples`). Fitted with
    `dse.costs.nccl.fit.fit_details` from NCCL's defaults, of the NCCL release `machine` names, else
    of the one the logs print (`printed_release`; none: the newest restated). Not nccl-tests output, a rank count that
    differs, a topology `system_of` refuses, an unknown generation, or no usable row: `InputError`."""
    from dse.costs.nccl.fit import fit_details, geomean_error, held_out_errors, row_skips, sample_errors

    if not isinstance(topology, Topology):
        raise InputError("topology", f"{type(topology).__name__} is not a Topology", "a dse Topology")
    if isinstance(logs, (str, Path)) or not logs:
        raise InputError("logs", "no nccl-tests log given", "one or more nccl-tests output files")
    base = default_calibration(topology, **machine)
    system = base.fitted_system()
    runs: list[NcclTestsRun] = []
    entries = []
    for path in logs:
        data = read_bytes(path, str(path))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(str(path), f"not UTF-8 text (byte {e.start})", "nccl-tests output files") from None
        found = parse_nccl_tests(text, str(path), collective=collective)
        for run in found:
            _check_named(run, system.has_nvls)
            _check_ranks(run, topology.npus)
        runs += found
        entries.append(f"{Path(path).name} sha256:{hashlib.sha256(data).hexdigest()}")
    if "nccl_version" not in machine:
        base = replace(base, nccl_version=printed_release(runs))
        system = base.fitted_system()
    done = fit_details(system, runs, settings=settings)
    errs = sample_errors(system, done.params, done.samples)
    gm = geomean_error(e.error for e in errs)
    sources = tuple(str(p) for p in logs)
    calib = replace(base, params=done.params, logs=tuple(entries), rows=len(done.samples), fit_gm=gm, sources=sources)
    skips = []
    for r in runs:
        why = row_skips(r)
        skips += [f"{r.row_place(row)} ({row.size_bytes} B): {why[row.line]}" for row in r.rows if row.line in why]
    return calib, errs, tuple(skips), held_out_errors(system, runs, settings=settings) if held_out else None


def _check_named(run: NcclTestsRun, nvls: bool) -> None:
    """The run names its test, and does not turn NVLS off on a machine the calibration has it on."""
    if run.collective is None:
        raise InputError(
            f"{run.source}:{run.line}",
            "the log does not say which test it is (no '# Collective test starting' line, no X_perf command)",
            "--collective all_reduce, reduce_scatter, all_gather, alltoall, broadcast or reduce",
        )
    for name, value, line in run.settings:
        if nvls and name == "NCCL_NVLS_ENABLE" and value.strip() == "0":
            raise InputError(f"{run.source}:{line}", "the log sets NCCL_NVLS_ENABLE=0", "--no-nvls, as the run had")


def _check_ranks(run: NcclTestsRun, gpus: int) -> None:
    ranks = run.ranks if run.ranks is not None else implied_ranks(run)
    if ranks is not None and ranks != gpus:
        raise InputError(
            f"{run.source}:{run.line}",
            f"a run on {ranks} ranks, but the topology has {gpus} GPUs",
            f"logs of runs on {gpus} GPUs, or the topology they ran on",
        )


def default_calibration(
    topology: Topology,
    **machine: Unpack[MachineArgs],
) -> Calibration:
    """A calibration with NCCL's own parameters for `topology` (`default_params`): no logs, 0 rows,
    no sources. A topology or field `system_of` refuses (a NIC count for one node too): `InputError`."""
    if not isinstance(topology, Topology):
        raise InputError("topology", f"{type(topology).__name__} is not a Topology", "a dse Topology")
    system = system_of(topology, **machine)
    m: dict[str, Any] = {**MACHINE_DEFAULTS, **machine}
    return Calibration(
        "", topology.notation(exact=True), m["generation"], m["nvls"], m["network"], m["cpu"], m["nvlink_links"],
        m["nics_per_node"], default_params(system), (), 0, 0.0, (), m["single_gpu_nodes"], m["nccl_version"],
    )  # fmt: skip


# --------------------------------------------------------------------------- the file
def calibration_text(calib: Calibration, *, command: str = "dse calibrate nccl-tests") -> str:
    """The TOML text of `calib` (`write_calibration`), its header naming `command` as the writer.
    An invalid calibration is an `InputError` (nothing is written)."""
    _check(calib, "calibration")
    lines = [
        "# dse NCCL calibration (docs/nccl.md): the `nccl` cost model's parameters "
        + ("fitted for one GPU machine." if calib.rows else "for one GPU machine, NCCL's own (nothing fitted)."),
        f"# Written by `{command}`; read by `--calibration FILE`. Every key is checked when read.",
        "# Units are in the key names (_ns, _GBps, _bytes); e_* are fractions of a line rate, k_* exponents;",
        "# fit_gm_fraction is the geometric-mean time error on the rows fitted (0.05 = 5 %).",
    ]
    values: dict[str, object] = {
        "format": FORMAT, "name": calib.name, "topology": calib.topology, "generation": calib.generation,
        "nvls": calib.nvls, "network": calib.network, "cpu": calib.cpu, "nvlink_links": calib.nvlink_links,
        "nics_per_node": calib.nics_per_node, "single_gpu_nodes": calib.single_gpu_nodes or None,
        "nccl_version": calib.nccl_version or None,
        "rows": calib.rows, "fit_gm_fraction": calib.fit_gm, "logs": calib.logs, "sources": calib.sources,
    }  # fmt: skip
    lines += [f"{k} = {_toml_value(v)}" for k, v in values.items() if v is not None]
    lines += ["", "[params]"]
    lines += [f"{n} = {_toml_value(getattr(calib.params, n))}" for n in _PARAM_FIELDS]
    return "\n".join(lines) + "\n"


def write_calibration(path: str | Path, calib: Calibration, *, command: str = "dse calibrate nccl-tests") -> None:
    """Write `calib` to `path` as TOML (`calibration_text`), atomically: a temporary file renamed
    onto `path`, so a failure leaves any previous file as it was."""
    write_atomic(path, calibration_text(calib, command=command), str(path))


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        # a TOML basic string: JSON's escapes are TOML's, but DEL must be escaped too
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def read_calibration(path: str | Path) -> Calibration:
    """The calibration in TOML file `path` (size-limited, `dse.core.files.read_toml`). Every key is
    checked: an unknown format or key, a missing one, a wrong type or an out-of-range value is an
    `InputError` naming the file and the key (``calib.toml: params.e_ring_intra``)."""
    shown = str(path)
    data = read_toml(path, shown)
    extra = sorted(set(data) - set(_KEYS) - {"params"})
    if extra:
        raise InputError(f"{shown}: {extra[0]}", "unknown key", ", ".join((*_KEYS, "params")))
    if data.get("format") != FORMAT:
        raise InputError(f"{shown}: format", f"{data.get('format')!r} is not a known format", repr(FORMAT))
    missing = [k for k in (*_KEYS, "params") if k not in data and k not in _OPTIONAL]
    if missing:
        raise InputError(f"{shown}: {missing[0]}", "missing", f"every key of {FORMAT}")
    calib = Calibration(
        name=_string(data, "name", shown),
        topology=_topology(data, shown),
        generation=_string(data, "generation", shown),
        nvls=_boolean(data, "nvls", shown),
        network=_string(data, "network", shown),
        cpu=_string(data, "cpu", shown),
        nvlink_links=_optional_int(data, "nvlink_links", shown),
        nics_per_node=_optional_int(data, "nics_per_node", shown),
        params=_params(data["params"], shown),
        logs=_strings(data, "logs", shown),
        rows=_count(data, "rows", shown),
        fit_gm=_fraction(data, "fit_gm_fraction", shown),
        sources=_strings(data, "sources", shown),
        single_gpu_nodes="single_gpu_nodes" in data and _boolean(data, "single_gpu_nodes", shown),
        nccl_version=_string(data, "nccl_version", shown) if "nccl_version" in data else "",
    )
    _check(calib, shown)
    return calib


def _check(calib: Calibration, shown: str) -> None:
    """Whole-calibration checks: its types, the system builds, the logs' form, rows against logs."""
    if not isinstance(calib, Calibration):
        raise InputError(shown, f"{type(calib).__name__} is not a Calibration", "a Calibration")
    if not isinstance(calib.params, NcclParams):
        raise InputError(f"{shown}: params", f"{type(calib.params).__name__} is not NcclParams", "NcclParams")
    for key in ("name", "topology", "generation", "network", "cpu", "nccl_version"):
        _check_string(getattr(calib, key), f"{shown}: {key}")
    for key in ("logs", "sources"):
        value = getattr(calib, key)
        if not isinstance(value, tuple):
            raise InputError(f"{shown}: {key}", f"{type(value).__name__} is not a tuple", "a tuple of strings")
        for i, s in enumerate(value):
            _check_string(s, f"{shown}: {key}[{i}]")
    try:
        calib.fitted_system()
    except InputError as e:
        raise InputError(f"{shown}: {_key_of(e.field)}", e.problem, e.allowed) from None
    for i, entry in enumerate(calib.logs):
        if not _LOG_ENTRY.match(entry):
            raise InputError(f"{shown}: logs[{i}]", f"{entry!r} is not a log entry", "'<file name> sha256:<64 hex>'")
    if isinstance(calib.rows, bool) or not isinstance(calib.rows, int) or calib.rows < 0:
        raise InputError(f"{shown}: rows", f"{calib.rows!r} is not a row count", "a whole number from 0")
    fit_gm = calib.fit_gm
    if isinstance(fit_gm, bool) or not isinstance(fit_gm, float) or not 0.0 <= fit_gm < math.inf:
        raise InputError(f"{shown}: fit_gm_fraction", f"{fit_gm!r} is not an error", "a finite fraction >= 0")
    if (calib.rows == 0) != (not calib.logs) or (calib.rows == 0 and fit_gm != 0.0):
        raise InputError(
            f"{shown}: rows",
            f"{calib.rows} rows with {len(calib.logs)} logs and error {fit_gm!r}",
            "rows > 0 with one log or more, or 0 rows, no logs and error 0 (NCCL's defaults)",
        )


#: `NcclSystem`'s fields that come from the topology; the file's key for every other is its own.
_TOPOLOGY_FIELDS = ("gpus_per_node", "nodes", "fabric", "nvlink_GBps", "nic_GBps", "pcie_GBps")


def _key_of(field: str) -> str:
    """The file's key for a field `system_of` or `NcclSystem` names in an error."""
    if field == "nvls_enabled":
        return "nvls"
    return "topology" if field in _TOPOLOGY_FIELDS or field.startswith("topology") else field


def _check_string(value: object, field: str) -> None:
    if not isinstance(value, str):
        raise InputError(field, f"{type(value).__name__} is not a string", "a string")
    if len(value) > _MAX_TEXT:
        raise InputError(field, f"a string of {len(value):,} characters", f"at most {_MAX_TEXT:,}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(field, "a string that is not valid Unicode", "UTF-8 text") from None


def _string(data: dict[str, Any], key: str, shown: str) -> str:
    value = data[key]
    _check_string(value, f"{shown}: {key}")
    return str(value)


def _strings(data: dict[str, Any], key: str, shown: str) -> tuple[str, ...]:
    value = data[key]
    if not isinstance(value, list):
        raise InputError(f"{shown}: {key}", f"{type(value).__name__} is not a list", "a list of strings")
    for i, s in enumerate(value):
        _check_string(s, f"{shown}: {key}[{i}]")
    return tuple(value)


def _boolean(data: dict[str, Any], key: str, shown: str) -> bool:
    value = data[key]
    if not isinstance(value, bool):
        raise InputError(f"{shown}: {key}", f"{value!r} is not a boolean", "true or false")
    return value


def _count(data: dict[str, Any], key: str, shown: str) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{shown}: {key}", f"{value!r} is not a count", "a whole number from 0")
    return value


def _optional_int(data: dict[str, Any], key: str, shown: str) -> int | None:
    if key not in data:
        return None
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
        raise InputError(f"{shown}: {key}", f"{value!r} is not a count from 1 to 1024", "a whole number from 1 to 1024")
    return value


def _number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(field, f"{value!r} is not a number", "a number")
    return float(value)


def _fraction(data: dict[str, Any], key: str, shown: str) -> float:
    value = _number(data[key], f"{shown}: {key}")
    if not 0.0 <= value < math.inf:
        raise InputError(f"{shown}: {key}", f"{value!r} is out of range", "a finite fraction >= 0 (0.05 = 5 %)")
    return value


def _topology(data: dict[str, Any], shown: str) -> str:
    text = _string(data, "topology", shown)
    if "(" not in text:
        raise InputError(f"{shown}: topology", f"{text!r} is not a topology notation", "e.g. SW(8,450,0,links=18)")
    try:
        return parse_notation(text).notation(exact=True)
    except InputError as e:
        raise InputError(f"{shown}: topology", str(e), "dse's notation, e.g. SW(8,450,0,links=18)") from None


def _params(table: object, shown: str) -> NcclParams:
    """`NcclParams` from the [params] table: every field, numbers (Lat3: three), NcclParams' ranges;
    a field added since the format began may be missing (`_ADDED_PARAMS`: its value then)."""
    if not isinstance(table, dict):
        raise InputError(f"{shown}: params", "not a table", "a [params] table")
    table = {**_ADDED_PARAMS, **table}
    keys = set(table)
    for name in sorted(keys ^ set(_PARAM_FIELDS)):
        problem = "unknown key" if name in keys else "missing"
        raise InputError(f"{shown}: params.{name}", problem, ", ".join(_PARAM_FIELDS))
    values: dict[str, Any] = {}
    for name in _PARAM_FIELDS:
        field = f"{shown}: params.{name}"
        raw = table[name]
        if name in _LAT3:
            if not isinstance(raw, list) or len(raw) != 3:
                raise InputError(field, f"{raw!r} is not three latencies", "[LL, LL128, Simple] in ns")
            values[name] = tuple(_number(x, field) for x in raw)
        else:
            values[name] = _number(raw, field)
    try:
        return NcclParams(**values)
    except InputError as e:
        raise InputError(f"{shown}: params.{e.field}", e.problem, e.allowed) from None


# --------------------------------------------------------------------------- bundled machines
_BUNDLED_INDEX = {n.lower(): n for n in BUNDLED}
_BUNDLED_CACHE: dict[str, Calibration] = {}


def bundled_path(name: str) -> Path:
    """The file of bundled calibration `name` (one of `BUNDLED`, exactly)."""
    if name not in BUNDLED:
        raise InputError("calibration", f"{name!r} is not a bundled calibration", ", ".join(BUNDLED))
    return MACHINES_DIR / f"{name}.toml"


def resolve_calibration(text: str) -> Calibration:
    """The calibration `text` names: a bundled machine (`BUNDLED`, any case), else a calibration
    file's path (`read_calibration`). Neither: `InputError` listing the bundled names."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("calibration", f"{text!r} names no calibration", _RESOLVE_ALLOWED)
    name = _BUNDLED_INDEX.get(text.strip().lower())
    if name is not None:
        hit = _BUNDLED_CACHE.get(name)
        if hit is None:
            hit = read_calibration(bundled_path(name))
            if hit.name != name:
                raise InputError(f"{bundled_path(name)}: name", f"{hit.name!r} in the file of {name}", repr(name))
            _BUNDLED_CACHE[name] = hit
        return hit
    if not Path(text).exists():
        raise InputError("calibration", f"{text!r} is neither a bundled calibration nor a file", _RESOLVE_ALLOWED)
    return read_calibration(text)


_RESOLVE_ALLOWED = f"a bundled machine ({', '.join(BUNDLED)}) or a file written by dse calibrate nccl-tests"
