"""The failure causes' stored counts (results.store.failure_counts) give the page the same numbers as counting the
failed records themselves: on random failures of several activities and experiments, URLs in the messages, FTS schemes,
unknown sites; after the rules change (all challenges or one), the plan changes (re-attribution) and records are
deleted; kept by two writers at once; equal to a rebuild; and the page counts from the records, and says so, when
the stored counts do not hold them all."""

from __future__ import annotations

import random
from datetime import date
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import transaction
from django.test import Client

from challenges.models import Activity, Target
from results.failures import causes as failures
from results.failures.causes import FROM_RECORDS, STORED, failures_for_challenge, failures_recategorize
from results.models import FailureCount, FailureHour, FailureMessage, FailureRule, RetiredMonth, TransferRecord
from results.services import records_store
from results.store.attribution import records_reattribute, scope_everything
from results.store.failure_counts import failure_counts_rebuild
from results.store.rollups import ROLLUP_COLUMNS, rollup_add_sql

from .link_world import at, batches_stored_at_once, make_world, random_record

MESSAGES = [
    "Connection timed out",
    "TRANSFER [5] No such file davs://se.cern.ch:443/atlas/file{n}.root",
    "Checksum mismatch for root://eos.cnaf.it//cms/store/{n}.",
    "DESTINATION OVERWRITE quota exceeded on https://kit.de/{n}",
    "permission denied",
    "",
]
SCHEMES = [("", "", ""), ("TIMEOUT", "TRANSFER", "TRANSFER"), ("FILE_NOT_FOUND", "SOURCE", "TRANSFER_PREPARATION")]


def failure_record(world: dict[str, Any], rng: random.Random) -> TransferRecord:
    """A random record (results' matrix tests: activities, experiments, unknown sites, hours), and when failed a
    message with a file's URL and one of FTS's schemes."""
    record = random_record(world, rng)
    if record.state == "failed":
        record.error_message = rng.choice(MESSAGES).format(n=rng.randrange(50))
        record.origin = "fts"
        record.fts_error_category, record.error_scope, record.failure_phase = rng.choice(SCHEMES)
        if rng.random() < 0.1:  # a portal run's failure from a site not matched: it counts for the run's activity
            record.source_site, record.run, record.activity = None, world["runs"][0], world["activities"][0]
    return record


def stored_rows() -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for model in (FailureCount, FailureHour, FailureMessage):
        fields = [f.attname for f in model._meta.concrete_fields if not f.primary_key]
        rows += sorted(((model.__name__, *row) for row in model.objects.values_list(*fields)), key=repr)
    return rows


