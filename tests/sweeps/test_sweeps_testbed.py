"""Sweeps end to end on the testbed: one POST measures three sites' six links in pull and push with real workers
(one of them at TB-T0, on its own queue), iperf3 and tracepath per link; the plain WebDAV site cannot pull (its
error in the functional table); a sweep cancelled in its middle; a sweep whose worker is killed in its middle."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings
from rest_framework.test import APIClient

from common import processes
from runs.dispatch import served_queues_forget
from runs.models import Run, RunFile
from runs.tasks import runs_reap
from sweeps.models import Sweep
from sweeps.services import sweeps_advance
from testbed.grid import Testbed
from tests.runs.helpers import start_worker, wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

MB = 1024 * 1024
SITES = ["TB-T0", "TB-T1-A", "TB-WEBDAV"]


@pytest.fixture
def api(coordinator: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(coordinator)
    return client


@pytest.fixture
def site_worker(tmp_path: Path, worker: Path) -> Iterator[Path]:
    """A worker at TB-T0, on its own queue: the links from TB-T0 are measured from there."""
    pidfile = start_worker(tmp_path, "w-t0", queues="site.TB-T0", concurrency=8)
    served_queues_forget()
    try:
        yield pidfile
    finally:
        processes.stop(pidfile)
        served_queues_forget()


def sweep_post(api: APIClient, **fields: Any) -> dict[str, Any]:
    body = {"name": "JUNO-like", "sites": SITES, "modes": ["pull", "push"], "concurrency": [2], **fields}
    response = api.post("/api/v1/sweeps/", body, format="json")
    assert response.status_code == 201, response.content
    data: dict[str, Any] = response.json()
    return data


def sweep_state(sweep_id: int) -> str:
    sweep = Sweep.objects.get(pk=sweep_id)
    steps = list(sweep.steps.values_list("index", "state", "run__state"))
    return f"sweep {sweep_id} to end: {sweep.state} ({sweep.message}); steps {steps}"


def wait_for_sweep(sweep_id: int, timeout: float, *, beat: bool = False) -> Sweep:
    """Until the sweep ends; with beat, doing beat's work every second (the reaper and the sweeps' advance)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if beat:
            runs_reap()
            sweeps_advance()
        sweep = Sweep.objects.get(pk=sweep_id)
        if sweep.state in ("finished", "cancelled", "failed"):
            return sweep
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout} s waiting for {sweep_state(sweep_id)}")


def copies_left(testbed: Testbed, sweep: Sweep) -> list[Path]:
    directories = [
        step.run.directory for step in sweep.steps.select_related("run") if step.run_id and step.run.directory
    ]
    return [
        path
        for site in ("t0", "t1a", "t1b", "webdav")
        for directory in directories
        for path in testbed.site_dir(site).glob(f"**/portal-runs/{directory}/*")
    ]


