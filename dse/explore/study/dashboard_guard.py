"""What `dse study dashboard` lets optuna-dashboard see and do: one study, read-only unless asked.

optuna-dashboard is an editor as much as a viewer: it creates, renames and deletes studies, tells
trials and writes notes, with no authentication. dse puts two layers in front of it, so that a route
one layer misses is still caught by the other:

- `StudyView`, the storage optuna-dashboard is given (a `BaseStorage` delegating to the real one):
  it holds only the study named on the command line. `get_all_studies` lists just it; any other
  study id or name, or a trial of another study, raises `KeyError` (optuna-dashboard answers 404).
  Read-only (the default), every write method raises `ReadOnlyError`; with ``--allow-writes`` writes
  to the named study and its trials go through, but never to a finished trial (Optuna's journal
  storage appends such a change before it finds the trial finished). It never creates a study (a
  rename is a create and a delete).
- What it shows (`dse.explore.study.units`): objectives named with their units (``time (ms) with
  themis+scf``, ``cost ($)``) and valued in them, as ``dse study show`` prints them; each
  dimension's bandwidth in GB/s (``bw0 (GB/s)`` ...) as the parameters, in place of the weights a
  budget split samples; the trial's record as user attributes named with units. The journal is read
  as it is and never rewritten for this; with ``--allow-writes`` a value told through the dashboard
  (in the unit shown) is stored in the metric's stored unit.
- `guard`, WSGI middleware that answers before optuna-dashboard is reached: read-only, any method
  but GET and HEAD is 403 (none of optuna-dashboard 0.21's GET routes writes: checked in its
  ``_app.py``, ``_rdb_migration.py``, ``artifact/_backend.py`` and ``llm/_api_views.py``; the
  migration route only acts on an `RDBStorage`, which `StudyView` is not), and a GET's body is
  never read. A path naming another study (``/api/studies/N...``, ``/csv/N``, ``/artifacts/N...``,
  ``/api/artifacts/N...``) is 404, and so, with ``--allow-writes``, is ``/api/trials/T...`` for a
  trial of another study. Creating and renaming studies are 403 in both modes (this view shows one
  study). Paths are compared as bottle routes them (its UTF-8 decoding, trailing slashes removed,
  the method upper-cased), so an encoding trick cannot reach a route the guard did not see.
- DNS rebinding and cross-site requests: when the server listens on loopback, a request whose
  ``Host`` header names anything but a loopback address, ``localhost`` or the ``--host`` given is
  403 (a web page whose name resolves to 127.0.0.1 cannot read the study); a write (with
  ``--allow-writes``) whose ``Origin`` header is not the ``Host`` it was sent to is 403.
- Sizes: a request line is at most 64 KiB and its headers 100 lines of 64 KiB (the standard
  library's HTTP server); read-only, no body is ever read; a write's body (--allow-writes) is at
  most `MAX_BODY` (64 KiB) with a stated Content-Length (413 or 411 before it is read).
- Errors: an exception inside optuna-dashboard is answered 500 with a one-line JSON body and logged
  as one line ``dse: dashboard: ...`` on stderr (`log_line`), never a traceback; optuna-dashboard's
  own error logs (its logger ``optuna_dashboard``, `quiet_logs`) are cut to their first line too.
"""

from __future__ import annotations

import copy
import io
import ipaddress
import json
import logging
import re
import socket
import sys
import threading
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from optuna.distributions import BaseDistribution
from optuna.storages import BaseStorage
from optuna.study import StudyDirection
from optuna.study._frozen import FrozenStudy
from optuna.trial import FrozenTrial, TrialState

from dse.explore.study.units import (
    METRIC_NAMES_ATTR,
    closed_form_model,
    dashboard_study_attrs,
    dashboard_trials,
    objective_ids,
    shown,
)

READ_METHODS = ("GET", "HEAD")
ALLOW = "dse study dashboard --allow-writes serves optuna-dashboard's editing of this study"
# paths whose first number is a study id (bottle's `int` filter: -?\d+, any Unicode digit)
_STUDY_PATH = re.compile(r"/(?:api/studies|csv|artifacts|api/artifacts)/(-?\d+)(?:/|$)")
_TRIAL_PATH = re.compile(r"/api/trials/(-?\d+)(?:/|$)")
# routes that create a study (a rename creates one and deletes the old) or migrate an RDB schema
_NEVER = re.compile(r"/api/studies|/api/studies/-?\d+/rename|/incompatible-rdb-schema")

MAX_BODY = 64 * 1024  # bytes of a write's body (--allow-writes); optuna-dashboard's are a few hundred
_STDERR = threading.Lock()

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class ReadOnlyError(RuntimeError):
    """A write to a dashboard's storage that its mode does not allow."""


