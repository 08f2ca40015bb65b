"""Running studies: workers on one shared storage, each trial created under the storage's lock.

`run_study` ends with exactly N complete trials in total, however many workers share the storage
and however often it is interrupted: a worker creates a trial only while holding a lock (a file
lock next to a journal or SQLite file, a PostgreSQL advisory lock otherwise) and only while
complete + running trials are fewer than N; a trial whose worker died is marked failed and replaced
by the next worker started on the same host (each running trial records its worker's host and
process id). A worker that died on another machine leaves its trial running until a worker runs
again on that machine. Every trial's sampler is seeded from the study's seed and the trials
complete before it (`dse.explore.study.samplers`), so a one-worker study interrupted and resumed ends with
the same trials as one never interrupted.

A study's name is bound to its definition (`dse.explore.study.studies.StudySpec.definition`) in its
storage: `create_study` stores the definition as the study's system attribute `DEFINITION_ATTR`
when it creates the study, under `storage_lock`, and refuses, in one line naming the study
and the first field that differs, to run a definition other than the stored one under that name.
Two commands racing to create one name with different definitions: the lock lets one create it,
the other finds it and is refused. A study with no stored definition is checked on
what it holds (its directions and objective names) and, if they agree, bound to the definition
that resumes it.

Workers: `run_study` refuses more than `dse.core.limits.input_limit("processes")` workers
(``DSE_MAX_PROCESSES``) before anything is opened, and starts no more workers than trials are
left to run (a note says so unless `quiet`). Before any storage is opened it also measures the
space's first design (`dse.explore.study.trials.probe`), so a study none of whose trials could run
leaves no journal. Results name the storage with its password hidden (`dse.explore.study.storage.redact`).

Elsewhere: study files in `dse.explore.study.studies`; one trial in `dse.explore.study.trials`; storages,
locks and damaged journals in `dse.explore.study.storage`; the progress bar in `dse.explore.study.progress`;
optuna-dashboard in `dse.explore.study.dashboard`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Literal, cast

from dse.core.errors import InputError, RunError, raise_if_interrupted
from dse.core.limits import check_input
from dse.explore.study.progress import CompleteCount, TrialBar, wait_all
from dse.explore.study.samplers import ResumableSampler
from dse.explore.study.storage import (
    LAYOUT,
    LAYOUT_ATTR,
    WORKER_ATTR,
    default_storage,
    fail_dead,
    load_study,
    open_storage,
    reading,
    redact,
    storage_lock,
    study_names,
    trial_record,
    worker_id,
)
from dse.explore.study.studies import StudySpec
from dse.explore.study.trials import objective, probe
from dse.explore.study.units import CLOSED_FORM_ATTR, DEFINITION_ATTR, study_objectives
from dse.explore.study.units import METRIC_NAMES_ATTR as _METRIC_NAMES


def create_study(spec: StudySpec, url: str, *, repair: bool = False) -> Any:
    """Create the study on `url`, or load it if it exists (under `storage_lock`)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = open_storage(url, repair=repair)
    with storage_lock(url, spec.name), reading(url):
        bind = check_definition(storage, spec, url)
        study = optuna.create_study(
            study_name=spec.name,
            storage=storage,
            directions=cast("list[Literal['minimize', 'maximize']]", spec.directions),  # validated
            sampler=ResumableSampler(spec.sampler, spec.seed),
            load_if_exists=True,
        )
        labels = [o.label for o in spec.objectives]
        if study.user_attrs.get("objectives") != labels:
            study.set_user_attr("objectives", labels)
        names = [o.name for o in spec.objectives]
        if study.metric_names != names:  # the names reports and optuna-dashboard show
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # experimental in Optuna
                study.set_metric_names(names)
        model = spec.closed_form_model  # what every view shows in the scheduler's place
        if model and storage.get_study_system_attrs(study._study_id).get(CLOSED_FORM_ATTR) != model:
            storage.set_study_system_attr(study._study_id, CLOSED_FORM_ATTR, model)
        if LAYOUT_ATTR not in study.user_attrs and not study.get_trials(deepcopy=False):
            study.set_user_attr(LAYOUT_ATTR, LAYOUT)
        if bind:
            storage.set_study_system_attr(study._study_id, DEFINITION_ATTR, spec.definition())
    return study


