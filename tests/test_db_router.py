"""portal.db_router: the reads of GET requests go to the replica alias, writes and everything else to the
primary. The replica alias points at the test database's own server (a second connection), so which alias ran a
query is what the tests look at."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from challenges.models import Challenge
from portal.db_router import REPLICA, ReplicaReadsMiddleware, read_connection, replica_reads
from sites.models import Experiment

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def replica(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A "replica" alias on the test database's server, as settings make it from DATABASE_REPLICA_URL (its own
    connection: what it runs is not what the primary's runs)."""
    primary = connections["default"]
    monkeypatch.setattr(settings, "DATABASES", {**settings.DATABASES, REPLICA: dict(primary.settings_dict)})
    connections[REPLICA] = type(primary)(dict(primary.settings_dict), REPLICA)
    try:
        yield
    finally:
        connections[REPLICA].close()
        del connections[REPLICA]


def test_a_read_inside_replica_reads_runs_on_the_replica_connection(replica: None) -> None:
    with (
        replica_reads(),
        CaptureQueriesContext(connections[REPLICA]) as on_replica,
        CaptureQueriesContext(connections["default"]) as on_primary,
    ):
        assert list(Challenge.objects.filter(slug="any")) == []
    assert any("challenges_challenge" in query["sql"] for query in on_replica.captured_queries)
    assert not any("challenges_challenge" in query["sql"] for query in on_primary.captured_queries)


def test_a_write_inside_replica_reads_goes_to_the_primary(replica: None) -> None:
    with (
        replica_reads(),
        CaptureQueriesContext(connections[REPLICA]) as on_replica,
        CaptureQueriesContext(connections["default"]) as on_primary,
    ):
        experiment = Experiment.objects.create(name="ATLAS")
    assert experiment._state.db == "default"
    assert any("INSERT" in query["sql"] for query in on_primary.captured_queries)
    assert on_replica.captured_queries == []


def test_reads_in_a_transaction_and_of_users_stay_on_the_primary(replica: None) -> None:
    with replica_reads():
        assert Challenge.objects.all().db == REPLICA
        assert get_user_model().objects.all().db == "default"
        with transaction.atomic():
            assert Challenge.objects.all().db == "default"
            assert read_connection().alias == "default"
        assert read_connection().alias == REPLICA


def test_after_writing_a_large_apps_row_the_rest_of_replica_reads_is_on_the_primary(replica: None) -> None:
    with replica_reads():
        Experiment.objects.create(name="CMS")  # sites' tables are read on the primary anyway: nothing changes
        assert Challenge.objects.all().db == REPLICA
        Challenge.objects.create(name="Written", slug="written", start=timezone.now(), end=timezone.now())
        assert Challenge.objects.all().db == "default"
    with replica_reads():  # the next request starts on the replica again
        assert Challenge.objects.all().db == REPLICA


def test_without_replica_reads_or_without_a_replica_everything_is_on_the_primary(replica: None) -> None:
    assert Challenge.objects.all().db == "default"
    primary_only = {alias: value for alias, value in settings.DATABASES.items() if alias != REPLICA}
    with replica_reads(), override_databases(primary_only):
        assert Challenge.objects.all().db == "default"


@contextmanager
def override_databases(databases: dict[str, Any]) -> Iterator[None]:
    saved = settings.DATABASES
    settings.DATABASES = databases
    try:
        yield
    finally:
        settings.DATABASES = saved


def _alias_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse(Challenge.objects.all().db)


def test_the_middleware_reads_a_get_on_the_replica_and_a_post_on_the_primary(replica: None) -> None:
    middleware = ReplicaReadsMiddleware(_alias_view)
    assert middleware(RequestFactory().get("/results/")).content == REPLICA.encode()
    assert middleware(RequestFactory().post("/api/v1/ingest/fts/")).content == b"default"


def test_a_streamed_export_reads_on_the_replica_while_it_is_written(replica: None) -> None:
    def streamed(request: HttpRequest) -> StreamingHttpResponse:
        return StreamingHttpResponse(Challenge.objects.all().db for _ in range(2))

    response = ReplicaReadsMiddleware(streamed)(RequestFactory().get("/results/x/records/?format=csv"))
    assert b"".join(response.streaming_content) == (REPLICA * 2).encode()
