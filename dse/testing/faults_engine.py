"""Fault campaign: mutated calls of the C engine's entry points (`dse.sim._engine`: `run`, `batch_table`,
`batch_run`, `batch_one`, `batch_costs`). The promise: whatever a Python caller passes, each call
returns or raises a Python exception; it never kills the interpreter (a signal), never hangs, and
never leaves an error return without an exception (`SystemError`). And a `batch_run` or `batch_one`
on a shape, refused or not, leaves that shape giving the recorded numbers on the recorded points.

How: `capture` records valid calls by running the real callers (`dse.evaluate` at two sizes,
`dse.evaluate_many` with points of mixed sizes and chunk counts, `dse.iterate`; each cost model's
kernel with each Themis tracker and with a scheduler's fixed orders) with the C module replaced by a
recorder; a graph's hooks are recorded as their answers (`Replay` gives them back), a shape as the
dict of fields `batch_table` parsed. `mutate` changes one to three places of a recorded call, chosen
by walking down its nested tuples, lists, dicts and arrays: numbers made negative, huge, NaN or
infinite or of another type, sequences shortened, lengthened, emptied, shuffled or replaced by
something else, arrays retyped or truncated, an element of an array out of range, a field of a
shape dropped, renamed or added. `call_apart` runs the mutated call in a forked child (memory capped
at 1 GiB over its size, 20 s at most) and reports how it ended; a `batch_run` or `batch_one` child
whose shape was left alone also runs the recorded points on that shape afterwards and checks that
the numbers are the recorded ones (a call must not spoil the shape's kept workspace).

Choices: a `SystemError` counts as a broken promise (the C code returned NULL without setting an
exception, or set one and returned a value); any other exception is a refusal, as promised.
Without the C engine built there is nothing to run: `case` reports no problem.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import resource
import select
import signal
import time
from array import array
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from dse.testing.faults import Campaign

#: how long one mutated call may take in its child before it counts as a hang
CALL_SECONDS = 20.0
#: memory a child may take beyond what it has at the fork
CHILD_EXTRA_BYTES = 1 << 30

_CAPTURED: list[tuple[str, tuple, Any]] | None = None


class Replay:
    """A graph's hooks as recorded: `issue(node, t, lead)` gives back the recorded (plans, priority)
    of `node` (a KeyError for a node never issued); `resumed` does nothing."""

    def __init__(self, answers: Any) -> None:
        self.answers = answers

    def issue(self, node: int, t: float, lead: int) -> Any:
        """The recorded (plans, priority) of `node`; a KeyError for a node never issued."""
        for entry in self.answers:
            if entry[0] == node:
                return entry[1]
        raise KeyError(node)

    def resumed(self) -> None:
        """Nothing: a replay has no scheduler state to resume."""
        return None


class _Recorder:
    """Hooks that pass the engine's questions to the real ones and keep the answers."""

    def __init__(self, hooks: Any) -> None:
        self.hooks = hooks
        self.answers: dict[int, tuple[list, Any]] = {}

    def issue(self, node: int, t: float, lead: int) -> Any:
        """The real hooks' answer for `node`, kept (its first answer) in `answers`."""
        r = self.hooks.issue(node, t, lead)
        self.answers.setdefault(node, (list(r[0]), r[1]))
        return r

    def resumed(self) -> None:
        """Pass the resumption on to the real hooks."""
        self.hooks.resumed()