def assert_stored_give_the_records_numbers(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every experiment selection: the page's tables from the stored counts and from the records are the same, and
    the stored counts are those a rebuild gives."""
    for experiments in (None, [world["atlas"].pk], [world["cms"].pk]):
        stored = failures_for_challenge(challenge=world["challenge"], experiment_ids=experiments)
        with monkeypatch.context() as patched:
            patched.setattr(failures, "failure_counts_complete", lambda challenge_id: False)
            records = failures_for_challenge(challenge=world["challenge"], experiment_ids=experiments)
        assert (stored.computed, records.computed) == (STORED, FROM_RECORDS)
        assert stored.categories == records.categories
        for table in ("as_rows", "message_rows", "fts_rows", "hourly_rows"):
            assert getattr(stored, table)() == getattr(records, table)(), (experiments, table)
    kept = stored_rows()
    failure_counts_rebuild()
    assert stored_rows() == kept


def store_random(world: dict[str, Any], seed: int, records: int = 300) -> None:
    rng = random.Random(seed)
    for _ in range(4):  # batches, in no order of time
        records_store(records=[failure_record(world, rng) for _ in range(records // 4)])
    failed = TransferRecord.objects.filter(activity__isnull=False, state="failed")
    assert failed.count() > records // 10 and failed.filter(source_site__isnull=True).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [1, 2])
def test_the_stored_counts_give_the_numbers_of_the_records(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_world()
    store_random(world, seed)
    assert_stored_give_the_records_numbers(world, monkeypatch)
    assert len(failures_for_challenge(challenge=world["challenge"]).hourly_rows()) > 10


@pytest.mark.django_db
def test_the_stored_counts_follow_a_rule_change(monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_world()
    store_random(world, 3)
    FailureRule.objects.create(pattern="quota exceeded", category="storage", position=1)
    FailureRule.objects.create(pattern=r"davs://", category="tls", position=2)
    assert failures_recategorize(challenge=world["challenge"]) > 5
    assert_stored_give_the_records_numbers(world, monkeypatch)
    FailureRule.objects.filter(pattern="quota exceeded").update(enabled=False)
    assert failures_recategorize() > 5
    assert_stored_give_the_records_numbers(world, monkeypatch)
    assert failures_recategorize() == 0  # nothing changes: nothing written


@pytest.mark.django_db
def test_the_stored_counts_follow_the_records_when_the_plan_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_world()
    store_random(world, 4)
    first, second, _ = world["activities"]
    Activity.objects.filter(pk=first.pk).update(end=at(30000))
    Target.objects.filter(activity=second, link_from=world["sites"][0]).delete()
    assert records_reattribute(scope=scope_everything()) > 20
    assert_stored_give_the_records_numbers(world, monkeypatch)


@pytest.mark.django_db
def test_records_deleted_leave_the_counts_of_those_that_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_world()
    store_random(world, 5)
    with transaction.atomic():
        gone = "SELECT {columns} FROM results_transferrecord WHERE experiment_id = %s AND state = 'failed'"
        rollup_add_sql(records=gone.format(columns=ROLLUP_COLUMNS), params=[world["cms"].pk], sign=-1)
        TransferRecord.objects.filter(experiment=world["cms"], state="failed").delete()
    assert not FailureCount.objects.filter(experiment_id=world["cms"].pk).exists()
    assert_stored_give_the_records_numbers(world, monkeypatch)


@pytest.mark.django_db
def test_a_bulk_load_without_the_rebuild_is_counted_from_the_records_until_rebuilt() -> None:
    world = make_world()
    store_random(world, 6)
    kept = stored_rows()
    FailureHour.objects.filter(pk__in=FailureHour.objects.values("pk")[:1]).delete()  # counts short of the rollups
    assert failures_for_challenge(challenge=world["challenge"]).computed == FROM_RECORDS
    call_command("failure_counts_rebuild", stdout=None)
    assert stored_rows() == kept
    assert failures_for_challenge(challenge=world["challenge"]).computed == STORED


@pytest.mark.django_db
def test_the_page_says_how_its_numbers_were_counted(client: Client) -> None:
    world = make_world()
    store_random(world, 8, records=100)
    client.force_login(get_user_model().objects.create_user("viewer"))
    assert 'data-computed="stored"' in client.get("/results/dc/failures/").content.decode()
    FailureHour.objects.all().delete()
    assert 'data-computed="records"' in client.get("/results/dc/failures/").content.decode()


@pytest.mark.django_db
def test_the_counts_are_not_rebuilt_once_records_were_retired() -> None:
    world = make_world()
    store_random(world, 7, records=40)
    RetiredMonth.objects.create(month=date(2019, 5, 1), retired_at=at(0), records=1, bytes=1)
    with pytest.raises(RuntimeError, match="failure counts: the raw records of 2019-05 were retired"):
        failure_counts_rebuild()
    assert FailureCount.objects.exists()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_two_batches_stored_at_once_lose_no_count(monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_world()
    rng = random.Random(11)
    batches = [[failure_record(world, rng) for _ in range(200)] for _ in range(2)]
    assert batches_stored_at_once(batches) == []
    assert TransferRecord.objects.count() == 400
    assert_stored_give_the_records_numbers(world, monkeypatch)