def check_definition(storage: Any, spec: StudySpec, url: str) -> bool:
    """Refuse `spec` if study `spec.name` on `storage` was created from another definition (module
    docstring); call it under `storage_lock`. Returns whether the definition is still to be stored: a
    new study, or one with no stored definition whose directions and objective names
    agree with `spec`'s."""
    try:
        sid = storage.get_study_id_from_name(spec.name)
    except KeyError:
        return True
    attrs = storage.get_study_system_attrs(sid)
    stored, mine = attrs.get(DEFINITION_ATTR), spec.definition()
    if isinstance(stored, dict):
        for field, value in mine.items():
            if field in stored and stored[field] != value:  # a field added later: not compared
                raise _other_definition(spec, url, field, stored[field], value)
        return False
    theirs = [d.name.lower() for d in storage.get_study_directions(sid)]
    names = attrs.get(_METRIC_NAMES)
    if theirs != spec.directions or (names is not None and names != [o.name for o in spec.objectives]):
        there = ", ".join(f"{n} {d}" for n, d in zip(names or ["?"] * len(theirs), theirs))
        here = ", ".join(f"{o.name} {o.direction}" for o in spec.objectives)
        raise _other_definition(spec, url, "objectives", there, here)
    return True


def _other_definition(spec: StudySpec, url: str, field: str, there: Any, here: str) -> InputError:
    def clip(v: Any) -> str:
        """`v` as a quoted text of at most 60 characters."""
        text = str(v)
        return repr(text if len(text) <= 60 else text[:57] + "...")

    return InputError(
        "study",
        f"{spec.name!r} on {redact(url)} was created from another definition ({field}: "
        f"{clip(there)} there, {clip(here)} in {spec.source or 'this study'})",
        "another [study] name, or another --storage",
    )


def layout(study: Any) -> int:
    """How a study's trials are written (`dse.explore.study.storage.LAYOUT`); 1 for a study begun before layouts."""
    return int(study.user_attrs.get(LAYOUT_ATTR, 1))


def work(spec: StudySpec, url: str, trials: int, progress: Callable[[int], None] | None = None) -> int:
    """One worker: run trials until the study has `trials` complete ones; returns how many it ran.

    `progress` is called with the complete trials counted before each new one and at the end.
    Ctrl-C marks the trial in hand failed (the next run replaces it) before it stops the worker."""
    from optuna.trial import TrialState

    study = create_study(spec, url, repair=True)
    sampler = study.sampler
    written = layout(study)
    done = failures = 0
    while True:
        raise_if_interrupted()
        with storage_lock(url, spec.name), reading(url):
            fail_dead(study)
            states = [t.state for t in study.get_trials(deepcopy=False)]
            complete = states.count(TrialState.COMPLETE)
            running = states.count(TrialState.RUNNING)
            if progress is not None:
                progress(complete)
            if complete + running >= trials or sampler.exhausted:
                return done
            sampler.index = complete
            trial = study.ask()
            trial.set_user_attr(WORKER_ATTR, worker_id())
        try:
            values = objective(spec, trial, written)
        except InputError as e:  # a design the cost model rejects: failed, replaced by another
            study.tell(trial, state=TrialState.FAIL)
            failures += 1
            if failures >= 20:
                raise InputError("space", f"20 designs in a row were rejected; the last: {e}") from None
            continue
        except KeyboardInterrupt:
            study.tell(trial, state=TrialState.FAIL)
            raise
        failures = 0
        study.tell(trial, values)
        done += 1


def run_study(
    spec: StudySpec,
    *,
    trials: int | None = None,
    workers: int = 1,
    storage: str | None = None,
    progress: bool = False,
    quiet: bool = False,
) -> dict[str, Any]:
    """Run `spec` until it has `trials` complete trials, with `workers` processes on one storage.

    `workers` above the process limit is refused before anything is opened; more workers than
    trials left start as many as there are trials left (a note says so, unless `quiet`). With
    several workers, this process waits for them; if one dies, it finishes the study itself
    (the dead worker's trial is failed and replaced) and says so. Ctrl-C stops every worker.
    `progress`: a bar of the complete trials on stderr (`dse.explore.study.progress`). The result adds to
    `summary` the trials run here, the storage, the complete trials before the run and the target."""
    url = default_storage(spec.out_dir, spec.name) if storage is None else storage
    n = trials if trials is not None else spec.trials
    check_workers(workers)
    probe(spec)
    study = create_study(spec, url, repair=True)  # created once, before the workers race for it
    from optuna.trial import TrialState

    before = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    if workers > max(1, n - before) and before < n:
        if not quiet:
            left = n - before
            warnings.warn(
                f"--workers {workers}: {spec.name} has {left} trial{'s' * (left > 1)} left to run, "
                f"so {left} worker{'s' * (left > 1)} {'start' if left > 1 else 'runs'}",
                stacklevel=2,
            )
        workers = n - before
    bar = TrialBar(spec.name, n, before) if progress and before < n else None
    try:
        with storage_failures(url):
            ran = _optimize(spec, url, n, workers if before < n else 1, bar)
    finally:
        if bar is not None:
            bar.close()
    return summary(spec.name, url) | {"ran_here": ran, "storage": redact(url), "complete_before": before, "asked": n}


