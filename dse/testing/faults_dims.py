"""Fault class "many dimensions and big enumerations": topologies of 1 to 40 dimensions.

What grows with the dimensions is enumerated only after it is counted: the dimension orders of
the exact problem (`dse.bounds.exact.exact_refusal`), of the ILP and the fluid LP
(`dse.bounds.api.count_types`), of lp_guided (`too_many_orders`) and of any other chunk-type list
(`dse.schedulers.order_mix.types_for_plan`); a topology has at most ``DSE_MAX_DIMENSIONS``
dimensions (`dse.core.topology.check_dimensions`). A case (`dims_case`) draws a topology of 1 to 40
dimensions (kinds Ring, FC, SW; sizes 2 to 4, rarely more NPUs than 2^40 allows), a chunk count
from 1 to 64, a collective and a cost model, and runs one command on it: ``compare`` (small node
and time limits and exact work), ``optimal`` (small ``--work``), ``bound`` (small limits),
``evaluate`` (lp_guided, Themis or random) or ``iterate`` on the bundled one-layer workload. Half
the cases raise the dimension limit to 40, so the fallbacks above 10 dimensions are exercised too.

Promise: exit 0 with an answer, or exit 2 with one line ``dse: error: ...`` (a topology above the
limit is refused naming ``DSE_MAX_DIMENSIONS``); no traceback, no file written, within the work
limit (``DSE_MAX_WORK`` small) and under 1 GiB of address space (``RLIMIT_AS``, set in the
subprocess, inherited by the CP-SAT worker). Each run is a subprocess in its own session with a
generous safety timeout (`TIMEOUT_S`): reaching it is a failure, and the whole session is killed.
"""

from __future__ import annotations

import os
import random
import resource
import signal
import subprocess
import sys
from pathlib import Path

from dse.testing.faults import ROOT, Campaign

#: the address space each run may use (bytes)
MEMORY = 2**30
#: a run that has not answered after this many seconds is a failure (and is killed)
TIMEOUT_S = 120.0
#: the work limit of every run (`dse.core.limits.check_work`)
WORK = "2e5"
#: the dimension limit half the cases raise to (the most dimensions of 2 NPUs or more 2^40 NPUs hold)
HIGH_LIMIT = 40
KINDS = ("Ring", "FC", "SW")
COLLECTIVES = ("all_reduce", "all_reduce", "reduce_scatter", "all_gather", "all_to_all")
SIZES = ("64KB", "1MB", "3MB", "1GB")
MAX_NPUS = 2**40


def random_topology(rng: random.Random) -> tuple[str, int]:
    """A notation of 1 to 40 dimensions (sizes 2 to 4, within 2^40 NPUs but for about 3 % of
    cases), and its number of dimensions."""
    nd = rng.randint(1, 40)
    over = rng.random() < 0.03
    npus, dims = 1, []
    for i in range(nd):
        room = MAX_NPUS // (npus * 2 ** (nd - i - 1))  # what this dim may take, the rest at 2 each
        size = rng.choice((2, 2, 2, 3, 4))
        size = size if over or size <= room else 2
        npus *= size
        bw, lat = rng.choice((25, 100, 375)), rng.choice((0, 1, 20, 700))
        dims.append(f"{rng.choice(KINDS)}({size},{bw},{lat})")
    return "_".join(dims), nd


