"""`dse study dashboard`: optuna-dashboard on one study of a journal, read-only, on loopback, read back
over HTTP (a real server on 127.0.0.1, port 0)."""

import json
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from dse.core.topology import parse_topology  # noqa: E402
from dse.explore.study.storage import open_storage, trial_record  # noqa: E402
from dse.explore.study.studies import load_studies  # noqa: E402
from dse.explore.study.workers import run_study  # noqa: E402

from .conftest import stop_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BW = ROOT / "studies" / "bw_split_4d.toml"
NAME = "bw_split_4d.themis"


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("dash") / "d.journal")
    run_study(load_studies(BW)[0], trials=7, storage=url)
    run_study(load_studies(BW)[1], trials=3, storage=url)
    return url


def _get(url: str, tries: int = 50) -> bytes:
    """GET `url`, retrying while the server is not answering yet (a bounded number of times)."""
    for _ in range(tries - 1):
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return r.read()
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def _process_state(pid: int) -> str:
    """Each thread's signal masks and what it waits in (Linux /proc), for a process that hangs."""
    from pathlib import Path

    out = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        status = dict(
            line.split(":", 1) for line in (task / "status").read_text().splitlines() if line.startswith("Sig")
        )
        wchan = (task / "wchan").read_text()
        out.append(f"thread {task.name}: wchan {wchan}, " + ", ".join(f"{k} {v.strip()}" for k, v in status.items()))
    return "; ".join(out) or "no /proc entry"


def _check_trials(base: str, url: str) -> None:
    """The dashboard's API returns the trials the storage holds as dse study show prints them: the
    objective named with its unit and valued in it (the journal keeps ns), the bandwidths in GB/s
    as the parameters (not the weights the budget split samples), the record named with units."""
    studies = json.loads(_get(f"{base}/api/studies"))["study_summaries"]
    ids = {s["study_name"]: s["study_id"] for s in studies}
    assert set(ids) == {NAME}  # the journal's other study is not shown
    detail = json.loads(_get(f"{base}/api/studies/{ids[NAME]}"))
    stored = {t.number: t for t in optuna.load_study(study_name=NAME, storage=open_storage(url)).trials}
    assert len(detail["trials"]) == len(stored) == 7
    assert detail["objective_names"] == ["time (ms) with themis+scf"]
    for t in detail["trials"]:
        s = stored[t["number"]]
        rec = trial_record(s)
        assert t["values"] == pytest.approx([s.values[0] * 1e-6], rel=1e-12)
        params = {p["name"]: float(p["param_external_value"]) for p in t["params"]}
        bws = [params.pop(f"bw{i} (GB/s)") for i in range(4)]
        assert params == {} and sum(bws) == pytest.approx(800, rel=1e-5)  # the budget split's 800 GB/s
        assert bws == pytest.approx([d.bandwidth for d in parse_topology(rec["topology"]).dims])
        attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
        assert attrs["topology"] == rec["topology"] and attrs["kind_4d_3"] == "switch"  # a choice the space fixed
        assert float(attrs["time baseline (ms)"]) == pytest.approx(rec["time_baseline_ns"] * 1e-6)
        assert float(attrs["BW utilisation (%)"]) == pytest.approx(100 * rec["bw_utilization"])
        assert not any(k == "dse" or "weight" in k for k in attrs)
    best = min(stored.values(), key=lambda t: t.values[0])
    assert [t["number"] for t in detail["best_trials"]] == [best.number]
    assert {p["name"] for p in detail["intersection_search_space"]} == {f"bw{i} (GB/s)" for i in range(4)}
    # the dashboard's importances and CSV export compare the same GB/s and name the same units
    importances = json.loads(_get(f"{base}/api/studies/{ids[NAME]}/param_importances"))["param_importances"]
    assert sorted(p["name"] for p in importances[0]) == [f"bw{i} (GB/s)" for i in range(4)]
    head = _get(f"{base}/csv/{ids[NAME]}").decode().splitlines()[0].split(",")
    assert "time (ms) with themis+scf" in head and "Param bw0 (GB/s)" in head and "Param bw_4d_0" not in head


