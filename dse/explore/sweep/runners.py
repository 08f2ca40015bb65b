"""Parallel runners for sweeps: in process, a pool of forked worker processes, or a dask cluster.

A runner takes a function and a list of tasks and yields the function's results in any order
(`Runner`); `dse.explore.sweep.sweeps.run_sweep` takes one as a parameter. `process_runner` is the default:

- workers are forked (no named semaphores or temporary folders in /dev/shm), ignore Ctrl-C (the
  parent gets it, stops the pool and keeps what is finished), and are killed by the kernel when the
  parent dies (``PR_SET_PDEATHSIG`` on Linux), so a ``kill -9`` of a sweep leaves no orphans;
- Ctrl-C is deferred while the pool runs (`dse.core.interrupts.deferred_ctrl_c`) and raised when
  the parent next waits for a result, which it takes from a queue the pool's thread fills
  (`Future.add_done_callback`). Raised where it landed, inside `concurrent.futures.wait` say, it
  could leave a lock held that the pool's thread then waited on for ever, and the interpreter's
  exit on that thread: a hang, seen in CI. A Ctrl-C while the caller holds a result stops the
  run at the next one it asks for;
- a worker that dies mid-task stops the run with a `RunError` (rows already written are kept);
- a run stopped early (Ctrl-C, an error) ends its workers and the pool's management thread before
  it returns (`_stop`), so nothing of the pool is left for the interpreter's exit;
- `process_runner` starts at most as many workers as tasks; `dse.explore.sweep.sweeps.check_jobs` caps the
  count asked for at `dse.core.limits.input_limit("processes")`, as `dask_runner`'s local cluster is.

`dask_runner` hands the tasks to a dask.distributed cluster (`Client.map`) and takes their
results as the process runner does: from a queue the futures' callbacks fill, with Ctrl-C deferred
to the next wait. A local cluster's workers are forked by multiprocessing's fork server, started
with SIGINT ignored, so they ignore it too: a terminal's Ctrl-C goes to the whole process group,
and workers interrupted mid-task printed tracebacks and could keep the cluster from closing. Only
dse takes it, and closes the cluster. (A fork server some other code started first keeps its own
SIGINT handling.)
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import queue
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from dse.core.errors import InputError, RunError
from dse.core.interrupts import DeferredCtrlC, deferred_ctrl_c, ignoring_ctrl_c
from dse.core.limits import check_input

_WORKER_DIED = (
    "a worker process died (killed, or out of memory); what was finished is kept: run the same command again to resume"
)
Runner = Callable[[Callable[[Any], Any], Sequence[Any]], Iterable[Any]]
_PR_SET_PDEATHSIG = 1


def serial_runner(func: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Any]:
    """Every task in this process, in order."""
    for t in tasks:
        yield func(t)


def _worker_init(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    with contextlib.suppress(Exception):  # Linux only; elsewhere workers may outlive a killed parent
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)


def process_runner(jobs: int) -> Runner:
    """Up to `jobs` forked worker processes (one task at a time in process when `jobs` is 1)."""

    def map_forked(func: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Any]:
        """`func` of every task, in the order they finish, from at most `jobs` forked workers."""
        if jobs <= 1 or len(tasks) <= 1:
            yield from serial_runner(func, tasks)
            return
        pool = ProcessPoolExecutor(
            min(jobs, len(tasks)),
            mp_context=multiprocessing.get_context("fork"),
            initializer=_worker_init,
            initargs=(os.getpid(),),
        )
        finished: queue.SimpleQueue[Future | None] = queue.SimpleQueue()  # ended futures; None: a Ctrl-C
        with deferred_ctrl_c(wake=lambda: finished.put(None)) as ctrl_c:
            try:
                # the workers and the pool's threads start at the first submit: they inherit SIGINT blocked
                old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
                try:
                    pool.submit(func, tasks[0]).add_done_callback(finished.put)
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, old)
                for t in tasks[1:]:
                    pool.submit(func, t).add_done_callback(finished.put)
                yield from _results(finished, ctrl_c, len(tasks))
            except BrokenProcessPool:
                _stop(pool)
                raise RunError(_WORKER_DIED) from None
            except BaseException:  # Ctrl-C, an error in a task, or the consumer stopped early
                _stop(pool)
                raise
            pool.shutdown(wait=True)

    return map_forked


def _results(finished: queue.SimpleQueue[Any], ctrl_c: DeferredCtrlC, count: int) -> Iterator[Any]:
    """The results of `count` futures in the order their callbacks put them on `finished`; a Ctrl-C
    noted meanwhile (its wake-up puts a None) is raised before the next result is taken."""
    for _ in range(count):
        done = finished.get()
        ctrl_c.check()
        yield done.result()


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started, end the workers now, and wait for the pool's management thread.

    That thread notices the killed workers and closes the pool's wake-up pipe; joined here, it does
    so before `concurrent.futures`' exit hook runs, which then skips the pipe (a thread left running
    races the hook, whose write then fails with ``OSError: [Errno 9] Bad file descriptor``).
    The call queue's feeder thread is not joined at exit (`cancel_join_thread`): with the workers
    killed, a task it was writing into the full pipe would block that join for ever."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    calls = getattr(pool, "_call_queue", None)
    if calls is not None:  # its feeder thread may be blocked writing a task no worker will read:
        with contextlib.suppress(Exception):  # then joining it at the interpreter's exit never returns
            calls.cancel_join_thread()
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        with contextlib.suppress(Exception):
            p.kill()
    for p in processes:
        with contextlib.suppress(Exception):
            p.join(5)
    if manager is not None:
        manager.join(10)


def dask_runner(jobs: int, scheduler_address: str | None = None) -> Runner:
    """Tasks on a dask.distributed cluster; without an address, a local cluster of `jobs`
    single-threaded worker processes is started for the run (module docstring)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise InputError("backend", "dask is not installed", "pip install 'dse[dask]'") from None

    def map_on_dask(func: Callable[[Any], Any], tasks: Sequence[Any]) -> Iterator[Any]:
        """`func` of every task, in the order they finish, on the cluster (closed afterwards)."""
        import dask
        from distributed import KilledWorker

        finished: queue.SimpleQueue[Any] = queue.SimpleQueue()  # ended futures; None: a Ctrl-C
        # a local cluster's workers (and any it restarts) are forked by a fork server that ignores Ctrl-C
        with deferred_ctrl_c(wake=lambda: finished.put(None)) as ctrl_c, dask.config.set(_FORKED_WORKERS):
            client = _dask_client(jobs, scheduler_address)
            futures: list[Any] = []
            try:
                futures = client.map(func, list(tasks), pure=False)
                for f in futures:
                    f.add_done_callback(finished.put)
                yield from _results(finished, ctrl_c, len(tasks))
            except KilledWorker:
                raise RunError(_WORKER_DIED) from None
            finally:
                with contextlib.suppress(Exception):
                    client.cancel(futures)
                client.close()

    return map_on_dask


