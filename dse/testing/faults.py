"""Fault injection: malformed input, damaged files and interrupted runs, each checked against what dse
promises (docs/reliability.md). Used by `tests/test_faults.py` (hypothesis drives the
choices) and `scripts/fault_campaign.py` (a seeded campaign that counts the cases).

Every case returns a list of problems (empty: handled as promised):

- **malformed input** (`cli_case`): the command exits 0, or exits 2 with exactly one line
  ``dse: error: ...`` on stderr; never a traceback; a rejected run creates no output and changes no
  file it did not write;
- **damaged sweep CSVs** (`csv_case`): damage to the sweep's own rows is repaired to exactly the
  uninterrupted result; anything else is refused and the file is left byte for byte as it was;
- **damaged journals** (`journal_case`): a damaged end is cut back and the study resumes to the same
  trials as an undamaged run; damage inside, or a file that is no journal, is refused untouched;
- **interrupted runs** (`dse.testing.interrupts`): kill -9 or SIGINT at a chosen moment of a sweep,
  a study or a reproduction; SIGINT exits 130 with one line; no worker process or /dev/shm entry
  outlives the run; running the same command again gives the uninterrupted output (byte for byte
  for sweeps with one job and reproductions, the same rows for sweeps with several, the same trials
  for studies).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "studies" / "bw_split_4d.toml"

#: A fault campaign's classes (the ``CAMPAIGN`` table of each `dse.testing.faults_*` module): class name ->
#: (the promise in one sentence, the campaign's default number of cases, a function that runs one
#: seeded case in an empty folder and returns the promises it broke).
Campaign = dict[str, tuple[str, int, Callable[[random.Random, Path], list[str]]]]

# ------------------------------------------------------------------ malformed input
NOTATIONS = (
    "Ring(4,375,20)_FC(8,175,700)_Ring(4,150,700)_SW(8,100,1700)",
    "SW(16,150,700,links=6)_SW(64,100,1700,links=1)",
    "Ring(4,250,20,links=2,nic=5,router=3)_SW(4,200,700,algorithm=ring)",
    "Ring_FC 4x8 375,175 20,700",
    "2D-SW_SW",
)
#: Tokens mutations insert: numbers out of range, non-ASCII digits, keywords, separators.
TOKENS = (
    "0",
    "1",
    "-1",
    "1.5",
    "1e400",
    "1e308",
    "nan",
    "inf",
    "4" * 40,
    "\uff14",
    "\u0663",
    "\u00a0",
    "\x00",
    ",",
    "(",
    ")",
    "_",
    "=",
    "x",
    ";",
    " ",
    "links=2",
    "links=",
    "algo=ring",
    "algorithm=direct",
    "nic=1e400",
    "Ring(1,100,10)",
    "SW(2,1e-12,1)",
    "FC(600,1,1)",
    "Ring(1000000000,100,10,links=2)",
    "KiB",
    "B",
    "GB",
    '"',
    "'",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "#",
    "\n",
    "\\",
    "true",
    "[]",
    "\xff",
)
SIZES = (
    "1GB",
    "64MiB",
    "1e9",
    "100",
    "1.5B",
    "0.5",
    "0.1GiB",
    "1e400",
    "1e309",
    "-1",
    "\uff14GB",
    "",
    "8PiB",
    "9007199254740993",
)
CHUNKS = ("64", "1", "0", "-3", "1000", "10000000", "1e3", "\uff18", "4" * 40, "")
MODELS = ("paper", "astra-sim", "astra-sim-1", "astra")
SWEEP = """[sweep]
topology = ["2D-SW_SW", "Ring(4,375,20)_SW(8,100,1700)"]
size = ["1MB", "2MB"]
chunks = [4, 16]
schedules = ["baseline+fifo", "themis+scf"]
bounds = false
"""
STUDY_TOML = """[study]
name = "fz"
space = "space.toml"
sampler = "random"
seed = 1
trials = 2

[workload]
collective = "all_reduce"
size = "1GB"
cost_model = "paper"

[[objectives]]
metric = "time"
"""
SPACE_TOML = """[space]
npus = 64
dims = [2, 3]
kinds = ["ring", "switch"]
chunks = [4, 16]

