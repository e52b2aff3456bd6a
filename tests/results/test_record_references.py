"""The references of transfer records (experiment, sites, endpoints, run) are checked once per statement by the
table's triggers (migration 0020) instead of foreign keys: the same guarantee, for every writer and both ways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import ProtectedError

from results.models import TransferRecord
from results.services import record_rows_store, records_store
from results.store.rows import RecordRow
from runs.models import Run
from sites.models import Experiment, Site, StorageEndpoint

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
UNKNOWN = 987654321


@pytest.fixture
def world() -> dict[str, Any]:
    atlas = Experiment.objects.create(name="ATLAS")
    cern = Site.objects.create(name="CERN", tier=0, country="CH")
    cnaf = Site.objects.create(name="CNAF", tier=1, country="IT")
    door = StorageEndpoint(site=cnaf)
    door.set_url("davs://storm.cnaf.example.org:8443/atlas")
    door.save()
    run = Run.objects.create(kind="transfer")
    return {"atlas": atlas, "cern": cern, "cnaf": cnaf, "door": door, "run": run}


def row(world: dict[str, Any], number: int, **changes: Any) -> RecordRow:
    values: dict[str, Any] = {
        "experiment_id": world["atlas"].pk,
        "source_site_id": world["cern"].pk,
        "destination_site_id": world["cnaf"].pk,
        "destination_endpoint_id": world["door"].pk,
        "bytes": 10**9,
        "start": T0 + timedelta(minutes=number),
        "end": T0 + timedelta(minutes=number + 1),
        "state": "ok",
        "origin": "fts",
        "origin_id": f"transfer-{number}",
        "transfer_key": f"request-{number}/job",
    }
    return RecordRow(**{**values, **changes})


def keys_stored() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM results_recordkey")
        return int(cursor.fetchone()[0])


@pytest.mark.parametrize(
    "column", ["experiment_id", "source_site_id", "destination_site_id", "source_endpoint_id", "run_id"]
)
def test_a_batch_naming_an_unknown_row_is_refused_whole(world: dict[str, Any], column: str) -> None:
    record_rows_store(rows=[row(world, 0)])
    batch = [row(world, 1), row(world, 2, **{column: UNKNOWN}), row(world, 3)]
    with pytest.raises(IntegrityError, match=f"= {UNKNOWN} is not present"):
        record_rows_store(rows=batch)
    assert TransferRecord.objects.count() == 1
    assert keys_stored() == 2  # the refused batch claimed no identity: it can be sent again once corrected
    assert record_rows_store(rows=[row(world, 1), row(world, 3)]).stored == 2


def test_a_runs_record_naming_an_unknown_site_is_refused(world: dict[str, Any]) -> None:
    """The runs' writer (results.services.records_store, model instances) meets the same check as ingestion."""
    record = TransferRecord(
        run=world["run"],
        experiment=world["atlas"],
        source_site_id=UNKNOWN,
        bytes=1,
        start=T0,
        end=T0,
        state="ok",
        origin="probe",
        origin_id="run-file-1",
    )
    with pytest.raises(IntegrityError, match="source_site_id/destination_site_id"):
        records_store(records=[record])
    assert not TransferRecord.objects.exists()


def test_a_record_made_through_the_orm_naming_an_unknown_run_is_refused(world: dict[str, Any]) -> None:
    with pytest.raises(IntegrityError, match="run_id"), transaction.atomic():
        TransferRecord.objects.create(
            run_id=UNKNOWN, bytes=1, start=T0, end=T0, state="ok", origin="probe", origin_id="orm-1"
        )


def test_an_update_to_an_unknown_site_is_refused_and_one_to_a_known_site_is_not(world: dict[str, Any]) -> None:
    record_rows_store(rows=[row(world, 0)])
    with pytest.raises(IntegrityError), transaction.atomic():
        TransferRecord.objects.update(destination_site_id=UNKNOWN)
    TransferRecord.objects.update(destination_site_id=world["cern"].pk, destination_endpoint_id=None)
    assert TransferRecord.objects.get().destination_site_id == world["cern"].pk


@pytest.mark.parametrize(
    ("table", "name"),
    [("sites_site", "cern"), ("sites_experiment", "atlas"), ("sites_storageendpoint", "door"), ("runs_run", "run")],
)
def test_a_row_that_records_name_cannot_be_deleted_in_sql(world: dict[str, Any], table: str, name: str) -> None:
    record_rows_store(rows=[row(world, 0, run_id=world["run"].pk)])
    with pytest.raises(IntegrityError, match="still referenced"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [world[name].pk])
    assert TransferRecord.objects.count() == 1


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
@pytest.mark.parametrize("table", ["sites_site", "sites_experiment", "sites_storageendpoint", "runs_run"])
def test_a_table_that_records_name_cannot_be_truncated(world: dict[str, Any], table: str) -> None:
    record_rows_store(rows=[row(world, 0, run_id=world["run"].pk)])
    with pytest.raises(IntegrityError, match="still referenced"), connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {table} CASCADE")
    assert TransferRecord.objects.count() == 1


def test_rows_that_no_record_names_are_deleted_as_before(world: dict[str, Any]) -> None:
    record_rows_store(rows=[row(world, 0, source_site_id=None, destination_endpoint_id=None)])
    world["cern"].delete()
    world["door"].delete()
    world["run"].delete()
    assert TransferRecord.objects.count() == 1


def test_django_protects_sites_and_sets_endpoints_and_runs_to_null_as_before(world: dict[str, Any]) -> None:
    record_rows_store(rows=[row(world, 0, run_id=world["run"].pk)])
    with pytest.raises(ProtectedError):
        world["cnaf"].delete()
    world["door"].delete()
    world["run"].delete()
    record = TransferRecord.objects.get()
    assert (record.destination_endpoint_id, record.run_id, record.destination_site_id) == (
        None,
        None,
        world["cnaf"].pk,
    )


def test_a_row_that_loses_its_transfer_key_gives_its_origin_key_back(world: dict[str, Any]) -> None:
    assert record_rows_store(rows=[row(world, 0)]).stored == 1
    # a new origin id with the transfer key of the stored record: a duplicate, its origin id not kept
    assert record_rows_store(rows=[row(world, 1, transfer_key="request-0/job")]).duplicates == 1
    assert keys_stored() == 2
    # the same origin id with a new transfer key is then new
    assert record_rows_store(rows=[row(world, 1, transfer_key="request-1/job")]).stored == 1
    assert keys_stored() == 4


def test_a_row_whose_origin_is_stored_leaves_its_transfer_key_to_the_next_row_of_the_batch(
    world: dict[str, Any],
) -> None:
    record_rows_store(rows=[row(world, 0, transfer_key="")])
    # the first row is a duplicate by its origin id; the second, a new origin id with the same transfer key, is new
    summary = record_rows_store(
        rows=[row(world, 0, transfer_key="shared/job"), row(world, 1, transfer_key="shared/job")]
    )
    assert (summary.stored, summary.duplicates) == (1, 1)
    assert TransferRecord.objects.get(transfer_key="shared/job").origin_id == "transfer-1"
