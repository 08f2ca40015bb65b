"""`dse study dashboard`: optuna-dashboard (the optional extra ``dashboard``) on ONE study, read-only.

optuna-dashboard's own command opens a journal file with Optuna's journal lock and serves every
study of the storage, read-write, to anyone who can reach its port. dse opens the storage itself
(`dse.explore.study.storage.open_storage`: its flock journal lock, the same checks as `dse study report`)
and serves optuna-dashboard's WSGI application on a view of the named study only, behind a guard
(`dse.explore.study.dashboard_guard`):

- Read-only by default: any method but GET and HEAD is 403 before optuna-dashboard sees it, and
  the storage optuna-dashboard is given raises on every write, so nothing the dashboard is sent
  changes the storage. Other studies of the storage are invisible (404).
- ``--allow-writes`` (`allow_writes`): optuna-dashboard's editing of the named study (notes, trial
  states and attributes, deleting it), still a view of that one study: creating and renaming
  studies stay refused (a rename creates a study the view could not show). `risks` gives the
  warning line the command prints: anyone who can reach the port can change or delete the study.
- It listens on 127.0.0.1 by default. Another ``--host`` is allowed, with a warning line (`risks`):
  every machine that can reach the port then reads the study, and changes it with --allow-writes.
  On loopback, requests naming another host (DNS rebinding) are refused.
- Errors inside optuna-dashboard are answered 500 with a short body and logged as one line
  ``dse: dashboard: ...`` on stderr, never a traceback; nothing else is printed per request.
- Threads: each connection is served by its own daemon thread, with a socket timeout
  (`CONNECTION_TIMEOUT`, 30 s per read or write), and at most `MAX_CONNECTIONS` (32) at once (the
  next is answered 503 at once), so a client that stalls holds one thread, not the server. A client
  that trickles a byte every 29 s keeps its thread; 32 of them deny service until they stop: the
  bound is what keeps that from exhausting the machine.
- Ctrl-C stops the server at once, also in the middle of a request (`_StoppableHandler`).
"""

from __future__ import annotations

import socket
import socketserver
import sys
import threading
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

from dse.core.errors import InputError
from dse.explore.study.storage import load_study, open_storage

INSTALL = "pip install '.[dashboard]' (or pip install optuna-dashboard)"
CONNECTION_TIMEOUT = 30.0  # seconds a connection may wait on one read or write
MAX_CONNECTIONS = 32  # connections served at once; the next one is answered 503
_BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nbusy\n"


def _client_gone(exc: BaseException | None) -> bool:
    """A timed-out, reset or closed connection: the client's doing, not an error to log."""
    return isinstance(exc, (TimeoutError, ConnectionError, EOFError))


class _StoppableHandler(ServerHandler):
    """wsgiref's handler, except that a Ctrl-C during a request stops the server (wsgiref's `run`
    catches every exception, KeyboardInterrupt included, answers with an error page and serves on),
    and an error is logged as one line, not a traceback, and answered with a short body."""

    error_body = b"internal error\n"
    # set by wsgiref at run time, not declared in its stubs
    status: str | None
    request_handler: WSGIRequestHandler

    def handle_error(self) -> None:
        """A Ctrl-C is raised again (it stops the server); any other error is answered as wsgiref does."""
        if isinstance(sys.exc_info()[1], KeyboardInterrupt):
            raise
        super().handle_error()

    def log_exception(self, exc_info: Any) -> None:
        """The error as one `log_line`, nothing for a client that stalled or left."""
        if not _client_gone(exc_info[1]):
            from dse.explore.study.dashboard_guard import log_line

            log_line(f"{type(exc_info[1]).__name__}: {exc_info[1]}")

    def close(self) -> None:
        """Close the request, with a 500 status in wsgiref's log if none was answered."""
        if self.status is None:  # stopped before an answer began: wsgiref's request log needs a status
            self.status = "500 Interrupted"
        super().close()


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr per request: the terminal shows the URL and nothing else; a Ctrl-C while
    a request is served stops the server as one between requests does (`_StoppableHandler`); a
    client that stalls or goes away ends its connection quietly."""

    server: WSGIServer  # `make_server`'s

    def setup(self) -> None:
        """wsgiref's setup, with the server's `connection_timeout` on the connection."""
        super().setup()
        self.connection.settimeout(getattr(self.server, "connection_timeout", None))

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing: no line on stderr per request."""
        pass

    def handle(self) -> None:
        """One request, read and answered as `WSGIRequestHandler.handle` does, by `_StoppableHandler`."""
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:  # the request line is too long: 414, as wsgiref answers
                self.requestline = self.request_version = self.command = ""
                self.send_error(414)
                return
            if not self.parse_request():  # parse_request has answered the error
                return
        except OSError as e:
            if _client_gone(e):
                return
            raise
        # the streams wsgiref's own handle() passes: the stubs type wfile as a BufferedIOBase and
        # SimpleHandler's stdout as an IO[bytes], which it is at run time
        handler = _StoppableHandler(
            self.rfile,
            self.wfile,  # type: ignore[arg-type]
            self.get_stderr(),
            self.get_environ(),
            multithread=isinstance(self.server, socketserver.ThreadingMixIn),
        )
        handler.request_handler = self
        app = self.server.get_app()
        assert app is not None  # make_server set it
        handler.run(app)


