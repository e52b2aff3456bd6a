"""Runs survive what goes wrong in a challenge: a worker killed with SIGKILL mid-run, the broker restarted (losing
its messages) mid-run, and files that fail for their own reasons. Real worker processes, a real Redis of the test's
own for the restart, real copies on the testbed; the reaper is called as beat would call it."""

from __future__ import annotations

import os
import shutil
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db.models import Sum
from django.test import override_settings

from common import processes
from portal.celery import app
from results.models import RateRollup, TransferRecord
from runs import dispatch
from runs.dispatch import served_queues_forget
from runs.models import Run, RunFile
from runs.reaper import runs_reap
from runs.services import run_start
from sites.roles import membership_grant
from sites.services import sites_import
from testbed.grid import Testbed
from tests.runs.helpers import (
    purge_default_queue,
    run_ended,
    start_worker,
    wait_for,
    wait_for_run_end,
    worker_env,
)
from tests.sites.factories import UserFactory

pytestmark = [pytest.mark.testbed, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

MB = 1024 * 1024
FAST_REAPER = {"DISPATCH_WORKER_LOST_AFTER": 4, "DISPATCH_RESEND_AFTER": 4}


def reap_until_ended(run: Run, timeout: float) -> None:
    """Beat's job, every second: the reaper, until the run ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs_reap()
        if run_ended(run):
            return
        time.sleep(1)
    files = list(RunFile.objects.filter(run=run).values_list("index", "state", "attempt", "worker", "error"))
    raise AssertionError(f"run {run.pk} still {run.state} after {timeout} s: files {files}")


def assert_counted_once(run: Run, size: int) -> None:
    """Every file done has exactly one ok record, and the rollup holds each file's bytes once."""
    done = RunFile.objects.filter(run=run, state="done").count()
    ok_records = Counter(TransferRecord.objects.filter(run=run, state="ok").values_list("destination_url", flat=True))
    assert len(ok_records) == done and set(ok_records.values()) <= {1}, ok_records
    rollup = RateRollup.objects.aggregate(bytes=Sum("bytes"), ok=Sum("files_ok"))
    assert rollup["ok"] == done
    assert rollup["bytes"] == pytest.approx(done * size)


@pytest.fixture
def registry(testbed: Testbed) -> Testbed:
    sites_import(document=testbed.sites_document())
    return testbed


@pytest.fixture
def coordinator() -> Any:
    user = UserFactory(username="coordinator")
    membership_grant(user=user, role="coordinator")
    return user


@pytest.fixture
def cleanup_runs(testbed: Testbed) -> Iterator[list[Run]]:
    started: list[Run] = []
    yield started
    for run in started:
        for site in ("t1a", "t1b"):
            for data in (testbed.site_dir(site) / "data").glob(f"**/portal-runs/{run.directory or 'none'}"):
                shutil.rmtree(data, ignore_errors=True)


@override_settings(**FAST_REAPER)
def test_a_worker_killed_mid_run_loses_its_files_to_a_retry_and_nothing_counts_twice(
    registry: Testbed, coordinator: Any, tmp_path: Path, cleanup_runs: list[Run]
) -> None:
    purge_default_queue()
    served_queues_forget()
    doomed = start_worker(tmp_path, "doomed", concurrency=6)
    survivor: Path | None = None
    try:
        size = 16 * MB
        run = run_start(
            user=coordinator,
            kind="transfer",
            parameters={
                "source": registry.endpoint("t0.root").url,  # native copies: 2.5 s each at least
                "destinations": [registry.endpoint("t1a.root").url],
                "file_size": size,
                "file_count": 10,
                "concurrency": 4,
                "timeout": 60,
            },
        )
        cleanup_runs.append(run)
        wait_for(lambda: RunFile.objects.filter(run=run, state="running").count() == 4, 60, "4 copies in flight")
        os.kill(processes.read_pid(doomed) or 0, signal.SIGKILL)
        lost = set(RunFile.objects.filter(run=run, state="running").values_list("index", flat=True))
        survivor = start_worker(tmp_path, "survivor", concurrency=6)
        reap_until_ended(run, 120)
        assert run.state == "finished", run.message
        files = {f.index: f for f in RunFile.objects.filter(run=run)}
        assert all(f.state == "done" for f in files.values()), {i: f.error for i, f in files.items()}
        assert all(files[index].attempt == 2 for index in lost)
        lost_records = TransferRecord.objects.filter(run=run, state="failed", attempt=1)
        assert lost_records.count() == len(lost)
        assert all(r.error_message.startswith("worker lost: doomed@") for r in lost_records)
        assert {f.worker.split("@")[0] for f in files.values() if f.index in lost} == {"survivor"}
        assert_counted_once(run, size)
    finally:
        processes.stop(doomed)
        if survivor:
            processes.stop(survivor)


@pytest.fixture
def own_redis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A Redis of this test's own (no persistence: a restart loses every message), restartable on its port; the
    runs' tasks are sent there."""
    port = processes.free_port(46379)
    pidfile = tmp_path / "redis.pid"
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]

    def start() -> None:
        processes.start(argv, pidfile=pidfile, logfile=tmp_path / "redis.log", cwd=tmp_path)
        assert processes.wait_for_port(port, timeout=10)

    start()
    url = f"redis://127.0.0.1:{port}/0"
    from runs import tasks

    def send_prepare(run_id: int, queue: str, *, limits: tuple[int, int] | None = None) -> None:
        with app.connection_for_write(url) as conn:
            tasks.run_prepare.apply_async(args=(run_id,), queue=queue, connection=conn)

    def send_file(
        file_id: int, attempt: int, task_id: str, queue: str, *, limits: tuple[int, int] | None = None
    ) -> None:
        with app.connection_for_write(url) as conn:
            tasks.transfer_file_task.apply_async(args=(file_id, attempt), task_id=task_id, queue=queue, connection=conn)

    monkeypatch.setattr(dispatch, "prepare_send", send_prepare)
    monkeypatch.setattr(dispatch, "file_send", send_file)
    monkeypatch.setattr(dispatch, "served_queues", set)
    try:
        yield {"url": f"redis://127.0.0.1:{port}/0", "start": start, "pidfile": pidfile, "port": port}
    finally:
        processes.stop(pidfile)


