"""States that say what happened, liveness of one-task probes, and what runs do with their copies: the rules,
without workers (tasks are recorded, not sent)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings
from django.utils import timezone

from measure.outcomes import FileOutcome, utcnow
from measure.transfer import DESTINATION_FULL, EXISTS, STALLED
from runs.choices import CopiesState, FileState
from runs.copies import run_copies_delete, run_copies_to_delete
from runs.engine import file_claim, file_finish, run_space_problem
from runs.models import Run, RunFile
from runs.probes.runs import run_probe_begin, run_probe_store, runs_heartbeat
from runs.reaper import runs_reap
from runs.services import run_cancel, run_start
from sites.roles import membership_grant
from tests.challenges.factories import ActivityFactory, TargetFactory
from tests.sites.factories import ExperimentFactory, SiteFactory, StorageEndpointFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sent")]

SOURCE = "root://127.0.0.1:31000//data"
DESTINATION = "root://127.0.0.1:31002//data"


@pytest.fixture
def coordinator() -> Any:
    user = UserFactory(username="coord")
    membership_grant(user=user, role="coordinator")
    return user


def transfer(coordinator: Any, **overrides: Any) -> Run:
    parameters = {"source": SOURCE, "destinations": [DESTINATION], "file_size": 1000, "file_count": 3, **overrides}
    run = run_start(user=coordinator, kind="transfer", parameters=parameters)
    Run.objects.filter(pk=run.pk).update(state="running", started_at=timezone.now())
    return run


def copy_ended(run: Run, index: int, *, ok: bool, error: str = "", cause: str = "") -> None:
    """File `index` was sent, copied (or not) and its try ended, through the engine as a worker would."""
    RunFile.objects.filter(run=run, index=index).update(state="running", attempt=1, task_id=f"t{index}")
    file = RunFile.objects.get(run=run, index=index)
    now = utcnow()
    outcome = FileOutcome(
        file.source_url, file.destination_url, 1000 if ok else 0, now, now, ok, error=error, details={"cause": cause}
    )
    assert file_finish(file.pk, 1, f"t{index}", outcome)


def test_a_run_whose_every_file_failed_says_failed_with_an_error(coordinator: Any) -> None:
    run = transfer(coordinator, concurrency=3)
    for index in range(3):
        copy_ended(run, index, ok=False, error="destination refused the write: 403")
    run.refresh_from_db()
    assert run.state == "failed"
    assert run.message == "failed: none of 3 files ok (e.g. destination refused the write: 403)"


def test_a_run_with_some_failures_is_partly_finished_with_the_count(coordinator: Any) -> None:
    run = transfer(coordinator, concurrency=3)
    copy_ended(run, 0, ok=True)
    copy_ended(run, 1, ok=False, error="checksum mismatch")
    copy_ended(run, 2, ok=True)
    run.refresh_from_db()
    assert (run.state, run.get_state_display(), run.message) == (
        "partly",
        "finished with failures",
        "finished with 1 of 3 failed",
    )


def test_a_run_whose_files_all_succeeded_is_finished(coordinator: Any) -> None:
    run = transfer(coordinator, concurrency=3)
    for index in range(3):
        copy_ended(run, index, ok=True)
    run.refresh_from_db()
    assert (run.state, run.message) == ("finished", "finished: 3 of 3 files ok")


def test_a_full_destination_stops_the_run_at_once_not_file_after_file(coordinator: Any) -> None:
    run = transfer(coordinator, file_count=10, concurrency=2)
    copy_ended(run, 0, ok=False, error="destination full: No space left on device", cause=DESTINATION_FULL)
    run.refresh_from_db()
    assert run.state == "failed" and run.message.startswith("destination full: No space left on device")
    states = list(run.files.order_by("index").values_list("state", flat=True))
    assert states[0] == "failed" and states[2:] == ["cancelled"] * 8


def test_an_ended_run_deletes_its_copies_once_nothing_is_in_flight(
    coordinator: Any, sent: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    run = transfer(coordinator, concurrency=3)
    assert run.copies == CopiesState.PRESENT
    with django_capture_on_commit_callbacks(execute=True):
        copy_ended(run, 0, ok=True)
        copy_ended(run, 1, ok=True)
    assert not [task for task in sent if task[0] == "copies"]  # file 2 still to come
    with django_capture_on_commit_callbacks(execute=True):
        copy_ended(run, 2, ok=True)
    run.refresh_from_db()
    assert run.copies == CopiesState.DELETING
    assert [task for task in sent if task[0] == "copies"] == [("copies", (run.pk, "default"))]


def test_a_cancelled_run_deletes_its_copies_after_its_last_copy_in_flight(
    coordinator: Any, sent: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    run = transfer(coordinator, concurrency=1)
    RunFile.objects.filter(run=run, index=0).update(state="running", attempt=1, task_id="t0")
    run = run_cancel(run, user=coordinator)
    assert run.copies == CopiesState.PRESENT  # copy 0 may still write: not yet
    file = RunFile.objects.get(run=run, index=0)
    now = utcnow()
    cancelled = FileOutcome(
        file.source_url, file.destination_url, 0, now, now, False, "cancelled", details={"cancelled": True}
    )
    with django_capture_on_commit_callbacks(execute=True):
        file_finish(file.pk, 1, "t0", cancelled)
    run.refresh_from_db()
    assert run.copies == CopiesState.DELETING
    assert ("copies", (run.pk, "default")) in sent


def test_keep_copies_keeps_them_and_a_coordinator_deletes_them_on_request(
    coordinator: Any, sent: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    run = transfer(coordinator, concurrency=3, keep_copies=True)
    for index in range(3):
        copy_ended(run, index, ok=True)
    run.refresh_from_db()
    assert run.copies == CopiesState.KEPT and not [task for task in sent if task[0] == "copies"]
    with pytest.raises(Exception, match="Only coordinators"):
        run_copies_delete(run, user=UserFactory())
    with django_capture_on_commit_callbacks(execute=True):
        run = run_copies_delete(run, user=coordinator)
    assert run.copies == CopiesState.DELETING and ("copies", (run.pk, "default")) in sent
    with pytest.raises(ValidationError):
        run_copies_delete(Run.objects.create(kind="network", state="finished"), user=coordinator)


def test_a_tape_write_keeps_its_copies_by_default_for_the_recalls(coordinator: Any) -> None:
    run = run_start(
        user=coordinator,
        kind="tape-write",
        parameters={"source": SOURCE, "destinations": [DESTINATION], "file_size": 1000, "file_count": 1},
    )
    assert run.parameters["keep_copies"] is True
    assert transfer(coordinator).parameters["keep_copies"] is False
    with pytest.raises(ValidationError) as caught:
        transfer(coordinator, keep_copies="yes")
    assert "keep_copies must be true or false" in caught.value.message_dict["keep_copies"][0]


def test_the_clean_up_deletes_every_try_of_every_sent_file_and_the_run_directory(coordinator: Any) -> None:
    run = transfer(coordinator, file_count=2)
    first = RunFile.objects.get(run=run, index=0)
    tries = [first.destination_url, f"{first.destination_url}.try2"]
    RunFile.objects.filter(pk=first.pk).update(attempt=2, destination_url=tries[1], written=tries)
    wanted = run_copies_to_delete(run.pk)
    assert wanted.urls == tries  # file 1 never sent
    assert wanted.directories == [f"{DESTINATION}/portal-runs/{run.directory}"]


def claimed(run: Run, index: int) -> RunFile:
    """File `index` sent (try attempt+1) and claimed by a worker, as the engine and a task do."""
    file = RunFile.objects.get(run=run, index=index)
    RunFile.objects.filter(pk=file.pk).update(attempt=file.attempt + 1, task_id=f"t{index}-{file.attempt + 1}")
    found = file_claim(file.pk, file.attempt + 1, f"t{index}-{file.attempt + 1}", "w@host")
    assert found is not None
    return found


def ended(file: RunFile, *, ok: bool, cause: str = "") -> RunFile:
    now = utcnow()
    outcome = FileOutcome(
        file.source_url, file.destination_url, 1000 if ok else 0, now, now, ok, details={"cause": cause}
    )
    assert file_finish(file.pk, file.attempt, file.task_id, outcome)
    return RunFile.objects.get(pk=file.pk)


def test_each_try_records_the_name_it_writes_and_the_clean_up_deletes_those(coordinator: Any) -> None:
    run = transfer(coordinator, file_count=2)
    first = claimed(run, 0)
    assert first.written == [first.destination_url]
    stalled = ended(first, ok=False, cause=STALLED)  # tried again under a name of its own
    assert stalled.state == "queued" and stalled.destination_url.endswith(".try2")
    second = ended(claimed(run, 0), ok=True)
    assert second.written == [first.destination_url, f"{first.destination_url}.try2"]
    assert run_copies_to_delete(run.pk).urls == second.written  # file 1 was never sent: nothing of it


def test_a_try_refused_because_the_name_was_taken_leaves_that_name_out_of_the_clean_up(coordinator: Any) -> None:
    run = transfer(coordinator, file_count=1)
    refused = ended(claimed(run, 0), ok=False, cause=EXISTS)
    assert refused.state == "failed" and refused.written == []
    assert run_copies_to_delete(run.pk).urls == []


def test_a_message_delivered_twice_records_its_name_once(coordinator: Any) -> None:
    run = transfer(coordinator, file_count=1)
    file = claimed(run, 0)
    RunFile.objects.filter(pk=file.pk).update(state="queued")  # as if the claim had not been seen
    again = file_claim(file.pk, file.attempt, file.task_id, "w@host")
    assert again is not None and again.written == [file.destination_url]


def test_the_reaper_settles_the_copies_of_a_run_whose_end_it_did_not_see(coordinator: Any, sent: list[Any]) -> None:
    run = transfer(coordinator, file_count=1)
    Run.objects.filter(pk=run.pk).update(state="failed", finished_at=timezone.now())
    RunFile.objects.filter(run=run).update(state="failed", attempt=1, recorded=True)
    assert runs_reap().cleanups_sent == 1
    run.refresh_from_db()
    assert run.copies == CopiesState.DELETING


def test_a_run_that_cannot_fit_is_refused_with_the_numbers(coordinator: Any) -> None:
    run = transfer(coordinator, file_size=4 * 10**9, file_count=3)
    problem = run_space_problem(run, free_space=lambda url: 10 * 10**9 if url == DESTINATION else None)
    assert problem.startswith(f"not enough space at {DESTINATION}: this run writes 12 GB there and 10 GB are free")
    assert run_space_problem(run, free_space=lambda url: None) == ""  # no endpoint tells: nothing to refuse


# --- one-task probes: alive while they beat, results kept whatever ended them --------------------------------------


def network_run(coordinator: Any) -> Run:
    return run_start(user=coordinator, kind="network", parameters={"host": "127.0.0.1", "port": 5201, "duration": 50})


@override_settings(DISPATCH_WORKER_LOST_AFTER=30)
def test_the_reaper_leaves_a_long_probe_alone_while_it_beats(coordinator: Any) -> None:
    run = network_run(coordinator)
    run_probe_begin(run.pk)
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(minutes=10))
    runs_heartbeat([run.pk])
    runs_reap()
    run.refresh_from_db()
    assert run.state == "running" and run.summary == {}


@override_settings(DISPATCH_WORKER_LOST_AFTER=30)
def test_the_reaper_fails_a_probe_whose_worker_stopped_beating(coordinator: Any) -> None:
    run = network_run(coordinator)
    run_probe_begin(run.pk)
    Run.objects.filter(pk=run.pk).update(heartbeat=timezone.now() - timedelta(seconds=45))
    assert runs_reap().runs_failed == 1
    run.refresh_from_db()
    assert run.state == "failed" and run.message.startswith("worker lost: the worker running this network probe")


def test_what_a_cancelled_probe_measured_is_kept_with_the_cancel(coordinator: Any) -> None:
    run = network_run(coordinator)
    run_probe_begin(run.pk)
    run_cancel(run, user=coordinator)
    run_probe_store(run.pk, [], {"ok": True, "rate": 1.5e9, "pscheduler": {"interrupted": "interrupt"}})
    run.refresh_from_db()
    assert run.state == "cancelled" and run.summary["rate"] == 1.5e9
    assert run.message.endswith("(what the probe measured until then is kept)")


def test_a_staging_probe_with_some_files_failed_is_partly_finished(coordinator: Any) -> None:
    run = run_start(user=coordinator, kind="staging", parameters={"urls": [f"{DESTINATION}/a", f"{DESTINATION}/b"]})
    run_probe_begin(run.pk)
    now = utcnow()
    outcomes = [
        FileOutcome(f"{DESTINATION}/a", "", 10, now, now, True, mode="stage"),
        FileOutcome(f"{DESTINATION}/b", "", 0, now, now, False, "staging timeout", mode="stage"),
    ]
    run_probe_store(run.pk, outcomes, {"files": 2})
    run.refresh_from_db()
    assert (run.state, run.message) == ("partly", "finished with 1 of 2 failed")


# --- recalls (A-DT) read their own experiment's tape writes, through the door the run names ----------------------


def test_a_recall_reads_its_own_experiments_tape_writes_through_the_tape_rest_door(coordinator: Any) -> None:
    tape_site = SiteFactory()
    root_door = "root://tape.example.org:1094//data"
    rest_door = "davs://tape.example.org:8443/data"
    StorageEndpointFactory(site=tape_site, url=root_door, kind="tape")
    StorageEndpointFactory(site=tape_site, url=rest_door, kind="tape")
    mine, theirs = ExperimentFactory(name="ATLAS-R"), ExperimentFactory(name="CMS-R")
    write = ActivityFactory(kind="tape-write", experiment=mine)
    other = ActivityFactory(kind="tape-write", experiment=theirs, challenge=write.challenge)
    recall = ActivityFactory(kind="staging", challenge=write.challenge, experiment=mine)
    tape_site.experiments.add(mine)  # its tape endpoints serve the site's experiments
    TargetFactory(activity=recall, site=tape_site, direction="out")
    now = timezone.now()
    for index, (activity, name) in enumerate([(write, "mine"), (other, "theirs")]):
        dt = Run.objects.create(activity=activity, kind="tape-write", state="finished")
        RunFile.objects.create(
            run=dt,
            index=0,
            source_url=SOURCE,
            destination_url=f"{root_door}/portal-runs/run-{dt.pk}/{name}",
            state=FileState.DONE,
            end=now + timedelta(seconds=index),
        )
    run = run_start(user=coordinator, activity=recall)
    dt_run = Run.objects.get(activity=write)
    assert run.parameters["urls"] == [f"{rest_door}/portal-runs/run-{dt_run.pk}/mine"]
    assert (run.parameters["endpoint"], run.parameters["recalls_runs"]) == (rest_door, [dt_run.pk])
    through_root = run_start(user=coordinator, activity=recall, parameters={"endpoint": root_door})
    assert through_root.parameters["urls"] == [f"{root_door}/portal-runs/run-{dt_run.pk}/mine"]
    picked = run_start(user=coordinator, activity=recall, parameters={"recall_run": Run.objects.get(activity=other).pk})
    assert picked.parameters["urls"][0].endswith("/theirs")
    with pytest.raises(ValidationError) as caught:
        run_start(user=coordinator, activity=recall, parameters={"endpoint": "root://elsewhere:1//x"})
    assert "is not a tape endpoint of" in caught.value.message_dict["endpoint"][0]
