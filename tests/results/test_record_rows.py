"""Record rows (results.store.rows.RecordRow), what the ingestion parsers make instead of model instances: the same
columns as TransferRecord, stored as model instances are, failures categorised by the same rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from results.failures.causes import failure_categorize_rows
from results.models import OptimizerDecision, TransferRecord
from results.services import optimizer_decisions_store, record_rows_store, records_store
from results.store.rows import DecisionRow, RecordRow
from sites.models import Experiment, Site, StorageEndpoint

pytestmark = pytest.mark.django_db

T0 = datetime(2022, 3, 14, 10, 0, 0, 123456, tzinfo=UTC)
TIMEOUT = "TRANSFER [110] TRANSFER Operation timed out"


def test_a_record_row_has_every_column_of_a_transfer_record_in_order_with_its_defaults() -> None:
    fields = [field for field in TransferRecord._meta.concrete_fields if not field.primary_key]
    assert RecordRow._fields == tuple(field.attname for field in fields)
    assert RecordRow._field_defaults == {field.attname: field.get_default() for field in fields}


@pytest.fixture
def world() -> dict[str, Any]:
    atlas = Experiment.objects.create(name="ATLAS")
    cern = Site.objects.create(name="CERN", tier=0, country="CH")
    cnaf = Site.objects.create(name="CNAF", tier=1, country="IT")
    door = StorageEndpoint(site=cnaf)
    door.set_url("davs://storm.cnaf.example.org:8443/atlas")
    door.save()
    return {"atlas": atlas, "cern": cern, "cnaf": cnaf, "door": door}


def stored(origin_id: str) -> dict[str, Any]:
    values = TransferRecord.objects.filter(origin_id=origin_id).values().get()
    values.pop("id")
    values.pop("origin_id")
    return values


def test_a_row_is_stored_as_the_model_instance_of_the_same_values_is(world: dict[str, Any]) -> None:
    values: dict[str, Any] = {
        "experiment_id": world["atlas"].pk,
        "source_site_id": world["cern"].pk,
        "destination_site_id": world["cnaf"].pk,
        "destination_endpoint_id": world["door"].pk,
        "source_url": "root://eos.cern.example.org:1094//atlas/f",
        "destination_url": "davs://storm.cnaf.example.org:8443/atlas/f",
        "bytes": 2**40 + 1,
        "start": T0,
        "end": T0 + timedelta(seconds=61, microseconds=7),
        "state": "failed",
        "error_message": TIMEOUT,
        "mode": "pull",
        "concurrency": 40,
        "origin": "fts",
        "transfer_key": "request/job",
        "source_host": "eos.cern.example.org",
        "destination_host": "storm.cnaf.example.org",
        "attempt": 3,
    }
    records_store(records=[TransferRecord(**values, origin_id="as-model")])
    record_rows_store(rows=[RecordRow(**{**values, "transfer_key": "request/job-2"}, origin_id="as-row")])
    as_model, as_row = stored("as-model"), stored("as-row")
    assert as_row.pop("transfer_key") == "request/job-2"
    as_model.pop("transfer_key")
    assert as_row == as_model
    assert (as_row["end"], as_row["error_category"], as_row["bytes"]) == (
        T0 + timedelta(seconds=61, microseconds=7),
        "timeout",
        2**40 + 1,
    )


def row(state: str, message: str = "", category: str = "") -> RecordRow:
    return RecordRow(state=state, error_message=message, error_category=category)


def test_failed_rows_are_categorised_by_the_rules_read_once_and_the_others_left_blank() -> None:
    rows = [
        row("failed", TIMEOUT),
        row("ok", category="timeout"),
        row("failed", "No route to host"),
        row("failed", TIMEOUT),
    ]
    with CaptureQueriesContext(connection) as queries:
        categorised = failure_categorize_rows(rows)
    assert [r.error_category for r in categorised] == ["timeout", "", "network-unreachable", "timeout"]
    assert len(queries) == 1


def test_rows_without_a_failure_need_no_rules() -> None:
    with CaptureQueriesContext(connection) as queries:
        categorised = failure_categorize_rows([row("ok"), row("cancelled")])
    assert [r.error_category for r in categorised] == ["", ""]
    assert len(queries) == 0


def test_a_row_stores_ftss_category_scope_and_phase_through_the_copy(world: dict[str, Any]) -> None:
    row = RecordRow(
        experiment_id=world["atlas"].pk,
        bytes=0,
        start=T0,
        end=T0 + timedelta(seconds=3),
        state="failed",
        error_message="DESTINATION [70] Connection refused",
        origin="fts",
        origin_id="with-scheme",
        fts_error_category="COMMUNICATION_ERROR",
        error_scope="DESTINATION",
        failure_phase="TRANSFER_PREPARATION",
    )
    assert record_rows_store(rows=[row]).stored == 1
    assert TransferRecord.objects.values_list("fts_error_category", "error_scope", "failure_phase").get() == (
        "COMMUNICATION_ERROR",
        "DESTINATION",
        "TRANSFER_PREPARATION",
    )


def test_a_decision_row_has_every_column_of_an_optimizer_decision_in_order() -> None:
    fields = [field for field in OptimizerDecision._meta.concrete_fields if not field.primary_key]
    assert DecisionRow._fields == tuple(field.attname for field in fields)


def test_an_optimizer_decision_sent_twice_is_stored_once(world: dict[str, Any]) -> None:
    decision = DecisionRow(
        experiment_id=world["atlas"].pk,
        source_site_id=world["cern"].pk,
        destination_site_id=world["cnaf"].pk,
        source_se="davs://eos.cern.example.org",
        dest_se="davs://storm.cnaf.example.org:8443",
        at=T0,
        active=60,
        queue_size=5000,
        rationale="Source throughput limitation reached",
    )
    first = optimizer_decisions_store(rows=[decision, decision])
    again = optimizer_decisions_store(rows=[decision])
    assert (first.stored, first.duplicates, again.stored, again.duplicates) == (1, 1, 0, 1)
    stored = OptimizerDecision.objects.get()
    assert (stored.active, stored.queue_size, stored.origin) == (60, 5000, "fts")
    later = optimizer_decisions_store(rows=[decision._replace(at=T0 + timedelta(minutes=1))])
    assert later.stored == 1 and OptimizerDecision.objects.count() == 2
