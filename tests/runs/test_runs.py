"""run_start, run_cancel, run_progress and the reaper, without workers: the rules, the files a run plans, the
figures it reports, and what the reaper does with lost files and overdue runs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import override_settings
from django.utils import timezone

from results.models import RateRollup, TransferRecord
from runs import dispatch
from runs.choices import FileState
from runs.clock import activities_auto_run
from runs.dispatch import worker_schemes
from runs.engine import file_claim, file_heartbeat, runs_stopped
from runs.models import Run, RunFile
from runs.reaper import HUNG_GRACE, runs_reap
from runs.selectors import run_progress
from runs.services import run_cancel, run_start
from sites.roles import membership_grant
from tests.challenges.factories import ActivityFactory, TargetFactory
from tests.sites.factories import (
    ExperimentFactory,
    NetworkHostFactory,
    SiteFactory,
    StorageEndpointFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

SOURCE = "root://127.0.0.1:31000//data"
DESTINATIONS = ["root://127.0.0.1:31002//data", "root://127.0.0.1:31004//data"]


@pytest.fixture(autouse=True)
def no_workers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """Record the tasks run_start would send instead of sending them (these tests have no worker)."""
    sent: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(dispatch, "prepare_send", lambda run_id, queue, **_: sent.append(("prepare", (run_id, queue))))
    monkeypatch.setattr(dispatch, "file_send", lambda *args, **_: sent.append(("file", args)))
    monkeypatch.setattr(dispatch, "served_queues", set)
    monkeypatch.setattr(dispatch, "copies_delete_send", lambda *args: sent.append(("copies", args)))
    return sent


@pytest.fixture
def coordinator() -> Any:
    user = UserFactory(username="coord")
    membership_grant(user=user, role="coordinator")
    return user


def adhoc(**overrides: Any) -> dict[str, Any]:
    return {"source": SOURCE, "destinations": DESTINATIONS, "file_size": 1000, "file_count": 5, **overrides}


def test_only_coordinators_start_runs() -> None:
    with pytest.raises(PermissionDenied):
        run_start(user=UserFactory(), kind="transfer", parameters=adhoc())
    assert not Run.objects.exists()


def test_a_transfer_run_plans_its_files_round_robin_over_the_destinations(
    coordinator: Any, django_capture_on_commit_callbacks: Any, no_workers: list[Any]
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(user=coordinator, kind="transfer", parameters=adhoc(concurrency=3))
    files = list(run.files.order_by("index"))
    assert [f.destination_url for f in files[:2]] == [
        f"{DESTINATIONS[0]}/portal-runs/{run.directory}/file-00000",
        f"{DESTINATIONS[1]}/portal-runs/{run.directory}/file-00001",
    ]
    assert {f.source_url for f in files} == {f"{SOURCE}/portal-testfiles/random-1000"}
    assert all(f.state == FileState.QUEUED and f.size == 1000 for f in files)
    assert run.parameters["concurrency"] == 3 and run.parameters["queue"] == "default"
    assert no_workers == [("prepare", (run.pk, "default"))]
    assert run.deadline is not None and run.deadline > timezone.now()


def test_bad_parameters_get_per_field_messages_and_create_nothing(coordinator: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        run_start(
            user=coordinator,
            kind="transfer",
            parameters=adhoc(file_count=0, concurrency="many", copy_mode="sideways", colour="red"),
        )
    errors = caught.value.message_dict
    assert "file_count must be from 1" in errors["file_count"][0]
    assert "whole number" in errors["concurrency"][0]
    assert "copy_mode" in errors
    assert "unknown parameter 'colour'" in errors["parameters"][0]
    assert not Run.objects.exists() and not RunFile.objects.exists()


def test_a_scheme_the_workers_cannot_speak_is_refused_by_name(coordinator: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        run_start(user=coordinator, kind="transfer", parameters=adhoc(destinations=["s3://bucket.example/x"]))
    message = caught.value.message_dict["destinations"][0]
    assert "the workers cannot speak s3://" in message and "root" in message
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("copy_mode", "source", "destination", "refused"),
    [
        ("pull", SOURCE, DESTINATIONS[0], "pull is an HTTP third-party copy"),
        ("push", "davs://127.0.0.1:31001/data", DESTINATIONS[0], "push is an HTTP third-party copy"),
        ("streamed", SOURCE, DESTINATIONS[0], "streamed copies need a davs:// or https:// end"),
        ("native", "davs://127.0.0.1:31001/data", DESTINATIONS[0], "need root:// sources and destinations"),
        ("pull", "davs://127.0.0.1:31001/data", "https://127.0.0.1:31003/data", ""),
        ("streamed", SOURCE, "davs://127.0.0.1:31003/data", ""),
        ("native", SOURCE, DESTINATIONS[0], ""),
        ("", SOURCE, DESTINATIONS[0], ""),
    ],
)
def test_a_copy_mode_the_endpoints_cannot_do_is_refused_not_replaced(
    coordinator: Any, copy_mode: str, source: str, destination: str, refused: str
) -> None:
    parameters = adhoc(source=source, destinations=[destination], copy_mode=copy_mode)
    if not refused:
        assert run_start(user=coordinator, kind="transfer", parameters=parameters).parameters["copy_mode"] == (
            copy_mode
        )
        return
    with pytest.raises(ValidationError) as caught:
        run_start(user=coordinator, kind="transfer", parameters=parameters)
    assert refused in caught.value.message_dict["copy_mode"][0]
    assert not Run.objects.exists()


def test_the_default_timeout_gives_big_files_time_and_a_given_one_is_kept(coordinator: Any) -> None:
    small = run_start(user=coordinator, kind="transfer", parameters=adhoc())
    big = run_start(user=coordinator, kind="transfer", parameters=adhoc(file_size=5 * 10**9))
    given = run_start(user=coordinator, kind="transfer", parameters=adhoc(file_size=5 * 10**9, timeout=60))
    assert (small.parameters["timeout"], big.parameters["timeout"], given.parameters["timeout"]) == (300, 1000, 60)


def test_the_default_stall_timeout_lets_a_big_file_be_checksummed_and_a_given_one_is_checked(coordinator: Any) -> None:
    small = run_start(user=coordinator, kind="transfer", parameters=adhoc())
    big = run_start(user=coordinator, kind="transfer", parameters=adhoc(file_size=20 * 10**9))
    off = run_start(user=coordinator, kind="transfer", parameters=adhoc(stall_timeout=0))
    stalls = (small.parameters["stall_timeout"], big.parameters["stall_timeout"], off.parameters["stall_timeout"])
    assert stalls == (120, 400, 0)  # 20 GB checksummed at 50 MB/s takes 400 s
    with pytest.raises(ValidationError) as caught:
        run_start(user=coordinator, kind="transfer", parameters=adhoc(stall_timeout=-5))
    assert caught.value.message_dict["stall_timeout"] == ["stall_timeout must be from 0 to 86400, not -5"]


def test_the_workers_speak_the_schemes_of_the_loaded_gfal2_plugins() -> None:
    assert {"root", "davs", "https", "file"} <= worker_schemes()
    assert "s3" not in worker_schemes()


def test_an_activity_run_takes_its_parameters_and_endpoints_from_the_activity(coordinator: Any) -> None:
    atlas = ExperimentFactory(name="ATLAS")
    source_site, destination_site = SiteFactory(experiments=[atlas]), SiteFactory(experiments=[atlas])
    StorageEndpointFactory(site=source_site, url=SOURCE)
    StorageEndpointFactory(site=destination_site, url=DESTINATIONS[0])
    activity = ActivityFactory(
        experiment=atlas, source=source_site, file_size=2000, file_count=4, concurrency=2, copy_mode=""
    )
    TargetFactory(activity=activity, site=destination_site)
    run = run_start(user=coordinator, activity=activity, parameters={"file_count": 3})
    assert run.parameters["file_size"] == 2000 and run.parameters["file_count"] == 3
    assert run.parameters["concurrency"] == 2 and run.parameters["experiment"] == "ATLAS"
    assert run.parameters["site"] == source_site.name
    assert run.files.count() == 3
    assert all(f.destination_url.startswith(DESTINATIONS[0] + "/portal-runs/") for f in run.files.all())


def test_an_activity_without_destinations_is_refused_with_a_hint(coordinator: Any) -> None:
    site = SiteFactory()
    StorageEndpointFactory(site=site, url=SOURCE)
    activity = ActivityFactory(source=site, file_size=1, file_count=1, concurrency=1)
    with pytest.raises(ValidationError) as caught:
        run_start(user=coordinator, activity=activity)
    assert "destination" in caught.value.message_dict["destinations"][0]


def test_a_site_with_a_worker_of_its_own_gets_its_own_queue(coordinator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    site = SiteFactory(name="TB-X")
    StorageEndpointFactory(site=site, url=SOURCE)
    monkeypatch.setattr(dispatch, "served_queues", lambda: {"site.TB-X", "default"})
    run = run_start(user=coordinator, kind="transfer", parameters=adhoc())
    assert run.parameters["queue"] == "site.TB-X"
    assert set(run.files.values_list("queue", flat=True)) == {"site.TB-X"}


def test_cancel_cancels_queued_files_and_ends_the_run(coordinator: Any) -> None:
    run = run_start(user=coordinator, kind="transfer", parameters=adhoc())
    RunFile.objects.filter(run=run, index=0).update(state=FileState.RUNNING, attempt=1, task_id="t")
    run = run_cancel(run, user=coordinator)
    assert run.state == "cancelled" and run.finished_at is not None
    states = dict(run.files.values_list("index", "state"))
    assert states == {0: "running", 1: "cancelled", 2: "cancelled", 3: "cancelled", 4: "cancelled"}
    assert runs_stopped([run.pk]) == {run.pk}  # what the workers' watchers read to abort copy 0
    with pytest.raises(ValidationError):
        run_cancel(run, user=coordinator)


def test_progress_counts_files_bytes_and_the_rate_of_the_last_minute(coordinator: Any) -> None:
    run = run_start(user=coordinator, kind="transfer", parameters=adhoc(file_size=10**6, concurrency=2))
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(state="running", started_at=now - timedelta(seconds=30))
    run.refresh_from_db()
    files = {f.index: f for f in run.files.all()}
    # two files of 1 MB each done within the last 30 s, one running, one failed, one queued
    for index in (0, 1):
        RunFile.objects.filter(pk=files[index].pk).update(
            state="done", bytes=10**6, start=now - timedelta(seconds=20), end=now - timedelta(seconds=10)
        )
    RunFile.objects.filter(pk=files[2].pk).update(state="running", task_id="x", attempt=1)
    RunFile.objects.filter(pk=files[3].pk).update(state="failed", end=now)
    progress = run_progress(run)
    assert (progress.files_total, progress.files_done, progress.files_failed) == (5, 2, 1)
    assert (progress.in_flight, progress.queued, progress.bytes_done) == (1, 1, 2 * 10**6)
    # over the 20 s since the first copy began (the run's 10 s of preparation before it moved nothing)
    assert progress.rate == pytest.approx(2e6 / 20, rel=0.02)
    # 2 files of 1 MB left on 2 slots, each at the 100 kB/s a copy took: one copy's time
    assert progress.eta_seconds == pytest.approx(10, rel=0.02)
    assert progress.to_dict()["started_at"].endswith("+00:00")


def test_copies_in_flight_count_in_the_rate_and_eta_by_what_their_workers_reported(coordinator: Any) -> None:
    """Two 5 GB copies started 100 s ago, nothing ended yet: the workers' heartbeats reported 1 GB and 2 GB copied,
    10 s ago (11.1 and 22.2 MB/s). Carried on at those rates for the 10 s since, they hold 1.11 and 2.22 GB, spread
    over [start, now): the last 60 s hold 60/100 of each. The slower copy ends last: 3.89 GB left at 11.1 MB/s."""
    run = run_start(user=coordinator, kind="transfer", parameters=adhoc(file_size=5 * 10**9, file_count=2))
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(state="running", started_at=now - timedelta(seconds=100))
    run.refresh_from_db()
    files = list(run.files.order_by("index"))
    for file in files:
        RunFile.objects.filter(pk=file.pk).update(state="running", attempt=1, start=now - timedelta(seconds=100))
    before = run_progress(run)
    assert (before.rate, before.bytes_in_flight) == (0.0, 0)
    reported = now - timedelta(seconds=10)
    file_heartbeat([f.pk for f in files], progress={files[0].pk: (10**9, reported), files[1].pk: (2 * 10**9, reported)})
    progress = run_progress(run)
    assert progress.bytes_in_flight == 3 * 10**9
    assert progress.bytes_in_flight_estimated == pytest.approx(3e9 * 100 / 90, rel=0.01)
    assert progress.rate == pytest.approx(3e9 * 100 / 90 * 60 / 100 / 60, rel=0.01)
    assert progress.eta_seconds == pytest.approx((5e9 - 1e9 * 100 / 90) / (1e9 / 90), rel=0.01)
    # a heartbeat with news of one copy keeps what the other last reported
    file_heartbeat([f.pk for f in files], progress={files[1].pk: (3 * 10**9, now)})
    assert dict(RunFile.objects.filter(run=run).values_list("pk", "progress_bytes")) == {
        files[0].pk: 10**9,
        files[1].pk: 3 * 10**9,
    }
    # a new try starts from nothing
    RunFile.objects.filter(pk=files[0].pk).update(state="queued", task_id="t2", attempt=2)
    claimed = file_claim(files[0].pk, 2, "t2", "w@host")
    assert claimed is not None and (claimed.progress_bytes, claimed.progress_at) == (0, None)


@override_settings(DISPATCH_WORKER_LOST_AFTER=30)
def test_the_reaper_retries_a_lost_file_once_then_fails_it_with_worker_lost(coordinator: Any) -> None:
    run = run_start(user=coordinator, kind="transfer", parameters=adhoc(file_count=1, concurrency=1))
    Run.objects.filter(pk=run.pk).update(state="running", started_at=timezone.now())
    stale = timezone.now() - timedelta(seconds=60)
    began = stale - timedelta(seconds=40)
    RunFile.objects.filter(run=run).update(
        state="running", attempt=1, task_id="t1", worker="w1@host", heartbeat=stale, start=began
    )
    first = runs_reap()
    assert first.files_retried == 1
    file = run.files.get()
    assert file.state == "queued" and file.attempt == 2 and file.task_id  # sent again at once as try 2
    RunFile.objects.filter(pk=file.pk).update(state="running", worker="w2@host", heartbeat=stale, start=stale)
    second = runs_reap()
    assert second.files_failed == 1
    file.refresh_from_db()
    assert file.state == "failed" and file.error.startswith("worker lost")
    run.refresh_from_db()
    assert run.state == "failed" and run.message.startswith("failed: none of 1 files ok (e.g. worker lost")
    records = TransferRecord.objects.filter(run=run).order_by("attempt")
    assert [(r.attempt, r.state, r.error_message[:11]) for r in records] == [
        (1, "failed", "worker lost"),
        (2, "failed", "worker lost"),
    ]
    # a lost try spans its start to its worker's last heartbeat, not the reaper's visit a minute later
    assert (records[0].start, records[0].end) == (began, stale)
    assert sum(RateRollup.objects.values_list("files_failed", flat=True)) == 2


def test_the_reaper_fails_a_run_past_its_deadline(coordinator: Any) -> None:
    run = run_start(user=coordinator, kind="transfer", parameters=adhoc(max_duration=60))
    summary = runs_reap(now=timezone.now() + timedelta(seconds=61))
    run.refresh_from_db()
    assert summary.runs_failed == 1 and run.state == "failed" and "deadline passed" in run.message
    assert set(run.files.values_list("state", flat=True)) == {"cancelled"}


@override_settings(DISPATCH_WORKER_LOST_AFTER=30)
def test_a_copy_still_running_past_its_timeout_is_ended_as_hung_not_as_a_lost_worker(coordinator: Any) -> None:
    run = run_start(user=coordinator, kind="transfer", parameters=adhoc(file_count=1, concurrency=1, timeout=60))
    Run.objects.filter(pk=run.pk).update(state="running", started_at=timezone.now())
    started = timezone.now() - timedelta(seconds=60 + HUNG_GRACE + 5)  # its worker stopped beating for it
    RunFile.objects.filter(run=run).update(
        state="running", attempt=1, task_id="t1", worker="w1@host", heartbeat=started, start=started
    )
    assert runs_reap().files_retried == 1
    record = TransferRecord.objects.get(run=run)
    assert record.state == "failed" and record.error_message.startswith("timed out: try 1 was still running")


@override_settings(DISPATCH_WORKER_LOST_AFTER=30)
@pytest.mark.parametrize(("ended_as", "file_state"), [("cancelled", "cancelled"), ("failed", "failed")])
def test_a_file_left_running_in_an_ended_run_by_a_dead_worker_ends_with_its_record(
    coordinator: Any, ended_as: str, file_state: str
) -> None:
    run = run_start(user=coordinator, kind="transfer", parameters=adhoc(file_count=2, concurrency=2))
    stale = timezone.now() - timedelta(seconds=60)
    Run.objects.filter(pk=run.pk).update(state=ended_as, started_at=stale, finished_at=timezone.now())
    RunFile.objects.filter(run=run, index=0).update(
        state="running", attempt=1, task_id="t1", worker="w1@host", heartbeat=stale, start=stale
    )
    RunFile.objects.filter(run=run, index=1).update(
        state="running", attempt=1, task_id="t2", worker="w2@host", heartbeat=timezone.now(), start=stale
    )
    assert runs_reap().files_failed == 1
    states = dict(RunFile.objects.filter(run=run).values_list("index", "state"))
    assert states == {0: file_state, 1: "running"}  # the other's worker still answers: it will report itself
    record = TransferRecord.objects.get(run=run)
    assert record.state == file_state and f"after its run ended ({ended_as})" in record.error_message
    assert run_progress(run).in_flight == 1


# --- probe activities take their parameters from the plan; the clock's auto-run ------------------------------------


def test_a_network_activity_runs_iperf3_to_its_target_sites_network_host(coordinator: Any) -> None:
    site = SiteFactory()
    NetworkHostFactory(site=site, address="ps.example.org:5202")
    activity = ActivityFactory(kind="network", experiment=ExperimentFactory())
    TargetFactory(activity=activity, site=site, direction="in")
    run = run_start(user=coordinator, activity=activity, parameters={"duration": 5})
    assert (run.parameters["host"], run.parameters["port"], run.parameters["duration"]) == ("ps.example.org", 5202, 5)


def test_a_network_activity_whose_sites_have_no_network_host_says_so(coordinator: Any) -> None:
    activity = ActivityFactory(kind="network")
    target = TargetFactory(activity=activity)
    with pytest.raises(ValidationError) as caught:
        run_start(user=coordinator, activity=activity)
    assert caught.value.message_dict["host"] == [
        f"none of the activity's sites ({target.site.name}) has a network host: give host"
    ]
    assert not Run.objects.exists()


def test_an_io_activity_writes_to_a_disk_endpoint_of_its_site_with_its_file_size(coordinator: Any) -> None:
    site = SiteFactory()
    StorageEndpointFactory(site=site, url="davs://se.example.org:443/data")
    StorageEndpointFactory(site=site, url="root://se.example.org:1094//data")
    StorageEndpointFactory(site=site, url="root://tape.example.org:1094//data", kind="tape")
    activity = ActivityFactory(kind="io", file_size=5000)
    site.experiments.add(activity.experiment)  # its endpoints serve the site's experiments
    TargetFactory(activity=activity, site=site)
    run = run_start(user=coordinator, activity=activity)
    assert (run.parameters["endpoint"], run.parameters["file_size"]) == ("root://se.example.org:1094//data", 5000)


def test_a_recall_activity_stages_what_the_challenges_tape_writes_put_on_its_tape(coordinator: Any) -> None:
    """A-DT after DT: the staging activity's files are the newest files tape-write runs of the same challenge wrote
    to its site's tape endpoint (up to its file count); files of other challenges or other endpoints are not."""
    tape_site = SiteFactory()
    tape = "root://tape.example.org:1094//data"
    StorageEndpointFactory(site=tape_site, url=tape, kind="tape")
    write = ActivityFactory(kind="tape-write")
    recall = ActivityFactory(kind="staging", challenge=write.challenge, file_count=2, experiment=write.experiment)
    tape_site.experiments.add(write.experiment)  # its tape endpoint serves the site's experiments
    TargetFactory(activity=recall, site=tape_site, direction="out")
    with pytest.raises(ValidationError) as caught:
        run_start(user=coordinator, activity=recall)
    assert "run the tape-write (DT) activity first, or give urls" in caught.value.message_dict["urls"][0]
    now = timezone.now()
    written = Run.objects.create(activity=write, kind="tape-write", state="finished")
    other = Run.objects.create(activity=ActivityFactory(kind="tape-write"), kind="tape-write", state="finished")
    for index, (run, url, state) in enumerate(
        [
            (written, f"{tape}/portal-runs/run-1/file-00000", FileState.DONE),
            (written, f"{tape}/portal-runs/run-1/file-00001", FileState.DONE),
            (written, f"{tape}/portal-runs/run-1/file-00002", FileState.DONE),
            (written, f"{tape}/portal-runs/run-1/file-00003", FileState.FAILED),
            (written, "root://disk.example.org:1094//data/portal-runs/run-1/file-00004", FileState.DONE),
            (other, f"{tape}/portal-runs/run-2/file-00000", FileState.DONE),
        ]
    ):
        RunFile.objects.create(
            run=run,
            index=index,
            source_url=SOURCE,
            destination_url=url,
            state=state,
            end=now + timedelta(seconds=index),
        )
    run = run_start(user=coordinator, activity=recall)
    assert run.parameters["urls"] == [f"{tape}/portal-runs/run-1/file-00002", f"{tape}/portal-runs/run-1/file-00001"]
    assert run.parameters["site"] == tape_site.name