[space.bandwidth]
budget = 400.0
minimum = 10.0

[space.latency]
tiers = [20, 700]
"""
ASTRA_WORKLOAD = """DATA
3
conv1 -1 1000 NONE 0 1000 NONE 0 1000 ALLREDUCE 4194304 10
conv2 -1 2000 NONE 0 2000 NONE 0 2000 ALLREDUCE 8388608 10
fc -1 500 ALLGATHER 1048576 500 REDUCESCATTER 1048576 500 ALLREDUCE 2097152 10
"""
TOML_WORKLOAD = """name = "fz"
parallelism = "HYBRID"
model_parallel_group = 4
[[layers]]
name = "a"
fwd_compute = 1000
fwd_comm = "all_reduce"
fwd_bytes = 1048576
wg_comm = "all_reduce"
wg_bytes = 2097152
"""


def mutate(text: str, rng: random.Random, ops: int | None = None) -> str:
    """`text` with up to three random edits (none a fifth of the time): delete, insert a token,
    replace with a token, repeat a part."""
    s = text
    for _ in range(rng.choice((0, 1, 1, 2, 3)) if ops is None else ops):
        i = rng.randint(0, len(s))
        j = min(len(s), i + rng.randint(0, 6))
        op = rng.randrange(4)
        if op == 0:
            s = s[:i] + s[j:]
        elif op == 1:
            s = s[:i] + rng.choice(TOKENS) + s[i:]
        elif op == 2:
            s = s[:i] + rng.choice(TOKENS) + s[j:]
        else:
            s = s[:j] + s[i:j] + s[j:]
    return s


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """`dse` in this process: (exit code, stdout, stderr); an exception escaping main is a traceback."""
    from dse.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse --help, say
            code = e.code if isinstance(e.code, int) else 2
        except BaseException as e:  # noqa: BLE001 - what the promise forbids: report it as a problem
            return -1, out.getvalue(), f"Traceback (escaped main): {type(e).__name__}: {e}"
    return code, out.getvalue(), err.getvalue()


def outcome_problems(code: int, err: str) -> list[str]:
    """What is wrong with an outcome: exit 0, or exit 2 and one `dse: error:` line; no traceback."""
    lines = err.splitlines()
    if "Traceback" in err:
        return [f"a traceback: {err[-300:]!r}"]
    if code == 2:
        if len(lines) != 1 or not lines[0].startswith("dse: error: "):
            return [f"exit 2 with stderr {err[:300]!r} (one 'dse: error:' line expected)"]
        return []
    if code == 0:
        bad = [ln for ln in lines if not ln.startswith("dse: warning: ")]
        return [f"exit 0 with stderr {bad[:2]!r}"] if bad else []
    return [f"exit {code} (0 or 2 expected), stderr {err[-300:]!r}"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def cli_case(
    argv: Sequence[str], folder: Path, *, outputs: Sequence[Path] = (), codes: Counter | None = None
) -> list[str]:
    """Run one command in `folder` and check the promise: on exit 2 no file in `folder` changed and
    none of `outputs` was created. `codes` counts the exit codes seen."""
    before = _snapshot(folder)
    code, _, err = run_cli(argv)
    if codes is not None:
        codes[code] += 1
    problems = outcome_problems(code, err)
    if code == 2:
        after = _snapshot(folder)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        if changed:
            problems.append(f"a rejected run changed {changed[:3]}")
        created = [str(p) for p in outputs if p.exists() and str(p.relative_to(folder)) not in before]
        if created:
            problems.append(f"a rejected run left {created}")
    return problems


def notation_argv(rng: random.Random) -> list[str]:
    """`dse evaluate|bound|compare` with a mutated topology and odd sizes, chunks and options."""
    cmd = rng.choice(("evaluate", "evaluate", "evaluate", "bound", "compare"))
    argv = [
        cmd,
        mutate(rng.choice(NOTATIONS), rng),
        "--size",
        rng.choice(SIZES[:6]) if rng.random() < 0.7 else rng.choice(SIZES),
    ]
    if rng.random() < 0.5:
        argv += ["--chunks", rng.choice(CHUNKS)]
    if rng.random() < 0.3:
        argv += ["--cost-model", rng.choice(MODELS)]
    if cmd == "evaluate" and rng.random() < 0.3:
        argv += rng.choice(
            (
                ["--orders", "0123"],
                ["--timeline"],
                ["--scheduler", "fixed", "--orders", "01;\uff10"],
                ["--scheduler", "lp_guided"],
                ["--active-chunks", "1e9"],
                ["--latency-mode", "serialized"],
            )
        )
    if cmd != "evaluate":
        argv += ["--node-limit", "20"]
    return argv


def file_argv(kind: str, rng: random.Random, folder: Path) -> tuple[list[str], list[Path]]:
    """A mutated file of `kind` (sweep, study, space, astra, workload, binary) in `folder`, and the
    command that reads it with the outputs it would write."""
    if kind == "binary":
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
        kind = rng.choice(("sweep", "study", "workload"))
        (folder / "in.toml").write_bytes(data)
    else:
        text = {
            "sweep": SWEEP,
            "study": STUDY_TOML,
            "space": STUDY_TOML,
            "astra": ASTRA_WORKLOAD,
            "workload": TOML_WORKLOAD,
        }[kind]
        (folder / "space.toml").write_text(SPACE_TOML)
        if kind == "space":
            (folder / "space.toml").write_text(mutate(SPACE_TOML, rng))
        else:
            text = mutate(text, rng)
        name = {"astra": "in.txt", "workload": "in.toml"}.get(kind, "in.toml")
        (folder / name).write_text(text, encoding="utf-8", errors="surrogatepass")
        if kind == "astra":
            return ["iterate", str(folder / "in.txt"), "-t", "2D-SW_SW"], []
    if kind == "sweep":
        out = folder / "out.csv"
        return ["sweep", str(folder / "in.toml"), "--out", str(out)], [out]
    if kind in ("study", "space"):
        store = folder / "s.journal"
        return ["study", "run", str(folder / "in.toml"), "--trials", "2", "--storage", str(store)], [store]
    return ["iterate", str(folder / "in.toml"), "-t", "Ring(4,100,500)_SW(16,50,1000)"], []


# ------------------------------------------------------------------ damaged sweep CSVs
def sweep_reference(folder: Path) -> tuple[Path, bytes]:
    """A small sweep file and its uninterrupted CSV (one job: rows in point order)."""
    from dse.explore.sweep.sweeps import run_sweep

    spec = folder / "ref.toml"
    spec.write_text(SWEEP)
    out = folder / "ref.csv"
    if not out.exists():
        run_sweep(spec, out, jobs=1)
    return spec, out.read_bytes()


def damage_csv(data: bytes, rng: random.Random) -> tuple[bytes, bool]:
    """`data` with damage to its own rows (repeated, cut short, glued, blank lines, lost rows, a torn
    tail), then, one time in three, one foreign damage; True if there is none of the latter."""
    lines = data.split(b"\n")[:-1]
    whole = lines[1:]
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(1, len(lines))
        op = rng.randrange(5)
        if op == 0:  # a repeated row
            lines.insert(rng.randrange(1, len(lines) + 1), lines[k])
        elif op == 1:  # a row cut short, the rest of the line lost
            lines[k] = lines[k][: rng.randrange(len(lines[k]) + 1)]
        elif op == 2 and k + 1 < len(lines):  # a row cut short, the next row glued to it
            lines[k : k + 2] = [lines[k][: rng.randrange(len(lines[k]) + 1)] + lines[k + 1]]
        elif op == 3:  # a blank line
            lines.insert(k, b"")
        elif len(lines) > 2:  # a lost row
            del lines[k]
    tail = rng.randrange(1, 30) if rng.random() < 0.4 else 0
    if rng.random() < 0.3:  # a row with one number changed (its CRC no longer matches)
        i = rng.randrange(1, len(lines))
        lines.insert(i, re.sub(rb"[0-9](?=[^,]*,[0-9a-f]{8}$)", b"7", lines[i], count=1))
    own = rng.random() < 2 / 3
    if not own:
        if rng.random() < 0.5:  # a line that is no row of this sweep
            lines.insert(
                rng.randrange(1, len(lines) + 1),
                rng.choice((b"hello", b"1,2,3", b"99999," + rng.choice(whole).split(b",", 1)[1])),
            )
        else:  # another header
            lines[0] = lines[0].replace(b"time_ns", b"time")
        lines.append(whole[-1])  # so that the torn tail cannot reach the foreign damage
    out = b"\n".join(lines) + b"\n"
    return (out[:-tail] if tail else out), own


def csv_case(folder: Path, rng: random.Random) -> list[str]:
    """Damage a finished sweep CSV, run the sweep again, check the promise."""
    spec, ref = sweep_reference(folder)
    damaged, own = damage_csv(ref, rng)
    out = folder / "case.csv"
    out.write_bytes(damaged)
    code, _, err = run_cli(["sweep", str(spec), "--out", str(out)])
    problems = outcome_problems(code, err)
    after = out.read_bytes() if out.exists() else b""
    if code == 0:
        if sorted(after.splitlines()) != sorted(ref.splitlines()):
            problems.append("repaired file differs from the uninterrupted sweep")
    elif code == 2:
        if after != damaged:
            problems.append("a refused file was modified")
        if own and "different results" not in err:
            problems.append(f"repairable damage was refused: {err.strip()}")
    return problems


# ------------------------------------------------------------------ damaged journals
def journal_trials(url: str) -> list[tuple]:
    """The complete trials of the fault study on a storage, each as its sorted fields (trial number aside)."""
    from dse.output.study_report import report_data

    _, rep = report_data("bw_split_4d.themis", url)
    return [tuple(sorted((k, str(v)) for k, v in r.items() if k != "trial")) for r in rep.rows]


def journal_reference(folder: Path, trials: int = 12) -> tuple[Path, list[tuple]]:
    """A finished study journal of `trials` trials and its trials (parameters and values), written by
    another process, as a real one is (a running trial whose worker is alive is left running)."""
    ref = folder / "ref.journal"
    if not ref.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "dse",
                "study",
                "run",
                str(STUDY),
                "--only",
                "bw_split_4d.themis",
                "--trials",
                str(trials),
                "--storage",
                str(ref),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
    return ref, journal_trials(str(ref))


def journal_case(folder: Path, rng: random.Random, trials: int = 12) -> list[str]:
    """Damage a finished journal (its end, its middle, or all of it), run the study, check."""
    ref, want = journal_reference(folder, trials)
    data = ref.read_bytes()
    op = rng.randrange(5)
    if op == 0:  # cut at a random byte of its last half: a killed writer
        cut = rng.randrange(len(data) // 2, len(data))
        damaged, ok = data[:cut], True
    elif op == 1:  # garbage appended, with or without a newline
        damaged, ok = data + rng.choice((b"garbage\n", b'{"op_code": ', b"\x00\xff", b"more\nlines\n")), True
    elif op == 2:  # a record inside cut short
        lines = data.split(b"\n")
        k = rng.randrange(1, len(lines) - 2)
        lines[k] = lines[k][: len(lines[k]) // 2]
        damaged, ok = b"\n".join(lines), False
    elif op == 3:  # not a journal
        damaged, ok = rng.choice((b"hello\n", b"a,b\n1,2\n", bytes(range(256)))), False
    else:  # intact
        damaged, ok = data, True
    case = folder / "case.journal"
    for p in folder.glob("case.journal*"):
        p.unlink()
    case.write_bytes(damaged)
    code, _, err = run_cli(
        ["study", "run", str(STUDY), "--only", "bw_split_4d.themis", "--trials", str(trials), "--storage", str(case)]
    )
    problems = outcome_problems(code, err)
    if ok and code != 0:
        problems.append(f"a damaged end was not repaired: {err.strip()}")
    if code == 0 and journal_trials(str(case)) != want:
        problems.append("the resumed study differs from the undamaged one")
    if code == 2 and case.read_bytes() != damaged:
        problems.append("a refused journal was modified")
    return problems
