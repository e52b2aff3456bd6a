"""What the runs tests on the testbed share: real workers (their own processes) and waiting on a condition, with a
timeout, rather than for a fixed time."""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from common import processes
from results.models import TransferRecord
from runs.choices import RUN_ENDED
from runs.models import Run, RunFile
from tests.workers import worker_argv, worker_database_url


def worker_env(broker_url: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a worker process: the test database, the testbed's credentials, quick heartbeats."""
    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "PROBES_TESTBED": "true",
        "DISPATCH_HEARTBEAT": "1",
        **extra,
    }
    if broker_url:
        env["CELERY_BROKER_URL"] = env["CELERY_RESULT_BACKEND"] = broker_url
    return env


def start_worker(
    directory: Path, name: str, *, queues: str = "default", concurrency: int = 8, env: dict[str, str] | None = None
) -> Path:
    """Start a real worker (threads pool) and wait until it consumes; returns its pidfile."""
    pidfile, logfile = directory / f"{name}.pid", directory / f"{name}.log"
    argv = worker_argv(name=name, queues=queues, concurrency=concurrency)
    processes.start(argv, pidfile=pidfile, logfile=logfile, env=env or worker_env(), cwd=settings.BASE_DIR)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if logfile.exists() and " ready." in logfile.read_text(errors="replace"):
            return pidfile
        if processes.read_pid(pidfile) is None:
            break
        time.sleep(0.2)
    raise AssertionError(f"worker {name} did not start:\n{logfile.read_text(errors='replace')[-3000:]}")


def wait_for(
    predicate: Callable[[], bool], timeout: float, what: str | Callable[[], str], *, interval: float = 0.2
) -> None:
    """Until predicate() is true, looking every `interval` s; past `timeout` s, fail saying what was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what() if callable(what) else what}")


def run_state_now(run: Run) -> str:
    """What a run that did not end is doing: its state and its files by (state, recorded)."""
    run.refresh_from_db()
    files = Counter(RunFile.objects.filter(run=run).values_list("state", "recorded"))
    records = TransferRecord.objects.filter(run=run).count()
    return f"run {run.pk} to end: it is {run.state}, files (state, recorded): {dict(files)}, {records} records"


def wait_for_run_end(run: Run, timeout: float) -> None:
    wait_for(lambda: run_ended(run), timeout, lambda: run_state_now(run))


def run_ended(run: Run) -> bool:
    run.refresh_from_db()
    return run.state in RUN_ENDED


def purge_default_queue() -> None:
    """Messages left by an earlier session in this Redis db would only be dropped as stale; drop them first."""
    from portal.celery import app

    with app.connection_for_write() as conn:
        for queue in ("default", "site.TB-T0"):
            with contextlib.suppress(Exception):  # the queue may not exist yet
                conn.default_channel.queue_purge(queue)


def wait_for_worker_lost(run: Run, timeout: float) -> None:
    """After its worker was killed: beat's reaper, every second, until it has ended the run (it does once the
    run's heartbeat is older than DISPATCH_WORKER_LOST_AFTER)."""
    from runs.tasks import runs_reap

    def reaped() -> bool:
        runs_reap()
        return run_ended(run)

    wait_for(reaped, timeout, lambda: run_state_now(run), interval=1)
