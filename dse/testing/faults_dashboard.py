"""Fault campaign "dashboard HTTP API": random requests to `dse study dashboard`, read-only.

Each case (`case`) runs a small study journal (two studies of `studies/bw_split_4d.toml`, a few
trials each), serves one of them in-process on 127.0.0.1 port 0 (`dse.explore.study.dashboard`)
and sends a random sequence of requests: a method among GET, HEAD, POST, PUT, PATCH, DELETE,
OPTIONS and a few others (some lower-case, which bottle routes as upper-case), a path from
optuna-dashboard's own route table (`routes`, read from the installed package, so a new route is
tried as soon as it exists) with random ids (the other study's and its trials' among them, some
percent-encoded or in non-ASCII digits), a valid or garbage JSON body, sometimes a foreign ``Host``
header, sometimes a connection that sends half a request and stalls for the rest of the case.

The promise: the storage file is byte for byte unchanged; every request is answered (the stalled
one excepted); every method but GET and HEAD is refused (403); nothing about the other study is
shown (no answer carries its name, a path naming its id is 404); stderr holds no traceback, only
``dse: dashboard: ...`` lines.

`serving`, `routes`, `fill`, `send`, `make_journal` are shared with ``tests/test_study_dashboard.py``.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import random
import re
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dse.testing.faults import Campaign

ROOT = Path(__file__).resolve().parents[2]
STUDY_FILE = ROOT / "studies" / "bw_split_4d.toml"
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "post", "delete", "put", "TRACE", "PROPFIND")
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
PLOTS = ("contour", "slice", "parallel_coordinate", "rank", "edf", "timeline", "pareto_front", "nope")
#: bodies that each write route would accept (optuna-dashboard 0.21), by a word of the route
VALID = {
    "rename": {"study_name": "renamed"},
    "note": {"version": 1, "body": "a note"},
    "tell": {"state": "Complete", "values": [1.0]},
    "user-attrs": {"user_attrs": {"k": "v"}},
    "preference_feedback_component": {"output_type": "note"},
    "preference": {"mode": "ChooseWorst", "candidates": [0, 1], "clicked": 0},
    "/api/studies": {"study_name": "created", "directions": ["minimize"]},
    "/api/studies/": {"remove_associated_artifacts": False},
}
GARBAGE = (b"", b"{", b"null", b"[]", b"\xff\xfe", b"[" * 5000, b'{"state": 3}', b'{"study_name": null}', b"1e999")


def make_journal(folder: Path, trials: tuple[int, int] = (3, 2)) -> tuple[str, list[str]]:
    """A journal in `folder` with the two studies of `STUDY_FILE`, `trials` complete trials each,
    and their names in the file's order."""
    from dse.explore.study.studies import load_studies
    from dse.explore.study.workers import run_study

    url = str(folder / "d.journal")
    specs = load_studies(STUDY_FILE)
    for spec, n in zip(specs, trials, strict=True):
        run_study(spec, trials=n, storage=url)
    return url, [s.name for s in specs]


def routes() -> list[tuple[str, str]]:
    """(method, rule) of every route of the installed optuna-dashboard's application."""
    from optuna.storages import InMemoryStorage

    from dse.explore.study.dashboard import require

    app = require().wsgi(InMemoryStorage())
    return sorted({(r.method, r.rule) for r in app.routes})


def fill(rule: str, pick: Callable[[str], str]) -> str:
    """`rule` with each ``<name:filter>`` placeholder replaced by ``pick(name)``."""
    out, rest = [], rule
    while "<" in rest:
        head, _, tail = rest.partition("<")
        spec, _, rest = tail.partition(">")
        out += [head, pick(spec.split(":")[0])]
    return "".join(out) + rest


def send(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int | None, bytes]:
    """One request to 127.0.0.1:`port`: its status and body, or (None, the error) if unanswered in 30 s."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read()
    except (OSError, http.client.HTTPException) as e:
        return None, f"{type(e).__name__}: {e}".encode()
    finally:
        conn.close()


@contextlib.contextmanager
def serving(server: Any) -> Iterator[int]:
    """`server` (a `DashboardServer`, bound) served by a thread; yields its port; stopped on exit."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def stall(port: int, rng: random.Random) -> socket.socket:
    """A connection that has sent part of a request and sends no more."""
    whole = b'POST /api/studies HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 80\r\n\r\n{"study_name": '
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(whole[: rng.randint(1, len(whole) - 1)])
    return s


def study_and_trial_ids(url: str, names: list[str]) -> dict[str, tuple[int, list[int]]]:
    """The storage's ids of the studies `names` at `url`: per name, the study's id and its trials' ids."""
    from dse.explore.study.storage import load_study

    out = {}
    for name in names:
        study = load_study(name, url)
        out[name] = (study._study_id, [t._trial_id for t in study.get_trials(deepcopy=False)])
    return out


