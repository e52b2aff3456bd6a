"""The fault suite: what goes wrong in a challenge week, done for real to a portal of the test's own (its own
PostgreSQL and Redis, workers and beat started as an operator starts them) on the shared testbed. Each test checks
that its runs end, that every file ended exactly once (ok records = distinct files, none doubled) and that nothing
of another deployment was touched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from common import processes
from measure.testfiles import test_file
from portal.devstack import _pg_bin
from runs.reaper import copy_deadline_seconds
from testbed.grid import Testbed
from tests.faults.conftest import Deployment, Tally, wait_until
from tests.faults.servers import PostgresServer

pytestmark = [pytest.mark.faults, pytest.mark.testbed]

MB = 1024 * 1024
ENDED = ("finished", "partly", "failed", "cancelled")
# The beat test's deployment judges lost messages sooner than production (300 s), so that beat's absence can outlast
# every threshold of the reaper in well under the 5 minutes it took with production's: see that test.
BEAT_TEST_RESEND_AFTER = 60
BEAT_TEST_TIMEOUT = 30
BEAT_PAUSE = float(os.environ.get("FAULTS_BEAT_PAUSE", "100"))


def files_by_state(portal: Deployment, run_id: int) -> dict[str, int]:
    rows = portal.postgres.execute(
        f"SELECT state, count(*) FROM runs_runfile WHERE run_id = {int(run_id)} GROUP BY state", portal.database
    )
    return {str(state): int(count) for state, count in rows}


def run_state(portal: Deployment, run_id: int) -> str:
    rows = portal.postgres.execute(f"SELECT state FROM runs_run WHERE id = {int(run_id)}", portal.database)
    return str(rows[0][0])


def wait_for_run_end(portal: Deployment, run_id: int, timeout: float) -> dict[str, Any]:
    wait_until(lambda: run_state(portal, run_id) in ENDED, timeout, f"run {run_id} of {portal.name} ended", portal)
    return portal.driver("status", id=run_id)  # type: ignore[no-any-return]


def account(tally: Tally, status: dict[str, Any], files: int) -> None:
    """Every planned file ok exactly once: what is missing is lost, what is more is doubled."""
    tally.files_lost += files - status["ok_files"]
    tally.records_doubled += status["doubled"]


def transfer(testbed: Testbed, *, files: int, size: int = 20 * MB, concurrency: int = 3, **more: Any) -> dict[str, Any]:
    return {
        "source": testbed.endpoint("t0.root").url,
        "destinations": [testbed.endpoint("t1a.root").url],
        "file_size": size,
        "file_count": files,
        "concurrency": concurrency,
        "timeout": 120,
        **more,
    }


def test_a_broker_that_comes_back_empty_mid_run_loses_no_file(deployments: Any, testbed: Testbed, tally: Tally) -> None:
    """30 files; after 3, Redis is shut down without saving and started empty 8 s later. The worker (started the
    README's way) reconnects by itself, the reaper sees the broker's lost epoch and sends again what was queued,
    and the run ends within 2 minutes of Redis's return with 30 ok records for 30 files."""
    portal = deployments("broker")
    worker = portal.worker()
    portal.beat()
    run = portal.driver("run", parameters=transfer(testbed, files=30))["id"]
    wait_until(lambda: files_by_state(portal, run).get("done", 0) >= 3, 120, "3 files done", portal)
    portal.redis.shutdown_nosave()
    time.sleep(8)
    portal.redis.start()
    returned = time.monotonic()
    status = wait_for_run_end(portal, run, 120)
    took = time.monotonic() - returned
    account(tally, status, 30)
    assert status["state"] == "finished", status
    assert status["ok_records"] == status["ok_files"] == 30 and status["doubled"] == 0, status
    assert processes.read_pid(worker) is not None, "the worker died: " + portal.log("worker")[-3000:]
    assert took < 120
    print(f"broker restart: run ended {took:.0f} s after Redis came back")


def test_postgresql_restarted_mid_run_the_run_goes_on_and_counts_each_file_once(
    deployments: Any, postgres: PostgresServer, testbed: Testbed, tally: Tally
) -> None:
    portal = deployments("pg-run")
    portal.worker()
    portal.beat()
    run = portal.driver("run", parameters=transfer(testbed, files=20))["id"]
    wait_until(lambda: files_by_state(portal, run).get("done", 0) >= 3, 120, "3 files done", portal)
    postgres.stop("fast")  # every session of every process is cut
    time.sleep(5)
    postgres.start()
    status = wait_for_run_end(portal, run, 180)
    account(tally, status, 20)
    assert status["state"] == "finished", status
    assert status["ok_files"] == 20 and status["doubled"] == 0, status


def fts_batch(testbed: Testbed, batch: int, size: int) -> list[dict[str, Any]]:
    now = int(time.time() * 1000)
    source, destination = testbed.endpoint("t0.root").url, testbed.endpoint("t1a.root").url
    return [
        {
            "tr_id": f"ingest-b{batch}-{number}",
            "job_id": f"ingest-b{batch}",
            "file_id": str(number),
            "vo": "atlas",
            "src_url": f"{source}/ingest/b{batch}/f{number}",
            "dst_url": f"{destination}/ingest/b{batch}/f{number}",
            "tr_timestamp_start": now - 60_000 - number,
            "tr_timestamp_complete": now - number,
            "f_size": 10**9,
            "tr_bt_transfered": 10**9,
            "t_final_transfer_state": "Ok",
        }
        for number in range(size)
    ]


def batch_stored(portal: Deployment, batch: int) -> int | None:
    """How many records of the batch are stored; None while the database does not answer."""
    try:
        rows = portal.postgres.execute(
            f"SELECT count(*) FROM results_transferrecord WHERE origin_id LIKE 'ingest-b{int(batch)}-%'",
            portal.database,
        )
    except Exception:  # the database is still restarting
        return None
    return int(rows[0][0])


def post(port: int, key: str, body: list[dict[str, Any]]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/ingest/fts/",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_postgresql_restarted_mid_ingest_answers_503_and_stores_each_batch_whole_or_not_at_all(
    deployments: Any, postgres: PostgresServer, testbed: Testbed, tally: Tally
) -> None:
    portal = deployments("pg-ingest")
    key = portal.driver("token")["key"]
    port = portal.web()
    batches, size = 30, 40
    statuses: list[int] = []
    partial: list[tuple[int, int]] = []
    restart = threading.Thread(target=lambda: (postgres.stop("fast"), time.sleep(4), postgres.start()))
    for batch in range(batches):
        if batch == 6:
            restart.start()
        body = fts_batch(testbed, batch, size)
        deadline = time.monotonic() + 90
        while True:
            status, headers, content = post(port, key, body)
            statuses.append(status)
            assert status in (200, 201, 202, 503), (status, content[:500])
            if status != 503:
                break
            assert headers.get("Retry-After") and b"nothing of this request was stored" in content
            stored = batch_stored(portal, batch)
            if stored not in (None, 0, size):
                partial.append((batch, stored))
            assert time.monotonic() < deadline, "the API answered 503 for 90 s"
            time.sleep(1)
    restart.join()
    rows = postgres.execute(
        "SELECT count(*), count(DISTINCT origin_id) FROM results_transferrecord WHERE origin_id LIKE 'ingest-b%'",
        portal.database,
    )
    total, distinct = (int(value) for value in rows[0])
    tally.files_lost += batches * size - distinct
    tally.records_doubled += total - distinct
    assert 503 in statuses, "the restart did not meet a request: nothing was tried"
    assert not partial, f"batches stored in part: {partial}"
    assert distinct == total == batches * size


def test_a_worker_killed_mid_sweep_loses_its_copies_to_a_retry_and_the_sweep_ends(
    deployments: Any, testbed: Testbed, tally: Tally
) -> None:
    portal = deployments("sweep")
    doomed = portal.worker("doomed")
    portal.beat()
    data = {
        "name": "faults",
        "sites": ["TB-T0", "TB-T1-A"],
        "protocol": "davs",
        "modes": ["pull"],
        "concurrency": [3],
        "file_count": 6,
        "file_size": 16 * MB,
        "network": False,
    }
    sweep = portal.driver("sweep", data=data)["id"]

    def running_copies() -> bool:
        rows = portal.postgres.execute(
            "SELECT count(*) FROM runs_runfile f JOIN sweeps_sweepstep s ON s.run_id = f.run_id "
            f"WHERE s.sweep_id = {int(sweep)} AND f.state = 'running'",
            portal.database,
        )
        return int(rows[0][0]) >= 2

    wait_until(running_copies, 120, "copies of the sweep's first step in flight", portal)
    os.kill(processes.read_pid(doomed) or 0, signal.SIGKILL)
    portal.worker("survivor")  # as a service manager starts it again
    wait_until(
        lambda: portal.driver("sweep-status", id=sweep)["state"] in ("finished", "failed", "cancelled"),
        240,
        "the sweep ended",
        portal,
    )
    result = portal.driver("sweep-status", id=sweep)
    statuses = [portal.driver("status", id=run) for run in result["runs"]]
    for status in statuses:
        account(tally, status, 6)
    assert result["state"] == "finished" and result["steps"] == ["ended", "ended"], result
    assert all(s["state"] == "finished" and s["ok_files"] == 6 and s["doubled"] == 0 for s in statuses), statuses
    assert any(2 in s["attempts"] for s in statuses), "no copy was lost with the worker"


def test_beat_stopped_past_every_reaper_threshold_catches_up_and_the_run_ends(
    deployments: Any, testbed: Testbed, tally: Tally
) -> None:
    """Beat stops; meanwhile the worker is killed mid-run, so only the reaper can free its copies. While beat is
    away the run waits (nothing else frees them); once it is back, the run ends with every file once.

    Beat stays away longer than everything the reaper judges by time, so that its first pass after the return finds
    each of them past due at once, as after a long outage: the killed worker's copies lost (no heartbeat for 10 s)
    and past their copy deadline (timeout + HUNG_GRACE: taken for hung), a message that never reached a worker due
    to be sent again (DISPATCH_RESEND_AFTER), and every periodic task a run depends on overdue (the reaper, the
    auto-runs, the heartbeat: 60 s at most; the hourly partitions of the records are not the run's concern).
    With production's thresholds that took 5 minutes; this deployment's are lower."""
    portal = deployments("beat", DISPATCH_RESEND_AFTER=str(BEAT_TEST_RESEND_AFTER))
    parameters = transfer(testbed, files=12, timeout=BEAT_TEST_TIMEOUT)
    thresholds = {
        "worker lost (DISPATCH_WORKER_LOST_AFTER)": float(portal.env["DISPATCH_WORKER_LOST_AFTER"]),
        "sent again (DISPATCH_RESEND_AFTER)": float(portal.env["DISPATCH_RESEND_AFTER"]),
        "hung copy (timeout + HUNG_GRACE)": copy_deadline_seconds(parameters),
        "beat's longest interval of the runs' tasks": max(
            float(entry["schedule"])
            for entry in settings.CELERY_BEAT_SCHEDULE.values()
            if entry["task"].startswith("runs.") or entry["task"] == "portal.tasks.heartbeat"
        ),
    }
    assert all(seconds < BEAT_PAUSE for seconds in thresholds.values()), (BEAT_PAUSE, thresholds)
    doomed = portal.worker("doomed")
    beat = portal.beat()
    run = portal.driver("run", parameters=parameters)["id"]
    wait_until(lambda: files_by_state(portal, run).get("done", 0) >= 2, 120, "2 files done", portal)
    processes.stop(beat)
    wait_until(lambda: files_by_state(portal, run).get("running", 0) >= 1, 60, "a copy in flight", portal)
    os.kill(processes.read_pid(doomed) or 0, signal.SIGKILL)
    portal.worker("survivor")
    time.sleep(BEAT_PAUSE)
    assert run_state(portal, run) == "running", "the run ended without the reaper: nothing was tested"
    portal.beat("beat-again")
    status = wait_for_run_end(portal, run, 120)
    account(tally, status, 12)
    assert status["state"] == "finished" and status["ok_files"] == 12 and status["doubled"] == 0, status
    assert 2 in status["attempts"]


def test_a_second_database_against_the_same_storage_touches_nothing_of_the_first(
    deployments: Any, testbed: Testbed, gfal: Any, tally: Tally
) -> None:
    """Two portals on fresh databases (both number their runs from 1) against one testbed, both orders: the one
    that keeps its copies finds them as they were after the other ran the same run, tried to write onto them, and
    cleaned up."""
    destinations = [testbed.endpoint("t1a.root").url, testbed.endpoint("t1b.https").url]
    for order in ("first-keeps", "second-keeps"):
        first, second = deployments(f"{order}-1"), deployments(f"{order}-2")
        keeper, other = (first, second) if order == "first-keeps" else (second, first)
        # The other one's worker is started second, so that nothing but the names keeps them apart.
        keeper.worker()
        other.worker()
        kept = keeper.driver("run", parameters=transfer(testbed, files=2, destinations=destinations, keep_copies=True))
        status = wait_for_run_end(keeper, kept["id"], 120)
        assert status["state"] == "finished" and status["copies"] == "kept", status
        theirs = status["destinations"]
        before = {url: gfal.checksum(url, "ADLER32") for url in theirs}
        same = other.driver("run", parameters=transfer(testbed, files=2, destinations=destinations))
        assert same["id"] == kept["id"] == 1 and same["directory"] != kept["directory"]  # both number from 1
        onto = other.driver(
            "run",
            parameters={"files": [{"source": test_file(gfal, destinations[0], MB), "destination": theirs[0]}]},
        )
        for run in (same["id"], onto["id"]):
            wait_for_run_end(other, run, 120)
            wait_until(lambda r=run, o=other: o.driver("status", id=r)["copies"] == "deleted", 60, "clean-up", other)
        clash = other.driver("status", id=onto["id"])
        assert clash["state"] == "failed" and "destination exists" in clash["message"], clash
        assert clash["written"] == []  # refused: nothing of it to delete
        account(tally, other.driver("status", id=same["id"]), 2)
        account(tally, status, 2)
        after = {url: gfal.checksum(url, "ADLER32") for url in theirs}
        assert after == before  # still there, unchanged, after the other portal's clean-up
        for url in theirs:
            gfal.unlink(url)
        first.stop()
        second.stop()


def test_a_database_restored_from_a_dump_gives_the_same_rates_table(
    deployments: Any, postgres: PostgresServer, tmp_path: Path, tally: Tally
) -> None:
    portal = deployments("backup")
    portal.driver("setup", demo=True)
    assert portal.driver("fts", count=90)["accepted"] == 90
    at = datetime.now(UTC).isoformat()  # both reads at one minute: a running window's figures are so far
    before = portal.driver("rates", slug="demo", at=at)["rows"]
    assert any(row[1] > 0 for row in before), before  # the T0 export's link counted its volume
    dump = tmp_path / "portal.dump"
    pg = ["-h", "127.0.0.1", "-p", str(postgres.port), "-U", "postgres"]
    subprocess.run([_pg_bin("pg_dump"), *pg, "-Fc", "-f", str(dump), portal.database], check=True, timeout=120)
    restored = f"{portal.database}_restored"
    postgres.execute(f'CREATE DATABASE "{restored}"')
    try:
        subprocess.run([_pg_bin("pg_restore"), *pg, "--no-owner", "-d", restored, str(dump)], check=True, timeout=120)
        copy = Deployment("restored", tmp_path / "restored", postgres, portal.redis, restored)
        assert copy.driver("rates", slug="demo", at=at)["rows"] == before
    finally:
        postgres.execute(f'DROP DATABASE IF EXISTS "{restored}" WITH (FORCE)')