class DashboardServer(socketserver.ThreadingMixIn, WSGIServer):
    """wsgiref's server, one daemon thread per connection (none is waited for on close), with a
    socket timeout per connection and at most `max_connections` at once."""

    daemon_threads = True
    block_on_close = False
    connection_timeout: float | None = CONNECTION_TIMEOUT
    max_connections = MAX_CONNECTIONS

    def server_activate(self) -> None:
        """Listen, with `max_connections` free connection slots."""
        self._slots = threading.BoundedSemaphore(self.max_connections)
        super().server_activate()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection in a thread of its own if a slot is free, else answer 503 and close it."""
        if not self._slots.acquire(blocking=False):
            try:
                request.sendall(_BUSY)  # a few bytes into an empty socket buffer: does not block
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: its slot is free again
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve the connection, then free its slot."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, not socketserver's traceback; nothing for a client that stalled or left."""
        exc = sys.exc_info()[1]
        if not _client_gone(exc):
            from dse.explore.study.dashboard_guard import log_line

            log_line(f"{type(exc).__name__}: {exc}")


class _DashboardServer6(DashboardServer):
    address_family = socket.AF_INET6


def require() -> Any:
    """The optuna_dashboard module, or one line saying how to install it."""
    try:
        import optuna_dashboard
    except ImportError:
        raise InputError("dashboard", "optuna-dashboard is not installed", INSTALL) from None
    return optuna_dashboard


def dashboard_app(name: str, url: str, host: str = "127.0.0.1", allow_writes: bool = False) -> tuple[Any, int]:
    """optuna-dashboard's WSGI application on study `name` of the storage at `url` (which must
    exist) behind `dashboard_guard.guard`, and the study's id. `host`: where the server listens
    (on loopback, ``Host`` headers must name this machine)."""
    from dse.explore.study.dashboard_guard import StudyView, guard, quiet_logs, resolves_to_loopback

    module = require()
    storage = open_storage(url, must_exist=True)
    study_id = load_study(name, url)._study_id  # an unknown name: one line listing the studies there
    view = StudyView(storage, study_id, writable=allow_writes)
    app = module.wsgi(view)
    app.catchall = False  # bottle: an exception reaches the guard, which answers it in one line
    quiet_logs()
    hosts = {host.strip().strip("[]").lower().rstrip(".")} if resolves_to_loopback(host) else None
    return guard(app, view, writes=allow_writes, hosts=hosts), study_id


def study_url(host: str, port: int, study_id: int) -> str:
    """The dashboard page of one study."""
    where = f"[{host}]" if ":" in host else host
    return f"http://{where}:{port}/dashboard/studies/{study_id}"


def dashboard_server(
    name: str, url: str, host: str = "127.0.0.1", port: int = 8080, *, allow_writes: bool = False
) -> tuple[DashboardServer, str]:
    """A server (bound, not yet serving) of optuna-dashboard on study `name` of `url`'s storage,
    read-only unless `allow_writes`, and the study's page. Port 0 takes any free port; the page
    names the one taken."""
    if not host.strip() or not host.isprintable() or len(host) > 255:
        raise InputError("--host", f"{host[:60]!r} is no address", "an address to listen on, e.g. 127.0.0.1")
    app, study_id = dashboard_app(name, url, host, allow_writes)
    server_class = _DashboardServer6 if ":" in host else DashboardServer
    try:
        server = make_server(host.strip("[]"), port, app, server_class=server_class, handler_class=_QuietHandler)
    except (OSError, OverflowError, UnicodeError, TypeError) as e:  # TypeError: a name IDNA cannot encode
        problem = getattr(e, "strerror", None) or e
        raise InputError("--port", f"cannot listen on {host}:{port}: {problem}", "another --port or --host") from None
    assert isinstance(server, DashboardServer)
    return server, study_url(host.strip("[]"), server.server_port, study_id)


def risks(name: str, host: str, allow_writes: bool) -> list[str]:
    """The warning lines a dashboard on `host` deserves (none on loopback, read-only)."""
    from dse.explore.study.dashboard_guard import resolves_to_loopback

    lines = []
    if not resolves_to_loopback(host):
        lines.append(
            f"--host {host} is not loopback: every machine that can reach the port can read study {name} "
            "(default 127.0.0.1: this machine only)"
        )
    if allow_writes:
        lines.append(f"--allow-writes: anyone who can reach the port can change or delete study {name}")
    return lines


def serve(
    name: str,
    url: str,
    host: str,
    port: int,
    announce: Callable[[str], None],
    *,
    allow_writes: bool = False,
    warn: Callable[[str], None] = lambda line: None,
) -> None:
    """Serve the dashboard until Ctrl-C: once it listens, `warn` gets each line of `risks` and
    `announce` the study's page. The server runs in its own thread and the main thread only waits,
    so a Ctrl-C (which Python delivers to the main thread) never lands inside the server's accept
    and thread start-up (where it could leave a connection slot freed twice, or a half-started
    thread the interpreter then waits for); it stops the server, which closes."""
    server, page = dashboard_server(name, url, host, port, allow_writes=allow_writes)
    failed: list[BaseException] = []

    def serve_in_thread() -> None:
        """Serve until `server.shutdown()`; an exception is kept in `failed` for the main thread."""
        try:
            server.serve_forever()
        except BaseException as e:  # handed to the main thread, which raises it
            failed.append(e)

    thread = threading.Thread(target=serve_in_thread, name="dse-dashboard", daemon=True)
    try:
        for line in risks(name, host, allow_writes):
            warn(line)
        announce(page)
        thread.start()
        while thread.is_alive():
            thread.join(0.25)
        if failed:
            raise failed[0]
    finally:
        if thread.is_alive():
            server.shutdown()
        server.server_close()
