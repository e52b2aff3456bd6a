"""One writer of a run's end (runs.ends.run_end): every path that ends a run goes through it, and sends
runs.signals.run_ended once; ending an ended run changes nothing and says so, also when two ends come at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from measure.outcomes import FileOutcome, utcnow
from measure.transfer import DESTINATION_FULL
from runs.clock import activities_auto_run
from runs.ends import run_end
from runs.engine import file_finish, run_prepare
from runs.models import Run, RunFile
from runs.probes.runs import run_probe_begin, run_probe_store
from runs.reaper import runs_reap
from runs.services import run_cancel, run_start
from runs.signals import run_ended
from tests.challenges.factories import ActivityFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sent")]

SOURCE = "root://127.0.0.1:31000//data"
DESTINATION = "root://127.0.0.1:31002//data"


@pytest.fixture
def ended() -> Iterator[list[tuple[int, str]]]:
    """The ends runs.signals.run_ended announced, as (run id, state) in the order they came."""
    heard: list[tuple[int, str]] = []

    def hear(sender: Any, run: Run, **kwargs: Any) -> None:
        heard.append((run.pk, run.state))

    run_ended.connect(hear, dispatch_uid="test-run-end")
    yield heard
    run_ended.disconnect(dispatch_uid="test-run-end")


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


def network_run(coordinator: Any) -> Run:
    return run_start(user=coordinator, kind="network", parameters={"host": "127.0.0.1", "port": 5201, "duration": 50})


# --- every former writer of a run's end goes through run_end ------------------------------------------------------


def engine_last_file(coordinator: Any) -> tuple[Run, str]:
    run = transfer(coordinator, file_count=1)
    copy_ended(run, 0, ok=True)
    return run, "finished"


def engine_full_destination(coordinator: Any) -> tuple[Run, str]:
    run = transfer(coordinator, file_count=3, concurrency=1)
    copy_ended(run, 0, ok=False, error="destination full: No space left on device", cause=DESTINATION_FULL)
    return run, "failed"


def engine_prepare_refused(coordinator: Any) -> tuple[Run, str]:
    run = run_start(
        user=coordinator,
        kind="transfer",
        parameters={"source": SOURCE, "destinations": [DESTINATION], "file_size": 1000, "file_count": 3},
    )
    run_prepare(run.pk, ensure_test_file=lambda url, size: url, free_space=lambda url: 10)
    return run, "failed"


def reaper_deadline(coordinator: Any) -> tuple[Run, str]:
    run = transfer(coordinator, max_duration=60)
    runs_reap(now=timezone.now() + timedelta(seconds=61), broker_lost=False)
    return run, "failed"


@override_settings(DISPATCH_WORKER_LOST_AFTER=30)
def reaper_lost_probe(coordinator: Any) -> tuple[Run, str]:
    run = network_run(coordinator)
    run_probe_begin(run.pk)
    Run.objects.filter(pk=run.pk).update(heartbeat=timezone.now() - timedelta(seconds=45))
    runs_reap(broker_lost=False)
    return run, "failed"


def probe_stored(coordinator: Any) -> tuple[Run, str]:
    run = network_run(coordinator)
    run_probe_begin(run.pk)
    run_probe_store(run.pk, [], {"ok": True, "rate": 1.5e9})
    return run, "finished"


def cancelled(coordinator: Any) -> tuple[Run, str]:
    run = transfer(coordinator)
    run_cancel(run, user=coordinator)
    return run, "cancelled"


def clock_refused(coordinator: Any) -> tuple[Run, str]:
    now = timezone.now().replace(microsecond=0)
    activity = ActivityFactory(auto_run=True, start=now - timedelta(minutes=1), end=now + timedelta(hours=1))
    activities_auto_run(now=now)
    return Run.objects.get(activity=activity), "failed"


@pytest.mark.parametrize(
    "path",
    [
        engine_last_file,
        engine_full_destination,
        engine_prepare_refused,
        reaper_deadline,
        reaper_lost_probe,
        probe_stored,
        cancelled,
        clock_refused,
    ],
)
def test_every_path_that_ends_a_run_ends_it_through_run_end_once(
    path: Callable[[Any], tuple[Run, str]], coordinator: Any, ended: list[tuple[int, str]]
) -> None:
    run, state = path(coordinator)
    run.refresh_from_db()
    assert ended == [(run.pk, state)]
    assert run.state == state and run.finished_at is not None and run.message
    assert not run.files.filter(state="queued").exists()


# --- what run_end does, once ---------------------------------------------------------------------------------------


def test_run_end_ends_the_run_cancels_its_queued_files_and_sends_the_copies_deletion_after_the_commit(
    coordinator: Any, sent: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    run = transfer(coordinator)
    RunFile.objects.filter(run=run, index=0).update(state="done", attempt=1, recorded=True, written=["x"])
    run.refresh_from_db()
    at = timezone.now()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        end = run_end(run_id=run.pk, state="failed", message="stopped", files_error="never sent", now=at)
        assert ("copies", (run.pk, "default")) not in sent  # not before the commit
    assert end.ended and callbacks
    run.refresh_from_db()
    assert (run.state, run.finished_at, run.message, run.copies) == ("failed", at, "stopped", "deleting")
    assert set(run.files.exclude(index=0).values_list("state", "error", "end")) == {("cancelled", "never sent", at)}
    assert [kind for kind, _ in sent].count("copies") == 1


def test_ending_an_ended_run_changes_nothing_and_says_so(
    coordinator: Any, sent: list[Any], ended: list[tuple[int, str]]
) -> None:
    run = transfer(coordinator)
    first = run_end(run_id=run.pk, state="cancelled", message="cancelled by coord")
    second = run_end(run_id=run.pk, state="failed", message="deadline passed")
    run.refresh_from_db()
    assert (first.ended, second.ended) == (True, False)
    assert (run.state, run.message, run.finished_at) == ("cancelled", "cancelled by coord", first.run.finished_at)
    assert (second.run.state, second.run.message) == ("cancelled", "cancelled by coord")
    assert ended == [(run.pk, "cancelled")]


def test_run_end_refuses_a_state_that_is_not_an_end(coordinator: Any) -> None:
    run = transfer(coordinator)
    with pytest.raises(ValueError, match="'running' is not an ended state"):
        run_end(run_id=run.pk, state="running", message="x")
    run.refresh_from_db()
    assert run.state == "running" and run.finished_at is None


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_two_ends_at_once_one_wins_and_the_other_waits_then_changes_nothing(
    coordinator: Any, ended: list[tuple[int, str]]
) -> None:
    """A cancel holds its transaction open; the reaper's deadline, on another connection, waits at the run's row,
    then finds the run ended: the cancel's state and reason stay, and the end is announced once."""
    run = transfer(coordinator)
    cancel_ended, cancel_may_commit = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def cancel() -> None:
        with transaction.atomic():
            results["cancel"] = run_end(run_id=run.pk, state="cancelled", message="cancelled by coord").ended
            cancel_ended.set()
            cancel_may_commit.wait(10)
            results["cancel_committed"] = time.monotonic()
        connection.close()

    def deadline() -> None:
        cancel_ended.wait(10)
        results["deadline"] = run_end(run_id=run.pk, state="failed", message="deadline passed").ended
        results["deadline_done"] = time.monotonic()
        connection.close()

    threads = [threading.Thread(target=cancel), threading.Thread(target=deadline)]
    for thread in threads:
        thread.start()
    cancel_ended.wait(10)
    time.sleep(0.5)  # the deadline's end is now waiting for the run's row
    assert "deadline" not in results
    cancel_may_commit.set()
    for thread in threads:
        thread.join(20)
    assert (results["cancel"], results["deadline"]) == (True, False)
    assert results["deadline_done"] >= results["cancel_committed"]
    run.refresh_from_db()
    assert (run.state, run.message) == ("cancelled", "cancelled by coord")
    assert ended == [(run.pk, "cancelled")]
