"""The planning API: coordinators write with every rule checked, DDM services read their own plans, and the
clock tells an injector what runs now."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from challenges.models import Activity, Challenge, Target
from sites.choices import Role
from sites.models import Experiment, Site
from sites.roles import membership_grant

pytestmark = pytest.mark.django_db


@pytest.fixture
def plan() -> dict[str, Any]:
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    cern = Site.objects.create(name="CERN", tier=0, country="CH")
    cnaf = Site.objects.create(name="CNAF", tier=1, country="IT")
    lone = Site.objects.create(name="LONE", tier=2, country="ES")
    cern.experiments.set([atlas, cms])
    cnaf.experiments.set([atlas])
    lone.experiments.set([cms])
    now = timezone.now().replace(second=0, microsecond=0)
    challenge = Challenge.objects.create(
        name="DC", slug="dc", start=now - timedelta(days=2), end=now + timedelta(days=5)
    )
    running = Activity.objects.create(
        challenge=challenge,
        name="ATLAS DT",
        experiment=atlas,
        mode="DT",
        kind="tape-write",
        start=now - timedelta(hours=1),
        end=now + timedelta(hours=5),
        source=cern,
    )
    Target.objects.create(activity=running, site=cnaf, direction="in", rate=3.5e9)
    Activity.objects.create(
        challenge=challenge,
        name="ATLAS later",
        experiment=atlas,
        mode="A-DT",
        kind="staging",
        start=now + timedelta(days=1),
        end=now + timedelta(days=2),
    )
    Activity.objects.create(
        challenge=challenge,
        name="CMS now",
        experiment=cms,
        mode="DT",
        kind="transfer",
        start=now - timedelta(hours=1),
        end=now + timedelta(hours=1),
    )
    return {"challenge": challenge, "atlas": atlas, "cms": cms, "running": running, "now": now}


def api(role: str, experiment: Experiment | None = None) -> APIClient:
    user = get_user_model().objects.create_user(f"{role}-{experiment}")
    membership_grant(user=user, role=Role(role), experiment=experiment if role == "ddm" else None)
    client = APIClient()
    client.force_authenticate(user)
    return client


def activity_body(**overrides: Any) -> dict[str, Any]:
    now = timezone.now().replace(second=0, microsecond=0)
    body = {
        "challenge": "dc",
        "name": "new",
        "experiment": "ATLAS",
        "mode": "DT",
        "kind": "transfer",
        "start": (now + timedelta(hours=2)).isoformat(),
        "end": (now + timedelta(hours=4)).isoformat(),
    }
    return body | overrides


def test_a_coordinator_creates_an_activity(plan: dict[str, Any]) -> None:
    response = api("coordinator").post("/api/v1/activities/", activity_body(), format="json")
    assert response.status_code == 201, response.json()
    assert Activity.objects.filter(name="new", challenge=plan["challenge"]).exists()


def test_a_viewer_cannot_create_an_activity(plan: dict[str, Any]) -> None:
    assert api("viewer").post("/api/v1/activities/", activity_body(), format="json").status_code == 403
    assert not Activity.objects.filter(name="new").exists()


def test_an_activity_ending_before_it_starts_is_refused_on_its_end(plan: dict[str, Any]) -> None:
    now = timezone.now().replace(second=0, microsecond=0)
    body = activity_body(start=now.isoformat(), end=(now - timedelta(hours=1)).isoformat())
    response = api("coordinator").post("/api/v1/activities/", body, format="json")
    assert response.status_code == 400
    assert response.json()["end"] == ["the end must be after the start"]


def test_an_activity_window_with_seconds_is_refused_on_its_field(plan: dict[str, Any]) -> None:
    start = timezone.now().replace(second=0, microsecond=0) + timedelta(hours=2, seconds=30)
    response = api("coordinator").post("/api/v1/activities/", activity_body(start=start.isoformat()), format="json")
    assert response.status_code == 400
    assert response.json() == {"start": [f"on a whole minute, not {start.isoformat()} (rates are kept per minute)"]}
    assert not Activity.objects.filter(name="new").exists()


def test_an_activity_outside_its_challenge_is_refused(plan: dict[str, Any]) -> None:
    body = activity_body(end=(plan["challenge"].end + timedelta(days=1)).isoformat())
    response = api("coordinator").post("/api/v1/activities/", body, format="json")
    assert response.status_code == 400
    assert response.json()["end"][0].startswith("after the challenge ends")


def test_a_source_that_does_not_serve_the_experiment_is_refused(plan: dict[str, Any]) -> None:
    response = api("coordinator").post("/api/v1/activities/", activity_body(source="LONE"), format="json")
    assert response.status_code == 400
    assert response.json()["source"] == ["LONE does not serve ATLAS"]


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"site": "CERN", "direction": "out", "rate": 0}, "rate", "a positive number of bytes per second"),
        ({"site": "CNAF", "direction": "in", "rate": 1e9}, "site", "the activity already has a target for CNAF in"),
        ({"site": "LONE", "direction": "in", "rate": 1e9}, "site", "LONE does not serve ATLAS"),
        ({"link_from": "CERN", "link_to": "CERN", "rate": 1e9}, "link_to", "a link joins two different sites"),
        ({"rate": 1e9}, "site", "a site and a direction, or a link with both ends"),
        (
            {"site": "CERN", "direction": "out", "rate": 1e9, "nominal_rate": 2e8, "factors": {"headroom": 1.5}},
            "rate",
            "1e+09 B/s differs from nominal x factors = 3e+08 B/s",
        ),
    ],
)
def test_each_target_rule_is_reported_on_its_field(
    plan: dict[str, Any], body: dict[str, Any], field: str, message: str
) -> None:
    response = api("coordinator").post("/api/v1/targets/", {"activity": plan["running"].pk, **body}, format="json")
    assert response.status_code == 400
    assert message in response.json()[field]
    assert Target.objects.count() == 1


def test_a_derived_target_keeps_its_nominal_rate_and_factors(plan: dict[str, Any]) -> None:
    body = {
        "activity": plan["running"].pk,
        "site": "CERN",
        "direction": "out",
        "rate": 1.2e9,
        "nominal_rate": 2e8,
        "factors": {"headroom": 1.5, "efficiency": 2, "recovery": 2},
    }
    data = api("coordinator").post("/api/v1/targets/", body, format="json").json()
    assert data["derived_rate"] == pytest.approx(1.2e9)
    assert data["factors"] == {"headroom": 1.5, "efficiency": 2, "recovery": 2}


def test_the_clock_tells_an_injector_what_runs_now_with_targets(plan: dict[str, Any]) -> None:
    data = api("ddm", plan["atlas"]).get("/api/v1/clock/now/", {"experiment": "atlas"}).json()
    assert [activity["name"] for activity in data["activities"]] == ["ATLAS DT"]
    assert (data["experiment"], data["experiments"]) == ("ATLAS", ["ATLAS"])
    assert data["activities"][0]["targets"][0] | {"id": None} == {
        "id": None,
        "activity": plan["running"].pk,
        "site": "CNAF",
        "direction": "in",
        "link_from": None,
        "link_to": None,
        "rate": 3.5e9,
        "nominal_rate": None,
        "factors": {},
        "derived_rate": None,
    }


def test_a_ddm_service_cannot_follow_another_experiments_clock(plan: dict[str, Any]) -> None:
    response = api("ddm", plan["atlas"]).get("/api/v1/clock/now/", {"experiment": "CMS"})
    assert response.status_code == 403


@pytest.mark.parametrize("role", ["coordinator", "viewer"])
def test_without_an_experiment_the_clock_tells_who_reads_every_plan_all_of_them(
    plan: dict[str, Any], role: str
) -> None:
    response = api(role).get("/api/v1/clock/now/")
    assert response.status_code == 200, response.json()
    data = response.json()
    assert [activity["name"] for activity in data["activities"]] == ["ATLAS DT", "CMS now"]
    assert (data["experiment"], data["experiments"]) == (None, ["ATLAS", "CMS"])


def test_without_an_experiment_the_clock_tells_a_ddm_service_its_own(plan: dict[str, Any]) -> None:
    data = api("ddm", plan["cms"]).get("/api/v1/clock/now/").json()
    assert [activity["name"] for activity in data["activities"]] == ["CMS now"]
    assert data["experiments"] == ["CMS"]


def test_the_clock_of_an_unknown_experiment_is_not_found(plan: dict[str, Any]) -> None:
    assert api("viewer").get("/api/v1/clock/now/", {"experiment": "NOPE"}).status_code == 404


def test_a_ddm_service_reads_only_its_own_experiments_activities(plan: dict[str, Any]) -> None:
    client = api("ddm", plan["cms"])
    rows = client.get("/api/v1/activities/").json()["results"]
    assert [row["name"] for row in rows] == ["CMS now"]
    document = client.get("/api/v1/challenges/dc/plan/").json()
    assert [activity["name"] for activity in document["activities"]] == ["CMS now"]


def test_the_activity_list_takes_a_constant_number_of_queries(
    plan: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    client = api("viewer")
    with django_assert_max_num_queries(8):
        assert len(client.get("/api/v1/activities/").json()["results"]) == 3


def test_activities_are_filtered_by_challenge_slug_as_everywhere_else(plan: dict[str, Any]) -> None:
    other = Challenge.objects.create(name="Other", slug="other", start=plan["now"], end=plan["now"] + timedelta(days=1))
    Activity.objects.create(
        challenge=other,
        name="elsewhere",
        experiment=plan["atlas"],
        mode="DT",
        kind="transfer",
        start=other.start,
        end=other.end,
    )
    client = api("viewer")
    names = {row["name"] for row in client.get("/api/v1/activities/?challenge=dc").json()["results"]}
    assert names == {"ATLAS DT", "ATLAS later", "CMS now"}
    assert [row["name"] for row in client.get("/api/v1/activities/?challenge=other").json()["results"]] == ["elsewhere"]
