"""Beat's alert evaluation through the real Redis broker and a real worker: one task per running challenge, so a
challenge whose evaluation is under way holds no other (and is evaluated again once it is free); on a prefork
worker, an evaluation past its soft time limit leaves nothing half-written."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import transaction

from challenges.models import Challenge
from common import processes
from common.locks import advisory_lock, advisory_lock_try
from live.alerts import alerts_evaluate as evaluate
from live.models import Alert
from live.tasks import alerts_evaluate, alerts_evaluate_challenge
from portal.tasks import ping
from tests.live.scenario import Scenario, scenario_make
from tests.workers import worker_argv, worker_database_url

# serialized_rollback as every transactional test of the suite: a plain flush would make the content types again, and
# the next test that restores its serialized rows would find them twice.
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def alerts_of(challenge: Challenge) -> set[tuple[str, str]]:
    return set(Alert.objects.filter(challenge=challenge, state="open").values_list("kind", "subject"))


def beat_evaluates(queue: str) -> None:
    """Send beat's task to the worker's queue and return once the worker has run it and the tasks it sent: the worker
    takes its queue's messages one at a time in order, so a ping sent after a message comes back after it ran."""
    alerts_evaluate.apply_async(queue=queue)
    for _ in ("beat's task", "the challenges' tasks it sent"):
        assert ping.apply_async(args=("after",), queue=queue).get(timeout=60)["payload"] == "after"


@pytest.fixture
def live() -> Scenario:
    return scenario_make()


@pytest.fixture
def busy(live: Scenario) -> Challenge:
    """A running challenge evaluated before `live` (it started earlier)."""
    return Challenge.objects.create(
        name="Busy", slug="busy", start=live.at - timedelta(days=2), end=live.at + timedelta(days=1)
    )


def test_beat_opens_the_alerts_of_a_running_challenge_through_the_worker(
    live: Scenario, celery_worker_process: str
) -> None:
    beat_evaluates(celery_worker_process)
    assert len(alerts_of(live.challenge)) == 3


def test_a_challenge_whose_evaluation_is_under_way_holds_no_other(
    live: Scenario, busy: Challenge, celery_worker_process: str
) -> None:
    # The worker runs one task at a time: had it waited for busy's lock, live's evaluation would not have run.
    with advisory_lock(f"alerts {busy.pk}"):
        beat_evaluates(celery_worker_process)
        assert len(alerts_of(live.challenge)) == 3


def test_a_challenge_skipped_while_busy_is_evaluated_the_next_minute(
    live: Scenario, celery_worker_process: str
) -> None:
    with advisory_lock(f"alerts {live.challenge.pk}"):
        beat_evaluates(celery_worker_process)
        assert alerts_of(live.challenge) == set()
    beat_evaluates(celery_worker_process)
    assert len(alerts_of(live.challenge)) == 3


@pytest.fixture
def prefork_worker(django_db_setup: None, tmp_path: Path) -> Iterator[str]:
    """A real worker of the prefork pool (the one that enforces time limits), one process, on a private queue."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DATABASE_URL": worker_database_url()}
    pidfile = tmp_path / "worker.pid"
    argv = worker_argv(name=queue, queues=queue, pool="prefork", concurrency=1)
    processes.start(argv, pidfile=pidfile, logfile=tmp_path / "worker.log", env=env, cwd=settings.BASE_DIR)
    try:
        yield queue
    finally:
        processes.stop(pidfile)


def test_an_evaluation_past_its_soft_limit_writes_nothing_and_frees_its_challenge(
    live: Scenario, prefork_worker: str
) -> None:
    opened = evaluate(challenge=live.challenge).opened
    seen = {alert.pk: alert.last_seen_at for alert in opened}
    with transaction.atomic():
        # The evaluation waits for this open alert's row until its soft limit passes (its hard one would come after
        # the ping below gave up: the worker runs one task at a time).
        Alert.objects.select_for_update().get(pk=opened[0].pk)
        alerts_evaluate_challenge.apply_async(
            args=(live.challenge.pk,), queue=prefork_worker, soft_time_limit=3, time_limit=120
        )
        assert ping.apply_async(args=("after",), queue=prefork_worker).get(timeout=60)["payload"] == "after"
    assert {alert.pk: alert.last_seen_at for alert in Alert.objects.filter(challenge=live.challenge)} == seen
    with advisory_lock_try(f"alerts {live.challenge.pk}") as taken:
        assert taken
