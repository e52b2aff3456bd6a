"""Every task of the project has time limits of its own, below the global default (six hours, which only a task
that forgot its own would get), and the messages of a run's tasks carry limits from the run's own timeouts."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from portal.celery import app
from runs import dispatch
from runs.limits import COPY_GRACE, DEADLINE_GRACE, copy_task_limits, prepare_task_limits
from runs.services import run_start

# The apps whose tasks are the project's (Celery's own, such as celery.backend_cleanup, keep Celery's defaults).
PROJECT_PREFIXES = ("portal.", "runs.", "results.", "live.", "ingest.", "sweeps.", "reports.", "challenges.", "sites.")


def project_tasks() -> dict[str, Any]:
    app.loader.import_default_modules()  # autodiscovery: every app's tasks.py, as a worker loads them
    return {name: task for name, task in app.tasks.items() if name.startswith(PROJECT_PREFIXES)}


def test_the_registry_holds_the_tasks_of_every_app_that_has_some() -> None:
    apps = {name.split(".")[0] for name in project_tasks()}
    assert apps >= {"portal", "runs", "results", "live", "ingest", "sweeps"}


@pytest.mark.parametrize("name", sorted(project_tasks()))
def test_each_task_has_a_soft_and_a_hard_limit_below_the_global_default(name: str) -> None:
    task = project_tasks()[name]
    assert task.soft_time_limit is not None and task.time_limit is not None, f"{name} inherits the global limits"
    assert 0 < task.soft_time_limit < task.time_limit, name
    assert (
        task.soft_time_limit < settings.CELERY_TASK_SOFT_TIME_LIMIT
        and task.time_limit < settings.CELERY_TASK_TIME_LIMIT
    ), name


def test_beat_ticks_end_within_a_few_minutes() -> None:
    tasks = project_tasks()
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        task = tasks[str(entry["task"])]
        assert task.time_limit <= 660, f"{task.name}: a beat tick may run {task.time_limit} s"


def test_a_copy_may_run_its_timeout_and_a_grace_before_its_soft_limit() -> None:
    assert copy_task_limits({"timeout": 1000}) == (1000 + COPY_GRACE, 1000 + COPY_GRACE + 60)


def test_a_run_without_a_timeout_gets_the_default_copy_timeouts_limits() -> None:
    assert copy_task_limits({}) == copy_task_limits({"timeout": 300})


def test_a_runs_first_task_may_run_until_the_runs_deadline_and_a_grace() -> None:
    now = timezone.now()
    soft, hard = prepare_task_limits(now + timedelta(hours=2), now=now)
    assert (soft, hard) == (7200 + DEADLINE_GRACE, 7200 + DEADLINE_GRACE + 60)


def queued_message(queue: str, *, args: str | None = None) -> dict[str, Any]:
    """The message waiting in `queue` on the real broker (kombu keeps a queue as a Redis list), or the one whose
    arguments read `args`; the others are left where they are."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, decode_responses=True)
    try:
        raws: list[str] = client.lrange(queue, 0, -1)  # type: ignore[assignment]
        for raw in raws:
            message = json.loads(raw)
            if args is None or message["headers"]["argsrepr"] == args:
                client.lrem(queue, 1, raw)
                return message
        raise AssertionError(f"no message {args or ''} in {queue}")
    finally:
        client.close()


def test_a_files_message_carries_its_runs_copy_limits() -> None:
    queue = "test-limits-file"
    dispatch.file_send(1, 1, "00000000-0000-0000-0000-000000000001", queue, limits=copy_task_limits({"timeout": 900}))
    headers = queued_message(queue)["headers"]
    assert headers["task"] == dispatch.TRANSFER_TASK
    assert headers["timelimit"] == [900 + COPY_GRACE + 60, 900 + COPY_GRACE]  # Celery's order: hard, soft


def test_a_runs_first_message_carries_the_limits_of_its_deadline() -> None:
    queue = "test-limits-prepare"
    now = timezone.now()
    dispatch.prepare_send(1, queue, limits=prepare_task_limits(now + timedelta(minutes=10), now=now))
    headers = queued_message(queue)["headers"]
    assert headers["task"] == dispatch.PREPARE_TASK
    assert headers["timelimit"] == [600 + DEADLINE_GRACE + 60, 600 + DEADLINE_GRACE]


@pytest.mark.django_db
def test_run_start_sends_the_first_task_with_the_limits_of_the_runs_deadline(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(user=None, trigger="schedule", kind="network", parameters={"host": "127.0.0.1", "duration": 50})
    headers = queued_message(run.parameters["queue"], args=f"({run.pk},)")["headers"]
    hard, soft = headers["timelimit"]
    assert run.deadline is not None and hard == soft + 60
    # The network probe's deadline is its duration and ten minutes: the limit is that, and a grace, from the send.
    assert 50 + 600 + DEADLINE_GRACE - 5 <= soft <= 50 + 600 + DEADLINE_GRACE