def random_argv(rng: random.Random, topo: str) -> list[str]:
    """One command on `topo` with small limits (module docstring)."""
    command = rng.choice(("compare", "compare", "optimal", "optimal", "bound", "evaluate", "iterate", "iterate"))
    chunks = str(rng.randint(1, 64))
    if command == "iterate":
        sched = rng.choice(("themis", "baseline", "lp_guided", "ideal", "random"))
        return ["iterate", "microAllReduce", "-t", topo, "--chunks", chunks, "--scheduler", sched]
    argv = [command, topo, "--size", rng.choice(SIZES), "--chunks", chunks, "--collective", rng.choice(COLLECTIVES)]
    argv += ["--cost-model", rng.choice(("paper", "paper", "astra-sim"))]
    if command == "compare":
        argv += ["--node-limit", "20", "--time-limit", "10", "--exact-work", rng.choice(("0", "0.05", "0.2"))]
    elif command == "optimal":
        argv += ["--work", rng.choice(("0.05", "0.2")), "--seed", str(rng.randrange(2**31))]
    elif command == "bound":
        argv += ["--node-limit", "20", "--time-limit", "10"]
    else:
        argv += ["--scheduler", rng.choice(("lp_guided", "themis", "random"))]
    return argv + (["--json"] if rng.random() < 0.3 else [])


def run_limited(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """`python -m dse ARGV` in `cwd` under `MEMORY` of address space, in a session of its own:
    (exit code, stdout, stderr). A run past `TIMEOUT_S` has its session killed and gives -9; a
    process of the session left after the run ends is killed and noted on stderr."""

    def limit() -> None:
        """Cap the child's address space at `MEMORY` (run in the child before it executes)."""
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    proc = subprocess.Popen(
        [sys.executable, "-m", "dse", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return -9, out, err + f"\n(no answer within {TIMEOUT_S:g} s)"
    try:  # the CP-SAT worker, if one outlived its parent (it must not)
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return proc.returncode, out, err
    os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out, err + "\n(a process of the run outlived it)"


def answer_problems(code: int, out: str, err: str, *, over_limit: bool) -> list[str]:
    """The broken promises of one run (module docstring); `over_limit`: its topology has more
    dimensions than the limit, so it must be refused naming ``DSE_MAX_DIMENSIONS``."""
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("dse: warning: ")]
    last = lines[-1] if lines else ""
    if code == -9:
        return [f"no answer within {TIMEOUT_S:g} s"]
    if "Traceback" in err or "MemoryError" in err:
        return [f"exit {code} with a traceback: {last[:200]}"]
    if code == 0:
        problems = [] if out.strip() else ["exit 0 with nothing printed"]
        problems += [f"exit 0 with stderr: {lines[0][:200]}"] if lines else []
        return problems + (["a topology above the limit was accepted"] if over_limit else [])
    if code != 2:
        return [f"exit {code}: {last[:200]}"]
    if len(lines) != 1 or not lines[0].startswith("dse: error: "):
        return [f"exit 2 with {len(lines)} lines on stderr: {last[:200]}"]
    if over_limit and "DSE_MAX_DIMENSIONS" not in lines[0]:
        return [f"a topology above the limit refused for another reason: {lines[0][:200]}"]
    return []


def dims_case(rng: random.Random, folder: Path) -> list[str]:
    """One seeded case of "many dimensions and big enumerations" (module docstring)."""
    topo, nd = random_topology(rng)
    argv = random_argv(rng, topo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSE_")}
    env["DSE_MAX_WORK"] = WORK
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    high = rng.random() < 0.5
    if high:
        env["DSE_MAX_DIMENSIONS"] = str(HIGH_LIMIT)
    limit = HIGH_LIMIT if high else _default_limit()
    before = sorted(p.name for p in folder.iterdir())
    code, out, err = run_limited(argv, folder, env)
    problems = answer_problems(code, out, err, over_limit=nd > limit)
    if sorted(p.name for p in folder.iterdir()) != before:
        problems.append("files were written")
    shown = " ".join(a if len(a) < 60 else f"{a[:40]}...({nd} dims)" for a in argv)
    return [f"{p} [{shown}]" for p in problems]


def _default_limit() -> int:
    from dse.core.limits import MAX_DIMENSIONS

    return MAX_DIMENSIONS


CAMPAIGN: Campaign = {
    "many dimensions and big enumerations": (
        "a topology of 1 to 40 dimensions gets an answer (exit 0) or one line and exit 2 (above the "
        "dimension limit: naming it), within the work limit and 1 GiB, orders counted before enumerated",
        150,
        dims_case,
    ),
}
