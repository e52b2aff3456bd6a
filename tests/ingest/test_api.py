"""POST /api/v1/ingest/<format>/: real messages in, records out, nothing counted twice, bad items listed."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from results.models import TransferRecord
from results.targets.rates import target_rates

from .helpers import client_for, uam_target
from .samples import FTS_COMPLETE, PERFSONAR_THROUGHPUT, RUCIO_TRANSFER_DONE, fts_variant, rucio_of_fts

pytestmark = pytest.mark.django_db


def post(client: APIClient, format: str, items: Any, *, ndjson: bool = False) -> Any:
    if ndjson:
        body = b"\n".join(orjson.dumps(item) for item in items)
        return client.post(f"/api/v1/ingest/{format}/", data=body, content_type="application/x-ndjson")
    return client.post(f"/api/v1/ingest/{format}/", data=orjson.dumps(items), content_type="application/json")


def test_an_fts_message_becomes_a_record_of_its_experiment_sites_and_transfer_times(
    world: dict[str, Any], coordinator: APIClient
) -> None:
    response = post(coordinator, "fts", [FTS_COMPLETE])
    assert response.status_code == 200, response.content
    assert response.json() == {"accepted": 1, "duplicates": 0, "skipped": 0, "rejected": []}
    record = TransferRecord.objects.get()
    assert record.experiment == world["atlas"]
    assert record.bytes == 10556847  # "10556847" as a string
    # The data transfer itself (timestamp_tr_st/_comp), not the whole workflow with SRM preparation.
    assert record.start == datetime(2017, 4, 26, 14, 35, 32, 255000, tzinfo=UTC)
    assert record.end == datetime(2017, 4, 26, 14, 35, 34, 563000, tzinfo=UTC)
    assert (record.state, record.origin, record.origin_id) == ("ok", "fts", FTS_COMPLETE["tr_id"])
    assert record.transfer_key == "faebf1c016ad4c8a89d4be53b67347ce/f9b18c10-0132-51df-b341-3031a0a9ea39"
    assert record.source_site == world["cnaf"]  # by the RSE name and by the host
    assert record.source_endpoint is not None
    assert (record.destination_site, record.destination_host) == (None, "grid002.ft.uam.es")  # unknown, kept


def test_a_failed_fts_transfer_keeps_its_message_and_gets_a_failure_category(
    world: dict[str, Any], coordinator: APIClient
) -> None:
    failed = fts_variant(
        1,
        t_final_transfer_state="Error",
        t__error_message="TRANSFER [110] TRANSFER Operation timed out",
        timestamp_tr_st="0",
        timestamp_tr_comp="0",
    )
    assert post(coordinator, "fts", [failed]).json()["accepted"] == 1
    record = TransferRecord.objects.get()
    assert (record.state, record.error_category) == ("failed", "timeout")
    # No data transfer timestamps: the whole transfer's.
    assert record.start == datetime(2017, 4, 26, 14, 34, 50, 323000, tzinfo=UTC)


def test_a_rucio_transfer_done_of_a_single_vo_instance_takes_the_ddm_services_experiment(
    world: dict[str, Any],
) -> None:
    dune = client_for("ddm", experiment=world["dune"])
    response = post(dune, "rucio", [RUCIO_TRANSFER_DONE])
    assert response.json() == {"accepted": 1, "duplicates": 0, "skipped": 0, "rejected": []}
    record = TransferRecord.objects.get()
    assert (record.experiment, record.bytes, record.origin_id) == (
        world["dune"],
        1024000000,
        "b4ccdac3a01146a7859bd5458da9808e",
    )
    assert record.start == datetime(2022, 1, 31, 16, 53, 42, tzinfo=UTC)
    assert record.end == datetime(2022, 1, 31, 16, 57, 41, tzinfo=UTC)
    assert record.transfer_key == "b4ccdac3a01146a7859bd5458da9808e/57517b00-82b6-11ec-ba1a-fa163ecc10d8"
    assert (record.source_host, record.destination_host) == ("bohr3226.tier2.hep.manchester.ac.uk", "ccxroot.in2p3.fr")


@pytest.mark.parametrize("event_type", ["transfer-done", "transfer-failed"])
def test_a_rucio_event_without_started_at_starts_its_duration_before_transferred_at(
    world: dict[str, Any], event_type: str
) -> None:
    # Older Rucio versions send started_at as None; duration (seconds, FTS's start to finish) is always there.
    event = copy.deepcopy(RUCIO_TRANSFER_DONE)
    event["event_type"] = event_type
    event["payload"]["started_at"] = None
    dune = client_for("ddm", experiment=world["dune"])
    assert post(dune, "rucio", [event]).json()["accepted"] == 1
    record = TransferRecord.objects.get()
    assert record.start == datetime(2022, 1, 31, 16, 53, 42, tzinfo=UTC)  # 16:57:41 - 239 s
    assert record.end == datetime(2022, 1, 31, 16, 57, 41, tzinfo=UTC)


def test_a_rucio_event_without_started_at_nor_a_known_duration_is_placed_at_its_end(world: dict[str, Any]) -> None:
    # Rucio sends duration -1 when FTS gave none: nothing better than the moment it was transferred.
    event = copy.deepcopy(RUCIO_TRANSFER_DONE)
    event["payload"].update({"started_at": None, "duration": -1})
    dune = client_for("ddm", experiment=world["dune"])
    assert post(dune, "rucio", [event]).json()["accepted"] == 1
    record = TransferRecord.objects.get()
    assert record.start == record.end == datetime(2022, 1, 31, 16, 57, 41, tzinfo=UTC)


def test_rucio_events_of_other_types_are_counted_as_skipped(world: dict[str, Any]) -> None:
    dune = client_for("ddm", experiment=world["dune"])
    queued = {**copy.deepcopy(RUCIO_TRANSFER_DONE), "event_type": "transfer-queued"}
    assert post(dune, "rucio", [queued, RUCIO_TRANSFER_DONE]).json() == {
        "accepted": 1,
        "duplicates": 0,
        "skipped": 1,
        "rejected": [],
    }


def test_a_rucio_message_without_vo_from_a_coordinator_is_rejected(
    world: dict[str, Any], coordinator: APIClient
) -> None:
    response = post(coordinator, "rucio", [RUCIO_TRANSFER_DONE])
    assert response.json()["rejected"] == [
        {"index": 0, "error": "payload.vo: missing (needed unless a DDM service of one experiment sends it)"}
    ]
    assert not TransferRecord.objects.exists()


def test_a_perfsonar_throughput_run_between_network_hosts_becomes_an_iperf3_record(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    assert post(atlas_ddm, "perfsonar", [PERFSONAR_THROUGHPUT]).json()["accepted"] == 1
    record = TransferRecord.objects.get()
    assert (record.source_site, record.destination_site) == (world["cern"], world["cnaf"])
    assert (record.origin, record.mode, record.concurrency, record.bytes) == ("perfsonar", "iperf3", 2, 11251543040)
    assert (record.end - record.start).total_seconds() == pytest.approx(10.000231)
    assert record.experiment == world["atlas"]  # the DDM service's own


def test_duplicates_within_a_batch_and_across_batches_are_stored_once(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    batch = [fts_variant(i) for i in range(5)]
    first = post(atlas_ddm, "fts", [*batch, batch[0], batch[3]])
    assert first.json() == {"accepted": 5, "duplicates": 2, "skipped": 0, "rejected": []}
    again = post(atlas_ddm, "fts", batch, ndjson=True)
    assert again.json() == {"accepted": 0, "duplicates": 5, "skipped": 0, "rejected": []}
    assert TransferRecord.objects.count() == 5


def test_the_same_file_reported_by_fts_and_by_rucio_counts_once(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    target = uam_target(world, direction="out", site="cnaf")
    assert post(atlas_ddm, "fts", [FTS_COMPLETE]).json()["accepted"] == 1
    once = target_rates(target=target, max_window=60, stable_window=60).average_rate
    assert once == pytest.approx(10556847 / 60)
    response = post(atlas_ddm, "rucio", [rucio_of_fts(FTS_COMPLETE)])
    assert response.json() == {"accepted": 0, "duplicates": 1, "skipped": 0, "rejected": []}
    assert target_rates(target=target, max_window=60, stable_window=60).average_rate == pytest.approx(once)


def test_a_batch_of_1000_with_3_bad_items_stores_997_and_lists_the_3(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    batch: list[Any] = [fts_variant(i) for i in range(1000)]
    batch[10] = fts_variant(10, file_size="ten megabytes", f_size=None)
    del batch[500]["tr_id"]
    batch[999] = "not a message"
    response = post(atlas_ddm, "fts", batch)
    body = response.json()
    assert (body["accepted"], body["duplicates"], body["skipped"]) == (997, 0, 0)
    assert body["rejected"] == [
        {"index": 10, "error": "file_size: not a number: 'ten megabytes'"},
        {"index": 500, "error": "tr_id: missing"},
        {"index": 999, "error": "not a JSON object"},
    ]
    assert TransferRecord.objects.count() == 997


def test_a_line_of_ndjson_that_is_not_json_is_rejected_by_its_index(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    body = orjson.dumps(fts_variant(1)) + b"\n{broken\n\n" + orjson.dumps(fts_variant(2)) + b"\n"
    response = atlas_ddm.post("/api/v1/ingest/fts/", data=body, content_type="application/x-ndjson")
    result = response.json()
    assert result["accepted"] == 2
    assert [entry["index"] for entry in result["rejected"]] == [1]
    assert result["rejected"][0]["error"].startswith("not JSON")


@override_settings(INGEST_MAX_BODY_BYTES=10_000)
def test_an_oversized_body_is_refused_with_413_and_stores_nothing(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    response = post(atlas_ddm, "fts", [fts_variant(i) for i in range(10)])
    assert response.status_code == 413
    assert "10000 bytes" in response.json()["detail"]
    assert not TransferRecord.objects.exists()


def test_a_body_that_is_not_an_array_is_refused_and_stores_nothing(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    response = atlas_ddm.post("/api/v1/ingest/fts/", data=orjson.dumps(FTS_COMPLETE), content_type="application/json")
    assert response.status_code == 400
    assert "JSON array" in response.json()["detail"]
    assert not TransferRecord.objects.exists()


def test_a_ddm_token_may_send_only_its_own_experiments_records(world: dict[str, Any]) -> None:
    cms = client_for("ddm", experiment=world["cms"])
    response = post(cms, "fts", [fts_variant(1), fts_variant(2, vo="cms")])
    assert response.json() == {
        "accepted": 1,
        "duplicates": 0,
        "skipped": 0,
        "rejected": [{"index": 0, "error": "experiment ATLAS: this token sends records of CMS only"}],
    }
    assert list(TransferRecord.objects.values_list("experiment__name", flat=True)) == ["CMS"]


@pytest.mark.parametrize("role", ["viewer", "site-admin"])
def test_other_roles_may_not_ingest(world: dict[str, Any], role: str) -> None:
    from sites.tokens import token_issue

    _token, key = token_issue(username=f"u-{role}", role=role, site=world["cnaf"] if role == "site-admin" else None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert post(client, "fts", [FTS_COMPLETE]).status_code == 403
    assert APIClient().post("/api/v1/ingest/fts/", data=b"[]", content_type="application/json").status_code == 401
    assert not TransferRecord.objects.exists()


def test_another_experiments_token_cannot_make_the_real_message_a_duplicate(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    """Identity is per experiment: CMS's token sending ATLAS's FTS ids (tr_id, and the key shared with Rucio) stores
    a CMS record, and ATLAS's own message is still stored (it was dropped as a "duplicate" when identity was
    global)."""
    cms = client_for("ddm", experiment=world["cms"])
    forged = {**FTS_COMPLETE, "vo": "cms"}
    assert post(cms, "fts", [forged]).json()["accepted"] == 1
    response = post(atlas_ddm, "fts", [FTS_COMPLETE])
    assert response.json() == {"accepted": 1, "duplicates": 0, "skipped": 0, "rejected": []}
    assert sorted(TransferRecord.objects.values_list("experiment__name", flat=True)) == ["ATLAS", "CMS"]


def test_every_batch_adds_its_outcome_to_the_formats_totals_once_a_refused_body_nothing(
    world: dict[str, Any], atlas_ddm: APIClient, django_assert_max_num_queries: Any
) -> None:
    """The totals /metrics exports (results.ingest_counts): accepted, duplicates, skipped and rejected items per
    format, kept with one statement a batch; a body refused whole (not JSON, too large) stores and counts nothing."""
    from results.ingest_counts import IngestCount, ingest_counts

    batch: list[Any] = [fts_variant(i) for i in range(6)]
    batch[2] = fts_variant(2, file_size="ten megabytes", f_size=None)
    batch[4] = "not a message"
    assert post(atlas_ddm, "fts", [*batch, batch[0]]).json()["accepted"] == 4
    assert post(atlas_ddm, "fts", [batch[1], batch[5], {"tr_id": "x"}]).json()["duplicates"] == 2
    assert atlas_ddm.post("/api/v1/ingest/fts/", data=b"{broken", content_type="application/json").status_code == 400
    dune = client_for("ddm", experiment=world["dune"])
    queued = {**copy.deepcopy(RUCIO_TRANSFER_DONE), "event_type": "transfer-queued"}
    assert post(dune, "rucio", [queued, RUCIO_TRANSFER_DONE]).json()["skipped"] == 1
    assert ingest_counts() == {
        "fts": {"accepted": 4, "duplicates": 3, "skipped": 0, "rejected": 3},
        "rucio": {"accepted": 1, "duplicates": 0, "skipped": 1, "rejected": 0},
    }
    with django_assert_max_num_queries(1):  # the counting itself, once for the batch
        from results.ingest_counts import ingest_counts_add

        ingest_counts_add(format="perfsonar", accepted=0, duplicates=0, skipped=0, rejected=7)
    assert IngestCount.objects.get(format="perfsonar").rejected == 7