def _picker(rng: random.Random, ids: dict[str, tuple[int, list[int]]]) -> Callable[[str], str]:
    study_ids = [i for i, _ in ids.values()]
    trial_ids = [t for _, ts in ids.values() for t in ts]

    def number(pool: list[int]) -> str:
        """An id from `pool` or a bad one, in one of the forms a URL may carry it."""
        n = rng.choice(pool + [-1, 7, 10**30])
        form = rng.random()
        if form < 0.1:
            return "%" + "%".join(f"{b:02X}" for b in str(n).encode())  # percent-encoded digits
        if form < 0.15 and n >= 0:
            arabic = "".join(chr(0x660 + int(d)) for d in str(n))  # Arabic-Indic digits: int() takes them
            return "".join(f"%{b:02X}" for b in arabic.encode())  # as UTF-8, as a browser sends them
        return str(n)

    def pick(name: str) -> str:
        """A value for the route parameter `name`, valid or not."""
        if name == "study_id":
            return number(study_ids)
        if name == "trial_id":
            return number(trial_ids)
        if name == "plot_type":
            return rng.choice(PLOTS)
        if name == "filename":
            return rng.choice(("index.html", "../../_app.py", "bundle.js"))
        if name == "":  # /dashboard<:re:(/.*)?>
            return rng.choice(("", "/studies/0", "/studies/1"))
        return rng.choice(("0", "ab12", "deadbeef-0000"))

    return pick


def _body(rng: random.Random, rule: str) -> bytes | None:
    if rng.random() < 0.3:
        return rng.choice(GARBAGE)
    valid = [v for k, v in VALID.items() if k in rule or (k == "/api/studies/" and rule.startswith(k))]
    return json.dumps(valid[0] if valid else {"x": rng.random()}).encode()


def _request(rng: random.Random, rules: list[str], pick: Callable[[str], str]) -> tuple[str, str, bytes | None]:
    rule = rng.choice(rules)
    path = fill(rule, pick) + rng.choice(("", "", "", "/", "//", "?after=-1", "?trial_ids=0,1"))
    return rng.choice(METHODS), path, _body(rng, rule)


def case(rng: random.Random, folder: Path) -> list[str]:
    """One seeded random sequence of requests to a read-only dashboard; the broken promises."""
    from dse.explore.study.dashboard import dashboard_server

    url, names = make_journal(folder, (rng.randint(1, 4), rng.randint(1, 3)))
    shown, other = rng.sample(names, 2)
    ids = study_and_trial_ids(url, names)
    before = Path(url).read_bytes()
    rules = sorted({rule for _, rule in routes()})
    pick, problems, err = _picker(rng, ids), [], io.StringIO()
    with contextlib.redirect_stderr(err):
        server, _ = dashboard_server(shown, url, "127.0.0.1", 0)
        with serving(server) as port, contextlib.ExitStack() as stalled:
            for _ in range(rng.randint(6, 16)):
                if rng.random() < 0.1:
                    stalled.enter_context(stall(port, rng))
                method, path, body = _request(rng, rules, pick)
                host = {"Host": "evil.example"} if rng.random() < 0.05 else {}
                status, text = send(port, method, path, body, host)
                problems += _check(method, path, status, text, host, other, ids[other][0])
            status, text = send(port, "GET", "/api/studies")
            listed = [s["study_name"] for s in json.loads(text or b"{}").get("study_summaries", [])]
            if status != 200 or listed != [shown]:
                problems.append(f"GET /api/studies: {status} listing {listed}, not [{shown!r}]")
    if Path(url).read_bytes() != before:
        problems.append("the journal changed")
    lines = err.getvalue().splitlines()
    if "Traceback" in err.getvalue() or any(not ln.startswith("dse: dashboard: ") for ln in lines):
        problems.append(f"stderr: {err.getvalue()[:300]!r}")
    return problems


def _check(
    method: str, path: str, status: int | None, text: bytes, host: dict[str, str], other: str, other_id: int
) -> list[str]:
    """The promises one answer breaks."""
    what = f"{method} {path!r}"
    if status is None:
        return [f"{what}: no answer ({text.decode(errors='replace')})"]
    problems = []
    if other.encode() in text:
        problems.append(f"{what}: the answer shows study {other}")
    refused = method.upper() not in ("GET", "HEAD") or bool(host)
    if refused and status != 403:
        problems.append(f"{what}: {status}, not 403")
    if not refused and re.match(rf"/api/studies/{other_id}(?:[/?]|$)", path) and status != 404:
        problems.append(f"{what}: {status} for the other study, not 404")
    return problems


CAMPAIGN: Campaign = {
    "dashboard HTTP API": (
        "read-only: the storage byte for byte unchanged, every request answered, writes 403, "
        "other studies invisible, no traceback",
        300,
        case,
    ),
}
