"""The heavy reads answer from the replica, with two real databases whose contents differ: the "replica" is a second
PostgreSQL database, a copy of the primary taken after the live scenario's two hours of traffic and a few failures;
the primary then receives more records and failures on the steady link (A -> B), which the replica never sees. So a
GET that reads the replica answers with the replica's numbers and one that reads the primary with more; writes land
on the primary."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django.test import Client
from rest_framework.test import APIClient

from common.db import REPLICA, primary_reads, read_connection, replica_reads
from ingest.services import ingest_items
from live.now import now_board
from results.models import TransferRecord
from results.targets.rates import rates_for_challenge
from sites.models import Experiment
from sites.tokens import token_issue
from tests.live.scenario import STEADY, Scenario, fts, scenario_make

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

EXTRA = 10  # records of STEADY bytes on A -> B in the last hour, on the primary only
FAILED = 3  # failed records on A -> B in both databases
FAILED_EXTRA = 2  # and more on the primary only
SCENARIO_AB = 120 * STEADY  # the steady link's bytes in the scenario: what the replica holds


def _extra_records(live: Scenario, *, first: int, count: int, state: str = "Ok") -> list[dict[str, Any]]:
    return [
        fts(
            first + index, live.doors["A"], live.doors["B"], live.at - timedelta(minutes=index + 1), STEADY, state=state
        )
        for index in range(count)
    ]


def _ingest(items: list[dict[str, Any]]) -> None:
    stored = ingest_items(format="fts", items=items, user=None)
    assert stored.accepted == len(items), stored.as_dict()


@pytest.fixture
def live() -> Scenario:
    return scenario_make()


@pytest.fixture
def replica(live: Scenario, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scenario]:
    """A second database, a copy of the primary holding the scenario, set up as settings make the "replica" alias
    from DATABASE_REPLICA_URL; then EXTRA more records on the primary only. Dropped afterwards."""
    _ingest(_extra_records(live, first=30_000, count=FAILED, state="Error"))
    primary = connections["default"]
    name = f"{primary.settings_dict['NAME']}_replica"
    primary.close()  # PostgreSQL copies a database only while nobody is connected to it
    with primary._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cursor.execute(f'CREATE DATABASE "{name}" TEMPLATE "{primary.settings_dict["NAME"]}"')
    replica_settings = {**primary.settings_dict, "NAME": name}
    monkeypatch.setattr(settings, "DATABASES", {**settings.DATABASES, REPLICA: replica_settings})
    connections[REPLICA] = type(primary)(replica_settings, REPLICA)
    try:
        _ingest(_extra_records(live, first=10_000, count=EXTRA))
        _ingest(_extra_records(live, first=31_000, count=FAILED_EXTRA, state="Error"))
        yield live
    finally:
        connections[REPLICA].close()
        del connections[REPLICA]
        with primary._nodb_cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')


def _api(role: str = "viewer", **scope: Any) -> APIClient:
    _, key = token_issue(username=f"replica-{role}", role=role, **scope)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _steady_volume_on_the_primary(live: Scenario) -> float:
    rows = rates_for_challenge(challenge=live.challenge)  # outside a request: the primary
    return next(row.volume for row in rows if row.target.pk == live.steady.pk)


def test_the_databases_differ_by_the_extra_records(replica: Scenario) -> None:
    on_primary = TransferRecord.objects.using("default").count()
    assert TransferRecord.objects.using(REPLICA).count() == on_primary - EXTRA - FAILED_EXTRA
    assert _steady_volume_on_the_primary(replica) == pytest.approx(SCENARIO_AB + EXTRA * STEADY)


def test_the_rates_api_answers_from_the_replica(replica: Scenario) -> None:
    response = _api().get(f"/api/v1/challenges/{replica.challenge.slug}/rates/")
    assert response.status_code == 200, response.content
    row = next(row for row in response.json()["rows"] if row["id"] == replica.steady.pk)
    assert row["volume"] == pytest.approx(SCENARIO_AB)


def test_the_rates_cache_never_serves_the_replicas_numbers_to_a_primary_read(replica: Scenario) -> None:
    assert _api().get(f"/api/v1/challenges/{replica.challenge.slug}/rates/").status_code == 200  # cached: replica's
    assert _steady_volume_on_the_primary(replica) == pytest.approx(SCENARIO_AB + EXTRA * STEADY)


def test_the_now_api_answers_from_the_replica(replica: Scenario) -> None:
    response = _api().get(f"/api/v1/challenges/{replica.challenge.slug}/now/")
    assert response.status_code == 200, response.content
    row = next(row for row in response.json()["targets"] if row["target"] == replica.steady.pk)
    assert row["volume"] == pytest.approx(SCENARIO_AB)


def test_the_link_panel_counts_the_last_hour_from_the_replica(replica: Scenario) -> None:
    response = _api("coordinator").get(f"/api/v1/challenges/{replica.challenge.slug}/links/")
    assert response.status_code == 200, response.content
    row = next(row for row in response.json()["links"] if (row["source"], row["destination"]) == ("LIVE-A", "LIVE-B"))
    assert row["files_ok_last_hour"] == 60  # the scenario's minute a record; the primary has EXTRA more


def test_the_matrix_answers_from_the_replica(replica: Scenario, client: Client) -> None:
    client.force_login(get_user_model().objects.create_user("replica-viewer"))
    response = client.get(f"/results/{replica.challenge.slug}/matrix/", {"format": "json"})
    assert response.status_code == 200, response.content
    cell = next(row for row in response.json()["rows"] if (row["source"], row["destination"]) == ("LIVE-A", "LIVE-B"))
    assert cell["volume"] == SCENARIO_AB
    assert (cell["files_ok"], cell["files_failed"]) == (120, FAILED)


def test_the_failure_causes_count_from_the_replica(replica: Scenario, client: Client) -> None:
    client.force_login(get_user_model().objects.create_user("replica-viewer"))
    response = client.get(f"/results/{replica.challenge.slug}/failures/", {"format": "json"})
    assert response.status_code == 200, response.content
    row = next(row for row in response.json()["rows"] if (row["source"], row["destination"]) == ("LIVE-A", "LIVE-B"))
    assert row["failures"] == FAILED


def test_an_ingest_post_lands_on_the_primary_only(replica: Scenario) -> None:
    before = {alias: TransferRecord.objects.using(alias).count() for alias in ("default", REPLICA)}
    atlas = Experiment.objects.get(name="ATLAS")
    response = _api("ddm", experiment=atlas).post(
        "/api/v1/ingest/fts/", data=_extra_records(replica, first=20_000, count=1), format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 1
    assert TransferRecord.objects.using("default").count() == before["default"] + 1
    assert TransferRecord.objects.using(REPLICA).count() == before[REPLICA]


def test_inside_replica_reads_a_transaction_a_write_or_primary_reads_read_the_primary(replica: Scenario) -> None:
    with replica_reads():
        assert read_connection().alias == REPLICA
        with transaction.atomic():
            assert read_connection().alias == "default"
        with primary_reads():
            assert read_connection().alias == "default"
        assert read_connection().alias == REPLICA
        Experiment.objects.create(name="LHCb")  # not a large app's table: the replica is still read
        assert read_connection().alias == REPLICA
        replica.challenge.save(update_fields=["name"])  # a challenges row: read your own writes from here on
        assert read_connection().alias == "default"


def test_a_board_computed_outside_a_request_reads_the_primary(replica: Scenario) -> None:
    user = get_user_model().objects.create_superuser("replica-admin")
    board = now_board(challenge=replica.challenge, user=user, at=replica.at)
    row = next(row for row in board["targets"] if row["target"] == replica.steady.pk)
    assert row["volume"] == pytest.approx(SCENARIO_AB + EXTRA * STEADY)
