"""The dask backend of sweeps under faults: a Ctrl-C to the whole process group (as a terminal sends
it) is one line, exit 130, and the resumed sweep has every row once with the values of a serial run;
a task that kills its worker every time is one `RunError`, not a traceback."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
import warnings

import pytest

pytest.importorskip("distributed", reason="dask[distributed] not installed: pip install 'dse[dask]'")

from dse.core.errors import RunError  # noqa: E402
from dse.explore.sweep.runners import _dask_client, dask_runner  # noqa: E402
from dse.testing import faults_studies as fs  # noqa: E402
from dse.testing.interrupts import end_worker  # noqa: E402

SPEC = (
    '[sweep]\ntopology = ["4D-Ring_FC_Ring_SW", "3D-SW_SW_SW_hetero"]\nsize = ["1MB", "2MB", "3MB", "4MB"]\n'
    f"chunks = [64, 256, 1024]\nseed = {list(range(400))}\n"
)


def _sweep(spec, out, *extra):
    return [sys.executable, "-m", "dse", "sweep", str(spec), "--out", str(out), *extra]


def _start(folder):
    """(sweep file, its CSV, the process): a 9,600-point dask sweep with 2 workers, in its own
    process group (a terminal's Ctrl-C reaches every process of the group)."""
    spec, out = folder / "s.toml", folder / "d.csv"
    spec.write_text(SPEC)
    p = subprocess.Popen(
        _sweep(spec, out, "--jobs", "2", "--backend", "dask"),
        env=fs._env(),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    return spec, out, p


def _rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return sorted(rows, key=lambda r: int(r["point"]))


def test_ctrl_c_on_a_dask_sweep_is_one_line_exit_130_and_resumes_to_every_row_once(tmp_path):
    spec, out, p = _start(tmp_path)
    while p.poll() is None and (not out.exists() or out.stat().st_size < 20_000):
        time.sleep(0.01)  # rows are being written: the cluster is up and its workers busy
    assert p.poll() is None, "the sweep ended before it was interrupted"
    os.killpg(p.pid, signal.SIGINT)  # the parent and the cluster's workers, as a terminal's Ctrl-C
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 130 and err.count("\n") == 1 and err.startswith("dse: interrupted"), err
    assert 0 < len(_rows(out)) < 9600

    resumed = subprocess.run(
        _sweep(spec, out, "--jobs", "2", "--backend", "dask"), env=fs._env(), capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    serial = tmp_path / "serial.csv"
    done = subprocess.run(_sweep(spec, serial, "--jobs", "1"), env=fs._env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    got, want = _rows(out), _rows(serial)
    assert [r["point"] for r in got] == [str(i) for i in range(9600)]  # every point once
    assert got == want


def _group_size(pgid):
    """How many live processes are in process group `pgid` (Linux /proc)."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            count += fields[0] != "Z" and int(fields[2]) == pgid
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="Linux only (/proc)")
def test_ctrl_c_while_the_local_cluster_starts_is_raised_once_it_has_started(tmp_path):
    _, out, p = _start(tmp_path)
    while p.poll() is None and _group_size(p.pid) < 4:
        time.sleep(0.001)  # dse, the resource tracker, the fork server and a worker: the cluster is starting
    assert p.poll() is None, "the sweep ended before it was interrupted"
    os.killpg(p.pid, signal.SIGINT)
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 130 and err.count("\n") == 1 and err.startswith("dse: interrupted"), err
    assert not out.exists() or len(_rows(out)) < 9600


def test_the_local_clusters_http_server_takes_a_free_local_port_without_a_word():
    """Distributed's scheduler serves HTTP even without a dashboard, by default on port 8787; with
    another dask cluster on the machine holding it, it warned on stderr. dse's local cluster takes a
    free port on 127.0.0.1 (never every interface), and nothing warns."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = _dask_client(1, None)
        try:
            server = client.cluster.scheduler.http_server
            address, port = server.address, server.port
        finally:
            client.close()
    assert address == "127.0.0.1" and port != 8787
    assert not [w for w in caught if "already in use" in str(w.message)]


def test_a_task_that_kills_its_worker_every_time_is_one_run_error():
    run = dask_runner(1)
    with pytest.raises(RunError, match="a worker process died"):
        list(run(end_worker, [os.getpid()]))  # the task ends its worker process; dask retries it, then gives up