def _scenarios() -> list[Callable[[], object]]:
    """The runs whose engine calls `capture` records: each cost model with Themis (its tracker: the
    load tracker under `paper`, OfflineGreedy under the others) and with fixed orders (a prefix of
    orders), FIFO and smallest-first, at two sizes; a batch of one shape with mixed sizes and chunk
    counts and one of bandwidth rows; a timeline, a training iteration (a graph; lead maps under
    astra-sim), processor sharing, a fixed service order."""
    import dse

    t4 = "4D-Ring_FC_Ring_SW"
    links = "Ring(4,100,20,links=2)_FC(4,50,700,links=3)_SW(2,25,900,links=1)"
    pts = [links.replace("100", str(b), 1) for b in (50, 100, 150)]
    mixed = (("6MB", 20), ("1MB", 2), ("3MB", 8), ("5MB", 5), ("1MB", 2), ("2MB", 12))  # 20 first: fixed orders grow
    runs: list[Callable[[], object]] = []
    for model, topo in (("paper", t4), ("astra-sim", t4), ("astra-sim-1", links)):
        for sched, queue in (("themis", "scf"), ("baseline", "fifo"), ("themis", "fifo")):
            one = partial(dse.evaluate, topo, chunks=6, cost_model=model, scheduler=sched, queue=queue)
            runs += [partial(one, size="4MB"), partial(one, size="3MB")]  # the second on the same shape
            many = [{"size": s, "chunks": c} for s, c in mixed]
            runs.append(partial(dse.evaluate_many, many, topology=topo, cost_model=model, scheduler=sched, queue=queue))
        runs.append(partial(dse.evaluate, topo, size="1MB", chunks=4, cost_model=model, timeline=True))
        runs.append(partial(dse.evaluate_many, pts, size="2MB", chunks=4, cost_model=model))
        runs.append(partial(dse.iterate, "microAllReduce", topo, cost_model=model, chunks=4))
    runs.append(partial(dse.evaluate, t4, size="4MB", chunks=4, active_chunks=2))
    runs.append(partial(dse.evaluate, "2D-SW_SW", size="1MB", chunks=2, queue="fixed", service_order="0,0,1,1|0,0,1,1"))
    runs.append(partial(dse.evaluate_many, bandwidths=[[100, 50, 200, 25]] * 3, topology=t4, size="8MB", chunks=8))
    return runs


def _copy(a: Any) -> Any:
    """A buffer (an array or a memoryview of one) as a new array; anything else as it is."""
    if isinstance(a, memoryview):
        return array(a.format, a.tobytes())
    return array(a.typecode, a) if isinstance(a, array) else a


class _Spy:
    """The C module, recording the calls of `capture` into `calls`: of a shape parsed while recording,
    every `batch_run` and `batch_one` that succeeds, and for its first one the shape again
    (`batch_table`, with that call to make on it) and one point's costs (`batch_costs`)."""

    def __init__(self, real: Any, calls: list[tuple[str, tuple, Any]]) -> None:
        self.real, self.calls = real, calls
        self.shapes: dict[int, tuple[Any, dict, list[bool]]] = {}  # id(capsule): (capsule, fields, [recorded])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def run(self, *a: Any) -> Any:
        """The C module's `run` (the name the engine front calls), recorded with its hooks as a `Replay`."""
        if a[11] is None:
            self.calls.append(("run", a, None))
            return self.real.run(*a)
        recorder = _Recorder(a[11])
        out = self.real.run(*a[:11], recorder, *a[12:])
        self.calls.append(("run", (*a[:11], Replay(tuple(recorder.answers.items())), *a[12:]), None))
        return out

    def batch_table(self, *a: Any) -> Any:
        """The C module's `batch_table`; a shape parsed with fields is kept for the calls made on it."""
        cap = self.real.batch_table(*a)
        if a:
            self.shapes[id(cap)] = (cap, a[0], [False])
        return cap

    def _record(self, cap: Any, entry: str, rest: tuple, before: tuple, got: Any, one: tuple) -> None:
        """Record `entry`(cap, *rest) that gave `got` (from `before`); the shape and `one` point's costs
        too if it is the shape's first."""
        _, fields, seen = self.shapes[id(cap)]
        self.calls.append((entry, (fields, *rest), got))
        if not seen[0]:
            seen[0] = True
            self.calls.append(("batch_table", (fields,), (entry, before)))
            self.calls.append(("batch_costs", (fields, *one), None))

    def batch_run(self, cap: Any, points: tuple, outs: tuple) -> Any:
        """The C module's `batch_run`, recorded (with its outputs after) on a shape parsed while recording."""
        if id(cap) not in self.shapes or not points[0]:  # a shape parsed before the capture: not recorded
            return self.real.batch_run(cap, points, outs)
        points, before = tuple(map(_copy, points)), tuple(map(_copy, outs))
        self.real.batch_run(cap, points, outs)  # what it raises goes to the caller, unrecorded
        nd = self.shapes[id(cap)][1]["nd"]
        one = (points[1][0], points[2][0], points[3][:nd], points[4][:nd])
        self._record(cap, "batch_run", (points, before), (points, before), tuple(bytes(a) for a in outs), one)
        return None

    def batch_one(self, cap: Any, *point: Any) -> Any:
        """The C module's `batch_one`, recorded with what it returned on a shape parsed while recording."""
        got = self.real.batch_one(cap, *point)
        if id(cap) in self.shapes:
            point = tuple(map(_copy, point))
            self._record(cap, "batch_one", point, point, got, point)
        return got


