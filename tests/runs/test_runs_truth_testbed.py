"""Runs that tell the truth, end to end on the testbed with a real worker: long probes outlive the reaper and keep
what they measured, runs delete their copies (or keep them on request), test files are made once and right, and a
run that cannot fit never starts writing."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from django.test import override_settings

from common import processes
from measure.context import gfal2_context_new
from measure.testfiles import test_file_expected_checksum, test_file_url
from results.models import TransferRecord
from runs.choices import CopiesState
from runs.models import Run
from runs.reaper import runs_reap
from runs.services import run_cancel, run_start
from testbed.grid import Testbed

# The fixtures of test_runs_testbed.py: the testbed in the registry, a coordinator, one worker on the default queue.
from tests.runs.helpers import wait_for, wait_for_run_end, wait_for_worker_lost

pytestmark = [pytest.mark.testbed, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

MB = 10**6


def copies_on_disk(testbed: Testbed, run: Run) -> list[Path]:
    return [path for site in ("t1a", "t1b") for path in (testbed.site_dir(site) / "data").glob(f"**/{run.directory}/*")]


def wait_for_copies(run: Run, state: str, timeout: float = 60) -> None:
    def settled() -> bool:
        run.refresh_from_db()
        return run.copies == state

    wait_for(settled, timeout, lambda: f"copies of run {run.pk} to be {state}: {run.copies} {run.copies_message}")


def transfer(testbed: Testbed, user: Any, **overrides: Any) -> Run:
    parameters = {
        "source": testbed.endpoint("t0.root").url,
        "destinations": [testbed.endpoint("t1a.root").url],
        "file_size": 2 * MB,
        "file_count": 4,
        "concurrency": 4,
        "copy_mode": "native",
        **overrides,
    }
    return run_start(user=user, kind="transfer", parameters=parameters)


def iperf3_run(testbed: Testbed, user: Any, duration: int) -> Run:
    server = urlsplit(testbed.endpoint("iperf3").url)
    return run_start(
        user=user, kind="network", parameters={"host": server.hostname, "port": server.port, "duration": duration}
    )


def test_a_transfer_run_leaves_no_copy_on_its_destination(registry: Testbed, coordinator: Any, worker: Path) -> None:
    run = transfer(registry, coordinator)
    wait_for_run_end(run, 90)
    assert run.state == "finished", run.message
    wait_for_copies(run, CopiesState.DELETED)
    assert run.copies_message.startswith("4 deleted")
    assert copies_on_disk(registry, run) == []


def test_a_copy_that_stalls_is_stopped_and_its_file_copied_again(
    registry: Testbed, coordinator: Any, worker: Path
) -> None:
    """The destination's server frozen as the run starts (a hung storage node): the first try moves nothing, its
    stall guard stops it after 5 s, a failed transfer that says so; the server comes back and the second try, to a
    name of its own, copies the file. One file ok, two records, and no copy left behind."""
    with registry.frozen("t1b"):
        run = transfer(
            registry,
            coordinator,
            source=registry.endpoint("t0.https").url,
            destinations=[registry.endpoint("t1b.https").url],
            copy_mode="pull",
            file_count=1,
            concurrency=1,
            timeout=5,  # no byte moves: the guard stops it at its timeout (after one, at its stall timeout)
            stall_timeout=5,
        )
        wait_for(lambda: TransferRecord.objects.filter(run=run, state="failed").exists(), 60, "the first try to stall")
    wait_for_run_end(run, 60)
    assert run.state == "finished", run.message
    records = list(TransferRecord.objects.filter(run=run).order_by("attempt"))
    assert [(r.attempt, r.state, r.bytes) for r in records] == [(1, "failed", 0), (2, "ok", 2 * MB)]
    assert records[0].error_message.startswith("stalled: nothing moved for 5 s"), records[0].error_message
    file = run.files.get()
    assert file.attempt == 2 and file.destination_url.endswith(".try2")
    wait_for_copies(run, CopiesState.DELETED)
    assert copies_on_disk(registry, run) == []


def test_kept_copies_stay_until_runs_cleanup_deletes_them(registry: Testbed, coordinator: Any, worker: Path) -> None:
    run = transfer(registry, coordinator, keep_copies=True, file_count=2)
    wait_for_run_end(run, 90)
    wait_for_copies(run, CopiesState.KEPT)
    assert len(copies_on_disk(registry, run)) == 2
    call_command("runs_cleanup", "--run", str(run.pk), "--delete")
    run.refresh_from_db()
    assert run.copies == CopiesState.DELETED, run.copies_message
    assert copies_on_disk(registry, run) == []


def test_concurrent_runs_of_a_new_size_all_succeed_and_so_does_the_next(
    registry: Testbed, coordinator: Any, worker: Path
) -> None:
    size = 3 * MB + random.randrange(1, 10**6)  # a size no earlier test made a file of
    runs = [transfer(registry, coordinator, file_size=size, file_count=2, checksum="ADLER32") for _ in range(3)]
    for run in runs:
        wait_for_run_end(run, 120)
    assert [run.state for run in runs] == ["finished"] * 3, [run.message for run in runs]
    later = transfer(registry, coordinator, file_size=size, file_count=2, checksum="ADLER32")
    wait_for_run_end(later, 90)
    assert later.state == "finished", later.message
    url = test_file_url(registry.endpoint("t0.root").url, size)
    server = int(str(gfal2_context_new().checksum(url, "ADLER32")), 16)
    assert server == int(test_file_expected_checksum(size, "ADLER32") or "", 16)


def test_a_test_file_whose_checksum_no_longer_matches_is_made_again(
    registry: Testbed, coordinator: Any, worker: Path, tmp_path: Path
) -> None:
    size = 2 * MB + random.randrange(1, 10**6)
    url = test_file_url(registry.endpoint("t0.root").url, size)
    stale = tmp_path / "stale"
    stale.write_bytes(os.urandom(size))  # the right size, other bytes: what two racing makers once left
    ctx = gfal2_context_new()
    params = ctx.transfer_parameters()
    params.create_parent, params.overwrite = True, True
    ctx.filecopy(params, f"file://{stale}", url)
    run = transfer(registry, coordinator, file_size=size, file_count=2, checksum="ADLER32")
    wait_for_run_end(run, 90)
    assert run.state == "finished", run.message
    assert int(str(ctx.checksum(url, "ADLER32")), 16) == int(test_file_expected_checksum(size, "ADLER32") or "", 16)


def test_a_run_that_cannot_fit_fails_at_once_with_the_numbers_and_writes_nothing(
    registry: Testbed, coordinator: Any, worker: Path
) -> None:
    run = transfer(registry, coordinator, file_size=10**13, file_count=100)
    wait_for_run_end(run, 30)
    assert run.state == "failed"
    assert "not enough space at" in run.message and "this run writes" in run.message and "GB are free" in run.message
    assert copies_on_disk(registry, run) == []
    assert not list((registry.site_dir("t0") / "data").glob(f"**/random-{10**13}*"))


@override_settings(DISPATCH_WORKER_LOST_AFTER=10)
def test_a_50_second_iperf3_run_outlives_the_reaper_and_keeps_its_result(
    registry: Testbed, coordinator: Any, worker: Path
) -> None:
    """The reaper ran every 30 s and closed every probe longer than that as finished with nothing: now the probe's
    worker beats on the run, and the reaper (here every 2 s, with a 10 s limit) leaves it alone."""
    run = iperf3_run(registry, coordinator, 50)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs_reap()
        run.refresh_from_db()
        if run.state not in ("queued", "running"):
            break
        time.sleep(2)
    assert run.state == "finished", run.message
    assert (run.finished_at - run.started_at).total_seconds() >= 50
    assert run.summary["ok"] and run.summary["rate"] > 0
    assert len(run.summary["pscheduler"]["intervals"]) >= 49


def test_a_cancelled_iperf3_run_keeps_what_it_measured(registry: Testbed, coordinator: Any, worker: Path) -> None:
    run = iperf3_run(registry, coordinator, 60)
    wait_for(lambda: Run.objects.get(pk=run.pk).state == "running", 30, "the probe to start")
    time.sleep(5)
    run_cancel(run, user=coordinator)
    wait_for(lambda: bool(Run.objects.get(pk=run.pk).summary), 30, "the probe to hand in what it measured")
    run.refresh_from_db()
    assert run.state == "cancelled"
    assert run.summary["pscheduler"]["interrupted"].startswith("interrupt")
    assert 3 <= len(run.summary["pscheduler"]["intervals"]) < 60 and run.summary["rate"] > 0
    assert "what the probe measured until then is kept" in run.message


@override_settings(DISPATCH_WORKER_LOST_AFTER=5)
def test_a_probe_whose_worker_was_killed_fails_as_worker_lost(
    registry: Testbed, coordinator: Any, worker: Path
) -> None:
    run = iperf3_run(registry, coordinator, 60)
    wait_for(lambda: Run.objects.get(pk=run.pk).heartbeat is not None, 30, "the probe to start beating")
    os.kill(processes.read_pid(worker) or 0, signal.SIGKILL)
    wait_for_worker_lost(run, 30)
    assert run.state == "failed" and run.message.startswith("worker lost"), run.message


def test_a_runs_stated_average_is_its_files_bytes_over_first_start_to_last_end(
    registry: Testbed, coordinator: Any, worker: Path
) -> None:
    from rest_framework.test import APIClient

    from runs.models import RunFile

    run = transfer(registry, coordinator, file_count=6, concurrency=3, file_size=4 * MB)
    wait_for_run_end(run, 90)
    assert run.state == "finished", run.message
    files = list(RunFile.objects.filter(run=run, state="done").values_list("start", "end", "bytes"))
    seconds = (max(end for _, end, _ in files) - min(start for start, _, _ in files)).total_seconds()
    expected = sum(size for _, _, size in files) / seconds
    client = APIClient()
    client.force_authenticate(coordinator)
    rates = client.get(f"/api/v1/runs/{run.pk}/").json()["rates"]
    assert rates["volume"] == 6 * 4 * MB
    assert abs(rates["average_rate"] - expected) <= 0.02 * expected, (rates, expected)
    assert 0 < rates["max_window"] <= rates["active_seconds"] and rates["max_rate"] >= rates["average_rate"]
