"""Fault campaign of studies, storages and processes: concurrent studies of one name, process caps,
network storage faults (`CAMPAIGN`, run by `scripts/fault_campaign.py` and `tests/test_faults_studies.py`).

- **concurrent studies of one name** (`concurrent_case`): two or three ``dse study run`` started
  together on one journal, each from its own study file of one study name, with the same or
  different definitions (objective, direction, space, workload or constraint), random trial counts
  and workers. Same definition: every command exits 0 and the study ends with exactly the most
  trials asked, none running, no trial number twice. Different: the definition stored in the
  journal is one of them; every command of it exits 0, every other is refused in one line, and the
  study holds that definition's directions and exactly the most trials its commands asked.
- **process caps** (`caps_case`): ``dse study run --workers W`` and ``dse sweep --jobs J`` with W
  and J random (0, negative, huge, above a lowered ``DSE_MAX_PROCESSES``, not a number). Each is
  refused in one line with nothing created, or runs with never more child processes (counted in
  /proc while it runs) than trials or points left, the count asked or the cap; a count lowered to
  the work left says so in one note.
- **network storage faults** (`network_case`): a local socket that accepts and never answers,
  closes at once, sends garbage, or a closed port, as ``postgresql://``, ``postgresql+psycopg://``
  or ``mysql://`` URLs with a random password, to ``dse study run``, ``list`` and ``report``, with
  ``DSE_STORAGE_CONNECT_TIMEOUT=2``: one line, exit 2 (or 1), within `NETWORK_BOUND_S`, the
  password never printed, no file created.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

from dse.testing.faults import Campaign
from dse.testing.interrupts import child_pids

ROOT = Path(__file__).resolve().parents[2]
SPACE = ROOT / "search_spaces" / "bw_split_4d.toml"
#: seconds within which a command on a storage that never answers must have given up (the connect
#: timeout is lowered to 2 s, libpq's least; a generous margin for a loaded machine)
NETWORK_BOUND_S = 60.0

# ------------------------------------------------------------------ running dse


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSE_")}
    return dict(env, PYTHONPATH=str(ROOT), **extra)


def _dse(args: Sequence[str], folder: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "dse", *args],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _watch(p: subprocess.Popen, timeout: float = 300.0) -> tuple[int, str, str, int]:
    """Wait for `p`, counting its child processes meanwhile: (exit code, stdout, stderr, the most
    children seen at once). A run past `timeout` is killed (exit code -9)."""
    most = 0
    end = time.monotonic() + timeout
    while p.poll() is None and time.monotonic() < end:
        most = max(most, len(child_pids(p.pid)))
        time.sleep(0.01)
    if p.poll() is None:
        p.kill()
    out, err = p.communicate()
    return p.returncode, out, err, most


def _one_error_line(code: int, err: str, *words: str) -> list[str]:
    lines = err.splitlines()
    if code not in (1, 2) or len(lines) != 1 or not lines[0].startswith("dse: error: ") or "Traceback" in err:
        return [f"exit {code}, stderr {err[-300:]!r} (one 'dse: error:' line expected)"]
    return [f"the line lacks {w!r}: {lines[0][:200]!r}" for w in words if w not in lines[0]]


def _notes_only(err: str) -> list[str]:
    bad = [ln for ln in err.splitlines() if not ln.startswith("dse: warning: ")]
    return [f"stderr besides notes: {bad[:2]!r}"] if bad else []


# ------------------------------------------------------------------ concurrent studies of one name

SIZE = 'size = "1GB"'
#: ways a study file may differ from the first one: (what, the [[objectives]] and extra lines)
OTHERS = (
    ("objective", '[[objectives]]\nmetric = "bw_utilization"\n', ""),
    ("direction", '[[objectives]]\nmetric = "time"\ndirection = "maximize"\n', ""),
    ("size", '[[objectives]]\nmetric = "time"\n', 'size = "512MB"'),
    ("constraint", '[[objectives]]\nmetric = "time"\n[[constraints]]\nmetric = "cost"\nmax = 1\n', ""),
    ("space", '[[objectives]]\nmetric = "time"\n', "", "budget = 800.0", "budget = 700.0"),
)


def study_file(folder: Path, index: int, kind: int | None, name: str = "c") -> Path:
    """A study file of study `name` in `folder` (`kind`: None for the base definition, else an index
    into `OTHERS`), with its own copy of the space (so that files differ, definitions may not)."""
    other = OTHERS[kind] if kind is not None else ("base", '[[objectives]]\nmetric = "time"\n', "")
    space = SPACE.read_text()
    if len(other) > 3:
        space = space.replace(other[3], other[4])
    (folder / f"space{index}.toml").write_text(space)
    path = folder / f"study{index}.toml"
    path.write_text(
        f'[study]\nname = "{name}"\nspace = "space{index}.toml"\nseed = {index}\n\n'
        f'[workload]\ncollective = "all_reduce"\n{other[2] or SIZE}\n\n{other[1]}'
    )
    return path


def stored_study(url: str, name: str) -> tuple[dict | None, list[str], list]:
    """The definition a journal stores for study `name`, its directions, and its trials."""
    import optuna

    from dse.explore.study.storage import open_storage
    from dse.explore.study.workers import DEFINITION_ATTR

    storage = open_storage(url, must_exist=True)
    study = optuna.load_study(study_name=name, storage=storage)
    stored = storage.get_study_system_attrs(study._study_id).get(DEFINITION_ATTR)
    return stored, [d.name.lower() for d in study.directions], study.trials


def concurrent_case(rng: random.Random, folder: Path) -> list[str]:
    """One case of "concurrent studies of one name" (module docstring)."""
    from dse.explore.study.studies import load_studies

    k = rng.choice((2, 2, 3))
    if rng.random() < 0.5:
        kinds: list[int | None] = [None] * k
    else:
        other = rng.randrange(len(OTHERS))
        kinds = [None, other] + [rng.choice((None, other)) for _ in range(k - 2)]
        rng.shuffle(kinds)
    files = [study_file(folder, i, kind) for i, kind in enumerate(kinds)]
    definitions = [json.dumps(load_studies(f)[0].definition(), sort_keys=True) for f in files]
    trials = [rng.randint(1, 4) for _ in files]
    workers = [rng.choice((1, 1, 2)) for _ in files]
    url = str(folder / "one.journal")
    procs = [
        _dse(["study", "run", str(f), "--trials", str(t), "--workers", str(w), "--storage", url], folder, _env())
        for f, t, w in zip(files, trials, workers)
    ]
    runs = [_watch(p) for p in procs]
    try:
        stored, directions, held = stored_study(url, "c")
    except Exception as e:  # noqa: BLE001 - a journal that cannot be read is a broken promise
        return [f"the journal cannot be read: {type(e).__name__}: {e}"]
    winner = json.dumps(stored, sort_keys=True)
    if winner not in definitions:
        return [f"the journal stores a definition none of the commands had: {winner[:200]}"]
    problems = []
    for (code, _, err, _), d, kind in zip(runs, definitions, kinds):
        if d == winner:
            problems += [f"{kind}: exit {code}, {err[-300:]!r}"] if code != 0 else _notes_only(err)
        else:
            problems += _one_error_line(code, err, "another definition", "'c'")
    asked = max(t for t, d in zip(trials, definitions) if d == winner)
    states = [t.state.name for t in held]
    numbers = [t.number for t in held]
    if states.count("COMPLETE") != asked or "RUNNING" in states:
        problems.append(f"{states.count('COMPLETE')} complete, {states.count('RUNNING')} running; {asked} asked")
    if len(set(numbers)) != len(numbers):
        problems.append(f"trial numbers twice: {numbers}")
    spec = load_studies(files[definitions.index(winner)])[0]
    if directions != spec.directions:
        problems.append(f"directions {directions}, the winner's {spec.directions}")
    return problems


# ------------------------------------------------------------------ process caps

COUNTS = ("0", "-1", "-2", "1", "2", "3", "5", "9", "300", "1000", "1000000", "4" * 30, "x", "1e3")


def _count(text: str) -> int | None:
    """`text` as an integer, as the command line reads it (None: not one)."""
    try:
        return int(text.strip())
    except ValueError:
        return None


def caps_case(rng: random.Random, folder: Path) -> list[str]:
    """One case of "process caps" (module docstring)."""
    cap = rng.choice((2, 3, 4, 8, 256, 256))
    raw = rng.choice(COUNTS + (str(cap), str(cap + 1))) if rng.random() < 0.5 else str(rng.randint(2, 6))
    env = _env(DSE_MAX_PROCESSES=str(cap))
    if rng.random() < 0.5:
        return _study_caps(rng, folder, raw, cap, env)
    return _sweep_caps(rng, folder, raw, cap, env)


def _study_caps(rng: random.Random, folder: Path, raw: str, cap: int, env: dict[str, str]) -> list[str]:
    trials = rng.randint(1, 4)
    url = folder / "caps.journal"
    study = study_file(folder, 0, None)
    code, _, err, most = _watch(
        _dse(
            ["study", "run", str(study), "--trials", str(trials), "--workers", raw, "--storage", str(url)], folder, env
        )
    )
    n = _count(raw)
    return _cap_outcome(code, err, most, n, cap, trials, url, "--workers", n is not None and n > max(1, trials))


def _sweep_caps(rng: random.Random, folder: Path, raw: str, cap: int, env: dict[str, str]) -> list[str]:
    points = rng.randint(1, 24)
    sizes = ", ".join(f'"{i + 1}MB"' for i in range(points))
    spec = folder / "caps.toml"
    spec.write_text(f'[sweep]\ntopology = "Ring(4,100,10)_SW(4,50,100)"\nsize = [{sizes}]\nchunks = 64\n')
    out = folder / "caps.csv"
    code, _, err, most = _watch(_dse(["sweep", str(spec), "--out", str(out), "--jobs", raw], folder, env))
    n = _count(raw)
    asked = min(os.cpu_count() or 1, cap) if n == -1 else n
    return _cap_outcome(code, err, most, asked, cap, points, out, "--jobs", n is not None and n != -1 and n > points)


def _cap_outcome(
    code: int, err: str, most: int, n: int | None, cap: int, left: int, out: Path, flag: str, clamped: bool
) -> list[str]:
    """The promise of a process-cap case: refused in one line with nothing created when the count is
    no count, below 1 (or -1 for --jobs) or above `cap`; else run with at most min(n, left, cap)
    children, and a note exactly when the count was lowered to the work left."""
    if n is None or not 1 <= n <= cap:
        problems = _one_error_line(code, err)
        if code == 0:
            problems = [f"{flag} {n}: ran (cap {cap})"]
        if out.exists():
            problems.append(f"a refused run left {out.name}")
        return problems
    if code != 0:
        return [f"{flag} {n} (cap {cap}, {left} left): exit {code}, {err[-300:]!r}"]
    problems = _notes_only(err)
    bound = min(n, left, cap)
    if most > bound:
        problems.append(f"{flag} {n}: {most} child processes at once, more than {bound} ({left} left, cap {cap})")
    noted = f"dse: warning: {flag}" in err
    if noted != clamped:
        problems.append(f"{flag} {n}, {left} left: {'a' if noted else 'no'} note")
    return problems


# ------------------------------------------------------------------ network storage faults

BEHAVIOURS = ("silent", "close", "garbage", "refused")
PASSWORD_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!$%^&*()-_=+[]{};:,.<>~/ "


@contextlib.contextmanager
def fake_server(behaviour: str) -> Iterator[int]:
    """A port on 127.0.0.1 whose server accepts and never answers (``silent``), closes each
    connection at once (``close``), sends garbage (``garbage``), or no server at all (``refused``)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if behaviour == "refused":
        sock.close()
        yield port
        return
    sock.listen(16)
    sock.settimeout(0.1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        """Accept connections until `stop` is set and answer each as `behaviour` says."""
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            if behaviour == "close":
                conn.close()
                continue
            if behaviour == "garbage":
                with contextlib.suppress(OSError):
                    conn.sendall(bytes(random.Random(port).randrange(256) for _ in range(300)))
            held.append(conn)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield port
    finally:
        stop.set()
        t.join(5)
        for c in held:
            c.close()
        sock.close()


def network_case(rng: random.Random, folder: Path) -> list[str]:
    """One case of "network storage faults" (module docstring)."""
    secret = "".join(rng.choice(PASSWORD_CHARS) for _ in range(rng.randint(8, 16)))
    shown = rng.choice((secret.replace(" ", "%20"), quote(secret, safe=""), secret))
    behaviour = rng.choice(BEHAVIOURS)
    scheme = rng.choice(("postgresql", "postgresql+psycopg", "mysql", "mysql+pymysql"))
    command = rng.choice((["study", "list"], ["study", "report", "c", "--out", "rep"], ["study", "run", "STUDY"]))
    before = sorted(p.name for p in folder.iterdir())
    if command[-1] == "STUDY":
        command = [*command[:-1], str(study_file(folder, 0, None)), "--trials", "2"]
        before = sorted(p.name for p in folder.iterdir())
    with fake_server(behaviour) as port:
        url = f"{scheme}://user{rng.randrange(100)}:{shown}@127.0.0.1:{port}/db"
        start = time.monotonic()
        code, out, err, _ = _watch(
            _dse([*command, "--storage", url], folder, _env(DSE_STORAGE_CONNECT_TIMEOUT="2")), NETWORK_BOUND_S
        )
        took = time.monotonic() - start
    what = f"{behaviour} {scheme} {command[1]}"
    problems = [f"{what}: {p}" for p in _one_error_line(code, err)]
    if took >= NETWORK_BOUND_S:
        problems.append(f"{what}: no answer within {NETWORK_BOUND_S:.0f} s")
    for form in {secret, shown, quote(secret, safe="")}:
        if form in out + err:
            problems.append(f"{what}: the password is printed: {err[-300:]!r}")
    after = sorted(p.name for p in folder.iterdir())
    if after != before:
        problems.append(f"{what}: files created: {sorted(set(after) - set(before))}")
    return problems


CAMPAIGN: Campaign = {
    "concurrent studies of one name": (
        "same definition: exactly the trials asked, none twice; different: one refused in one line, "
        "the storage holds only the winner's trials",
        15,
        concurrent_case,
    ),
    "process caps": (
        "--workers/--jobs refused in one line (nothing created) or clamped with a note; never more "
        "processes than the work left, the count asked or DSE_MAX_PROCESSES",
        30,
        caps_case,
    ),
    "network storage faults": (
        "a PostgreSQL/MySQL URL on a port that never answers, closes or sends garbage: one line, "
        "exit 2, bounded by the connect timeout, the password never printed",
        25,
        network_case,
    ),
}