def test_one_post_gives_the_juno_tables_of_three_sites(
    registry: Testbed, coordinator: Any, worker: Path, site_worker: Path, api: APIClient
) -> None:
    # nginx computes no checksum: the copies to and from the plain WebDAV site are checked by size only.
    created = sweep_post(api, file_size=4 * MB, network_duration=2, checksum="none")
    assert created["state"] == "queued" and created["progress"]["steps_total"] == 6 + 12
    sweep = wait_for_sweep(created["id"], 300)
    assert sweep.state == "finished", sweep_state(sweep.pk)
    print(f"sweep of 18 steps: {(sweep.finished_at - sweep.started_at).total_seconds():.1f} s")  # the README's figure

    matrix = api.get(f"/api/v1/sweeps/{sweep.pk}/matrix/").json()
    rows = {(r["source"], r["destination"], r["mode"]): r for r in matrix["rows"]}
    assert len(matrix["rows"]) == 12 and len(rows) == 12
    assert {r["concurrency"] for r in matrix["rows"]} == {2}
    # The plain WebDAV site cannot copy by itself: it neither pulls (pull into it) nor pushes (push out of it).
    cannot = {(s, "TB-WEBDAV", "pull") for s in SITES[:2]} | {("TB-WEBDAV", d, "push") for d in SITES[:2]}
    for key, row in rows.items():
        assert row["state"] in ("finished", "partly", "failed"), row
        assert row["files_ok"] + row["files_failed"] == 2, row
        if key in cannot:
            assert row["files_ok"] == 0 and row["failure_ratio"] == 1.0 and row["top_error"], row
        else:
            assert row["files_ok"] == 2 and row["files_failed"] == 0, (key, row["top_error"])
            assert row["aggregate_rate"] > 0 and row["sum_of_file_rates"] > 0, row
            # Two files over their union: the aggregate rate is at most the sum of their own rates.
            assert row["aggregate_rate"] <= row["sum_of_file_rates"] * 1.000001, row
            assert row["volume"] == 2 * 4 * MB
        assert row["measured_from"] == ("TB-T0" if key[0] == "TB-T0" else "portal"), row
        worker_there = "measured at TB-T0 by the portal's worker there"
        assert row["measured_by"] == (worker_there if key[0] == "TB-T0" else "measured by the portal's workers"), row
    network = {(r["source"], r["destination"]): r for r in matrix["network"]}
    assert len(matrix["network"]) == 6 and len(network) == 6
    for row in network.values():
        assert row["error"] == "" and row["iperf3_bps"] > 0 and row["iperf3_rate"] * 8 == row["iperf3_bps"], row
        assert row["path_mtu"] == 65535 and row["mtu_mismatch"] is False, row  # loopback, both ends alike
        assert row["retransmits"] is not None, row

    # Every step was an ordinary run, and each deleted its copies.
    runs = Run.objects.filter(sweep_step__sweep=sweep)
    assert runs.count() == 18 and set(runs.values_list("kind", flat=True)) == {"transfer", "network"}
    wait_for(lambda: copies_left(registry, sweep) == [], 60, "the steps' copies to be deleted")

    browser = Client()
    browser.force_login(coordinator)
    page = browser.get(f"/sweeps/{sweep.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    for title in ("Functional test, pull", "Functional test, push", "Throughput, pull, 2 files in parallel"):
        assert title in html
    assert 'class="bad" title="' in html and ">OK</a>" in html  # red cells with the error on hover, green cells
    assert "Gb/s" in html and "MTU 65535" in html
    functional = browser.get(f"/sweeps/{sweep.pk}/?table=functional&format=json").json()["rows"]
    assert {(r["source"], r["destination"], r["mode"]) for r in functional if not r["ok"]} == cannot
    csv = browser.get(f"/sweeps/{sweep.pk}/?table=network&format=csv").content.decode()
    assert csv.splitlines()[0].startswith("step,run,state,source,destination,iperf3_bps")
    assert len(csv.splitlines()) == 7


def test_a_sweep_cancelled_in_its_middle_stops_and_leaves_no_copy(
    registry: Testbed, coordinator: Any, worker: Path, api: APIClient
) -> None:
    created = sweep_post(api, concurrency=[2, 4], file_size=16 * MB, network=False, modes=["pull"])
    sweep_id = created["id"]
    wait_for(lambda: Sweep.objects.get(pk=sweep_id).steps.filter(state="ended").count() >= 2, 120, "two steps")
    response = api.post(f"/api/v1/sweeps/{sweep_id}/cancel/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "cancelled"
    states = [step["state"] for step in body["steps"]]
    assert "cancelled" in states and states.count("pending") == 0
    sweep = Sweep.objects.get(pk=sweep_id)
    # The current step ends once its cancelled run has ended and its copies are deleted; no step starts after it.
    wait_for(lambda: not sweep.steps.filter(state__in=["pending", "running"]).exists(), 60, "the current step to end")
    time.sleep(3)
    assert not sweep.steps.filter(state__in=["pending", "running"]).exists()
    assert sweep.steps.exclude(run=None).count() == len([s for s in states if s != "cancelled"])
    for run in Run.objects.filter(sweep_step__sweep=sweep):
        wait_for(lambda run=run: Run.objects.get(pk=run.pk).state in ("finished", "partly", "failed", "cancelled"), 60,
                 f"run {run.pk} to end")  # fmt: skip
    wait_for(lambda: copies_left(registry, sweep) == [], 60, "the copies to be deleted")
    assert api.post(f"/api/v1/sweeps/{sweep_id}/cancel/").status_code == 400  # it has ended


@override_settings(DISPATCH_WORKER_LOST_AFTER=4, DISPATCH_RESEND_AFTER=4)
def test_a_sweep_whose_worker_is_killed_goes_on_with_the_next_worker(
    registry: Testbed, coordinator: Any, tmp_path: Path, api: APIClient
) -> None:
    from tests.runs.helpers import purge_default_queue

    purge_default_queue()
    served_queues_forget()
    doomed = start_worker(tmp_path, "doomed", concurrency=8)
    survivor: Path | None = None
    try:
        created = sweep_post(api, sites=["TB-T0", "TB-T1-A"], modes=["pull"], concurrency=[2, 4], network=False,
                             file_size=16 * MB, protocol="root")  # fmt: skip
        sweep_id = created["id"]
        wait_for(
            lambda: Sweep.objects.get(pk=sweep_id).steps.filter(state="running", run__files__state="running").exists(),
            60,
            "a step's copies in flight",
        )
        os.kill(processes.read_pid(doomed) or 0, signal.SIGKILL)
        survivor = start_worker(tmp_path, "survivor", concurrency=8)
        sweep = wait_for_sweep(sweep_id, 240, beat=True)
        assert sweep.state == "finished", sweep_state(sweep_id)
        rows = api.get(f"/api/v1/sweeps/{sweep_id}/matrix/").json()["rows"]
        assert len(rows) == 4
        # The copies the killed worker lost were copied again: every file is ok once, none counted twice.
        retried = RunFile.objects.filter(run__sweep_step__sweep_id=sweep_id, attempt=2)
        assert retried.exists(), "the worker was killed with no copy in flight"
        for row in rows:
            assert (row["files_ok"], row["files_failed"]) == (row["concurrency"], 0), row
            assert row["volume"] == row["concurrency"] * 16 * MB, row
        wait_for(lambda: copies_left(registry, sweep) == [], 60, "the copies to be deleted")
    finally:
        processes.stop(doomed)
        if survivor:
            processes.stop(survivor)
