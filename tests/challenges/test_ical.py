"""The iCalendar feeds, parsed back by the icalendar library."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client
from icalendar import Calendar

from challenges.choices import ActivityKind
from challenges.models import Activity
from sites.models import Experiment
from sites.roles import membership_grant
from sites.tokens import token_create
from tests.challenges.factories import ActivityFactory, ChallengeFactory, TargetFactory
from tests.sites.factories import ExperimentFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2022, 3, day, hour, tzinfo=UTC)


@pytest.fixture
def plan() -> dict[str, Activity]:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    cern, cnaf, bnl, kit = (SiteFactory(name=name, experiments=[atlas, cms]) for name in ("CERN", "CNAF", "BNL", "KIT"))
    tc22 = ChallengeFactory(slug="tc22", name="Tape Challenge 2022", start=at(7), end=at(26))
    other = ChallengeFactory(slug="other", name="Network Challenge", start=at(1), end=at(31))
    atlas_dt = ActivityFactory(
        challenge=tc22,
        name="ATLAS DT",
        experiment=atlas,
        mode="DT",
        kind=ActivityKind.TAPE_WRITE,
        start=at(14),
        end=at(19),
        source=cern,
    )
    TargetFactory(activity=atlas_dt, site=cnaf, direction="in", rate=3.5e9)
    TargetFactory(activity=atlas_dt, site=None, direction="", link_from=cern, link_to=bnl, rate=3.5e9)
    cms_adt = ActivityFactory(
        challenge=tc22, name="CMS A-DT", experiment=cms, mode="A-DT", kind=ActivityKind.STAGING, start=at(7), end=at(12)
    )
    TargetFactory(
        activity=cms_adt,
        site=kit,
        direction="out",
        rate=0.29e9,
        nominal_rate=0.0967e9,
        factors={"headroom": 1.5, "efficiency": 2},
    )
    network = ActivityFactory(
        challenge=other, name="CMS network", experiment=cms, kind=ActivityKind.NETWORK, start=at(2), end=at(3)
    )
    TargetFactory(activity=network, site=None, direction="", link_from=kit, link_to=bnl, rate=1e9)
    ActivityFactory(challenge=other, name="ATLAS at KIT only", experiment=atlas, start=at(4), end=at(5))
    return {"atlas_dt": atlas_dt, "cms_adt": cms_adt, "network": network}


@pytest.fixture
def reader(client: Client) -> Client:
    client.force_login(UserFactory())
    return client


def events(content: bytes) -> dict[str, object]:
    return {str(event["summary"]): event for event in Calendar.from_ical(content).walk("VEVENT")}


def test_the_challenge_feed_has_one_event_per_activity_in_utc(reader: Client, plan: dict[str, Activity]) -> None:
    response = reader.get("/challenges/tc22/calendar.ics")
    assert response["Content-Type"].startswith("text/calendar")
    parsed = events(response.content)
    assert sorted(parsed) == ["ATLAS DT (tape-write)", "CMS A-DT (staging)"]
    event = parsed["ATLAS DT (tape-write)"]
    assert event["dtstart"].dt == at(14) and event["dtend"].dt == at(19)  # type: ignore[index]
    assert event["dtstart"].dt.utcoffset().total_seconds() == 0  # type: ignore[index]
    assert "Z" in event["dtstart"].to_ical().decode()  # type: ignore[index]


def test_the_description_lists_the_targets_in_gbytes_per_second(reader: Client, plan: dict[str, Activity]) -> None:
    parsed = events(reader.get("/challenges/tc22/calendar.ics").content)
    atlas = str(parsed["ATLAS DT (tape-write)"]["description"])  # type: ignore[index]
    assert "CNAF in: 3.5 GB/s" in atlas and "CERN -> BNL: 3.5 GB/s" in atlas
    cms = str(parsed["CMS A-DT (staging)"]["description"])  # type: ignore[index]
    assert "nominal 0.0967 GB/s x headroom 1.5 x efficiency 2 = 0.290 GB/s" in cms


def test_event_uids_stay_the_same_when_an_activity_is_edited(reader: Client, plan: dict[str, Activity]) -> None:
    before = {str(e["uid"]) for e in events(reader.get("/challenges/tc22/calendar.ics").content).values()}
    Activity.objects.filter(pk=plan["atlas_dt"].pk).update(name="ATLAS DT renamed", end=at(20))
    after = {str(e["uid"]) for e in events(reader.get("/challenges/tc22/calendar.ics").content).values()}
    assert before == after and len(after) == 2


def test_the_site_feed_holds_activities_of_all_challenges_that_target_or_source_it(
    reader: Client, plan: dict[str, Activity]
) -> None:
    assert sorted(events(reader.get("/challenges/site/BNL/calendar.ics").content)) == [
        "ATLAS DT (tape-write)",  # the link's destination, in tc22
        "CMS network (network)",  # the link's destination, in the other challenge
    ]
    assert sorted(events(reader.get("/challenges/site/CERN/calendar.ics").content)) == ["ATLAS DT (tape-write)"]
    assert sorted(events(reader.get("/challenges/site/KIT/calendar.ics").content)) == [
        "CMS A-DT (staging)",
        "CMS network (network)",
    ]


def test_an_unknown_site_feed_is_404(reader: Client, plan: dict[str, Activity]) -> None:
    assert reader.get("/challenges/site/NOWHERE/calendar.ics").status_code == 404


def test_an_anonymous_calendar_client_is_told_to_authenticate(client: Client, plan: dict[str, Activity]) -> None:
    response = client.get("/challenges/tc22/calendar.ics")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"


def test_a_calendar_client_may_send_an_api_token(client: Client, plan: dict[str, Activity]) -> None:
    _, key = token_create(user=UserFactory(), name="calendar")
    response = client.get("/challenges/tc22/calendar.ics", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200 and len(events(response.content)) == 2


def test_a_ddm_token_sees_only_its_experiment_on_every_door_of_the_plan(
    client: Client, plan: dict[str, Activity]
) -> None:
    """One access policy (Activity.objects.restrict): a DDM service of CMS saw ATLAS's activities in the calendar,
    on the clock page and its exports, and in the load planner, though not in the API."""
    user = UserFactory(username="rucio-cms")
    cms = Experiment.objects.get(name="CMS")
    membership = membership_grant(user=user, role="ddm", experiment=cms)
    _, key = token_create(user=user, membership=membership)
    token = {"HTTP_AUTHORIZATION": f"Token {key}"}
    _, reader_key = token_create(user=UserFactory(username="viewer-of-all"))
    assert [name.split(" (")[0] for name in events(client.get("/challenges/tc22/calendar.ics", **token).content)] == [
        "CMS A-DT"
    ]
    everyone = events(
        Client().get("/challenges/site/CNAF/calendar.ics", HTTP_AUTHORIZATION=f"Token {reader_key}").content
    )
    assert any("ATLAS" in name for name in everyone)
    site_feed = events(client.get("/challenges/site/CNAF/calendar.ics", **token).content)
    assert all("ATLAS" not in name for name in site_feed)
    clock = client.get("/challenges/tc22/?format=json&table=activities", **token).json()
    assert [row["name"] for row in clock["rows"]] == ["CMS A-DT"]
    grid = client.get("/challenges/tc22/?format=json", **token).json()
    assert {row["experiment"] for row in grid["rows"]} == {"CMS"}
    page = client.get("/challenges/tc22/", **token).content.decode()
    assert "CMS A-DT" in page and "ATLAS DT" not in page
    api = client.get("/api/v1/activities/?challenge=tc22", **token).json()
    assert [row["name"] for row in api["results"]] == ["CMS A-DT"]