_FORKED_WORKERS = {"distributed.worker.multiprocessing-method": "forkserver"}


def _dask_client(jobs: int, scheduler_address: str | None) -> Any:
    """A client of the cluster at `scheduler_address`, or of a new local one whose worker processes
    ignore SIGINT (module docstring). The local cluster logs only what is critical: as it closes under
    a Ctrl-C its workers report cancelled tasks and lost heartbeats, and a task's own error reaches
    dse through its future."""
    from multiprocessing import forkserver

    from distributed import Client
    from distributed.utils import get_mp_context

    if scheduler_address:
        try:
            return Client(scheduler_address, timeout="10s")
        except OSError as e:
            raise InputError("scheduler_address", f"cannot reach {scheduler_address!r}: {e}") from None
    get_mp_context()  # distributed's modules for the fork server to import once
    with ignoring_ctrl_c():  # the fork server keeps SIGINT ignored for every process it forks
        forkserver.ensure_running()  # unless it runs already; a few milliseconds, once per process
    # The scheduler's HTTP server listens even without a dashboard: on a free local port, not on 8787
    # (another cluster there made distributed warn on stderr), and never on every interface.
    return Client(
        n_workers=max(1, jobs),
        threads_per_worker=1,
        dashboard_address="127.0.0.1:0",
        scheduler_kwargs={"dashboard": False},
        silence_logs=logging.CRITICAL,
    )


BACKENDS = ("processes", "dask")


def get_runner(backend: str, jobs: int, scheduler_address: str | None = None) -> Runner:
    """The runner of a backend name: ``processes`` (default) or ``dask``; `jobs` above the process
    limit (`dse.core.limits.input_limit`) is one line."""
    check_input("processes", jobs, "jobs", "worker processes")
    if backend == "processes":
        if scheduler_address:
            raise InputError("scheduler_address", "given without --backend dask", "--backend dask")
        return process_runner(jobs)
    if backend == "dask":
        return dask_runner(jobs, scheduler_address)
    raise InputError("backend", f"unknown backend {backend!r}", ", ".join(BACKENDS))