def auto_run_activity(now: Any, **extra: Any) -> Any:
    """An auto-run transfer activity open at `now` (for an hour), from a site to a target site whose endpoints serve
    its experiment."""
    site, destination = SiteFactory(), SiteFactory()
    StorageEndpointFactory(site=site, url=SOURCE)
    StorageEndpointFactory(site=destination, url=DESTINATIONS[0])
    activity = ActivityFactory(
        source=site,
        file_size=1000,
        file_count=2,
        concurrency=1,
        auto_run=True,
        start=now - timedelta(minutes=1),
        end=now + timedelta(hours=1),
        **extra,
    )
    TargetFactory(activity=activity, site=destination)
    for served in (site, destination):
        served.experiments.add(activity.experiment)
    return activity


def test_the_clock_starts_an_auto_run_activity_once_and_cancels_it_when_its_window_closes() -> None:
    now = timezone.now().replace(microsecond=0)
    activity = auto_run_activity(now)
    site = activity.source
    ActivityFactory(source=site, file_size=1000, file_count=2, auto_run=False, start=activity.start, end=activity.end)
    assert activities_auto_run(now=now - timedelta(minutes=2)) == []  # not open yet
    started = activities_auto_run(now=now)
    assert [run.activity for run in started] == [activity]
    run = started[0]
    assert (run.parameters["trigger"], run.created_by, run.files.count()) == ("schedule", None, 2)
    run.refresh_from_db()
    assert run.deadline <= activity.end + timedelta(minutes=5)
    assert activities_auto_run(now=now + timedelta(minutes=1)) == []  # once per window
    assert Run.objects.count() == 1
    activities_auto_run(now=activity.end)
    run.refresh_from_db()
    assert run.state == "cancelled" and run.message == "the activity's window closed"


