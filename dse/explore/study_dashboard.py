"""`dse study dashboard`: optuna-dashboard (the optional extra ``dashboard``) on a study's storage.

optuna-dashboard's own command opens a journal file with Optuna's journal lock; dse opens the
storage itself (`dse.explore.storage.open_storage`: its flock journal lock, the same checks as `dse study
report`) and serves optuna-dashboard's WSGI application on that storage object with the standard
library's single-threaded server. It listens on 127.0.0.1 by default, so only this machine sees it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

from dse.core.errors import InputError
from dse.explore.storage import load_study, open_storage

INSTALL = "pip install '.[dashboard]' (or pip install optuna-dashboard)"


class _StoppableHandler(ServerHandler):
    """wsgiref's handler, except that a Ctrl-C during a request stops the server: wsgiref's `run`
    catches every exception, KeyboardInterrupt included, answers with an error page and serves on."""

    # set by wsgiref at run time, not declared in its stubs
    status: str | None
    request_handler: WSGIRequestHandler

    def handle_error(self) -> None:
        if isinstance(sys.exc_info()[1], KeyboardInterrupt):
            raise
        super().handle_error()

    def close(self) -> None:
        if self.status is None:  # stopped before an answer began: wsgiref's request log needs a status
            self.status = "500 Interrupted"
        super().close()


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr per request: the terminal shows the URL and nothing else; a Ctrl-C while
    a request is served stops the server as one between requests does (`_StoppableHandler`)."""

    server: WSGIServer  # `make_server`'s

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle(self) -> None:
        """One request, read and answered as `WSGIRequestHandler.handle` does, by `_StoppableHandler`."""
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:  # the request line is too long: 414, as wsgiref answers
            self.requestline = self.request_version = self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():  # parse_request has answered the error
            return
        # the streams wsgiref's own handle() passes: the stubs type wfile as a BufferedIOBase and
        # SimpleHandler's stdout as an IO[bytes], which it is at run time
        handler = _StoppableHandler(
            self.rfile,
            self.wfile,  # type: ignore[arg-type]
            self.get_stderr(),
            self.get_environ(),
            multithread=False,
        )
        handler.request_handler = self
        app = self.server.get_app()
        assert app is not None  # make_server set it
        handler.run(app)


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
        raise InputError(
            "--port", f"cannot listen on {host}:{port}: {e.strerror or e}", "another --port or --host"
        ) from None
    return server, study_url(host, server.server_port, study._study_id)


def serve(name: str, url: str, host: str, port: int, announce: Callable[[str], None]) -> None:
    """Serve the dashboard until Ctrl-C (`announce` gets the study's page once it listens)."""
    server, page = dashboard_server(name, url, host, port)
    try:
        announce(page)
        server.serve_forever()
    finally:
        server.server_close()
