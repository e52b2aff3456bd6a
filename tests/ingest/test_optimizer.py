"""POST /api/v1/ingest/fts-optimizer/: FTS optimizer decisions in, as a JSON array or NDJSON, sites matched by the
storage elements' hosts, each decision stored once; bad items rejected by index with the field and the reason; a
DDM token sends only its experiment's links, stored with its experiment."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from rest_framework.test import APIClient

from results.models import OptimizerDecision
from sites.models import Site

from .helpers import client_for, endpoint

pytestmark = pytest.mark.django_db

URL = "/api/v1/ingest/fts-optimizer/"
AT = datetime(2024, 5, 14, 10, 2, tzinfo=UTC)
CNAF_SE = "srm://storm-fe.cr.cnaf.infn.it:8444"  # the world's CNAF endpoint


def decision(**changes: Any) -> dict[str, Any]:
    """A row of FTS's t_optimizer_evolution, CERN -> CNAF."""
    return {
        "source_se": "davs://eosatlas.cern.ch",
        "dest_se": CNAF_SE,
        "datetime": "2024-05-14 10:02:00",
        "ema": 1.25e9,
        "active": 60,
        "actual_active": 58,
        "queue_size": 5000,
        "throughput": 1.2e9,
        "success": 100,
        "filesize_avg": 2.5e9,
        "filesize_stddev": 1.1e8,
        "rationale": "Source throughput limitation reached",
        "diff": 2,
        **changes,
    }


@pytest.fixture
def cern_door(world: dict[str, Any]) -> None:
    endpoint(world["cern"], "davs://eosatlas.cern.ch/eos/atlas")
    world["cern"].experiments.add(world["atlas"])
    world["cnaf"].experiments.add(world["atlas"])


def post(client: APIClient, items: list[Any], *, ndjson: bool = False) -> Any:
    if ndjson:
        body = b"\n".join(orjson.dumps(item) for item in items)
        response = client.post(URL, data=body, content_type="application/x-ndjson")
    else:
        response = client.post(URL, data=orjson.dumps(items), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_decision_is_stored_with_its_sites_matched_by_host(
    world: dict[str, Any], cern_door: None, coordinator: APIClient
) -> None:
    assert post(coordinator, [decision()]) == {"accepted": 1, "duplicates": 0, "skipped": 0, "rejected": []}
    stored = OptimizerDecision.objects.get()
    assert (stored.source_site, stored.destination_site) == (world["cern"], world["cnaf"])
    assert (stored.at, stored.active, stored.actual_active, stored.queue_size, stored.diff) == (AT, 60, 58, 5000, 2)
    assert (stored.ema, stored.throughput, stored.success) == (1.25e9, 1.2e9, 100.0)
    assert stored.rationale == "Source throughput limitation reached" and stored.experiment is None
    assert (stored.source_host, stored.destination_host) == ("eosatlas.cern.ch", "storm-fe.cr.cnaf.infn.it")


def test_a_decision_sent_twice_is_stored_once(world: dict[str, Any], cern_door: None, coordinator: APIClient) -> None:
    post(coordinator, [decision()])
    assert post(coordinator, [decision(), decision()])["duplicates"] == 2
    assert OptimizerDecision.objects.count() == 1


@pytest.mark.parametrize(
    "moment",
    [
        {"datetime": "2024-05-14T10:02:00Z"},
        {"datetime": "2024-05-14T12:02:00+02:00"},
        {"datetime": int(AT.timestamp() * 1000)},
        {"datetime": None, "timestamp": int(AT.timestamp() * 1000)},
        {"datetime": None, "timestamp": f"{int(AT.timestamp() * 1000)}.000000"},
    ],
    ids=["iso-z", "iso-offset", "ms", "timestamp-ms", "timestamp-ms-string"],
)
def test_a_decisions_time_is_taken_in_ms_or_iso_8601(
    world: dict[str, Any], coordinator: APIClient, moment: dict[str, Any]
) -> None:
    assert post(coordinator, [decision(**moment)])["accepted"] == 1
    assert OptimizerDecision.objects.get().at == AT


def test_decisions_come_as_ndjson(world: dict[str, Any], cern_door: None, coordinator: APIClient) -> None:
    items = [decision(), decision(datetime="2024-05-14 10:03:00", active=58, diff=-2)]
    assert post(coordinator, items, ndjson=True)["accepted"] == 2
    assert list(OptimizerDecision.objects.values_list("active", flat=True)) == [60, 58]


def test_a_decision_of_unknown_storage_is_stored_without_sites(world: dict[str, Any], coordinator: APIClient) -> None:
    result = post(coordinator, [decision(source_se="root://unknown.example.org:1094")])
    assert result["accepted"] == 1
    stored = OptimizerDecision.objects.get()
    assert stored.source_site is None and stored.destination_site == world["cnaf"]
    assert stored.source_host == "unknown.example.org"


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (decision(source_se=None), "source_se: missing (a storage element such as davs://host or root://host:port)"),
        (decision(dest_se="no-host"), "dest_se: no host in 'no-host' (a storage element such as davs://host)"),
        (decision(active=None), "active: missing"),
        (decision(active=-1), "active: must be between 0 and 2147483647, not -1"),
        (decision(active=2.5), "active: a whole number, not 2.5"),
        (decision(queue_size=2**40), f"queue_size: must be between 0 and 2147483647, not {2**40}"),
        (decision(ema="fast"), "ema: not a number: 'fast'"),
        (decision(throughput="NaN"), "throughput: not a finite number: 'NaN'"),
        (decision(throughput=-3), "throughput: must be a number >= 0, not -3"),
        (decision(success=140), "success: a percentage (0 to 100), not 140"),
        (decision(datetime=None), "datetime: missing (or timestamp: epoch milliseconds or ISO 8601)"),
        (decision(datetime="yesterday"), "datetime: not an ISO 8601 time: 'yesterday'"),
        (decision(datetime=1e25), "datetime: time out of range: 1e+25"),
        (decision(rationale=["x"]), "rationale: not a string: ['x']"),
        (decision(vo="nobody"), "vo: 'nobody' is not an experiment of the registry"),
        (decision(source_se="davs://a\u0000b"), "source_se: contains a NUL character"),
        ("not an object", "not a JSON object"),
    ],
)
def test_a_bad_decision_is_rejected_by_its_index_and_the_rest_stored(
    world: dict[str, Any], coordinator: APIClient, bad: Any, error: str
) -> None:
    result = post(coordinator, [decision(), bad])
    assert result["rejected"] == [{"index": 1, "error": error}]
    assert result["accepted"] == 1


