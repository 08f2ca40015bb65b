"""nccl-tests' JSON results (``-J FILE.json``, nccl-tests 2.17.3 on; file versions 1-3, NVIDIA/nccl-tests
src/util.cu; none of its code is used), read into the rows the text tables give.

One file is one test. Its top-level object holds ``args`` (the binary's argv: ``all_reduce_perf``
names the test), ``env`` (``NAME=VALUE`` strings: NCCL_ALGO, NCCL_PROTO, NCCL_MAX_NCHANNELS and
NCCL_NVLS_ENABLE are read, nothing else), ``nccl_version`` (NCCL's version code), ``config``
(``nthreads``, ``ngpus``, ``devices``: one object per rank with ``rank`` and ``device_info``, the GPU
name), ``results`` (one object per size: ``size``, ``count``, ``type``, ``redop``, ``root``, and per
pass ``out_of_place`` / ``in_place`` with ``time`` or ``cpu_time`` in µs, ``alg_bw``, ``bus_bw``
and ``nwrong``, None when not checked; a pass may be null) and ``average_bus_bandwidth``
(``bandwidth``; ``bandwidith`` in version 1). Keys nccl-tests adds later are ignored. A file that is
not JSON (one cut short by a crash too), or a result without its size, is one `InputError`.
"""

from __future__ import annotations

import json
import math
from pathlib import PurePath
from typing import Any

from dse.core.errors import InputError
from dse.core.limits import MAX_BYTES
from dse.costs.nccl.log_lines import BINARY, NcclTestsPass, NcclTestsRow, settings_in
from dse.costs.nccl.log_runs import COLLECTIVES, NcclTestsRun, nccl_version_name

ALLOWED = "nccl-tests' -J output: a JSON object with 'results'"


def looks_like_json(text: str) -> bool:
    """Whether `text` is meant as JSON: its first non-blank character is ``{``."""
    return text.lstrip()[:1] == "{"


def json_run(text: str, source: str, *, collective: str | None = None, ranks: int | None = None) -> NcclTestsRun:
    """The test in nccl-tests JSON `text` (module docstring); `source` names the file in errors. The
    caller's `collective` and `ranks` apply where the file says nothing; one it contradicts is an
    `InputError`, as for a text log (`dse.costs.nccl.logs.parse_nccl_tests`)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(source, f"not valid JSON at line {e.lineno}: {e.msg} (cut short?)", ALLOWED) from None
    except RecursionError:
        raise InputError(source, "JSON nested too deeply", ALLOWED) from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise InputError(source, "a JSON file without a 'results' list", ALLOWED)
    if not data["results"]:
        raise InputError(source, "a JSON 'results' list with no result (the test stopped first)", ALLOWED)
    config = _obj(data.get("config"))
    devices = [d for d in config.get("devices") or [] if isinstance(d, dict)]
    ranks_seen: list[int] = [r for d in devices if (r := _int(d.get("rank"))) is not None and r >= 0]
    warnings: list[str] = []
    if ranks_seen and len(set(ranks_seen)) != max(ranks_seen) + 1:
        top = max(ranks_seen)
        warnings.append(f"devices for {len(set(ranks_seen))} of ranks 0..{top}: ranks taken as {top + 1}")
    rows, cpu_time = [], False
    for i, item in enumerate(data["results"]):
        row, cpu = _row(item, f"{source}: results[{i}]", i + 1)
        rows.append(row)
        cpu_time |= cpu
        for p in (row.out_of_place, row.in_place):
            if p is not None and p.wrong:
                warnings.append(f"results[{i}] ({row.size_bytes} B): {p.wrong} wrong elements")
    avg = _obj(data.get("average_bus_bandwidth"))
    name, count = _test(data.get("args"), collective, source), max(ranks_seen) + 1 if ranks_seen else None
    if ranks is not None and count is not None and ranks != count:
        raise InputError(
            source, f"its devices give {count} ranks, but ranks={ranks} was given", f"ranks={count}, or none"
        )
    return NcclTestsRun(
        source=source, line=1, collective=name, nccl_tests_version=None,
        nccl_version=nccl_version_name(data["nccl_version"]) if isinstance(data.get("nccl_version"), int) else None,
        ranks=count if count is not None else ranks,
        gpus=tuple(dict.fromkeys(str(d["device_info"]) for d in devices if d.get("device_info"))),
        threads=_int(config.get("nthreads")), gpus_per_thread=_int(config.get("ngpus")), cpu_time=cpu_time,
        rows=tuple(rows), avg_busbw_GBps=_num(avg.get("bandwidth", avg.get("bandwidith"))),
        warnings=tuple(warnings), settings=tuple(_settings(data.get("env"))), json=True,
    )  # fmt: skip


def _row(item: Any, where: str, line: int) -> tuple[NcclTestsRow, bool]:
    """One result as a row (`line`: its place in the list, from 1), and whether it gives CPU time."""
    if not isinstance(item, dict):
        raise InputError(where, f"{type(item).__name__} is not a result object", ALLOWED)
    size, count = _int(item.get("size")), _int(item.get("count"))
    if size is None or size < 0 or count is None or count < 0:
        raise InputError(where, "a result without a whole 'size' and 'count'", ALLOWED)
    if size > MAX_BYTES:
        raise InputError(where, f"size {size} B", f"at most {MAX_BYTES} B (2^53)")
    root = str(item.get("root", "")).strip()
    cpu = any(isinstance(p, dict) and "cpu_time" in p for p in (item.get("out_of_place"), item.get("in_place")))
    row = NcclTestsRow(
        size_bytes=size,
        count=count,
        type=str(item.get("type", "")),
        redop=str(item["redop"]).strip() if item.get("redop") is not None else None,
        root=int(root) if root.lstrip("-").isdigit() else None,
        out_of_place=_pass(item.get("out_of_place")),
        in_place=_pass(item.get("in_place")),
        line=line,
    )
    return row, cpu


def _pass(p: Any) -> NcclTestsPass | None:
    if not isinstance(p, dict):
        return None
    wrong = _num(p.get("nwrong"))
    return NcclTestsPass(
        time_us=_num(p.get("time", p.get("cpu_time"))),
        algbw_GBps=_num(p.get("alg_bw")),
        busbw_GBps=_num(p.get("bus_bw")),
        wrong=int(wrong) if wrong is not None else None,
    )


def _test(args: Any, collective: str | None, source: str) -> str | None:
    """The test the binary in ``args[0]`` runs (``.../all_reduce_perf`` -> ``all_reduce``), else the
    caller's `collective`; a caller's that differs from the binary's is an `InputError`."""
    first = args[0] if isinstance(args, list) and args and isinstance(args[0], str) else ""
    m = BINARY.fullmatch(PurePath(first).name)
    name = m.group(1) if m and m.group(1) in COLLECTIVES else None
    if collective is not None and name is not None and name != collective:
        problem = f"the file's test is {name}, but collective={collective!r} was given"
        raise InputError(source, problem, f"collective={name!r}, or none")
    return name or collective


def _settings(env: Any) -> list[tuple[str, str, int]]:
    """NCCL settings among the ``env`` strings, as ``export`` lines would show them (line: 1)."""
    found: list[tuple[str, str, int]] = []
    for entry in env if isinstance(env, list) else []:
        if isinstance(entry, str) and entry.startswith("NCCL_"):
            found += [(name, value, 1) for name, value in settings_in("export " + entry)]
    return found


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: Any) -> float | None:
    """A number as nccl-tests writes it (NaN as the string ``"nan"``); None for anything else."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None
