"""The run page stays true to its end: the progress panel keeps asking until the run's copies are kept or deleted,
brings what the run measured (its FROM x TO table, its probe's results and figures) once the run has ended, so
that none of it needs a reload; a one-task probe shows its own progress, not "Files 0/0"; copies in flight that
report nothing count by the pace of the copies done."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from results.models import TransferRecord
from runs.models import Run, RunFile
from sites.roles import membership_grant
from tests.sites.factories import SiteFactory, UserFactory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
MB = 10**6


@pytest.fixture
def viewer(client: Client) -> Client:
    client.force_login(UserFactory(username="viewer"))
    return client


def text(response: Any) -> str:
    return response.content.decode()


def transfer_run(*, state: str = "running", copies: str = "present", ended_ago: float = 1.0) -> Run:
    """Two 100 MB files from SRC to DST, both done with their records stored; running, or ended `ended_ago` s ago."""
    now = timezone.now()
    source, destination = SiteFactory(name="SRC"), SiteFactory(name="DST")
    ended = state != "running"
    run = Run.objects.create(
        kind="transfer",
        state=state,
        copies=copies,
        started_at=now - timedelta(seconds=30),
        finished_at=now - timedelta(seconds=ended_ago) if ended else None,
        parameters={"concurrency": 2},
    )
    for index in range(2):
        start, end = now - timedelta(seconds=20), now - timedelta(seconds=10)
        RunFile.objects.create(
            run=run, index=index, source_url="root://a//f", destination_url=f"root://b//f{index}", size=100 * MB,
            state="done", attempt=1, start=start, end=end, bytes=100 * MB,
        )  # fmt: skip
        TransferRecord.objects.create(
            run=run, bytes=100 * MB, start=start, end=end, state="ok", origin="probe", origin_id=f"r{run.pk}-{index}",
            source_site=source, destination_site=destination,
        )  # fmt: skip
    return run


def panel(client: Client, run: Run) -> str:
    return text(client.get(f"/challenges/runs/{run.pk}/progress/", **HTMX))


@pytest.mark.parametrize("copies", ["present", "deleting"])
def test_the_panel_keeps_asking_after_the_end_while_the_copies_are_being_deleted(viewer: Client, copies: str) -> None:
    run = transfer_run(state="finished", copies=copies)
    page = panel(viewer, run)
    assert 'id="run-state" class="state-finished">finished<' in page
    assert f'hx-get="/challenges/runs/{run.pk}/progress/"' in page
    assert "until its copies are kept or deleted" in page


@pytest.mark.parametrize("copies", ["deleted", "kept", "delete-failed"])
def test_the_panel_stops_asking_once_the_copies_are_kept_or_deleted(viewer: Client, copies: str) -> None:
    run = transfer_run(state="finished", copies=copies)
    page = panel(viewer, run)
    assert "hx-get" not in page and "hx-trigger" not in page
    assert 'id="run-copies"' in page


def test_a_page_left_open_stops_asking_about_copies_a_quarter_of_an_hour_after_the_end(viewer: Client) -> None:
    run = transfer_run(state="finished", copies="deleting", ended_ago=16 * 60)
    assert "hx-get" not in panel(viewer, run)


def test_the_run_page_holds_the_place_of_its_results_while_the_run_goes_on(viewer: Client) -> None:
    run = transfer_run()
    page = text(viewer.get(f"/challenges/runs/{run.pk}/"))
    assert '<div id="run-results">' in page
    assert "hx-swap-oob" not in page
    assert "hx-swap-oob" not in panel(viewer, run)  # nothing measured to bring while it runs


def test_the_panel_that_sees_the_end_brings_the_from_to_table_out_of_band(viewer: Client) -> None:
    run = transfer_run(state="finished", copies="deleting")
    page = panel(viewer, run)
    results = page.split('<div id="run-results" hx-swap-oob="true">')[1]
    assert 'id="run-matrix"' in results
    assert "<td>SRC</td><td>DST</td>" in results
    assert "<td>2</td>" in results  # files ok


def test_a_cancel_brings_the_results_with_the_panel_it_answers(client: Client) -> None:
    boss = UserFactory(username="boss")
    membership_grant(user=boss, role="coordinator")
    client.force_login(boss)
    run = transfer_run()
    page = text(client.post(f"/challenges/runs/{run.pk}/cancel/", **HTMX))
    assert 'id="run-state" class="state-cancelled">' in page
    assert '<div id="run-results" hx-swap-oob="true">' in page and 'id="run-matrix"' in page


def network_run(*, state: str, summary: dict[str, Any] | None = None, started_ago: float = 4.0) -> Run:
    now = timezone.now()
    return Run.objects.create(
        kind="network",
        state=state,
        parameters={"host": "iperf.example.org", "port": 5201, "streams": 4, "duration": 10, "reverse": False},
        started_at=now - timedelta(seconds=started_ago),
        heartbeat=now - timedelta(seconds=1),
        finished_at=now if state != "running" else None,
        summary=summary or {},
    )


def test_a_running_network_probe_shows_its_own_progress_not_files(viewer: Client) -> None:
    run = network_run(state="running")
    page = panel(viewer, run)
    assert "iperf3 to iperf.example.org:5201, 4 streams for 10 s, then tracepath (path MTU)" in page
    assert 'id="probe-elapsed">4 s <small class="muted">of about 15 s</small>' in page
    assert 'id="probe-phase">iperf3<' in page
    assert ">1 s ago<" in page
    assert 'id="run-eta">11 s<' in page
    assert '<progress id="probe-progress" max="15" value="4">' in page
    assert "Files done" not in page and "0 / 0" not in page and "Bytes done" not in page


def test_a_network_probe_past_its_iperf3_time_is_tracing_the_path(viewer: Client) -> None:
    run = network_run(state="running", started_ago=12)
    page = panel(viewer, run)
    assert 'id="probe-phase">tracepath<' in page
    assert 'id="run-eta">3 s<' in page


def test_a_running_recall_says_what_it_recalls(viewer: Client) -> None:
    run = Run.objects.create(
        kind="staging", state="running", parameters={"urls": ["root://t//a", "root://t//b", "root://t//c"]},
        started_at=timezone.now() - timedelta(seconds=65), heartbeat=timezone.now(),
    )  # fmt: skip
    page = panel(viewer, run)
    assert "Recalling 3 files from tape" in page
    assert 'id="probe-elapsed">1 min 5 s<' in page
    assert 'id="run-eta">—<' in page  # a recall takes what the tape takes


def test_the_panel_that_sees_a_probe_end_brings_its_results_and_figures(viewer: Client) -> None:
    intervals = [{"summary": {"start": n, "end": n + 1, "throughput-bits": 2e9}} for n in range(3)]
    run = network_run(state="finished", summary={"rate": 2.5e8, "pscheduler": {"intervals": intervals}})
    page = panel(viewer, run)
    assert "hx-get" not in page  # a probe leaves no copies to wait for
    results = page.split('<div id="run-results" hx-swap-oob="true">')[1]
    assert 'id="probe-network"' in results
    assert 'id="probe-figures-data"' in results
    # Plotly is not on a page that was loaded while the probe ran: portal.js loads it from here
    assert 'data-plotly="/challenges/plotly.min.js?v=' in results
    assert 'id="probe-elapsed">' in page and "Took" in page


def test_an_ended_probe_with_records_counts_its_files(viewer: Client) -> None:
    run = Run.objects.create(kind="io", state="partly", started_at=timezone.now(), finished_at=timezone.now())
    now = timezone.now()
    for index, state in enumerate(["ok", "failed"]):
        TransferRecord.objects.create(
            run=run, bytes=MB if state == "ok" else 0, start=now, end=now, state=state, origin="probe",
            origin_id=f"io{index}",
        )  # fmt: skip
    page = panel(viewer, run)
    assert 'id="files-done">1 / 2<' in page and 'id="files-failed">1<' in page
    assert 'id="bytes-done" title="1000000 bytes">1 MB<' in page


def test_copies_in_flight_that_report_nothing_show_what_they_must_have_copied(viewer: Client) -> None:
    """One 100 MB file done in 10 s, two started 5 s ago that report nothing: about 50 MB each."""
    now = timezone.now()
    run = Run.objects.create(kind="transfer", state="running", started_at=now - timedelta(seconds=20),
                             parameters={"concurrency": 2})  # fmt: skip
    RunFile.objects.create(
        run=run, index=0, source_url="root://a//f", destination_url="root://b//f0", size=100 * MB, state="done",
        attempt=1, start=now - timedelta(seconds=15), end=now - timedelta(seconds=5), bytes=100 * MB,
    )  # fmt: skip
    for index in (1, 2):
        RunFile.objects.create(
            run=run, index=index, source_url="root://a//f", destination_url=f"root://b//f{index}", size=100 * MB,
            state="running", attempt=1, start=now - timedelta(seconds=5),
        )  # fmt: skip
    with time_machine.travel(now, tick=False):  # the estimate grows with the clock: read it at `now`
        page = panel(viewer, run)
    in_flight = page.split('id="bytes-in-flight"')[1].split("</dd>")[0]
    assert ">≈ 100 MB" in in_flight
    assert "0 as the workers last reported" in in_flight


def test_a_probes_page_says_nothing_of_copies_it_does_not_make(viewer: Client) -> None:
    probe_page = text(viewer.get(f"/challenges/runs/{network_run(state='running').pk}/"))
    assert 'id="probe-what"' in probe_page
    assert "A transfer run deletes the copies" not in probe_page
    assert "A transfer run deletes the copies" in text(viewer.get(f"/challenges/runs/{transfer_run().pk}/"))
