"""FTS retries: FTS publishes one transfer-complete message per try of a file (one Rucio request, one FTS job).
Every try is a record; the try that ends the job and Rucio's report of the same transfer count once."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.db.models import Sum
from rest_framework.test import APIClient

from results.models import RateRollup, TransferRecord

from .samples import FTS_COMPLETE, fts_variant, rucio_of_fts

pytestmark = pytest.mark.django_db

SIZE = int(FTS_COMPLETE["file_size"])


def post(client: APIClient, format: str, items: list[Any]) -> dict[str, Any]:
    response = client.post(f"/api/v1/ingest/{format}/", data=orjson.dumps(items), content_type="application/json")
    assert response.status_code == 200, response.content
    return dict(response.json())


def fts_try(*, retry: int, ok: bool, minute: str = "1435", retry_max: int = 2, recoverable: bool = True) -> Any:
    """A try of the first file of the sample's job. tr_id is made from the time the message is sent, to the minute
    (cern-fts/fts3 src/url-copy/Transfer.cpp getTransferId): tries within one minute share it."""
    message = fts_variant(1)
    message["tr_id"] = message["tr_id"].replace("-1435__", f"-{minute}__")
    message.update({"retry": str(retry), "retry_max": str(retry_max)})
    if not ok:
        message.update(
            {
                "t_final_transfer_state": "Error",
                "t__error_message": "TRANSFER [110] TRANSFER Operation timed out",
                "is_recoverable": recoverable,
                "timestamp_tr_st": "0",
                "timestamp_tr_comp": "0",
                "tr_timestamp_start": "1493217200000",
                "tr_timestamp_complete": "1493217260000",
            }
        )
    return message


def counted() -> tuple[int, int, float]:
    totals = RateRollup.objects.aggregate(ok=Sum("files_ok"), failed=Sum("files_failed"), bytes=Sum("bytes"))
    return totals["ok"] or 0, totals["failed"] or 0, totals["bytes"] or 0.0


def test_a_failed_try_and_the_successful_retry_are_two_records(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    first, second = fts_try(retry=0, ok=False, minute="1434"), fts_try(retry=1, ok=True)
    assert post(atlas_ddm, "fts", [first])["accepted"] == 1
    assert post(atlas_ddm, "fts", [second])["accepted"] == 1
    assert sorted(TransferRecord.objects.values_list("state", flat=True)) == ["failed", "ok"]
    assert counted() == (1, 1, pytest.approx(SIZE))


def test_tries_within_one_minute_share_a_tr_id_and_are_still_two_records(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    first, second = fts_try(retry=0, ok=False), fts_try(retry=1, ok=True)
    assert first["tr_id"] == second["tr_id"]
    assert post(atlas_ddm, "fts", [first, second])["accepted"] == 2
    assert counted() == (1, 1, pytest.approx(SIZE))


def test_a_try_sent_twice_is_a_duplicate(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    tries = [fts_try(retry=0, ok=False), fts_try(retry=1, ok=False, minute="1436"), fts_try(retry=2, ok=True)]
    assert post(atlas_ddm, "fts", tries)["accepted"] == 3
    assert post(atlas_ddm, "fts", tries) == {"accepted": 0, "duplicates": 3, "skipped": 0, "rejected": []}


@pytest.mark.parametrize("rucio_first", [False, True])
def test_rucios_transfer_done_and_the_successful_fts_try_count_once(
    world: dict[str, Any], atlas_ddm: APIClient, rucio_first: bool
) -> None:
    first, second = fts_try(retry=0, ok=False, minute="1434"), fts_try(retry=1, ok=True)
    rucio = rucio_of_fts(second)
    if rucio_first:
        assert post(atlas_ddm, "rucio", [rucio])["accepted"] == 1
    assert post(atlas_ddm, "fts", [first, second])["accepted"] == (1 if rucio_first else 2)
    if not rucio_first:
        assert post(atlas_ddm, "rucio", [rucio])["duplicates"] == 1
    assert TransferRecord.objects.count() == 2
    assert counted() == (1, 1, pytest.approx(SIZE))


@pytest.mark.parametrize(
    ("retry", "retry_max", "recoverable"), [(2, 2, True), (0, 2, False)], ids=["last-retry", "not-recoverable"]
)
def test_rucios_transfer_failed_and_the_last_failed_fts_try_count_once(
    world: dict[str, Any], atlas_ddm: APIClient, retry: int, retry_max: int, recoverable: bool
) -> None:
    tries = [fts_try(retry=n, ok=False, minute=f"14{30 + n}") for n in range(retry)]
    last = fts_try(retry=retry, ok=False, retry_max=retry_max, recoverable=recoverable)
    assert post(atlas_ddm, "fts", [*tries, last])["accepted"] == retry + 1
    failed = rucio_of_fts(last)
    failed["event_type"] = "transfer-failed"
    assert post(atlas_ddm, "rucio", [failed])["duplicates"] == 1
    assert counted() == (0, retry + 1, 0.0)