def test_a_repeating_auto_run_keeps_one_run_going_and_stops_after_a_failed_one() -> None:
    now = timezone.now().replace(microsecond=0)
    activity = auto_run_activity(now, auto_run_repeat=True)
    first = activities_auto_run(now=now)
    assert [run.activity for run in first] == [activity]
    assert activities_auto_run(now=now) == []  # one at a time: the first still runs
    Run.objects.filter(pk=first[0].pk).update(state="finished", finished_at=now)
    second = activities_auto_run(now=now + timedelta(seconds=30))
    assert len(second) == 1 and second[0].pk != first[0].pk  # the load goes on
    Run.objects.filter(pk=second[0].pk).update(state="failed", finished_at=now)
    assert activities_auto_run(now=now + timedelta(minutes=1)) == []  # a failure stops it: no retry every 30 s
    assert Run.objects.filter(activity=activity).count() == 2


def test_an_auto_run_the_clock_cannot_start_is_kept_as_a_failed_run_with_the_reason() -> None:
    now = timezone.now().replace(microsecond=0)
    activity = ActivityFactory(auto_run=True, start=now - timedelta(minutes=1), end=now + timedelta(hours=1))
    assert activities_auto_run(now=now) == []
    refused = Run.objects.get(activity=activity)
    assert refused.state == "failed" and refused.parameters["trigger"] == "schedule"
    assert refused.message.startswith("the clock could not start this activity: ")
    assert "source" in refused.message
    assert activities_auto_run(now=now + timedelta(minutes=1)) == []
    assert Run.objects.filter(activity=activity).count() == 1  # not retried every 30 s
