"""What dse accepts, and how much work one run may take before it is refused.

Two kinds of limit, both chosen so that every accepted input gives finite, exact numbers and every
run finishes in minutes, not hours:

- **Ranges of the inputs** (checked where each number enters, `dse.core.units` and `dse.core.topology`):
  sizes up to 2^53 bytes (8 PiB per NPU, where byte counts are still exact in floating point),
  times (latencies, compute) up to 1e15 ns, bandwidths from 1e-9 to 1e9 GB/s, at most 2^40 NPUs.
  Within them no result can overflow; a non-finite result is still refused as a last resort.
- **Work** (`check_work`): before a run, dse estimates the steps it will take (chunk-phases the
  simulator handles, packets a cost model replays, queue scans that grow with the chunks) and
  refuses a run above `max_work()`, 2e7 steps by default (seconds of one core;
  docs/reliability.md has the figure). The environment variable ``DSE_MAX_WORK`` raises or lowers
  it for every command and every worker process (``DSE_MAX_WORK=1e9 dse ...``).
- **Sizes of inputs** (`input_limit`), checked before anything is read or built: bytes of a text
  or TOML file (`MAX_TEXT_BYTES`), bytes of one Chakra rank file after decompression
  (`MAX_TRACE_BYTES`), nodes of one Chakra rank's graph (`MAX_TRACE_NODES`), dimensions of a
  topology (`MAX_DIMENSIONS`), processes one command starts (`MAX_PROCESSES`), bytes of a CSV read
  back whole (`MAX_TABLE_BYTES`). Each refusal names
  its environment variable (``DSE_MAX_TEXT_BYTES=1e9 dse ...``), which raises or lowers it.
- **Bounds** that enumerate dimension orders (`EXACT_ORDER_TYPES`, `LP_ORDER_TYPES`): above them
  the ILP and pipeline bounds fall back to the LP, and the LP to the ideal, both still valid, and
  the bound's notes say so.
"""

from __future__ import annotations

import math
import os

from dse.core.errors import InputError

MAX_BYTES = 2**53
MAX_NS = 1e15
MIN_BANDWIDTH = 1e-9
MAX_BANDWIDTH = 1e9
MAX_NPUS = 2**40
#: Layers one workload may have (memory, not time; the work limit bounds the run itself).
MAX_LAYERS = 1_000_000
#: Points one sweep file may expand to, and shapes one search space may hold (memory, not time).
MAX_SWEEP_POINTS = 2_000_000
MAX_SPACE_SHAPES = 100_000
#: Chunk types (dimension orders x chunk sizes) up to which the ILP and pipeline bounds are solved,
#: and up to which the fluid LP is (6 and 8 dimensions with two chunk sizes).
EXACT_ORDER_TYPES = 1_440
LP_ORDER_TYPES = 80_640

#: Input-size limits: (default, environment variable that overrides it). Chosen so that a refused
#: input costs well under 1 GB and a second, and no real input comes near them.
MAX_TEXT_BYTES = 64 * 2**20
MAX_TRACE_BYTES = 256 * 2**20
MAX_TRACE_NODES = 1_000_000
MAX_DIMENSIONS = 10
MAX_PROCESSES = 256
#: A CSV dse reads back whole (`dse plot sweep`): 2 million sweep rows fit.
MAX_TABLE_BYTES = 2**30
_INPUT_LIMITS = {
    "text_bytes": (MAX_TEXT_BYTES, "DSE_MAX_TEXT_BYTES"),
    "trace_bytes": (MAX_TRACE_BYTES, "DSE_MAX_TRACE_BYTES"),
    "trace_nodes": (MAX_TRACE_NODES, "DSE_MAX_TRACE_NODES"),
    "dimensions": (MAX_DIMENSIONS, "DSE_MAX_DIMENSIONS"),
    "processes": (MAX_PROCESSES, "DSE_MAX_PROCESSES"),
    "table_bytes": (MAX_TABLE_BYTES, "DSE_MAX_TABLE_BYTES"),
}

WORK_ENV = "DSE_MAX_WORK"
DEFAULT_MAX_WORK = 2e7


def _env_number(env: str) -> float | None:
    """The number in environment variable `env` (ASCII, ``1e9`` allowed), None if unset or blank;
    NaN if it is no number (the caller's range check refuses it)."""
    raw = os.environ.get(env)
    if raw is None or not raw.strip():
        return None
    try:
        return float(raw) if raw.strip().isascii() else math.nan
    except ValueError:
        return math.nan


def max_work() -> float:
    """The work limit in steps: ``DSE_MAX_WORK`` if set, else `DEFAULT_MAX_WORK`."""
    value = _env_number(WORK_ENV)
    if value is None:
        return DEFAULT_MAX_WORK
    if not (math.isfinite(value) and value > 0):
        raw = os.environ[WORK_ENV]
        raise InputError(WORK_ENV, f"{raw!r} is not a positive number of steps", "e.g. DSE_MAX_WORK=1e9")
    return value


def input_limit(kind: str) -> int:
    """The limit `kind` (``"text_bytes"``, ``"trace_bytes"``, ``"trace_nodes"``, ``"dimensions"``,
    ``"processes"``, ``"table_bytes"``): its environment variable if set (a positive number, ``1e9``
    allowed), else the default. A bad value is one `InputError` naming the variable."""
    default, env = _INPUT_LIMITS[kind]
    value = _env_number(env)
    if value is None:
        return default
    if not (math.isfinite(value) and 1 <= value <= 2**62):
        raw = os.environ[env]
        raise InputError(env, f"{raw!r} is not a positive whole number", f"a whole number from 1, e.g. {env}={default}")
    return int(value)


def check_input(kind: str, amount: float, field: str, what: str) -> None:
    """Refuse an input of `amount` (bytes, nodes, dimensions, processes) above `input_limit(kind)`,
    naming the field, the limit and the variable that raises it. `what` names the unit (``"bytes"``)."""
    limit = input_limit(kind)
    if amount > limit:
        env = _INPUT_LIMITS[kind][1]
        raise InputError(
            field,
            f"{amount:,.0f} {what}, more than the limit of {limit:,} {what}",
            f"a smaller input; or raise the limit: {env}={round_up_text(amount)} dse ...",
        )


def check_work(steps: float, what: str) -> None:
    """Refuse a run estimated at more than `max_work()` steps, naming the limit and how to raise it.

    `what` says where the steps come from (``"4,000,000 chunks x 8 phases"``)."""
    limit = max_work()
    if steps > limit:
        raise InputError(
            "work",
            f"this run needs about {steps:.2g} steps ({what}), more than the limit of {limit:.2g}",
            f"fewer chunks, NPUs or iterations; or raise the limit: {WORK_ENV}={round_up_text(steps)} dse ...",
        )


def round_up_text(x: float) -> str:
    """A short number at least `x`, for a message naming a limit to raise: 3.2e8 -> '4e8'; below
    10,000 a whole number (40 -> '40', 2.5 -> '3')."""
    if x < 10_000:
        return str(max(1, math.ceil(x)))
    exp = math.floor(math.log10(x))
    lead = math.ceil(x / 10**exp - 1e-9)
    return f"{lead}e{exp}" if lead < 10 else f"1e{exp + 1}"
