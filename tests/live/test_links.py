"""The link panel: one row per link of a running challenge, its rates against its target, FTS's latest optimizer
decision and what limits the link, and its failures by FTS's category, scope and phase."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from rest_framework.test import APIClient

from challenges.models import Activity, Challenge, Target
from ingest.services import ingest_items
from live.links import challenge_links, link_limited_by
from live.now import board_minute
from results.models import OptimizerDecision, TransferRecord
from results.services import records_store
from sites.models import Experiment, Site
from sites.tokens import token_issue
from tests.live.scenario import door

pytestmark = pytest.mark.django_db

MB = 10**6
CERN_DOOR = "davs://eosatlas.cern.ch"
CNAF_DOOR = "davs://xfer-archive.cr.cnaf.infn.it"


@dataclass
class World:
    at: datetime
    challenge: Challenge
    activity: Activity
    cern: Site
    cnaf: Site
    pic: Site


def transfer(number: int, source: str, destination: str, end: datetime, **extra: Any) -> dict[str, Any]:
    """An FTS transfer-complete message of a file that moved 60 MB over the minute before `end`."""
    return {
        "tr_id": f"link-{number}",
        "job_id": "links",
        "vo": "atlas",
        "src_url": f"{source}/eos/atlas/f{number}",
        "dst_url": f"{destination}/atlas/f{number}",
        "tr_timestamp_start": int((end - timedelta(seconds=60)).timestamp() * 1000),
        "tr_timestamp_complete": int(end.timestamp() * 1000),
        "f_size": 60 * MB,
        "t_final_transfer_state": "Ok",
        **extra,
    }


def failure(number: int, end: datetime, **extra: Any) -> dict[str, Any]:
    return transfer(
        number,
        CERN_DOOR,
        CNAF_DOOR,
        end,
        f_size=0,
        t_final_transfer_state="Error",
        t__error_message=f"DESTINATION [70] Connection refused ({number})",
        **extra,
    )


COMMUNICATION = {
    "tr_error_category": "COMMUNICATION_ERROR",
    "tr_error_scope": "DESTINATION",
    "t_failure_phase": "TRANSFER_PREPARATION",
}


def decision(at: datetime, **extra: Any) -> dict[str, Any]:
    return {
        "source_se": CERN_DOOR,
        "dest_se": CNAF_DOOR,
        "datetime": at.isoformat(),
        "ema": 1.1e6,
        "active": 60,
        "actual_active": 60,
        "queue_size": 5000,
        "throughput": 1.0e6,
        "success": 100,
        "filesize_avg": 60e6,
        "filesize_stddev": 0,
        "rationale": "Source throughput limitation reached",
        "diff": 0,
        **extra,
    }


@pytest.fixture
def world() -> World:
    """ATLAS's challenge running now: a CERN -> CNAF link target of 10 MB/s (1 MB/s flows: one 60 MB file a minute
    for the last two hours), and PIC, which only the traffic names."""
    at = board_minute()
    atlas = Experiment.objects.get_or_create(name="ATLAS")[0]
    cern = Site.objects.create(name="CERN-PROD", tier=0)
    cnaf = Site.objects.create(name="INFN-T1", tier=1)
    pic = Site.objects.create(name="PIC", tier=1)
    for site, url in ((cern, CERN_DOOR), (cnaf, CNAF_DOOR), (pic, "root://door.pic.es:1094")):
        site.experiments.add(atlas)
        door(site, url)
    challenge = Challenge.objects.create(
        name="DC", slug="dc-links", start=at - timedelta(days=1), end=at + timedelta(days=1)
    )
    activity = Activity.objects.create(
        challenge=challenge,
        name="T0 export",
        experiment=atlas,
        mode="T0",
        kind="transfer",
        start=at - timedelta(hours=2),
        end=at + timedelta(hours=2),
    )
    Target.objects.create(activity=activity, link_from=cern, link_to=cnaf, rate=10 * MB)
    messages = [transfer(minute, CERN_DOOR, CNAF_DOOR, at - timedelta(minutes=minute - 1)) for minute in range(1, 121)]
    result = ingest_items(format="fts", items=messages, user=None)
    assert result.accepted == 120, result.as_dict()
    return World(at, challenge, activity, cern, cnaf, pic)


def coordinator_client() -> APIClient:
    _, key = token_issue(username="coordinator-links", role="coordinator")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def panel_row(client: APIClient, world: World, source: str = "CERN-PROD", destination: str = "INFN-T1") -> Any:
    response = client.get(f"/api/v1/challenges/{world.challenge.slug}/links/")
    assert response.status_code == 200, response.content
    rows = {(row["source"], row["destination"]): row for row in response.json()["links"]}
    return rows[(source, destination)]


def test_an_fts_optimizer_at_its_maximum_with_files_queued_limits_a_link_under_its_target(world: World) -> None:
    client = coordinator_client()
    sent = client.post(
        "/api/v1/ingest/fts-optimizer/", [decision(world.at - timedelta(minutes=2))], format="json"
    ).json()
    assert sent["accepted"] == 1, sent
    failures = [failure(1000 + n, world.at - timedelta(minutes=10 + n), **COMMUNICATION) for n in range(3)]
    assert ingest_items(format="fts", items=failures, user=None).accepted == 3
    row = panel_row(client, world)
    assert row["fts"]["active"] == 60 and row["fts"]["queue_size"] == 5000
    assert row["fts"]["rationale"] == "Source throughput limitation reached"
    assert row["limited_by"] == "fts_max_active"
    assert row["target_rate"] == 10 * MB
    assert len(row["errors"]) == 1
    entry = row["errors"][0]
    assert (entry["category"], entry["scope"], entry["phase"], entry["count"]) == (
        "COMMUNICATION_ERROR",
        "DESTINATION",
        "TRANSFER_PREPARATION",
        3,
    )
    assert entry["example"].startswith("DESTINATION [70] Connection refused")


def test_a_link_has_its_last_hour_and_average_rates_and_files_from_the_rollups(world: World) -> None:
    ingest_items(format="fts", items=[failure(2000, world.at - timedelta(minutes=5))], user=None)
    with time_machine.travel(world.at + timedelta(seconds=30), tick=False):  # the board's minute stays the world's
        row = panel_row(coordinator_client(), world)
    assert row["last_hour_rate"] == pytest.approx(1 * MB)  # 60 files of 60 MB in the hour
    assert row["average_rate"] == pytest.approx(1 * MB)  # 120 over the activity's two hours so far
    assert row["files_ok_last_hour"] == 60 and row["files_failed_last_hour"] == 1
    assert row["window_start"].startswith((world.at - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M"))


def test_a_link_only_the_traffic_names_has_a_row_without_a_target(world: World) -> None:
    ingest_items(
        format="fts",
        items=[transfer(3000, CERN_DOOR, "root://door.pic.es:1094", world.at - timedelta(minutes=1))],
        user=None,
    )
    row = panel_row(coordinator_client(), world, destination="PIC")
    assert row["target_rate"] is None and row["limited_by"] is None and row["fts"] is None
    assert row["files_ok_last_hour"] == 1


def test_a_site_target_of_an_activity_with_a_source_is_a_link(world: World) -> None:
    world.activity.source = world.cern
    world.activity.save()
    Target.objects.create(activity=world.activity, site=world.pic, direction="in", rate=3 * MB)
    row = panel_row(coordinator_client(), world, destination="PIC")
    assert row["target_rate"] == 3 * MB and row["last_hour_rate"] == 0


def test_the_latest_decision_is_the_one_shown(world: World) -> None:
    client = coordinator_client()
    later = decision(world.at - timedelta(minutes=1), active=42, rationale="Good link efficiency")
    client.post("/api/v1/ingest/fts-optimizer/", [decision(world.at - timedelta(minutes=3)), later], format="json")
    row = panel_row(client, world)
    assert row["fts"]["active"] == 42 and row["limited_by"] is None


def test_a_portal_runs_failure_is_counted_by_the_fts_scheme(world: World) -> None:
    end = world.at - timedelta(minutes=3)
    record = TransferRecord(
        experiment=world.activity.experiment,
        source_url=f"{CERN_DOOR}/probe/f1",
        destination_url=f"{CNAF_DOOR}/probe/f1",
        source_site=world.cern,
        destination_site=world.cnaf,
        bytes=0,
        start=end - timedelta(seconds=5),
        end=end,
        state="failed",
        error_message="destination refused the write: Permission denied",
        origin="probe",
        origin_id="probe-1",
    )
    records_store(records=[record])
    entry = panel_row(coordinator_client(), world)["errors"][0]
    assert (entry["category"], entry["scope"], entry["phase"], entry["count"]) == (
        "PERMISSION_DENIED",
        "DESTINATION",
        "TRANSFER_PREPARATION",
        1,
    )


def test_failures_before_the_last_hour_count_only_over_the_window(world: World) -> None:
    old = failure(4000, world.at - timedelta(minutes=90), **COMMUNICATION)
    ingest_items(format="fts", items=[old], user=None)
    from sites.roles import membership_grant
    from tests.sites.factories import UserFactory

    user = UserFactory()
    membership_grant(user=user, role="coordinator")
    panel = challenge_links(challenge=world.challenge, user=user, at=world.at, window_errors=True)
    row = next(link for link in panel["links"] if link["destination"] == "INFN-T1")
    assert row["errors"] == [] and [e["count"] for e in row["window_errors"]] == [1]


def make_decision(**values: Any) -> OptimizerDecision:
    defaults: dict[str, Any] = {"active": 20, "actual_active": 20, "queue_size": 100, "diff": 0, "rationale": ""}
    return OptimizerDecision(**(defaults | values))


@pytest.mark.parametrize(
    ("values", "target_rate", "expected"),
    [
        ({"active": 60, "queue_size": 5000}, 10.0, "fts_max_active"),
        ({"active": 60, "queue_size": 0}, 10.0, None),  # nothing queued: FTS is not what holds it
        ({"active": 60, "queue_size": 5000}, 0.5, None),  # over its target
        ({"active": 60, "queue_size": 5000}, None, None),  # no target to be under
        ({"active": 16, "actual_active": 20, "diff": -4, "rationale": "Bad link efficiency"}, 10.0, "fts_optimizer"),
        ({"rationale": "Source throughput limitation reached"}, 10.0, "source"),
        ({"rationale": "Destination throughput limitation reached"}, 10.0, "destination"),
        ({"rationale": "Good link efficiency"}, 10.0, None),
        ({"active": 16, "diff": -4, "rationale": "Good link efficiency, throughput deterioration"}, 10.0, None),
    ],
)
def test_what_limits_a_link(values: dict[str, Any], target_rate: float | None, expected: str | None) -> None:
    assert link_limited_by(decision=make_decision(**values), target_rate=target_rate, rate=1.0) == expected


def test_a_ddm_token_of_another_experiment_finds_no_such_challenge(world: World) -> None:
    cms = Experiment.objects.create(name="CMS")
    _, key = token_issue(username="cms-ddm-links", role="ddm", experiment=cms)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get(f"/api/v1/challenges/{world.challenge.slug}/links/").status_code == 404
    assert APIClient().get(f"/api/v1/challenges/{world.challenge.slug}/links/").status_code in (401, 403)


def test_the_page_shows_the_links_and_the_now_board_leads_to_it(world: World, client: Any) -> None:
    from sites.roles import membership_grant
    from tests.sites.factories import UserFactory

    user = UserFactory()
    membership_grant(user=user, role="coordinator")
    client.force_login(user)
    coordinator_client().post(
        "/api/v1/ingest/fts-optimizer/", [decision(world.at - timedelta(minutes=2))], format="json"
    )
    page = client.get(f"/challenges/{world.challenge.slug}/links/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "CERN-PROD → INFN-T1" in text and "Source throughput limitation reached" in text
    assert "fts_max_active" in text
    now = client.get(f"/challenges/{world.challenge.slug}/now/").content.decode()
    assert f"/challenges/{world.challenge.slug}/links/" in now


def test_the_panel_takes_the_same_queries_however_many_links(world: World, django_assert_max_num_queries: Any) -> None:
    from sites.roles import membership_grant
    from tests.sites.factories import UserFactory

    user = UserFactory()
    membership_grant(user=user, role="coordinator")
    for number in range(5):
        site = Site.objects.create(name=f"EXTRA-{number}", tier=2)
        Target.objects.create(activity=world.activity, link_from=world.cern, link_to=site, rate=MB)
    # 9 for the panel, 2 for its running targets' figures (their flows in one query, the runs outside their windows)
    with django_assert_max_num_queries(11):
        panel = challenge_links(challenge=world.challenge, user=user, at=world.at, window_errors=True)
    assert len(panel["links"]) == 6
