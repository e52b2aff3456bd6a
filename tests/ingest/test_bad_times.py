"""Records of impossible times are refused by item with what was probably wrong (FTS times in seconds rather than
milliseconds, a zero time, an end before 2000 or more than 10 minutes ahead of the portal's clock, an end before
the start); the rest of the batch is stored, and nothing of the refused items."""

from __future__ import annotations

import copy
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from results.models import TransferRecord

from .helpers import client_for
from .samples import FTS_COMPLETE, PERFSONAR_THROUGHPUT, RUCIO_TRANSFER_DONE, fts_variant

pytestmark = pytest.mark.django_db

AHEAD = "more than 10 minutes ahead of the portal's clock"


def post(client: APIClient, format: str, items: list[Any]) -> Any:
    response = client.post(f"/api/v1/ingest/{format}/", data=orjson.dumps(items), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def utc(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def fts_times(start: int | str, end: int | str, *, number: int = 1) -> dict[str, Any]:
    """The FTS sample with only the whole transfer's times (the data transfer's left out, as FTS does when it did
    not measure them)."""
    return fts_variant(
        number, timestamp_tr_st="", timestamp_tr_comp="", tr_timestamp_start=start, tr_timestamp_complete=end
    )


def refused(error: str) -> dict[str, Any]:
    return {"accepted": 1, "duplicates": 0, "skipped": 0, "rejected": [{"index": 1, "error": error}]}


def stored_ids() -> list[str]:
    return list(TransferRecord.objects.values_list("origin_id", flat=True))


# --- FTS -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (
            fts_times(1699999950, 1700000000),
            "tr_timestamp_complete 1700000000 is 1970-01-20T16:13:20Z: looks like seconds, not milliseconds",
        ),
        (
            fts_variant(1, timestamp_tr_st="1699999990.000000", timestamp_tr_comp="1700000000.000000"),
            "timestamp_tr_comp 1700000000 is 1970-01-20T16:13:20Z: looks like seconds, not milliseconds",
        ),
        (
            fts_times(1493217290, FTS_COMPLETE["tr_timestamp_complete"]),
            "tr_timestamp_start 1493217290 is 1970-01-18T06:46:57Z: looks like seconds, not milliseconds",
        ),
    ],
    ids=["end", "data-transfer", "start-only"],
)
def test_an_fts_time_in_seconds_is_refused_as_seconds_not_milliseconds(
    world: dict[str, Any], atlas_ddm: APIClient, bad: dict[str, Any], error: str
) -> None:
    result = post(atlas_ddm, "fts", [fts_variant(0), bad])
    assert result == refused(error)
    assert stored_ids() == [fts_variant(0)["tr_id"]]