def capture() -> list[tuple[str, tuple, Any]]:
    """Valid calls of each entry point as (entry, args, expected), shapes as their dicts of fields:
    `batch_table` (fields) with expected a call to make on it (`batch_run` and its (points, outputs),
    or `batch_one` and its point); `batch_run` (fields, points, outputs before) with expected the
    outputs' bytes after; `batch_one` (fields, size, chunks, bandwidths, latencies) with expected what
    it returned; `batch_costs` the same args; `run` with its hooks a `Replay`. Recorded once per
    process; empty without the C engine."""
    global _CAPTURED
    if _CAPTURED is not None:
        return _CAPTURED
    from dse.sim import compiled
    from dse.sim import engine as front

    real = front._engine
    calls: list[tuple[str, tuple, Any]] = []
    if real is None:
        _CAPTURED = []
        return _CAPTURED
    compiled.CACHE.clear()  # every shape new: parsed, and run, through the recorder
    front._engine = _Spy(real, calls)
    try:
        for run in _scenarios():
            run()
    finally:
        front._engine = real
        compiled.CACHE.clear()  # no shape parsed through the recorder stays
    _CAPTURED = calls
    return calls


# ----- mutations -----------------------------------------------------------------------------------
INTS = (-1, -2, 0, 1, 2, 3, 7, 8, 9, 64, 255, 256, 65536, 2**31 - 1, 2**31, -(2**31), 2**32 + 1, 2**62, 2**63 - 1)
HUGE_INTS = (2**63, -(2**63) - 1, 2**64, 10**30)
FLOATS = (math.nan, math.inf, -math.inf, -1.0, -0.0, 0.0, 5e-324, 1e308, -1e308, 2.0**53 + 1)
OTHERS: tuple[Any, ...] = (None, "x", b"", {}, object(), 1.5, (), [], array("b"))


def _number(rng: random.Random, v: Any) -> Any:
    r = rng.random()
    if r < 0.35 and isinstance(v, int):
        return rng.choice((v + 1, v - 1, -v, 2 * v, v + 8, -1 - v))
    if r < 0.6:
        return rng.choice(INTS)
    if r < 0.8:
        return rng.choice(FLOATS)
    if r < 0.9:
        return rng.choice(HUGE_INTS)
    return rng.choice(OTHERS)


def _array(rng: random.Random, a: array) -> Any:
    b = array(a.typecode, a)
    r = rng.random()
    if r < 0.6 and len(b):
        for _ in range(rng.choice((1, 1, 1, 2, 5))):
            i = rng.randrange(len(b))
            if a.typecode in "dfe":
                b[i] = rng.choice((*FLOATS, b[i] * 2, -b[i], b[rng.randrange(len(b))]))
            else:
                bits = 8 * a.itemsize
                lo, hi = (0, 2**bits - 1) if a.typecode in "BHILQ" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
                near = (b[i] + 1, b[i] - 1, -b[i], len(b), len(b) - 1, b[i] + len(b), b[rng.randrange(len(b))])
                b[i] = rng.choice([x for x in (*INTS, *near, lo, hi) if lo <= x <= hi])
        return b
    if r < 0.6:
        return b[: rng.randrange(len(b) + 1)]
    if r < 0.7:
        return b + b[: rng.randrange(1, 4)] if len(b) else array(a.typecode, [1])
    if r < 0.8:
        code = rng.choice("bBiIqQdfl")
        try:
            return array(code, [int(x) if code not in "df" else x for x in b])
        except (OverflowError, TypeError, ValueError):
            return array(code)
    if r < 0.9:
        return rng.choice([bytes(b), b.tolist(), tuple(b.tolist()), memoryview(bytes(b))])
    return rng.choice(OTHERS)