@override_settings(**FAST_REAPER)
def test_a_broker_restarted_mid_run_loses_messages_but_the_run_still_ends_cleanly(
    registry: Testbed,
    coordinator: Any,
    tmp_path: Path,
    own_redis: dict[str, Any],
    cleanup_runs: list[Run],
) -> None:
    url = own_redis["url"]
    worker = start_worker(tmp_path, "w-own-redis", concurrency=6, env=worker_env(broker_url=url))
    try:
        size = 8 * MB
        run = run_start(
            user=coordinator,
            kind="transfer",
            parameters={
                "source": registry.endpoint("t0.root").url,
                "destinations": [registry.endpoint("t1b.root").url],
                "file_size": size,
                "file_count": 12,
                "concurrency": 3,
                "timeout": 30,
            },
        )
        cleanup_runs.append(run)
        wait_for(lambda: RunFile.objects.filter(run=run, state="done").count() >= 2, 60, "2 files done")
        processes.stop(own_redis["pidfile"], timeout=1)  # gone with every queued message
        time.sleep(2)
        own_redis["start"]()
        reap_until_ended(run, 120)  # the same worker: it reconnects (Celery below 5.7, see requirements.in)
        assert processes.read_pid(worker) is not None, "the worker died with the broker"
        assert run.state in ("finished", "failed"), run.message
        assert not RunFile.objects.filter(run=run, state__in=["running", "queued"]).exists()
        files = list(RunFile.objects.filter(run=run).values_list("state", "error"))
        assert all(state == "done" or (state == "failed" and error) for state, error in files), files
        assert sum(state == "done" for state, _ in files) >= 8, files
        assert_counted_once(run, size)
    finally:
        processes.stop(worker)


def test_files_that_fail_for_their_own_reasons_each_say_why_and_the_run_goes_on(
    registry: Testbed, coordinator: Any, tmp_path: Path, cleanup_runs: list[Run], gfal: Any
) -> None:
    purge_default_queue()
    served_queues_forget()
    from measure.testfiles import test_file

    source = test_file(gfal, registry.endpoint("t0.root").url, MB)
    name = f"reliability/{uuid.uuid4().hex}"
    # a destination directory the server's user may not write in
    readonly = registry.site_dir("t1a") / "data" / "data" / name / "readonly"
    readonly.mkdir(parents=True)  # made by root: the server's user may write in its parents, not in it
    for item in (readonly.parent.parent, readonly.parent):
        shutil.chown(item, "xrootd", "xrootd")
    # a source whose bytes rotted on disk behind the checksum the server stored
    rotten = registry.site_dir("t0") / "data" / "data" / name / "rotten"
    rotten.parent.mkdir(parents=True)
    rotten.write_bytes(os.urandom(MB))
    for item in (rotten.parent.parent, rotten.parent, rotten):
        shutil.chown(item, "xrootd", "xrootd")
    rotten_url = registry.url("t0.root", f"{name}/rotten")
    gfal.checksum(rotten_url, "ADLER32")
    before = rotten.stat()
    data = bytearray(rotten.read_bytes())
    data[7] ^= 0x01
    rotten.write_bytes(bytes(data))
    os.utime(rotten, ns=(before.st_atime_ns, before.st_mtime_ns))
    destination = registry.url("t1a.root", name)
    files = [
        {"source": source, "destination": f"{destination}/ok-1"},
        {"source": source, "destination": f"{destination}/readonly/refused"},
        {"source": registry.url("t0.root", f"{name}/absent"), "destination": f"{destination}/missing"},
        {"source": rotten_url, "destination": f"{destination}/corrupt"},
        {"source": source, "destination": f"{destination}/ok-2"},
    ]
    worker = start_worker(tmp_path, "w-errors", concurrency=4)
    try:
        run = run_start(user=coordinator, kind="transfer", parameters={"files": files, "concurrency": 2})
        wait_for_run_end(run, 60)
        errors = dict(RunFile.objects.filter(run=run).values_list("index", "error"))
        assert run.state == "partly" and run.message == "finished with 3 of 5 failed", errors
        assert errors[0] == errors[4] == ""
        assert errors[1].startswith("destination refused the write: ")
        assert errors[2].startswith("source file missing (")
        assert errors[3].startswith("checksum mismatch: ")
        records = dict(
            TransferRecord.objects.filter(run=run, state="failed").values_list("destination_url", "error_message")
        )
        assert records == {
            url: errors[index] for index, url in enumerate(f["destination"] for f in files) if errors[index]
        }
    finally:
        processes.stop(worker)
        shutil.rmtree(registry.site_dir("t1a") / "data" / "data" / name, ignore_errors=True)
        shutil.rmtree(registry.site_dir("t0") / "data" / "data" / name, ignore_errors=True)