def log_line(text: str) -> None:
    """One line ``dse: dashboard: TEXT`` on stderr: whitespace collapsed, control characters
    replaced (a request's path may carry them), at most 300 characters."""
    flat = " ".join(str(text).split())
    flat = "".join(c if c.isprintable() else "?" for c in flat)[:300]
    with _STDERR:  # one write per line, whole: requests are served by several threads
        sys.stderr.write(f"dse: dashboard: {flat}\n")
        sys.stderr.flush()


class _OneLine(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        """The record's first line as one `log_line` (its level name if it has no message)."""
        try:
            lines = record.getMessage().strip().splitlines()
        except Exception:  # a record whose arguments do not fit its format
            lines = [str(record.msg)]
        log_line(lines[0] if lines else record.levelname)


def quiet_logs() -> None:
    """optuna-dashboard's log records (an error's is its message and a traceback) become one
    `log_line` each, and no longer reach the root logger."""
    logger = logging.getLogger("optuna_dashboard")
    if not any(isinstance(h, _OneLine) for h in logger.handlers):
        logger.addHandler(_OneLine())
    logger.propagate = False


class StudyView(BaseStorage):
    """Storage `base` as holding only study `study_id`; writes raise `ReadOnlyError` unless
    `writable`, and then reach only that study and its trials. See the module docstring."""

    def __init__(self, base: BaseStorage, study_id: int, *, writable: bool = False) -> None:
        self._base, self._id, self._writable = base, study_id, writable
        self._trial_ids: frozenset[int] = frozenset()

    def _study(self, study_id: int) -> int:
        if study_id != self._id:
            raise KeyError(f"study_id={study_id} is not found")
        return study_id

    def _trial(self, trial_id: int) -> int:
        if trial_id not in self._trial_ids:  # a new trial, or not one of this study's
            trials = self._base.get_all_trials(self._id, deepcopy=False)
            self._trial_ids = frozenset(t._trial_id for t in trials)
            if trial_id not in self._trial_ids:
                raise KeyError(f"trial_id={trial_id} is not found")
        return trial_id

    def _write(self) -> None:
        if not self._writable:
            raise ReadOnlyError(f"read-only dashboard: the storage is not changed ({ALLOW})")

    def _updatable(self, trial_id: int) -> int:
        """A trial of the study that is not finished: Optuna's journal storage appends a change to
        a finished trial before it finds the trial finished, leaving a record it then rejects."""
        self._write()
        self._base.check_trial_is_updatable(trial_id, self._base.get_trial(self._trial(trial_id)).state)
        return trial_id

    def owns_trial(self, trial_id: int) -> bool:
        """Whether `trial_id` is a trial of the study shown."""
        try:
            self._trial(trial_id)
        except KeyError:
            return False
        return True

    def _ids(self) -> list[str]:
        """The study's objective ids (`dse.explore.study.units.objective_ids`)."""
        attrs = self._base.get_study_system_attrs(self._id)
        labels = self._base.get_study_user_attrs(self._id).get("objectives")
        return objective_ids(attrs.get(METRIC_NAMES_ATTR), labels, len(self._base.get_study_directions(self._id)))

    def _model(self) -> str:
        """The closed-form cost model the study is measured with, or ``""`` (`closed_form_model`)."""
        return closed_form_model(self._base.get_study_system_attrs(self._id))

    # ---- reads: the named study only, in the units people read (module docstring)
    def get_all_studies(self) -> list[FrozenStudy]:
        """The named study alone, its objectives named with their units."""
        out = []
        for s in self._base.get_all_studies():
            if s._study_id == self._id:
                s = copy.copy(s)
                s.system_attrs = dashboard_study_attrs(s.system_attrs, s.user_attrs, len(s.directions))
                out.append(s)
        return out

    def get_study_id_from_name(self, study_name: str) -> int:
        """The named study's id; any other name raises `KeyError`."""
        return self._study(self._base.get_study_id_from_name(study_name))

    def get_study_name_from_id(self, study_id: int) -> str:
        """The named study's name; any other id raises `KeyError`."""
        return self._base.get_study_name_from_id(self._study(study_id))

    def get_study_directions(self, study_id: int) -> list[StudyDirection]:
        """The named study's directions; any other id raises `KeyError`."""
        return self._base.get_study_directions(self._study(study_id))

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        """The named study's user attributes; any other id raises `KeyError`."""
        return self._base.get_study_user_attrs(self._study(study_id))

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        """The named study's system attributes, its objectives named with their units; any other id
        raises `KeyError`."""
        attrs = self._base.get_study_system_attrs(self._study(study_id))
        n = len(self._base.get_study_directions(study_id))
        return dashboard_study_attrs(attrs, self._base.get_study_user_attrs(study_id), n)

    def get_all_trials(
        self, study_id: int, deepcopy: bool = True, states: Container[TrialState] | None = None
    ) -> list[FrozenTrial]:
        """The named study's trials, valued in the units shown; any other id raises `KeyError`."""
        trials = self._base.get_all_trials(self._study(study_id), deepcopy=deepcopy, states=states)
        return dashboard_trials(trials, self._ids(), self._model())

    def get_n_trials(self, study_id: int, state: tuple[TrialState, ...] | TrialState | None = None) -> int:
        """How many trials the named study has (in `state`); any other id raises `KeyError`."""
        return self._base.get_n_trials(self._study(study_id), state)

    def get_best_trial(self, study_id: int) -> FrozenTrial:
        """The named study's best trial, valued in the units shown; any other id raises `KeyError`."""
        return super().get_best_trial(self._study(study_id))  # over `get_all_trials`: values as shown

    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        """The id of the named study's trial number `trial_number`; any other study raises `KeyError`."""
        return self._base.get_trial_id_from_study_id_trial_number(self._study(study_id), trial_number)

    def get_trial(self, trial_id: int) -> FrozenTrial:
        """A trial of the named study, valued in the units shown; any other trial raises `KeyError`."""
        trial = self._base.get_trial(self._trial(trial_id))
        return dashboard_trials([trial], self._ids(), self._model())[0]

    def get_trial_number_from_id(self, trial_id: int) -> int:
        """A trial's number; a trial of another study raises `KeyError`."""
        return self._base.get_trial_number_from_id(self._trial(trial_id))

    def get_trial_param(self, trial_id: int, param_name: str) -> float:
        """A parameter of a trial of the named study; any other trial raises `KeyError`."""
        return self._base.get_trial_param(self._trial(trial_id), param_name)

    def get_trial_params(self, trial_id: int) -> dict[str, Any]:
        """The parameters of a trial of the named study; any other trial raises `KeyError`."""
        return self._base.get_trial_params(self._trial(trial_id))

    def get_trial_user_attrs(self, trial_id: int) -> dict[str, Any]:
        """The user attributes of a trial of the named study; any other trial raises `KeyError`."""
        return self._base.get_trial_user_attrs(self._trial(trial_id))

    def get_trial_system_attrs(self, trial_id: int) -> dict[str, Any]:
        """The system attributes of a trial of the named study; any other trial raises `KeyError`."""
        return self._base.get_trial_system_attrs(self._trial(trial_id))

    def remove_session(self) -> None:
        """The real storage's `remove_session`."""
        self._base.remove_session()

    # ---- writes: refused read-only; the named study only otherwise; never a new study
    def create_new_study(self, directions: Sequence[StudyDirection], study_name: str | None = None) -> int:
        """Always `ReadOnlyError`: the view shows one study and creates none."""
        raise ReadOnlyError("this dashboard shows one study: it creates none")

    def delete_study(self, study_id: int) -> None:
        """Delete the named study if writes are allowed (else `ReadOnlyError`; another id: `KeyError`)."""
        self._write()
        self._base.delete_study(self._study(study_id))

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        """Set a user attribute of the named study if writes are allowed (else `ReadOnlyError`)."""
        self._write()
        self._base.set_study_user_attr(self._study(study_id), key, value)

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        """Set a system attribute of the named study if writes are allowed (else `ReadOnlyError`)."""
        self._write()
        self._base.set_study_system_attr(self._study(study_id), key, value)

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        """A new trial of the named study if writes are allowed (else `ReadOnlyError`); its id."""
        self._write()
        return self._base.create_new_trial(self._study(study_id), template_trial)

    def set_trial_param(
        self, trial_id: int, param_name: str, param_value_internal: float, distribution: BaseDistribution
    ) -> None:
        """Set a parameter of an unfinished trial of the named study if writes are allowed."""
        self._base.set_trial_param(self._updatable(trial_id), param_name, param_value_internal, distribution)

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Sequence[float] | None = None) -> bool:
        """Values told in the unit the dashboard shows are stored in the metric's stored unit."""
        if values is not None:
            ids = self._ids()
            values = [v / shown(i).unit.scale for v, i in zip(values, ids)] + list(values[len(ids) :])
        return self._base.set_trial_state_values(self._updatable(trial_id), state, values)

    def set_trial_intermediate_value(self, trial_id: int, step: int, intermediate_value: float) -> None:
        """Set an intermediate value of an unfinished trial of the named study if writes are allowed."""
        self._base.set_trial_intermediate_value(self._updatable(trial_id), step, intermediate_value)

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        """Set a user attribute of an unfinished trial of the named study if writes are allowed."""
        self._base.set_trial_user_attr(self._updatable(trial_id), key, value)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        """Set a system attribute of an unfinished trial of the named study if writes are allowed."""
        self._base.set_trial_system_attr(self._updatable(trial_id), key, value)