@contextlib.contextmanager
def storage_failures(url: str) -> Iterator[None]:
    """A database storage that fails mid-run (a statement timeout, a dropped connection) stops the
    run with one `RunError` line, its password hidden; the trials it finished are kept."""
    try:
        yield
    except Exception as e:
        sqlalchemy = sys.modules.get("sqlalchemy.exc")
        psycopg = sys.modules.get("psycopg")
        kinds = tuple(k for k in (getattr(sqlalchemy, "SQLAlchemyError", None), getattr(psycopg, "Error", None)) if k)
        if not kinds or not isinstance(e, kinds):
            raise
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise RunError(
            f"storage {redact(url)} failed: {type(e).__name__}: {redact(first, url)}; "
            "the finished trials are kept: run the same command again"
        ) from None


def check_workers(workers: int, field: str = "--workers") -> None:
    """Refuse a worker count below 1 or above `input_limit("processes")`, in one line."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(field, f"{workers!r} workers", "an integer >= 1")
    check_input("processes", workers, field, "worker processes")


def _optimize(spec: StudySpec, url: str, n: int, workers: int, bar: TrialBar | None) -> int:
    """The trials this process ran (-1: several workers ran them)."""
    if workers <= 1:
        return work(spec, url, n, bar.show if bar else None)
    codes = _run_workers(spec, url, n, workers, CompleteCount(spec.name, url).show_on(bar) if bar else None)
    if not any(codes):
        return -1
    short = summary(spec.name, url)["complete"] < n
    warnings.warn(
        f"{sum(1 for c in codes if c)} of {workers} workers ended early (exit codes {codes}); "
        + ("this process finishes the study" if short else "the others finished the study"),
        stacklevel=3,
    )
    return work(spec, url, n, bar.show if bar else None) if short else -1


def _run_workers(spec: StudySpec, url: str, n: int, workers: int, poll: Callable[[], None] | None = None) -> list[int]:
    """Start `workers` worker processes and wait for them (calling `poll` meanwhile, if given); on
    Ctrl-C, interrupt and reap them."""
    cmd = [
        sys.executable,
        "-m",
        "dse",
        "study",
        "run",
        spec.source,
        "--trials",
        str(n),
        "--only",
        spec.name,
        "--workers",
        "1",
        "--quiet",
    ]
    env = {**os.environ, "DSE_STORAGE": url}  # not on the command line, where `ps` would show a password
    procs = [subprocess.Popen(cmd, env=env) for _ in range(workers)]
    try:
        return wait_all(procs, poll)
    except BaseException:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        raise


def summary(name: str, url: str) -> dict[str, Any]:
    """A study's trials by state, its objectives as people read them (`objectives`: names with
    units, `dse.explore.study.units`), and its best trial (one objective: `best` in the unit
    its name (`best_name`) gives, `best_value` as stored, `best_metric` the objective's id) or its
    Pareto front's size."""
    from optuna.trial import TrialState

    study = load_study(name, url)
    trials = study.get_trials(deepcopy=False)
    objectives = study_objectives(study)
    out: dict[str, Any] = {
        "study": name,
        "complete": sum(t.state == TrialState.COMPLETE for t in trials),
        "failed": sum(t.state == TrialState.FAIL for t in trials),
        "running": sum(t.state == TrialState.RUNNING for t in trials),
        "objectives": [s.name for s in objectives],
    }
    if out["complete"]:
        if len(study.directions) == 1:
            best = study.best_trial
            out["best"] = objectives[0].value(best.value)
            out["best_value"] = best.value
            out["best_metric"] = objectives[0].id  # how to show the value
            out["best_name"] = objectives[0].name
            out["best_topology"] = trial_record(best).get("topology")
            out["best_trial"] = best.number
        else:
            out["pareto_size"] = len(study.best_trials)
    return out


def list_studies(url: str) -> list[dict[str, Any]]:
    """`summary` of every study on a storage, with the storage."""
    return [summary(name, url) | {"storage": redact(url)} for name in study_names(url)]