def _sequence(rng: random.Random, s: Any) -> Any:
    items, r = list(s), rng.random()
    if r < 0.2 and items:
        del items[rng.randrange(len(items))]
    elif r < 0.35 and items:
        items.insert(rng.randrange(len(items) + 1), rng.choice(items))
    elif r < 0.5 and len(items) > 1:
        i, j = rng.sample(range(len(items)), 2)
        items[i], items[j] = items[j], items[i]
    elif r < 0.6:
        items.append(rng.choice((*OTHERS, 0, 1.0, -1)))
    elif r < 0.7:
        items = items[: rng.randrange(len(items) + 1)]
    elif r < 0.8:
        items = []
    elif r < 0.9:
        return list(items) if isinstance(s, tuple) else tuple(items)
    else:
        return rng.choice(OTHERS)
    return items if isinstance(s, list) else tuple(items)


def _children(v: Any) -> list[Any] | None:
    if isinstance(v, Replay):
        return [v.answers]
    if isinstance(v, (tuple, list)) and v:
        return list(v)
    return None


def _rebuild(v: Any, kids: list[Any]) -> Any:
    if isinstance(v, Replay):
        return Replay(kids[0])
    return kids if isinstance(v, list) else tuple(kids)


#: what a shape's field may be renamed to, or added as: names the engine does not know
ODD_KEYS: tuple[Any, ...] = ("dims", "Nd", "nd ", "", "perm\x00", b"nd", 0, None, ("nd",))


def _fields(rng: random.Random, v: dict, depth: int) -> dict:
    """A shape's fields with one changed: a value (`mutate_once`), or one dropped, renamed or added."""
    d, r = dict(v), rng.random()
    key = rng.choice(list(d)) if d else None
    if key is None or r < 0.05:
        d[rng.choice(ODD_KEYS)] = rng.choice((0, 1, -1, 1.5, None, array("i", [0]), array("d")))
    elif r < 0.85:
        d[key] = mutate_once(rng, d[key], depth + 1)
    elif r < 0.92:
        del d[key]
    else:
        value = d.pop(key)
        new = rng.choice((*ODD_KEYS, str(key).upper(), f"{key}_", str(key)[:-1]))
        d[new if new not in v else f"{key}_"] = value
    return d


def mutate_once(rng: random.Random, v: Any, depth: int = 0) -> Any:
    """`v` with one place changed: here (more likely the deeper), or in one of its items."""
    if isinstance(v, dict) and (depth == 0 or rng.random() < 0.95):
        return _fields(rng, v, depth)
    kids = _children(v)
    if kids is not None and (depth == 0 or rng.random() < 0.75):
        i = rng.randrange(len(kids))
        kids[i] = mutate_once(rng, kids[i], depth + 1)
        return _rebuild(v, kids)
    if isinstance(v, bool) or isinstance(v, (int, float)):
        return _number(rng, v)
    if isinstance(v, array):
        return _array(rng, v)
    if isinstance(v, (tuple, list)):
        return _sequence(rng, v)
    if isinstance(v, Replay):
        return rng.choice(OTHERS)
    return rng.choice((*OTHERS, 0, -1))


def mutate(rng: random.Random, args: tuple) -> tuple:
    """One to three places of a call's arguments changed (`mutate_once`)."""
    for _ in range(rng.choice((1, 1, 2, 3))):
        args = mutate_once(rng, args)
    return args


# ----- a call in a child ---------------------------------------------------------------------------
def _raised(e: BaseException) -> str:
    return f"raised {type(e).__name__}: {e}"[:300]


#: the entry points that run points on a shape's kept workspace
STATEFUL = ("batch_run", "batch_one")


def replay(eng: Any, entry: str, cap: Any, rest: tuple) -> str:
    """What `entry`(cap, *rest) gives, as a repr: `batch_run`'s outputs' bytes (its outputs copied
    first), `batch_one`'s result."""
    if entry == "batch_one":
        return repr(eng.batch_one(cap, *rest))
    outs = tuple(map(_copy, rest[1]))
    eng.batch_run(cap, rest[0], outs)
    return repr(tuple(bytes(a) for a in outs))