def test_an_fts_transfer_ending_30_days_ahead_is_refused_as_in_the_future(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    end = datetime.now(UTC) + timedelta(days=30)
    result = post(atlas_ddm, "fts", [fts_variant(0), fts_times(ms(end) - 60_000, ms(end))])
    error = f"tr_timestamp_complete {ms(end)} is {utc(end)}: ends 30 days in the future ({AHEAD})"
    assert result == refused(error)
    assert stored_ids() == [fts_variant(0)["tr_id"]]


def test_an_fts_transfer_ending_before_2000_is_refused(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    result = post(atlas_ddm, "fts", [fts_variant(0), fts_times(946684790000, 946684799000)])
    error = (
        "tr_timestamp_complete 946684799000 is 1999-12-31T23:59:59Z: ends before 2000-01-01, before any grid "
        "transfer (a wrong time or unit)"
    )
    assert result == refused(error)
    assert stored_ids() == [fts_variant(0)["tr_id"]]


def test_an_fts_transfer_of_zero_times_is_refused_as_not_set(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    result = post(atlas_ddm, "fts", [fts_variant(0), fts_times("0", "0.000000")])
    error = "tr_timestamp_complete 0 is 1970-01-01T00:00:00Z: a zero time (the sender did not set it)"
    assert result == refused(error)
    assert stored_ids() == [fts_variant(0)["tr_id"]]


def test_an_fts_transfer_ending_before_it_starts_is_refused_with_both_times(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    result = post(atlas_ddm, "fts", [fts_variant(0), fts_times(1493217344240, 1493217290323)])
    error = (
        "tr_timestamp_complete 1493217290323 is before tr_timestamp_start 1493217344240: the transfer ends before "
        "it starts"
    )
    assert result == refused(error)
    assert stored_ids() == [fts_variant(0)["tr_id"]]


def test_the_first_millisecond_of_2000_is_the_earliest_end_taken(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    first = datetime(2000, 1, 1, tzinfo=UTC)
    on, before = fts_times(ms(first) - 5000, ms(first), number=0), fts_times(ms(first) - 5000, ms(first) - 1)
    result = post(atlas_ddm, "fts", [on, before])
    assert result["accepted"] == 1
    assert [entry["index"] for entry in result["rejected"]] == [1]
    assert TransferRecord.objects.get().end == first


def test_an_end_9_minutes_ahead_is_taken_and_11_minutes_ahead_refused(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    now = datetime.now(UTC)
    nine, eleven = now + timedelta(minutes=9), now + timedelta(minutes=11)
    result = post(atlas_ddm, "fts", [fts_times(ms(now), ms(nine), number=0), fts_times(ms(now), ms(eleven))])
    error = f"tr_timestamp_complete {ms(eleven)} is {utc(eleven)}: ends 11 minutes in the future ({AHEAD})"
    assert result == refused(error)
    assert stored_ids() == [fts_variant(0)["tr_id"]]


# --- Rucio ---------------------------------------------------------------------------------------------------


def rucio_times(**times: Any) -> dict[str, Any]:
    event = copy.deepcopy(RUCIO_TRANSFER_DONE)
    event["payload"]["request-id"] = "c" * 32
    for name, value in times.items():
        if name == "created_at":
            event["created_at"] = value
        else:
            event["payload"][name] = value
    return event


def rucio_text(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")  # as Hermes writes its times: naive UTC


@pytest.fixture
def dune_ddm(world: dict[str, Any]) -> APIClient:
    return client_for("ddm", experiment=world["dune"])


def test_a_rucio_transfer_ending_30_days_ahead_is_refused_as_in_the_future(
    world: dict[str, Any], dune_ddm: APIClient
) -> None:
    end = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    bad = rucio_times(started_at=rucio_text(end - timedelta(minutes=4)), transferred_at=rucio_text(end))
    result = post(dune_ddm, "rucio", [RUCIO_TRANSFER_DONE, bad])
    assert result == refused(f"payload.transferred_at {utc(end)}: ends 30 days in the future ({AHEAD})")
    assert stored_ids() == [RUCIO_TRANSFER_DONE["payload"]["request-id"]]


def test_a_rucio_event_without_transferred_at_is_held_to_its_created_at(
    world: dict[str, Any], dune_ddm: APIClient
) -> None:
    end = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    bad = rucio_times(started_at=None, transferred_at=None, duration="60", created_at=rucio_text(end))
    result = post(dune_ddm, "rucio", [RUCIO_TRANSFER_DONE, bad])
    assert result == refused(f"created_at {utc(end)}: ends 2 hours in the future ({AHEAD})")


def test_a_rucio_transfer_ending_before_2000_is_refused(world: dict[str, Any], dune_ddm: APIClient) -> None:
    bad = rucio_times(started_at="1999-12-31 23:50:00", transferred_at="1999-12-31 23:59:00")
    result = post(dune_ddm, "rucio", [RUCIO_TRANSFER_DONE, bad])
    error = (
        "payload.transferred_at 1999-12-31T23:59:00Z: ends before 2000-01-01, before any grid transfer (a wrong "
        "time or unit)"
    )
    assert result == refused(error)
    assert stored_ids() == [RUCIO_TRANSFER_DONE["payload"]["request-id"]]


def test_a_rucio_transfer_ending_before_it_starts_is_refused_with_both_times(
    world: dict[str, Any], dune_ddm: APIClient
) -> None:
    bad = rucio_times(started_at="2022-01-31 16:59:00", transferred_at="2022-01-31 16:57:41")
    result = post(dune_ddm, "rucio", [RUCIO_TRANSFER_DONE, bad])
    error = (
        "payload.transferred_at 2022-01-31T16:57:41Z is before payload.started_at 2022-01-31T16:59:00Z: the "
        "transfer ends before it starts"
    )
    assert result == refused(error)


# --- perfSONAR -----------------------------------------------------------------------------------------------


def perfsonar_times(start: str, end: str | None = None, *, succeeded: bool = True) -> dict[str, Any]:
    run = copy.deepcopy(PERFSONAR_THROUGHPUT)
    run["run"]["href"] = "https://ps-bandwidth.cern.ch/pscheduler/tasks/t/runs/bad"
    run["run"]["start-time"] = start
    run["run"]["end-time"] = end
    run["run"]["result-merged"]["succeeded"] = succeeded
    return run


def test_a_perfsonar_run_ending_30_days_ahead_is_refused_as_in_the_future(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    start = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    result = post(atlas_ddm, "perfsonar", [PERFSONAR_THROUGHPUT, perfsonar_times(utc(start))])
    end = utc(start + timedelta(seconds=10.000231))  # the summary's end
    error = f"run.start-time + result.summary.summary.end {end}: ends 30 days in the future ({AHEAD})"
    assert result == refused(error)
    assert stored_ids() == [PERFSONAR_THROUGHPUT["run"]["href"]]


def test_a_perfsonar_run_ending_before_2000_is_refused(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    bad = perfsonar_times("1999-12-31T23:50:00Z", "1999-12-31T23:50:12Z", succeeded=False)
    result = post(atlas_ddm, "perfsonar", [PERFSONAR_THROUGHPUT, bad])
    error = "run.end-time 1999-12-31T23:50:12Z: ends before 2000-01-01, before any grid transfer (a wrong time or unit)"
    assert result == refused(error)


def test_a_failed_perfsonar_run_ending_before_it_starts_is_refused(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    bad = perfsonar_times("2026-03-02T10:00:00Z", "2026-03-02T09:59:00Z", succeeded=False)
    result = post(atlas_ddm, "perfsonar", [PERFSONAR_THROUGHPUT, bad])
    error = (
        "run.end-time 2026-03-02T09:59:00Z is before run.start-time 2026-03-02T10:00:00Z: the transfer ends before "
        "it starts"
    )
    assert result == refused(error)
    assert stored_ids() == [PERFSONAR_THROUGHPUT["run"]["href"]]


# --- a dump --------------------------------------------------------------------------------------------------


def test_a_dump_counts_and_names_its_records_of_impossible_times(world: dict[str, Any], tmp_path: Path) -> None:
    dump = tmp_path / "fts.ndjson"
    lines = [fts_variant(0), fts_times(1699999950, 1700000000), fts_variant(2)]
    dump.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    out, err = io.StringIO(), io.StringIO()
    call_command("ingest", "--format", "fts", "--no-progress", str(dump), stdout=out, stderr=err)
    assert out.getvalue().strip() == "accepted 2, duplicates 0, skipped 0, rejected 1"
    assert "looks like seconds, not milliseconds" in err.getvalue()
    assert sorted(stored_ids()) == sorted([fts_variant(0)["tr_id"], fts_variant(2)["tr_id"]])
