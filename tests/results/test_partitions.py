"""The transfer records partitioned by month of "end": a record's identity kept outside the partitions (a record
re-sent with another end still counts once), the DEFAULT partition for months without one, partitions made ahead
by beat and on demand before a batch, the ORM still reading records by id."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from results.models import RateRollup, RecordKey, RetiredMonth, TransferRecord
from results.services import records_store
from results.store.partitions import (
    DEFAULT_PARTITION,
    partition_ensure,
    partition_name,
    partitions_ensure,
    partitions_list,
)
from sites.models import Experiment

T0 = datetime(2024, 3, 31, 23, 50, tzinfo=UTC)


@pytest.fixture
def atlas(db: None) -> Experiment:
    return Experiment.objects.create(name="ATLAS")


def record(experiment: Experiment, origin_id: str, **values: Any) -> TransferRecord:
    fields: dict[str, Any] = {
        "experiment": experiment,
        "bytes": 6_000_000,
        "start": T0,
        "end": T0 + timedelta(minutes=5),
        "state": "ok",
        "origin": "fts",
        "origin_id": origin_id,
        **values,
    }
    return TransferRecord(**fields)


def partition_of(record_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM results_transferrecord WHERE id = %s", [record_id])
        return cursor.fetchone()[0]


def rollup_bytes() -> float:
    return sum(RateRollup.objects.values_list("bytes", flat=True))


@pytest.mark.django_db
def test_a_record_resent_with_another_end_in_another_month_counts_once(atlas: Experiment) -> None:
    first = records_store(records=[record(atlas, "tr-1")])
    again = records_store(records=[record(atlas, "tr-1", end=T0 + timedelta(days=3))])
    assert (first.stored, again.stored, again.duplicates) == (1, 0, 1)
    assert TransferRecord.objects.count() == 1
    assert rollup_bytes() == pytest.approx(6_000_000)


@pytest.mark.django_db
def test_the_same_transfer_reported_by_fts_and_rucio_with_other_ends_counts_once(atlas: Experiment) -> None:
    records_store(records=[record(atlas, "fts-id", transfer_key="req-1/job-1")])
    rucio = records_store(
        records=[record(atlas, "rucio-id", origin="rucio", transfer_key="req-1/job-1", end=T0 + timedelta(days=40))]
    )
    assert (rucio.stored, rucio.duplicates) == (0, 1)
    assert list(TransferRecord.objects.values_list("origin_id", flat=True)) == ["fts-id"]


@pytest.mark.django_db
def test_a_row_refused_for_its_transfer_key_does_not_keep_its_origin_id(atlas: Experiment) -> None:
    records_store(records=[record(atlas, "a", transfer_key="k")])
    refused = records_store(records=[record(atlas, "b", transfer_key="k")])
    later = records_store(records=[record(atlas, "b")])
    assert (refused.stored, later.stored) == (0, 1)
    assert RecordKey.objects.count() == 3  # a's two keys and b's origin id


@pytest.mark.django_db
def test_rows_repeated_in_a_batch_count_once_the_first_winning(atlas: Experiment) -> None:
    summary = records_store(
        records=[
            record(atlas, "x", bytes=1),
            record(atlas, "x", bytes=2, end=T0 + timedelta(days=9)),
            record(atlas, "y", bytes=3, transfer_key="t"),
            record(atlas, "z", bytes=4, transfer_key="t"),
        ]
    )
    assert (summary.stored, summary.duplicates) == (2, 2)
    assert sorted(TransferRecord.objects.values_list("origin_id", "bytes")) == [("x", 1), ("y", 3)]


@pytest.mark.django_db
def test_the_same_origin_id_of_another_experiment_is_another_record(atlas: Experiment) -> None:
    cms = Experiment.objects.create(name="CMS")
    summary = records_store(records=[record(atlas, "same"), record(cms, "same"), record(None, "same")])
    assert summary.stored == 3
    assert records_store(records=[record(None, "same")]).duplicates == 1


@pytest.mark.django_db
def test_a_record_of_a_month_without_a_partition_goes_to_the_default_one(atlas: Experiment) -> None:
    records_store(
        records=[record(atlas, "old", start=datetime(1999, 1, 1, tzinfo=UTC), end=datetime(1999, 1, 2, tzinfo=UTC))]
    )
    stored = TransferRecord.objects.get(origin_id="old")
    assert partition_of(stored.pk) == DEFAULT_PARTITION


@pytest.mark.django_db
def test_making_a_months_partition_moves_its_records_out_of_the_default_one(atlas: Experiment) -> None:
    month = date(2019, 5, 1)
    records_store(
        records=[
            record(
                atlas, "m", start=datetime(2019, 5, 31, 23, tzinfo=UTC), end=datetime(2019, 5, 31, 23, 30, tzinfo=UTC)
            )
        ]
    )
    assert partition_ensure(month=month)
    stored = TransferRecord.objects.get(origin_id="m")
    assert partition_of(stored.pk) == partition_name(month)
    assert not partition_ensure(month=month)


@pytest.mark.django_db
def test_beat_makes_the_current_month_and_three_ahead() -> None:
    made = partitions_ensure(now=datetime(2031, 11, 20, tzinfo=UTC))
    assert made == [date(2031, 11, 1), date(2031, 12, 1), date(2032, 1, 1), date(2032, 2, 1)]
    assert set(made) <= set(partitions_list())
    assert partitions_ensure(now=datetime(2031, 11, 20, tzinfo=UTC)) == []


@pytest.mark.django_db
def test_a_retired_month_gets_no_partition_again() -> None:
    RetiredMonth.objects.create(month=date(2018, 2, 1), retired_at=datetime.now(UTC), records=0, bytes=0)
    assert not partition_ensure(month=date(2018, 2, 1))
    assert date(2018, 2, 1) not in partitions_list()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_batch_outside_a_transaction_makes_the_partition_of_its_recent_month() -> None:
    atlas = Experiment.objects.create(name="ATLAS")
    end = (datetime.now(UTC) - timedelta(days=400)).replace(day=15)
    records_store(records=[record(atlas, "recent", start=end - timedelta(minutes=1), end=end)])
    month = date(end.year, end.month, 1)
    assert month in partitions_list()
    assert partition_of(TransferRecord.objects.get(origin_id="recent").pk) == partition_name(month)


@pytest.mark.django_db
def test_the_orm_reads_and_deletes_a_record_by_its_id(atlas: Experiment) -> None:
    records_store(records=[record(atlas, "orm")])
    stored = TransferRecord.objects.get(origin_id="orm")
    assert TransferRecord.objects.get(pk=stored.pk).origin_id == "orm"
    stored.delete()
    assert not TransferRecord.objects.filter(pk=stored.pk).exists()


@pytest.mark.django_db
def test_the_records_api_pages_by_cursor_through_records_of_one_start(atlas: Experiment) -> None:
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    records_store(records=[record(atlas, f"p{i}", start=T0 + timedelta(seconds=i // 3)) for i in range(7)])
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_superuser("root"))
    seen, url = [], "/api/v1/records/?limit=2"
    while url:
        body = client.get(url).json()
        seen += [(row["start"], row["id"]) for row in body["results"]]
        url = body["next"]
    assert len(seen) == 7 and seen == sorted(seen) and len(set(seen)) == 7


@pytest.mark.django_db
def test_the_records_api_refuses_a_cursor_it_did_not_make(atlas: Experiment) -> None:
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_superuser("root"))
    response = client.get("/api/v1/records/", {"after": "not-a-cursor"})
    assert response.status_code == 400 and "after" in response.json()


@pytest.mark.django_db
def test_beat_makes_the_month_of_records_left_in_the_default_partition(atlas: Experiment) -> None:
    end = datetime(2019, 5, 20, tzinfo=UTC)
    records_store(records=[record(atlas, "stray", start=end - timedelta(minutes=1), end=end)])
    assert partition_of(TransferRecord.objects.get(origin_id="stray").pk) == DEFAULT_PARTITION
    made = partitions_ensure(now=datetime(2019, 7, 1, tzinfo=UTC))
    assert date(2019, 5, 1) in made
    assert partition_of(TransferRecord.objects.get(origin_id="stray").pk) == partition_name(date(2019, 5, 1))


def test_the_writers_keys_are_the_sql_definitions_of_a_records_identity(atlas: Experiment) -> None:
    """The batch writer hashes the keys in Python (results.store.keys.origin_key / transfer_key); retention, the
    partition migration and bench/scale.py hash them in SQL (ORIGIN_KEY / TRANSFER_KEY). Both must give the same
    key, or a stored record would not be found again: checked on the stored keys themselves, with non-ASCII ids,
    and with records of no experiment."""
    from results.store.keys import ORIGIN_KEY, TRANSFER_KEY, origin_key, transfer_key

    records_store(
        records=[
            record(atlas, "tr-é/ü 1", transfer_key="req-1/job-1"),
            record(None, "tr-2", transfer_key="rucio-ü/job-2"),  # type: ignore[arg-type]
            record(atlas, "tr-3"),
        ]
    )
    stored = set(RecordKey.objects.values_list("key", flat=True))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT origin, experiment_id, origin_id, transfer_key, {ORIGIN_KEY.format(r='r')}, "
            f"CASE WHEN transfer_key <> '' THEN {TRANSFER_KEY.format(r='r')} END FROM results_transferrecord AS r"
        )
        rows = cursor.fetchall()
    assert len(rows) == 3
    mine = set()
    for origin, experiment, origin_id, key, sql_origin_key, sql_transfer_key in rows:
        assert origin_key(origin, experiment, origin_id) == sql_origin_key.bytes
        assert transfer_key(experiment, key) == (sql_transfer_key.bytes if sql_transfer_key else None)
        mine |= {sql_origin_key} | ({sql_transfer_key} if sql_transfer_key else set())
    assert stored == mine  # 3 origin keys and 2 transfer keys, exactly those the writer claimed