def _invoke(entry: str, args: Any, expected: Any, again: tuple | None) -> str:
    """Run one call here, a shape given as its fields parsed first: "ok", or "wrong: ..." (a call after
    which its shape gives other numbers on the recorded point or points, `again`); raises what the
    call raises (a `STATEFUL` call's is reported as "raised ...")."""
    from dse.sim import _engine

    args = args if isinstance(args, tuple) else (args,)
    if entry == "batch_table":  # then the recorded call on it
        replay(_engine, expected[0], _engine.batch_table(*args), expected[1])
        return "ok"
    fields = args[0] if args and isinstance(args[0], dict) else None
    if entry != "run" and fields is not None:
        args = (_engine.batch_table(fields), *args[1:])
    if entry not in STATEFUL:
        getattr(_engine, entry)(*args)
        return "ok"
    if again is not None and entry == "batch_run":
        again = (again[0], tuple(map(_copy, again[1])))  # before the call may write into them
    try:
        getattr(_engine, entry)(*args)
        outcome = "ok"
    except Exception as e:  # noqa: BLE001 - any refusal keeps the promise; its kind is reported
        outcome = _raised(e)
    if again is not None and replay(_engine, entry, args[0], again) != repr(expected):
        if replay(_engine, entry, _engine.batch_table(fields), again) != repr(expected):
            return "wrong: the recorded points give other numbers on a fresh shape (the recorded ones hang on history)"
        return "wrong: the recorded points on the same shape gave other numbers after the call"
    return outcome


def run_apart(fn: Callable[[], object]) -> str:
    """Run `fn()` in a forked child (memory capped at `CHILD_EXTRA_BYTES` over its size, `CALL_SECONDS`
    at most): what it returned if a str, else "ok"; "raised NAME: message"; or a broken promise:
    "signal NAME", "exit N", "hang"."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(r)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            size = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_AS, (size + CHILD_EXTRA_BYTES, hard))
            try:
                got = fn()
                report = got if isinstance(got, str) else "ok"
            except Exception as e:  # noqa: BLE001 - any refusal keeps the promise; its kind is reported
                report = _raised(e)
            os.write(w, report.encode(errors="replace")[:400])
        except BaseException:  # noqa: BLE001 - the child must end here, whatever happened
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    return _collect(pid, r)


def call_apart(entry: str, args: Any, expected: Any = None, again: tuple | None = None) -> str:
    """`run_apart` of one call of `entry` (`_invoke`)."""
    return run_apart(lambda: _invoke(entry, args, expected, again))


def _collect(pid: int, r: int) -> str:
    """The child's report and how it ended."""
    deadline, got = time.monotonic() + CALL_SECONDS, b""
    status = None
    while status is None:
        ready, _, _ = select.select([r], [], [], 0.05)
        if ready:
            got += os.read(r, 4096)
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
        elif time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return "hang"
    with contextlib.suppress(OSError):
        while chunk := os.read(r, 4096):
            got += chunk
    os.close(r)
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    if os.WEXITSTATUS(status):
        return f"exit {os.WEXITSTATUS(status)}"
    return got.decode(errors="replace") or "exit 0 with no report"


def broken(outcome: str) -> bool:
    """Is this outcome of `call_apart` a broken promise (module docstring)?"""
    return not (outcome == "ok" or outcome.startswith("raised ")) or outcome.startswith("raised SystemError")


def mutated_call(seed: int) -> tuple[str, tuple, Any, tuple | None]:
    """The call of `seed`: (entry, mutated args, the recorded result, and for a `STATEFUL` call whose
    shape was left alone, its recorded args after the shape, to run again on it)."""
    rng = random.Random(seed)
    entry, args, expected = rng.choice(capture())
    if entry in STATEFUL and rng.random() < 0.85:  # the points or outputs; `batch_table` the shape
        bad = (args[0], *mutate(rng, args[1:]))
    else:
        bad = mutate(rng, args)
    keep = entry in STATEFUL and bad[0] is args[0]
    return entry, bad, expected, args[1:] if keep else None


def case(rng: random.Random, folder: Path) -> list[str]:
    """One seeded mutated call (module docstring); the broken promises, empty if it kept them."""
    if not capture():
        return []
    seed = rng.randrange(2**32)
    entry, bad, expected, again = mutated_call(seed)
    outcome = call_apart(entry, bad, expected, again)
    if broken(outcome):
        return [f"{entry}: {outcome} (dse.testing.faults_engine.mutated_call({seed}))"]
    return []


CAMPAIGN: Campaign = {
    "mutated engine calls": (
        "a mutated call of a C engine entry point returns or raises, never crashes or hangs",
        5000,
        case,
    ),
}