def test_a_line_of_ndjson_that_is_not_json_is_rejected_by_its_index(
    world: dict[str, Any], coordinator: APIClient
) -> None:
    body = orjson.dumps(decision()) + b"\n{not json\n"
    response = coordinator.post(URL, data=body, content_type="application/x-ndjson")
    assert response.status_code == 200
    assert response.json()["rejected"][0]["index"] == 1
    assert response.json()["rejected"][0]["error"].startswith("not JSON")


def test_a_body_that_is_not_an_array_is_a_400(world: dict[str, Any], coordinator: APIClient) -> None:
    response = coordinator.post(URL, data=b'{"active": 60}', content_type="application/json")
    assert response.status_code == 400 and "JSON array" in response.json()["detail"]
    assert OptimizerDecision.objects.count() == 0


def test_a_ddm_tokens_decisions_are_stored_with_its_experiment(
    world: dict[str, Any], cern_door: None, atlas_ddm: APIClient
) -> None:
    assert post(atlas_ddm, [decision()])["accepted"] == 1
    assert OptimizerDecision.objects.get().experiment == world["atlas"]


def test_a_ddm_token_sends_only_its_experiments_links(
    world: dict[str, Any], cern_door: None, atlas_ddm: APIClient
) -> None:
    outside = Site.objects.create(name="CMS-ONLY", tier=2)
    endpoint(outside, "davs://cms-only.example.org/store")
    result = post(atlas_ddm, [decision(), decision(dest_se="davs://cms-only.example.org", vo=None)])
    assert result["rejected"] == [
        {"index": 1, "error": "dest_se: the storage of a site that is not one of ATLAS's: not this token's link"}
    ]
    result = post(atlas_ddm, [decision(vo="CMS", datetime="2024-05-14 10:05:00")])
    assert result["rejected"] == [{"index": 0, "error": "experiment CMS: this token sends decisions of ATLAS only"}]
    assert OptimizerDecision.objects.count() == 1


def test_a_viewer_cannot_send_decisions(world: dict[str, Any]) -> None:
    response = client_for("viewer").post(URL, data=orjson.dumps([decision()]), content_type="application/json")
    assert response.status_code == 403
    assert OptimizerDecision.objects.count() == 0


def test_an_fts_failures_category_scope_and_phase_are_stored(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    from results.models import TransferRecord

    from .samples import fts_variant

    failed = fts_variant(
        7,
        t_final_transfer_state="Error",
        t__error_message="DESTINATION [70] Connection refused",
        tr_error_category="COMMUNICATION_ERROR",
        tr_error_scope="DESTINATION",
        t_failure_phase="TRANSFER_PREPARATION",
    )
    ok = fts_variant(8, tr_error_category="COMMUNICATION_ERROR")  # an Ok transfer has no failure to describe
    response = atlas_ddm.post("/api/v1/ingest/fts/", data=orjson.dumps([failed, ok]), content_type="application/json")
    assert response.json()["accepted"] == 2, response.content
    scheme = dict(TransferRecord.objects.values_list("state", "fts_error_category").order_by())
    assert scheme == {"failed": "COMMUNICATION_ERROR", "ok": ""}
    assert TransferRecord.objects.filter(state="failed").values_list("error_scope", "failure_phase").get() == (
        "DESTINATION",
        "TRANSFER_PREPARATION",
    )