def _answer(
    start_response: Callable[..., Any], status: str, reason: str, head: bool, exc_info: Any = None
) -> list[bytes]:
    body = (json.dumps({"reason": reason}) + "\n").encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    start_response(status, headers, exc_info)
    return [] if head else [body]


def is_loopback(name: str) -> bool:
    """Whether host name or address `name` (without a port) is this machine's loopback."""
    name = name.strip().strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def resolves_to_loopback(host: str) -> bool:
    """Whether every address host name `host` resolves to is a loopback one (no answer: no)."""
    if is_loopback(host):
        return True
    try:
        found = socket.getaddrinfo(host.strip().strip("[]"), None)
    except (OSError, UnicodeError):
        return False
    return bool(found) and all(is_loopback(str(a[4][0])) for a in found)


def _host_name(netloc: str) -> str:
    try:
        return (urlsplit(f"//{netloc}").hostname or "").rstrip(".")
    except ValueError:  # a bracket left open, a port that is no number...
        return "\0"


def _length(environ: dict[str, Any]) -> int:
    try:
        return int(str(environ.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return MAX_BODY + 1  # not a number: refused as too long


def _refusal(
    view: StudyView, environ: dict[str, Any], writes: bool, hosts: Container[str] | None
) -> tuple[str, str] | None:
    """The status and reason of a request the guard answers itself, or None to pass it on."""
    method = str(environ.get("REQUEST_METHOD", "")).upper()
    path = str(environ.get("PATH_INFO", "")).encode("latin1", "replace").decode("utf8", "ignore").rstrip("/")
    host = str(environ.get("HTTP_HOST", ""))
    if hosts is not None and host and not (is_loopback(_host_name(host)) or _host_name(host) in hosts):
        return "403 Forbidden", "Host is not this machine: open the dashboard at the address dse printed"
    if method not in READ_METHODS:
        if not writes:
            return "403 Forbidden", f"read-only dashboard: {method} refused ({ALLOW})"
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and urlsplit(str(origin)).netloc.lower() != host.lower():
            return "403 Forbidden", "a write from another site's page is refused"
        if _NEVER.fullmatch(path):
            return "403 Forbidden", "this dashboard shows one study: it creates and renames none"
        if "chunked" in str(environ.get("HTTP_TRANSFER_ENCODING", "")).lower():
            return "411 Length Required", "a body of a stated length (Content-Length)"
        if _length(environ) > MAX_BODY:
            return "413 Content Too Large", f"a body of at most {MAX_BODY} bytes"
    study = _STUDY_PATH.match(path)
    if study and int(study.group(1)) != view._id:
        return "404 Not Found", f"study_id={study.group(1)} is not found"
    trial = _TRIAL_PATH.match(path)
    if trial and not view.owns_trial(int(trial.group(1))):
        return "404 Not Found", f"trial_id={trial.group(1)} is not found"
    return None


def guard(app: WSGIApp, view: StudyView, *, writes: bool, hosts: Container[str] | None) -> WSGIApp:
    """WSGI application: `app` (optuna-dashboard on `view`) behind the refusals of the module
    docstring; `hosts`: the names a ``Host`` header may carry besides loopback ones (None: any)."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """Answer a refused request (module docstring) itself; pass any other to `app`, a read without
        its body, an error in it answered 500 and logged as one line."""
        head = str(environ.get("REQUEST_METHOD", "")).upper() == "HEAD"
        try:
            refused = _refusal(view, environ, writes, hosts)
        except Exception as e:  # the storage failed while checking a trial id
            log_line(f"{type(e).__name__}: {e}")
            return _answer(start_response, "500 Internal Server Error", "internal error", head)
        if refused is not None:
            return _answer(start_response, *refused, head)
        if str(environ.get("REQUEST_METHOD", "")).upper() in READ_METHODS:
            environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(), "0"  # a GET's body is not read
        errors = environ["wsgi.errors"] = io.StringIO()
        try:
            return app(environ, start_response)
        except Exception as e:
            log_line(f"{environ.get('REQUEST_METHOD')} {environ.get('PATH_INFO')}: {type(e).__name__}: {e}")
            return _answer(start_response, "500 Internal Server Error", "internal error", head, sys.exc_info())
        finally:
            if errors.getvalue().strip():
                log_line(errors.getvalue().strip().splitlines()[0])

    return guarded
