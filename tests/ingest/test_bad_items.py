"""Items PostgreSQL would refuse (numbers past a bigint, NUL characters, host names past their column, times that
make no transfer) are rejected by item, with the field and the reason; the rest of the batch is stored."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from rest_framework.test import APIClient

from results.models import TransferRecord

from .helpers import client_for
from .samples import PERFSONAR_THROUGHPUT, RUCIO_TRANSFER_DONE, fts_variant

pytestmark = pytest.mark.django_db

LONG_HOST = "a" * 250 + ".example.org"  # 262 characters: past the 255 of the host columns (and of DNS)


def post(client: APIClient, format: str, items: list[Any]) -> Any:
    response = client.post(f"/api/v1/ingest/{format}/", data=orjson.dumps(items), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def fts_bad(**changes: Any) -> dict[str, Any]:
    return fts_variant(1, **changes)


def fts_long_request_id() -> dict[str, Any]:
    message = fts_variant(1)
    message["file_metadata"]["request_id"] = "r" * 300
    return message


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (fts_bad(file_size="1e25", f_size="1e25"), "file_size: 1e+25 bytes is more than a record holds"),
        (fts_bad(file_size="NaN", f_size=None), "file_size: must be a number >= 0, not 'NaN'"),
        (fts_bad(file_size="Infinity", f_size=None), "file_size: must be a number >= 0, not 'Infinity'"),
        (fts_bad(tr_id="2017-04-26-1435__a\u0000b"), "tr_id: contains a NUL character"),
        (fts_bad(dst_url="srm://grid002.ft.uam.es:8443/data\u0000/file"), "dst_url: contains a NUL character"),
        (fts_bad(dst_url=f"davs://{LONG_HOST}/data/file"), "dst_url: a host name of 262 characters (at most 255)"),
        (
            fts_bad(timestamp_tr_st="0", timestamp_tr_comp="0", tr_timestamp_complete="1e25"),
            "tr_timestamp_complete: time out of range: 1e+25",
        ),
        (
            fts_bad(timestamp_tr_st="0", timestamp_tr_comp="0", tr_timestamp_start="1000"),
            "the transfer lasts 17282.6 days: more than 7, its times are wrong",
        ),
    ],
    ids=["size-1e25", "size-nan", "size-inf", "tr_id-nul", "dst_url-nul", "host-too-long", "time-1e25", "decades"],
)
def test_an_fts_item_postgresql_would_refuse_is_rejected_by_item(
    world: dict[str, Any], atlas_ddm: APIClient, bad: dict[str, Any], error: str
) -> None:
    assert post(atlas_ddm, "fts", [fts_variant(0), bad]) == {
        "accepted": 1,
        "duplicates": 0,
        "skipped": 0,
        "rejected": [{"index": 1, "error": error}],
    }
    assert TransferRecord.objects.get().origin_id == fts_variant(0)["tr_id"]


def test_an_over_long_transfer_key_is_kept_as_its_hash_and_still_matches_rucios(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    from .samples import rucio_of_fts

    message = fts_long_request_id()
    assert post(atlas_ddm, "fts", [message])["accepted"] == 1
    key = TransferRecord.objects.get().transfer_key
    assert key.startswith("sha256:") and len(key) <= 200
    assert post(atlas_ddm, "rucio", [rucio_of_fts(message)])["duplicates"] == 1


def test_a_nul_in_an_error_message_is_dropped_and_the_failure_stored(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    failed = fts_variant(1, t_final_transfer_state="Error", t__error_message="TRANSFER\u0000 Operation timed out")
    assert post(atlas_ddm, "fts", [failed])["accepted"] == 1
    assert TransferRecord.objects.get().error_message == "TRANSFER Operation timed out"


def rucio_bad(**changes: Any) -> dict[str, Any]:
    event = copy.deepcopy(RUCIO_TRANSFER_DONE)
    event["payload"]["request-id"] = "c" * 32
    event["payload"].update(changes)
    return event


DECADES = "the transfer lasts 19023.7 days: more than 7, its times are wrong"
AGES = "the transfer lasts 1.15741e+20 days: more than 7, its times are wrong"


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (rucio_bad(bytes="1e25"), "bytes: 1e+25 bytes is more than a record holds"),
        (rucio_bad(bytes="NaN"), "bytes: must be a number >= 0, not 'NaN'"),
        (rucio_bad(**{"request-id": "c\u0000d"}), "payload.request-id: contains a NUL character"),
        (
            rucio_bad(**{"src-url": f"root://{LONG_HOST}//f"}),
            "payload.src-url: a host name of 262 characters (at most 255)",
        ),
        (rucio_bad(started_at="1970-01-01 00:00:00"), DECADES),
        (rucio_bad(started_at=None, duration="NaN"), "payload.duration: not a finite number: 'NaN'"),
        (rucio_bad(started_at=None, duration="1e25"), AGES),
    ],
    ids=["bytes-1e25", "bytes-nan", "request-id-nul", "host-too-long", "decades", "duration-nan", "duration-1e25"],
)
def test_a_rucio_item_postgresql_would_refuse_is_rejected_by_item(
    world: dict[str, Any], bad: dict[str, Any], error: str
) -> None:
    dune = client_for("ddm", experiment=world["dune"])
    assert post(dune, "rucio", [RUCIO_TRANSFER_DONE, bad]) == {
        "accepted": 1,
        "duplicates": 0,
        "skipped": 0,
        "rejected": [{"index": 1, "error": error}],
    }


def perfsonar_bad(*, source: str | None = None, href: str | None = None, **summary: Any) -> dict[str, Any]:
    run = copy.deepcopy(PERFSONAR_THROUGHPUT)
    run["run"]["href"] = href or "https://ps-bandwidth.cern.ch/pscheduler/tasks/t/runs/bad"
    if source is not None:
        run["task"]["test"]["spec"]["source"] = source
    run["run"]["result-merged"]["summary"]["summary"].update(summary)
    return run


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (perfsonar_bad(**{"throughput-bytes": "1e25"}), "throughput-bytes: 1e+25 bytes is more than a record holds"),
        (perfsonar_bad(end="1e300"), "the transfer lasts 1.15741e+295 days: more than 7, its times are wrong"),
        (perfsonar_bad(end="NaN"), "end: must be a number >= 0, not 'NaN'"),
        (perfsonar_bad(source="ps\u0000.cern.ch"), "task.test.spec.source: contains a NUL character"),
        (perfsonar_bad(href="https://ps/runs/\u0000"), "run.href: contains a NUL character"),
        (perfsonar_bad(source=LONG_HOST), "task.test.spec.source: a host name of 262 characters (at most 255)"),
    ],
    ids=["bytes-1e25", "end-1e300", "end-nan", "source-nul", "href-nul", "host-too-long"],
)
def test_a_perfsonar_item_postgresql_would_refuse_is_rejected_by_item(
    world: dict[str, Any], atlas_ddm: APIClient, bad: dict[str, Any], error: str
) -> None:
    assert post(atlas_ddm, "perfsonar", [PERFSONAR_THROUGHPUT, bad]) == {
        "accepted": 1,
        "duplicates": 0,
        "skipped": 0,
        "rejected": [{"index": 1, "error": error}],
    }


def test_the_ddm_activity_name_is_kept_and_a_bad_one_rejected_by_item(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    rucio = copy.deepcopy(RUCIO_TRANSFER_DONE)
    rucio["payload"]["activity"] = ["not", "a", "name"]
    assert post(atlas_ddm, "fts", [fts_variant(0), fts_bad(activity={"a": 1})])["rejected"] == [
        {"index": 1, "error": "activity: not a string: {'a': 1}"}
    ]
    assert post(atlas_ddm, "rucio", [rucio])["rejected"] == [
        {"index": 0, "error": "payload.activity: not a string: ['not', 'a', 'name']"}
    ]
    assert list(TransferRecord.objects.values_list("ddm_activity", flat=True)) == ["Data Consolidation"]


def test_a_huge_error_message_is_cut_and_a_huge_url_rejected_by_item(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    failed = fts_bad(t_final_transfer_state="Error", t__error_message="TRANSFER timeout " + "x" * 10**6)
    long_url = fts_bad(src_url="davs://storage.example.org/" + "a" * 5000)
    result = post(atlas_ddm, "fts", [failed, long_url])
    assert result["accepted"] == 1
    assert result["rejected"] == [{"index": 1, "error": "src_url: a URL of 5027 characters (at most 4096)"}]
    message = TransferRecord.objects.get().error_message
    assert len(message) == 2000 and message.startswith("TRANSFER timeout") and message.endswith("…")