def test_the_dashboard_serves_the_trials_of_a_journal(journal):
    pytest.importorskip("optuna_dashboard")
    from dse.explore.study.dashboard import dashboard_server

    server, page = dashboard_server(NAME, journal, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert page == f"http://127.0.0.1:{server.server_port}/dashboard/studies/0"
        _check_trials(page.split("/dashboard")[0], journal)
        assert b"<html" in _get(page).lower()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_dashboard_command_prints_its_url_and_stops_on_ctrl_c(journal):
    pytest.importorskip("optuna_dashboard")
    cmd = [sys.executable, "-m", "dse", "study", "dashboard", NAME, "--storage", journal, "--port", "0"]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert select.select([p.stdout], [], [], 120)[0], "no URL printed"  # a safety net for a hung server
        line = p.stdout.readline()
        page = line.split(" at ")[1].split()[0]
        assert page.startswith("http://127.0.0.1:") and journal in line
        _check_trials(page.split("/dashboard")[0], journal)
    finally:
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # seen twice in fresh clones under load: say what it was doing
            state = _process_state(p.pid)
            p.kill()
            raise AssertionError(f"no exit 60 s after SIGINT; {state}") from None
    assert p.returncode == 0 and err == "" and out == ""


def test_the_dashboard_without_its_extra_is_one_line(journal, run_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna_dashboard", None)  # import optuna_dashboard fails
    code, out, err = run_cli("study", "dashboard", NAME, "--storage", journal)
    assert code == 2 and out == "" and err.count("\n") == 1 and "pip install '.[dashboard]'" in err


def test_bad_dashboard_input_is_one_line(journal, run_cli):
    pytest.importorskip("optuna_dashboard")
    import socket

    with socket.socket() as taken:  # a loopback port in use
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        cases = [
            (["nope", "--port", "0"], ["no study 'nope'", journal, "bw_split_4d.themis, bw_split_4d.baseline"]),
            ([NAME, "--port", "70000"], ["--port", "65535"]),
            ([NAME, "--port", port], [f"cannot listen on 127.0.0.1:{port}"]),
            ([NAME, "--port", "0", "--host", " "], ["--host", "is no address"]),
            ([NAME, "--port", "0", "--host", "a\x00b"], ["--host", "is no address"]),
            ([NAME, "--port", "0", "--host", "\u00e4" * 70], ["cannot listen on"]),
        ]
        for args, words in cases:
            code, out, err = run_cli("study", "dashboard", args[0], "--storage", journal, *args[1:])
            assert code == 2 and out == "" and err.count("\n") == 1, err
            for w in words:
                assert w in err, (w, err)


def test_a_ctrl_c_while_a_request_is_served_stops_the_server():
    """wsgiref answers any exception of the application with an error page and serves on; the
    dashboard's handler lets a KeyboardInterrupt through, so Ctrl-C stops `dse study dashboard`
    even when it lands in the middle of a request."""
    from wsgiref.simple_server import make_server

    from dse.explore.study.dashboard import _QuietHandler

    def app(environ, start_response):
        raise KeyboardInterrupt

    server = make_server("127.0.0.1", 0, app, handler_class=_QuietHandler)
    client = threading.Thread(target=lambda: _get_quietly(f"http://127.0.0.1:{server.server_port}/"), daemon=True)
    client.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            server.handle_request()
    finally:
        server.server_close()
        client.join(timeout=30)


def _get_quietly(url: str) -> None:
    try:
        urllib.request.urlopen(url, timeout=30).read()
    except (urllib.error.URLError, ConnectionError, OSError):
        pass  # the server stopped mid-request: no answer is what is expected


# ---------------------------------------------------------------- read-only, one study, no tracebacks
OTHER = "bw_split_4d.baseline"
WRITES = ("POST", "PUT", "PATCH", "DELETE", "post", "delete")


@pytest.fixture
def served(journal):
    """The dashboard of NAME on the module's journal (read-only), served by a thread: its port."""
    pytest.importorskip("optuna_dashboard")
    from dse.explore.study.dashboard import dashboard_server
    from dse.testing.faults_dashboard import serving

    server, _ = dashboard_server(NAME, journal, "127.0.0.1", 0)
    with serving(server) as port:
        yield port


def _ids(url: str) -> dict[str, tuple[int, list[int]]]:
    from dse.testing.faults_dashboard import study_and_trial_ids as ids

    return ids(url, [NAME, OTHER])


def _write_requests(url: str) -> list[tuple[str, str, bytes]]:
    """Every write route of the installed optuna-dashboard, every write method, each filled with
    this study's ids and with the other study's, and a body the route would accept."""
    from dse.testing.faults_dashboard import VALID, fill, routes

    ids = _ids(url)
    out = []
    for who in (NAME, OTHER):
        study, trials = ids[who]
        pick = {"study_id": str(study), "trial_id": str(trials[0]), "plot_type": "slice", "filename": "x"}
        for _, rule in routes():
            path = fill(rule, lambda name, pick=pick: pick.get(name, "0"))
            valid = [v for k, v in VALID.items() if k in rule]
            body = json.dumps(valid[0] if valid else {}).encode()
            out += [(m, path, body) for m in WRITES]
    return out


def _studies(run_cli, url: str) -> dict[str, int]:
    code, out, err = run_cli("study", "list", "--storage", url, "--json")
    assert code == 0, err
    return {r["study"]: r["complete"] for r in json.loads(out)}


def test_every_write_route_is_refused_and_the_journal_is_unchanged(journal, served, run_cli):
    """The issue's attack: POST /api/studies, rename, DELETE (which wiped a study), tell (which
    appended a record while answering 500)... on every write route optuna-dashboard has, with a
    body it would accept: 403 each, before optuna-dashboard sees it; the journal is the same bytes."""
    from dse.testing.faults_dashboard import send

    before = Path(journal).read_bytes()
    requests = _write_requests(journal)
    assert len(requests) > 100
    for method, path, body in requests:
        status, text = send(served, method, path, body, {"Content-Type": "application/json"})
        assert status == 403 and b"read-only dashboard" in text, (method, path, status, text)
    assert Path(journal).read_bytes() == before
    assert _studies(run_cli, journal) == {NAME: 7, OTHER: 3}


def test_the_storage_alone_refuses_every_write(journal):
    """Layer (b): optuna-dashboard served WITHOUT the HTTP guard, on the study view dse gives it:
    no write route changes the journal, whatever it answers (as for a route the guard missed)."""
    optuna_dashboard = pytest.importorskip("optuna_dashboard")
    from wsgiref.simple_server import make_server

    from dse.explore.study.dashboard import DashboardServer, _QuietHandler
    from dse.explore.study.dashboard_guard import StudyView, quiet_logs
    from dse.testing.faults_dashboard import send, serving

    view = StudyView(open_storage(journal, must_exist=True), _ids(journal)[NAME][0])
    app = optuna_dashboard.wsgi(view)
    app.catchall, _ = False, quiet_logs()  # errors: a 500 and a line, not a traceback per request
    server = make_server("127.0.0.1", 0, app, server_class=DashboardServer, handler_class=_QuietHandler)
    before = Path(journal).read_bytes()
    with serving(server) as port:
        answers = [send(port, m, p, b, {"Content-Type": "application/json"})[0] for m, p, b in _write_requests(journal)]
        studies = json.loads(send(port, "GET", "/api/studies")[1])["study_summaries"]
    assert None not in answers and 204 not in answers and 201 not in answers
    assert Path(journal).read_bytes() == before
    assert [s["study_name"] for s in studies] == [NAME]


def test_the_study_view_raises_on_every_write_and_hides_other_studies(journal):
    from optuna.distributions import FloatDistribution
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    from dse.explore.study.dashboard_guard import ReadOnlyError, StudyView

    ids = _ids(journal)
    (mine, my_trials), (other, other_trials) = ids[NAME], ids[OTHER]
    view = StudyView(open_storage(journal, must_exist=True), mine)
    before = Path(journal).read_bytes()
    t = my_trials[0]
    writes = [
        lambda: view.create_new_study([StudyDirection.MINIMIZE], "x"),
        lambda: view.delete_study(mine),
        lambda: view.set_study_user_attr(mine, "k", 1),
        lambda: view.set_study_system_attr(mine, "k", 1),
        lambda: view.create_new_trial(mine),
        lambda: view.set_trial_param(t, "p", 0.5, FloatDistribution(0, 1)),
        lambda: view.set_trial_state_values(t, TrialState.FAIL),
        lambda: view.set_trial_intermediate_value(t, 1, 0.5),
        lambda: view.set_trial_user_attr(t, "k", 1),
        lambda: view.set_trial_system_attr(t, "k", 1),
    ]
    for write in writes:
        with pytest.raises(ReadOnlyError):
            write()
    assert [s.study_name for s in view.get_all_studies()] == [NAME]
    assert view.get_study_id_from_name(NAME) == mine and len(view.get_all_trials(mine)) == 7
    for read in (
        lambda: view.get_study_id_from_name(OTHER),
        lambda: view.get_study_name_from_id(other),
        lambda: view.get_all_trials(other),
        lambda: view.get_study_system_attrs(other),
        lambda: view.get_trial(other_trials[0]),
        lambda: view.get_trial_user_attrs(other_trials[0]),
    ):
        with pytest.raises(KeyError):
            read()
    assert Path(journal).read_bytes() == before


def test_only_the_named_study_is_shown(journal, served):
    """Every path naming the other study's id, however spelled (bottle reads Unicode digits and
    drops bytes that are not UTF-8), is 404, and no answer names it."""
    from dse.testing.faults_dashboard import send

    other = _ids(journal)[OTHER][0]
    assert other != 0
    arabic = "".join(f"%{b:02X}" for b in chr(0x660 + other).encode())
    for path in (
        f"/api/studies/{other}",
        f"/api/studies/{other}/",
        f"/api/studies/0{other}",
        f"/api/studies/{arabic}",
        f"/api/studies/{other}%FF",
        f"/api/studies/{other}/param_importances",
        f"/api/studies/{other}/plot/slice",
        f"/csv/{other}",
    ):
        status, text = send(served, "GET", path)
        assert status == 404 and OTHER.encode() not in text, (path, status, text)
    status, text = send(served, "GET", "/api/studies")
    assert status == 200 and [s["study_name"] for s in json.loads(text)["study_summaries"]] == [NAME]


def test_a_request_naming_another_host_is_refused(served):
    """DNS rebinding: a page of evil.example whose name resolves to 127.0.0.1 cannot read the study."""
    from dse.testing.faults_dashboard import send

    assert send(served, "GET", "/api/studies", headers={"Host": "evil.example"})[0] == 403
    assert send(served, "GET", "/api/studies", headers={"Host": f"evil.example:{served}"})[0] == 403
    for host in (f"localhost:{served}", f"127.0.0.1:{served}", "[::1]"):
        assert send(served, "GET", "/api/studies", headers={"Host": host})[0] == 200, host


def test_errors_inside_optuna_dashboard_are_a_500_and_one_line(served, monkeypatch, capsys):
    """A failure inside an API view (optuna-dashboard logs it with a traceback) and one that
    escapes bottle (dse's guard answers it): each a 500 with a short body, one line on stderr."""
    import optuna_dashboard._app

    from dse.testing.faults_dashboard import send

    def boom(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    capsys.readouterr()
    monkeypatch.setattr(optuna_dashboard._app, "get_trials", boom)
    monkeypatch.setattr(optuna, "load_study", boom)
    for path in ("/api/studies/0", "/csv/0"):
        status, text = send(served, "GET", path)
        assert status == 500 and len(text) < 100 and b"Traceback" not in text, (path, text)
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("dse: dashboard: ") and "boom" in err, err


def test_an_error_while_the_answer_is_sent_is_one_line(capsys):
    """An application whose answer fails while wsgiref sends it: 500, one line, no traceback."""
    from wsgiref.simple_server import make_server

    from dse.explore.study.dashboard import DashboardServer, _QuietHandler
    from dse.testing.faults_dashboard import send, serving

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        yield from ()
        raise ValueError("failed mid-answer")

    server = make_server("127.0.0.1", 0, app, server_class=DashboardServer, handler_class=_QuietHandler)
    capsys.readouterr()
    with serving(server) as port:
        status, text = send(port, "GET", "/")
    err = capsys.readouterr().err
    assert status == 500 and text == b"internal error\n"
    assert err == "dse: dashboard: ValueError: failed mid-answer\n"


def test_a_stalled_client_does_not_block_others(served):
    """One connection sends half a request and stalls; another client is still answered (a socket
    timeout bounds the wait: a single-threaded server would make it time out)."""
    import socket

    with socket.create_connection(("127.0.0.1", served), timeout=30) as stalled:
        stalled.sendall(b"GET /api/studies HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ")
        body = _get(f"http://127.0.0.1:{served}/api/studies", tries=1)
        assert json.loads(body)["study_summaries"][0]["study_name"] == NAME


def test_connections_beyond_the_bound_are_answered_503(journal):
    pytest.importorskip("optuna_dashboard")
    import socket

    from dse.explore.study.dashboard import dashboard_server
    from dse.testing.faults_dashboard import send, serving

    server, _ = dashboard_server(NAME, journal, "127.0.0.1", 0)
    server._slots = threading.BoundedSemaphore(1)  # as if MAX_CONNECTIONS were 1
    with serving(server) as port, socket.create_connection(("127.0.0.1", port), timeout=30) as stalled:
        stalled.sendall(b"GET /")
        assert send(port, "GET", "/api/studies") == (503, b"busy\n")
    with serving(dashboard_server(NAME, journal, "127.0.0.1", 0)[0]) as port:
        assert send(port, "GET", "/api/studies")[0] == 200


def test_allow_writes_edits_the_named_study_only(tmp_path, run_cli):
    """--allow-writes: a note and a deletion of the named study go through; the other study, its
    trials, creating and renaming studies are refused; a finished trial is not told again (Optuna's
    journal would append the record before refusing it)."""
    pytest.importorskip("optuna_dashboard")
    from dse.explore.study.dashboard import dashboard_server
    from dse.testing.faults_dashboard import make_journal, send, serving

    url, _ = make_journal(tmp_path, (3, 2))
    ids = _ids(url)
    (mine, my_trials), (other, other_trials) = ids[NAME], ids[OTHER]
    server, _ = dashboard_server(NAME, url, "127.0.0.1", 0, allow_writes=True)
    js = {"Content-Type": "application/json"}
    note = json.dumps({"version": 1, "body": "checked"}).encode()
    with serving(server) as port:
        refused = [
            ("PUT", f"/api/studies/{other}/note", note, 404),
            ("DELETE", f"/api/studies/{other}", b"{}", 404),
            ("POST", f"/api/trials/{other_trials[0]}/tell", b'{"state": "Fail"}', 404),
            ("POST", "/api/studies", b'{"study_name": "x", "directions": ["minimize"]}', 403),
            ("POST", f"/api/studies/{mine}/rename", b'{"study_name": "x"}', 403),
        ]
        before = Path(url).read_bytes()
        for method, path, body, code in refused:
            assert send(port, method, path, body, js)[0] == code, (method, path)
        assert send(port, "POST", f"/api/trials/{my_trials[0]}/tell", b'{"state": "Fail"}', js)[0] == 500
        assert Path(url).read_bytes() == before
        forged = {**js, "Origin": "http://evil.example"}
        assert send(port, "PUT", f"/api/studies/{mine}/note", note, forged)[0] == 403
        assert send(port, "PUT", f"/api/studies/{mine}/note", note, js)[0] == 204
        assert Path(url).read_bytes() != before
        assert send(port, "PUT", f"/api/studies/{mine}/note", b" " * 70000, js)[0] == 413
        assert _chunked(port, f"/api/studies/{mine}/note") == b"HTTP/1.0 411 Length Required"
        assert send(port, "DELETE", f"/api/studies/{mine}", b"{}", js)[0] == 204
    assert _studies(run_cli, url) == {OTHER: 2}


def _chunked(port: int, path: str) -> bytes:
    """The status line answering a PUT whose body is sent in chunks (no length stated)."""
    import socket

    head = f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head.encode() + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        return s.makefile("rb").readline().rstrip()


def _serve_and_stop(args: list[str]) -> tuple[str, str, int]:
    """`dse study dashboard ARGS --port 0` until it prints its URL, then Ctrl-C: stdout, stderr, exit code."""
    cmd = [sys.executable, "-m", "dse", "study", "dashboard", *args, "--port", "0"]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert select.select([p.stdout], [], [], 120)[0], "no URL printed"
        line = p.stdout.readline()
    finally:
        out, err = stop_server(p)
    return line + out, err, p.returncode


def test_allow_writes_and_a_host_that_is_not_loopback_print_a_warning_each(journal):
    pytest.importorskip("optuna_dashboard")
    out, err, code = _serve_and_stop([NAME, "--storage", journal, "--allow-writes", "--host", "0.0.0.0"])
    assert code == 0 and "(editing allowed)" in out and "http://0.0.0.0:" in out
    assert err.splitlines() == [
        f"dse: warning: --host 0.0.0.0 is not loopback: every machine that can reach the port can read "
        f"study {NAME} (default 127.0.0.1: this machine only)",
        f"dse: warning: --allow-writes: anyone who can reach the port can change or delete study {NAME}",
    ]
    out, err, code = _serve_and_stop([NAME, "--storage", journal, "--host", "localhost"])
    assert code == 0 and "(read-only)" in out and err == ""


def test_the_view_shows_units_and_leaves_the_stored_trials_as_they_are(journal):
    """What the dashboard is given is converted copies: the journal's trials keep their weights and
    ns, so a sampler reading the storage draws what it always drew."""
    from dse.explore.study.dashboard_guard import StudyView

    storage = open_storage(journal)
    sid = storage.get_study_id_from_name(NAME)
    view = StudyView(storage, sid)
    before = [(t.params, t.values, t.user_attrs) for t in storage.get_all_trials(sid)]
    shown = view.get_all_trials(sid, deepcopy=False)
    assert [t.values[0] for t in shown] == pytest.approx([v[0] * 1e-6 for _, v, _ in before], rel=1e-12)
    assert all(sorted(t.params) == [f"bw{i} (GB/s)" for i in range(4)] for t in shown)
    best = min(range(len(before)), key=lambda k: before[k][1][0])
    assert view.get_best_trial(sid).number == best and view.get_best_trial(sid).values == shown[best].values
    assert view.get_trial(shown[best]._trial_id).values == shown[best].values
    assert view.get_study_system_attrs(sid)["study:metric_names"] == ["time (ms) with themis+scf"]
    assert view.get_all_studies()[0].system_attrs["study:metric_names"] == ["time (ms) with themis+scf"]
    after = [(t.params, t.values, t.user_attrs) for t in storage.get_all_trials(sid)]
    assert after == before and all(sorted(p)[:4] == [f"bw_4d_{i}" for i in range(4)] for p, _, _ in after)
    assert storage.get_study_system_attrs(sid)["study:metric_names"] == ["time_ns_themis_scf"]


def test_a_study_run_before_metric_names_is_shown_with_units_and_told_in_them():
    """A study that kept only its objective labels: the dashboard names its objectives with units;
    with --allow-writes a value told in the unit shown (ms) is stored in the stored unit (ns); a
    constraint (value minus limit) is shown in its metric's unit, in the list optuna-dashboard reads."""
    from dse.explore.study.dashboard_guard import StudyView

    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(storage=storage, study_name="old", directions=["minimize", "minimize"])
    study.set_user_attr("objectives", ["time[themis+scf]", "cost"])
    done = optuna.trial.create_trial(values=[3.0e6, 2.0e6], system_attrs={"constraints:cost": -1.0e6})
    study.add_trial(done)
    running = study.ask()
    sid = study._study_id
    view = StudyView(storage, sid, writable=True)
    assert view.get_study_system_attrs(sid)["study:metric_names"] == ["time (ms) with themis+scf", "cost ($)"]
    (first, _) = view.get_all_trials(sid)
    assert first.values == pytest.approx([3.0, 2.0e6]) and first.system_attrs["constraints"] == [-1.0e6]
    view.set_trial_state_values(running._trial_id, optuna.trial.TrialState.COMPLETE, [2.5, 1.5e6])
    assert storage.get_trial(running._trial_id).values == pytest.approx([2.5e6, 1.5e6])
