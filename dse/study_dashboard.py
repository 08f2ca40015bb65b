"""`dse study dashboard`: optuna-dashboard (the optional extra ``dashboard``) on a study's storage.

optuna-dashboard's own command opens a journal file with Optuna's journal lock; dse opens the
storage itself (`dse.storage.open_storage`: its flock journal lock, the same checks as `dse study
report`) and serves optuna-dashboard's WSGI application on that storage object with the standard
library's single-threaded server. It listens on 127.0.0.1 by default, so only this machine sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from .errors import InputError
from .storage import load_study, open_storage

INSTALL = "pip install '.[dashboard]' (or pip install optuna-dashboard)"


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr per request: the terminal shows the URL and nothing else."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def require() -> Any:
    """The optuna_dashboard module, or one line saying how to install it."""
    try:
        import optuna_dashboard
    except ImportError:
        raise InputError("dashboard", "optuna-dashboard is not installed", INSTALL) from None
    return optuna_dashboard


def dashboard_app(url: str) -> Any:
    """optuna-dashboard's WSGI application on the storage at `url` (which must exist)."""
    return require().wsgi(open_storage(url, must_exist=True))


def study_url(host: str, port: int, study_id: int) -> str:
    """The dashboard page of one study."""
    where = f"[{host}]" if ":" in host else host
    return f"http://{where}:{port}/dashboard/studies/{study_id}"


def dashboard_server(name: str, url: str, host: str = "127.0.0.1", port: int = 8080) -> tuple[WSGIServer, str]:
    """A server (bound, not yet serving) of optuna-dashboard on study `name`'s storage, and the
    study's page. Port 0 takes any free port; the page names the one taken."""
    app = dashboard_app(url)
    study = load_study(name, url)  # an unknown name: one line listing the studies there
    if not host.strip():
        raise InputError("--host", "empty", "an address to listen on, e.g. 127.0.0.1")
    try:
        server = make_server(host, port, app, handler_class=_QuietHandler)
    except OSError as e:
        raise InputError("--port", f"cannot listen on {host}:{port}: {e.strerror or e}", "another --port or --host") from None
    return server, study_url(host, server.server_port, study._study_id)


def serve(name: str, url: str, host: str, port: int, announce: Callable[[str], None]) -> None:
    """Serve the dashboard until Ctrl-C (`announce` gets the study's page once it listens)."""
    server, page = dashboard_server(name, url, host, port)
    try:
        announce(page)
        server.serve_forever()
    finally:
        server.server_close()
