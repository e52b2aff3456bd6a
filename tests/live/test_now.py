"""The now board of a running challenge: the numbers of each target against the arithmetic of its definitions,
the verdicts, the sites' traffic, the sources' freshness, and the API's shape and access."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from live.now import now_board
from sites.tokens import token_issue
from tests.live.scenario import MB, STEADY, Scenario, scenario_make
from tests.sites.factories import UserFactory

pytestmark = pytest.mark.django_db

WINDOW = 4 * 3600.0  # the activity's window: two hours behind, two ahead
REMAINING = 2 * 3600.0


@pytest.fixture
def live() -> Scenario:
    return scenario_make()


@pytest.fixture
def coordinator() -> Any:
    from sites.roles import membership_grant

    user = UserFactory()
    membership_grant(user=user, role="coordinator")
    return user


def rows_by_target(board: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {row["target"]: row for row in board["targets"]}


def test_a_steady_link_under_its_target_will_miss_by_the_arithmetic(live: Scenario, coordinator: Any) -> None:
    row = rows_by_target(now_board(challenge=live.challenge, user=coordinator, at=live.at))[live.steady.pk]
    volume = 120 * STEADY
    last_hour = 60 * STEADY / 3600
    assert row["volume"] == pytest.approx(volume)
    assert row["last_hour_rate"] == pytest.approx(last_hour) and row["last_15min_rate"] == pytest.approx(last_hour)
    assert row["required_rate"] == pytest.approx((2 * MB * WINDOW - volume) / REMAINING)
    assert row["projected_average_rate"] == pytest.approx((volume + last_hour * REMAINING) / WINDOW)
    assert row["verdict"] == "will miss"  # 1 MB/s projected against 2 MB/s: under 0.8 of it
    assert len(row["trend"]) == 12 and row["trend"][-1]["rate"] == pytest.approx(1 * MB)  # 2 h of its window


def test_a_link_that_dropped_to_a_fifth_is_still_on_track_with_its_own_numbers(
    live: Scenario, coordinator: Any
) -> None:
    row = rows_by_target(now_board(challenge=live.challenge, user=coordinator, at=live.at))[live.dropped.pk]
    volume = 100 * STEADY + 20 * STEADY / 5
    last_hour = (40 * STEADY + 20 * STEADY / 5) / 3600
    assert row["volume"] == pytest.approx(volume)
    assert row["last_15min_rate"] == pytest.approx(0.2 * MB)
    assert row["last_hour_rate"] == pytest.approx(last_hour)
    assert row["projected_average_rate"] == pytest.approx((volume + last_hour * REMAINING) / WINDOW)
    assert row["verdict"] == "on track"


def test_a_target_whose_traffic_stopped_but_whose_volume_is_reached_is_met(live: Scenario, coordinator: Any) -> None:
    board = now_board(challenge=live.challenge, user=coordinator, at=live.at)
    row = rows_by_target(board)[live.stopped.pk]
    assert row["volume"] == pytest.approx(90 * STEADY)
    assert row["last_15min_rate"] == 0 and row["last_hour_rate"] == pytest.approx(30 * STEADY / 3600)
    assert row["verdict"] == "met"
    assert [r["verdict"] for r in board["targets"]] == ["will miss", "on track", "met"]  # worst first


def test_every_site_says_its_traffic_in_and_out_over_the_last_hour(live: Scenario, coordinator: Any) -> None:
    sites = {row["site"]: row for row in now_board(challenge=live.challenge, user=coordinator, at=live.at)["sites"]}
    out_of_a = (60 * STEADY + 40 * STEADY + 20 * STEADY / 5 + 30 * STEADY) / 3600
    assert sites["LIVE-A"]["out_rate_last_hour"] == pytest.approx(out_of_a)
    assert sites["LIVE-A"]["in_rate_last_hour"] == 0
    assert sites["LIVE-D"]["in_rate_last_hour"] == pytest.approx(30 * STEADY / 3600)
    assert sites["LIVE-B"]["experiments"] == [
        {"experiment": "ATLAS", "in_rate_last_hour": pytest.approx(1 * MB), "out_rate_last_hour": 0.0}
    ]


def test_the_fts_source_is_fresh_and_the_others_say_they_sent_nothing(live: Scenario, coordinator: Any) -> None:
    sources = {s["source"]: s for s in now_board(challenge=live.challenge, user=coordinator, at=live.at)["sources"]}
    assert sources["fts"]["age_seconds"] == 0  # the last records end at the board's minute
    assert sources["fts"]["records_last_hour"] == 60 + 60 + 30
    assert sources["rucio"]["latest_record_end"] is None and sources["rucio"]["records_last_hour"] == 0


def test_before_its_window_a_target_has_not_started_and_after_it_has_ended_with_its_final_verdict(
    live: Scenario, coordinator: Any
) -> None:
    before = now_board(challenge=live.challenge, user=coordinator, at=live.at - timedelta(hours=3))
    assert {row["verdict"] for row in before["targets"]} == {"not started"}
    after = rows_by_target(now_board(challenge=live.challenge, user=coordinator, at=live.at + timedelta(hours=3)))
    ended = after[live.stopped.pk]
    assert ended["window_ended"] and ended["verdict"] in ("met", "partly", "missed")
    assert ended["final_verdict"] == ended["verdict"]


def test_the_api_gives_the_board_with_exactly_its_fields(live: Scenario) -> None:
    _, key = token_issue(username="viewer", role="viewer")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = client.get(f"/api/v1/challenges/{live.challenge.slug}/now/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"at", "targets", "sites", "sources", "agents", "alerts"}
    rates = client.get(f"/api/v1/challenges/{live.challenge.slug}/rates/").json()["rows"][0]
    assert set(body["targets"][0]) == set(rates) | {"target", "final_verdict", "trend"}  # the rates API's row and more
    assert body["at"].endswith("Z") or body["at"].endswith("+00:00")


def test_a_ddm_token_of_another_experiment_finds_no_such_challenge(live: Scenario) -> None:
    from sites.models import Experiment

    cms = Experiment.objects.create(name="CMS")
    _, key = token_issue(username="cms-ddm", role="ddm", experiment=cms)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get(f"/api/v1/challenges/{live.challenge.slug}/now/").status_code == 404
    assert APIClient().get(f"/api/v1/challenges/{live.challenge.slug}/now/").status_code in (401, 403)


def test_a_running_consumer_says_its_lag_and_none_says_nothing(live: Scenario, coordinator: Any) -> None:
    from django.core.cache import cache

    from ingest.consumer import STATUS_KEY, consumer_status_write

    cache.delete_many([STATUS_KEY.format(format=name) for name in ("fts", "rucio", "perfsonar")])
    consumer_status_write(
        format="fts", destination="/topic/transfer.fts_monitoring_complete", lag_seconds=2.5, waiting=3
    )
    sources = {s["source"]: s for s in now_board(challenge=live.challenge, user=coordinator, at=live.at)["sources"]}
    assert sources["fts"]["consumer_lag_seconds"] == 2.5
    assert sources["rucio"]["consumer_lag_seconds"] is None  # no consumer of Rucio's messages runs
    cache.delete(STATUS_KEY.format(format="fts"))


def _cms_token(actor: str) -> str:
    """A token that acts as CMS's DDM service: a service's own, or a superuser's scoped to that one role."""
    from sites.models import Experiment
    from sites.roles import membership_grant
    from sites.tokens import token_create

    cms = Experiment.objects.get(name="CMS")
    if actor == "service":
        return token_issue(username="cms-ddm", role="ddm", experiment=cms)[1]
    user = UserFactory(username="root", is_superuser=True, is_staff=True)
    return token_create(user=user, membership=membership_grant(user=user, role="ddm", experiment=cms))[1]


@pytest.mark.parametrize("actor", ["service", "superuser scoped to the service"])
def test_a_cms_token_on_a_shared_challenge_sees_only_the_sites_of_cms_plan(live: Scenario, actor: str) -> None:
    from challenges.models import Activity, Target
    from sites.models import Experiment
    from tests.live.scenario import site_with_door

    cms = Experiment.objects.create(name="CMS")
    cms_site, _ = site_with_door("E")
    activity = Activity.objects.create(
        challenge=live.challenge, name="CMS export", experiment=cms, mode="T0", kind="transfer",
        start=live.activity.start, end=live.activity.end, source=live.sites["B"],
    )  # fmt: skip
    Target.objects.create(activity=activity, site=cms_site, direction="in", rate=MB)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {_cms_token(actor)}")
    body = client.get(f"/api/v1/challenges/{live.challenge.slug}/now/").json()
    assert {row["site"] for row in body["sites"]} == {live.sites["B"].name, cms_site.name}  # not A, C, D: ATLAS's only
    assert [row["target"] for row in body["targets"]] == [activity.targets.get().pk]
