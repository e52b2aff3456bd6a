"""A broker that came back without its data is noticed (its epoch key is gone) and what was queued is sent again at
once; with the broker's data intact, a message is sent again only after DISPATCH_RESEND_AFTER. A Redis of the
test's own, shut down and started again for real."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from runs.dispatch import broker_lost_messages
from runs.models import Run, RunFile
from runs.reaper import runs_reap
from runs.services import run_start
from sites.roles import membership_grant
from tests.faults.servers import RedisServer
from tests.sites.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_broker(tmp_path: Path, settings: Any) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", persist=True)
    server.start()
    settings.CELERY_BROKER_URL = server.url
    yield server
    server.stop()


def test_the_epoch_key_tells_a_broker_that_came_back_without_its_data(own_broker: RedisServer) -> None:
    assert broker_lost_messages() is True  # the first look: nothing to tell it from a loss, and no harm
    assert broker_lost_messages() is False
    own_broker.stop()  # SIGTERM: Redis writes its append-only file and comes back with its data
    own_broker.start()
    assert broker_lost_messages() is False
    own_broker.shutdown_nosave()
    shutil.rmtree(own_broker.dir / "appendonlydir")  # as a Redis without persistence, or a lost disk
    own_broker.start()
    assert broker_lost_messages() is True
    assert broker_lost_messages() is False


def test_a_broker_that_cannot_be_reached_is_not_taken_for_one_that_lost_its_data(own_broker: RedisServer) -> None:
    assert broker_lost_messages() is True
    own_broker.stop()
    assert broker_lost_messages() is False  # the next look, once it answers, tells


def test_the_reaper_sends_again_at_once_what_a_broker_without_its_data_lost(
    sent: list[tuple[str, tuple[Any, ...]]], django_capture_on_commit_callbacks: Any
) -> None:
    coordinator = UserFactory()
    membership_grant(user=coordinator, role="coordinator")
    parameters = {
        "source": "root://src.example.org:1094//data",
        "destinations": ["root://dst.example.org:1094//data"],
        "file_size": 1000,
        "file_count": 4,
        "concurrency": 2,
    }
    queued = run_start(user=coordinator, kind="transfer", parameters=parameters)  # its first task just sent
    running = run_start(user=coordinator, kind="transfer", parameters=parameters)
    Run.objects.filter(pk=running.pk).update(state="running", started_at=timezone.now())
    now = timezone.now()
    RunFile.objects.filter(run=running, index__in=[0, 1]).update(task_id="t", attempt=1, dispatched_at=now)
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        runs_reap(broker_lost=False)
    assert sent == []  # sent a moment ago: not yet
    with django_capture_on_commit_callbacks(execute=True):
        summary = runs_reap(broker_lost=True)
    assert sorted(kind for kind, _ in sent) == ["file", "file", "prepare"]
    assert summary.tasks_resent == 3
    assert {args[0] for kind, args in sent if kind == "prepare"} == {queued.pk}
    files = {args[0] for kind, args in sent if kind == "file"}
    assert files == set(RunFile.objects.filter(run=running, index__in=[0, 1]).values_list("pk", flat=True))
