"""Storage URLs: their passwords hidden in every message, and the timeouts of network storages.

`redact` hides a URL's password (``user:***@host``), ``password=...`` pairs and the URL's own
password wherever a driver repeats it. `network_timeouts` gives libpq's connect timeout (10 s,
``DSE_STORAGE_CONNECT_TIMEOUT``) and statement timeout (60 s, ``DSE_STORAGE_STATEMENT_TIMEOUT``;
0 turns it off), except where the URL's own query sets them.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from dse.core.errors import InputError

CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT = "DSE_STORAGE_CONNECT_TIMEOUT", 10.0  # seconds
STATEMENT_TIMEOUT_ENV, STATEMENT_TIMEOUT = "DSE_STORAGE_STATEMENT_TIMEOUT", 60.0  # seconds; 0: none
_URL_SECRET = re.compile(r"([A-Za-z][\w+.-]*://[^:/@\s]*):[^\n]*@")  # to the line's last @, as a URL's host follows it
_KEY_SECRET = re.compile(r"(password\s*=\s*)('[^']*'|[^\s&'\",;)]*)", re.IGNORECASE)


def redact(text: str, url: str | None = None) -> str:
    """`text` with every URL's password shown as ``***`` (``user:***@host``), every ``password=...``
    as ``password=***``, and `url`'s own password (4 characters or more) wherever else it appears."""
    out = _KEY_SECRET.sub(r"\1***", _URL_SECRET.sub(r"\1:***@", str(text)))
    m = re.match(r"[A-Za-z][\w+.-]*://[^:/@]*:([^@]*)@", url or "")  # the password, as SQLAlchemy reads it
    if m and len(unquote(m.group(1))) >= 4:
        for form in {unquote(m.group(1)), quote(unquote(m.group(1)), safe="")}:
            out = out.replace(form, "***")
    return out


def network_timeouts(url: str) -> dict[str, Any]:
    """libpq's ``connect_timeout`` and ``options=-c statement_timeout=...`` for a PostgreSQL URL
    (module docstring), except where the URL's own query sets them."""
    query = {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}
    out: dict[str, Any] = {}
    if "connect_timeout" not in query:
        out["connect_timeout"] = max(2, math.ceil(_seconds(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT, zero=False)))
    options = query.get("options", "")
    statement = _seconds(STATEMENT_TIMEOUT_ENV, STATEMENT_TIMEOUT, zero=True)
    if statement > 0 and "statement_timeout" not in options:
        out["options"] = f"{options} -c statement_timeout={math.ceil(statement * 1000)}".strip()
    return out


def _seconds(env: str, default: float, *, zero: bool) -> float:
    """Seconds from environment variable `env` (`default` if unset); one line if it is no number."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    value = float(raw) if re.fullmatch(r"[0-9]*\.?[0-9]+(e[+-]?[0-9]+)?", raw, re.IGNORECASE) else math.nan
    if not (math.isfinite(value) and (value > 0 or (zero and value == 0)) and value <= 86_400):
        raise InputError(env, f"{raw!r} is not a number of seconds", "0 to 86400" if zero else "above 0, up to 86400")
    return value
