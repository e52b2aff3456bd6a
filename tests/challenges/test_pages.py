"""The challenge pages: reading, exports, the coordinators' forms with their errors in place, permissions and
query counts."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings

from challenges.choices import ActivityKind
from challenges.models import Activity, Challenge, Target
from sites.models import Experiment, Site
from sites.roles import membership_grant
from tests.challenges.factories import ActivityFactory, ChallengeFactory, TargetFactory
from tests.sites.factories import CapacityFactory, ExperimentFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2022, 3, day, hour, tzinfo=UTC)


@pytest.fixture
def atlas() -> Experiment:
    return ExperimentFactory(name="ATLAS")


@pytest.fixture
def cnaf(atlas: Experiment) -> Site:
    site = SiteFactory(name="CNAF", experiments=[atlas])
    CapacityFactory(site=site, network_rate=1.25e9, tape_drives=4, tape_drive_rate=300e6)
    return site


@pytest.fixture
def challenge() -> Challenge:
    return ChallengeFactory(slug="tc22", name="Tape Challenge 2022", start=at(7), end=at(26))


@pytest.fixture
def coordinator(client: Client) -> Client:
    user = UserFactory(username="coordinator")
    membership_grant(user=user, role="coordinator")
    client.force_login(user)
    return client


@pytest.fixture
def viewer(client: Client) -> Client:
    client.force_login(UserFactory(username="viewer"))
    return client


def errors(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, "an invalid form is shown again, not redirected"
    return {field: list(messages) for field, messages in response.context["form"].errors.items()}


# --- reading --------------------------------------------------------------------------------------------------


def test_the_list_links_each_challenge_to_its_clock(viewer: Client, challenge: Challenge) -> None:
    response = viewer.get("/challenges/")
    assert response.status_code == 200
    assert b'href="/challenges/tc22/"' in response.content
    assert b"New challenge" not in response.content  # viewers get no edit links


def test_the_list_exports_csv_and_json(viewer: Client, challenge: Challenge, atlas: Experiment) -> None:
    ActivityFactory(challenge=challenge, experiment=atlas)
    csv_text = viewer.get("/challenges/?format=csv").content.decode()
    assert csv_text.splitlines()[0] == "slug,name,start,end,activities,experiments"
    assert csv_text.splitlines()[1] == "tc22,Tape Challenge 2022,2022-03-07T00:00:00Z,2022-03-26T00:00:00Z,1,1"
    rows = viewer.get("/challenges/?format=json").json()["rows"]
    assert rows == [
        {"slug": "tc22", "name": "Tape Challenge 2022", "start": "2022-03-07T00:00:00Z",
         "end": "2022-03-26T00:00:00Z", "activities": 1, "experiments": 1}
    ]  # fmt: skip


def test_pages_ask_for_a_login(client: Client, challenge: Challenge) -> None:
    for url in ("/challenges/", "/challenges/tc22/", "/challenges/tc22/load/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


@override_settings(ANONYMOUS_READ=True)
def test_pages_are_readable_anonymously_when_the_settings_allow(client: Client, challenge: Challenge) -> None:
    for url in ("/challenges/", "/challenges/tc22/", "/challenges/tc22/load/", "/challenges/tc22/calendar.ics"):
        assert client.get(url).status_code == 200
    assert client.get("/challenges/tc22/activities/new/").status_code == 302  # but not the forms


def test_the_clock_shows_modes_in_the_grid_and_the_derivation(
    viewer: Client, challenge: Challenge, atlas: Experiment, cnaf: Site
) -> None:
    activity = ActivityFactory(challenge=challenge, experiment=atlas, name="ATLAS A-DT", mode="A-DT",
                               kind=ActivityKind.STAGING, start=at(14), end=at(19))  # fmt: skip
    TargetFactory(activity=activity, site=cnaf, direction="out", rate=0.29e9, nominal_rate=0.0967e9,
                  factors={"headroom": 1.5, "efficiency": 2})  # fmt: skip
    response = viewer.get("/challenges/tc22/")
    page = response.content.decode()
    assert ">A-DT</span>" in page
    assert "nominal 0.0967 GB/s x headroom 1.5 x efficiency 2 = 0.290 GB/s" in page
    assert "CNAF out: <strong>0.29 GB/s</strong>" in page
    assert "/challenges/tc22/activities/" not in page  # no edit links for a viewer
    grid = response.context["grid"]
    assert grid.cell(experiment="ATLAS", week=at(14)).modes == ("A-DT",)


def test_the_gantt_figure_reaches_the_page_as_json_with_a_now_line(
    viewer: Client, challenge: Challenge, atlas: Experiment
) -> None:
    ActivityFactory(challenge=challenge, experiment=atlas, name="ATLAS DT", start=at(14), end=at(19))
    page = viewer.get("/challenges/tc22/").content.decode()
    start = page.index('<script id="gantt-figure" type="application/json">') + len(
        '<script id="gantt-figure" type="application/json">'
    )
    figure = json.loads(page[start : page.index("</script>", start)])
    assert [trace["name"] for trace in figure["data"]] == ["ATLAS"]
    assert figure["data"][0]["y"] == ["ATLAS DT"]
    assert figure["data"][0]["x"] == [5 * 86400 * 1000]
    assert figure["layout"]["shapes"][0]["type"] == "line"
    assert figure["layout"]["annotations"][0]["text"] == "now"
    assert "cdn" not in page.lower()
    assert "/challenges/plotly.min.js?v=" in page


def test_plotly_js_is_served_from_the_package_with_long_caching(client: Client) -> None:
    response = client.get("/challenges/plotly.min.js?v=1")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/javascript")
    assert "max-age=31536000" in response["Cache-Control"] and "immutable" in response["Cache-Control"]
    assert b"plotly.js" in response.content[:2000]


def test_the_clock_exports_its_tables(viewer: Client, challenge: Challenge, atlas: Experiment, cnaf: Site) -> None:
    activity = ActivityFactory(challenge=challenge, experiment=atlas, name="ATLAS DT", start=at(14), end=at(19))
    TargetFactory(activity=activity, site=cnaf, rate=2e9)
    grid = viewer.get("/challenges/tc22/?table=grid&format=json").json()["rows"]
    assert {"experiment": "ATLAS", "week": "2022-03-14", "modes": ["DT"], "kinds": ["transfer"],
            "activities": ["ATLAS DT"]} in grid  # fmt: skip
    csv_lines = viewer.get("/challenges/tc22/?table=activities&format=csv").content.decode().splitlines()
    assert csv_lines[1].endswith("CNAF in 2e+09 B/s")


def test_the_load_page_marks_oversubscribed_hours_and_names_the_experiments(
    viewer: Client, challenge: Challenge, atlas: Experiment, cnaf: Site
) -> None:
    cms = ExperimentFactory(name="CMS")
    cnaf.experiments.add(cms)
    TargetFactory(activity=ActivityFactory(challenge=challenge, experiment=atlas, start=at(14), end=at(15)),
                  site=cnaf, rate=1e9)  # fmt: skip
    TargetFactory(activity=ActivityFactory(challenge=challenge, experiment=cms, start=at(14, 12), end=at(16)),
                  site=cnaf, rate=1e9)  # fmt: skip
    page = viewer.get("/challenges/tc22/load/").content.decode()
    assert page.count('class="over"') == 1
    assert "oversubscribed by ATLAS + CMS" in page
    assert "1 span oversubscribed" in page
    rows = viewer.get("/challenges/tc22/load/?format=json").json()["rows"]
    over = [row for row in rows if row["oversubscribed"]]
    assert [(row["start"], row["end"], row["network_Bps"], row["experiments"]) for row in over] == [
        ("2022-03-14T12:00:00Z", "2022-03-15T00:00:00Z", 2e9, ["ATLAS", "CMS"])
    ]
    hourly = viewer.get("/challenges/tc22/load/?format=csv&per=hour").content.decode().splitlines()
    assert len(hourly) == 1 + 19 * 24  # one site, every hour
    at_once = viewer.get("/challenges/tc22/load/?table=concurrency&format=json").json()["rows"]
    assert {"start": "2022-03-14T12:00:00Z", "end": "2022-03-15T00:00:00Z", "hours": 12.0, "count": 2,
            "experiments": ["ATLAS", "CMS"]} in at_once  # fmt: skip


def _queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as context:
        assert client.get(url).status_code == 200
    return len(context.captured_queries)


@pytest.mark.parametrize("url", ["/challenges/", "/challenges/tc22/", "/challenges/tc22/load/"])
def test_page_queries_do_not_grow_with_the_plan(
    coordinator: Client, challenge: Challenge, atlas: Experiment, cnaf: Site, url: str
) -> None:
    kit = SiteFactory(name="KIT", experiments=[atlas])
    first = ActivityFactory(challenge=challenge, experiment=atlas)
    TargetFactory(activity=first, site=cnaf)
    few = _queries(coordinator, url)
    for day in range(8, 20):
        activity = ActivityFactory(challenge=challenge, experiment=ExperimentFactory(), start=at(day), end=at(day + 3))
        TargetFactory(activity=activity, site=cnaf, rate=2e9)
        TargetFactory(activity=activity, site=None, direction="", link_from=kit, link_to=cnaf)
        ChallengeFactory()
    assert _queries(coordinator, url) == few
    assert few <= 10  # the clock: and two for the activities that may claim the same transfers


# --- permissions ----------------------------------------------------------------------------------------------


def test_edit_views_are_forbidden_to_non_coordinators(
    viewer: Client, challenge: Challenge, atlas: Experiment, cnaf: Site
) -> None:
    activity = ActivityFactory(challenge=challenge, experiment=atlas)
    target = TargetFactory(activity=activity, site=cnaf)
    for url in (
        "/challenges/new/",
        "/challenges/tc22/edit/",
        "/challenges/tc22/activities/new/",
        f"/challenges/tc22/activities/{activity.pk}/edit/",
        f"/challenges/tc22/activities/{activity.pk}/targets/new/",
        f"/challenges/tc22/targets/{target.pk}/edit/",
    ):
        assert viewer.get(url).status_code == 403, url
        assert viewer.post(url, {"name": "x"}).status_code == 403, url
    assert viewer.post(f"/challenges/tc22/targets/{target.pk}/delete/").status_code == 403
    assert viewer.post(f"/challenges/tc22/activities/{activity.pk}/delete/").status_code == 403
    assert Activity.objects.count() == 1 and Target.objects.count() == 1


def test_a_coordinator_sees_the_edit_links(coordinator: Client, challenge: Challenge, atlas: Experiment) -> None:
    activity = ActivityFactory(challenge=challenge, experiment=atlas)
    page = coordinator.get("/challenges/tc22/").content.decode()
    assert 'href="/challenges/tc22/activities/new/"' in page
    assert f'href="/challenges/tc22/activities/{activity.pk}/edit/"' in page


# --- the forms ------------------------------------------------------------------------------------------------


CHALLENGE_DATA = {"name": "Data Challenge 2024", "slug": "dc24", "start": "2024-02-12T00:00", "end": "2024-02-24T00:00",
                  "max_window": "3600", "stable_window": "18000"}  # fmt: skip


def test_a_coordinator_creates_a_challenge(coordinator: Client) -> None:
    response = coordinator.post("/challenges/new/", CHALLENGE_DATA)
    assert response.status_code == 302 and response["Location"] == "/challenges/dc24/"
    challenge = Challenge.objects.get(slug="dc24")
    assert (challenge.start, challenge.end) == (datetime(2024, 2, 12, tzinfo=UTC), datetime(2024, 2, 24, tzinfo=UTC))


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"end": "2024-02-11T00:00"}, "end", "the end must be after the start"),
        (
            {"max_window": "0"},
            "max_window",
            "a positive number of seconds in whole minutes (rates are kept per minute)",
        ),
        (
            {"stable_window": "0"},
            "stable_window",
            "a positive number of seconds in whole minutes (rates are kept per minute)",
        ),
        (
            {"max_window": "90"},
            "max_window",
            "a positive number of seconds in whole minutes (rates are kept per minute)",
        ),
    ],
)
def test_the_challenge_form_shows_each_problem_in_place_and_stores_nothing(
    coordinator: Client, changes: dict[str, str], field: str, message: str
) -> None:
    response = coordinator.post("/challenges/new/", {**CHALLENGE_DATA, **changes})
    assert message in errors(response)[field]
    assert message in response.content.decode()
    assert not Challenge.objects.exists()


def test_moving_a_challenge_window_may_not_strand_its_activities(
    coordinator: Client, challenge: Challenge, atlas: Experiment
) -> None:
    ActivityFactory(challenge=challenge, experiment=atlas, name="late", start=at(20), end=at(25))
    data = {**CHALLENGE_DATA, "slug": "tc22", "start": "2022-03-07T00:00", "end": "2022-03-21T00:00"}
    response = coordinator.post("/challenges/tc22/edit/", data)
    assert any("activity late: after the challenge ends" in m for m in errors(response)["end"])
    challenge.refresh_from_db()
    assert challenge.end == at(26)


def activity_data(experiment: Experiment, **changes: Any) -> dict[str, Any]:
    return {"name": "ATLAS DT", "experiment": experiment.pk, "mode": "DT", "kind": "tape-write",
            "start": "2022-03-14T00:00", "end": "2022-03-19T00:00", **changes}  # fmt: skip


def test_a_coordinator_creates_an_activity_and_is_sent_to_add_its_targets(
    coordinator: Client, challenge: Challenge, atlas: Experiment, cnaf: Site
) -> None:
    response = coordinator.post("/challenges/tc22/activities/new/", activity_data(atlas, source=cnaf.pk))
    activity = Activity.objects.get()
    assert response["Location"] == f"/challenges/tc22/activities/{activity.pk}/targets/new/"
    assert (activity.challenge, activity.start, activity.source) == (challenge, at(14), cnaf)
    assert activity.ddm_activities == []  # none given: any DDM activity


def test_the_activity_form_takes_ddm_activities_comma_separated(
    coordinator: Client, challenge: Challenge, atlas: Experiment
) -> None:
    coordinator.post(
        "/challenges/tc22/activities/new/", activity_data(atlas, ddm_activities="T0 Export, Data Challenge")
    )
    assert Activity.objects.get().ddm_activities == ["T0 Export", "Data Challenge"]


@pytest.mark.parametrize(
    "case",
    [
        ({"end": "2022-03-13T00:00"}, "end", "the end must be after the start"),
        ({"start": "2022-03-06T00:00"}, "start", "before the challenge starts (2022-03-07 00:00 UTC)"),
        ({"end": "2022-03-27T00:00"}, "end", "after the challenge ends (2022-03-26 00:00 UTC)"),
        ({"source": "KIT"}, "source", "KIT does not serve ATLAS"),
        ({"name": "taken"}, "name", "the challenge already has an activity named taken"),
        (
            {"ddm_activities": "T0 Export, t0 export"},
            "ddm_activities",
            "'t0 export' is given twice (names are matched ignoring case)",
        ),
    ],
)
def test_the_activity_form_shows_each_problem_in_place_and_stores_nothing(
    coordinator: Client, challenge: Challenge, atlas: Experiment, case: tuple[dict[str, str], str, str]
) -> None:
    changes, field, message = case
    ActivityFactory(challenge=challenge, experiment=atlas, name="taken")
    kit = SiteFactory(name="KIT", experiments=[ExperimentFactory(name="CMS")])
    data = activity_data(atlas, **{k: (kit.pk if v == "KIT" else v) for k, v in changes.items()})
    response = coordinator.post("/challenges/tc22/activities/new/", data)
    assert errors(response) == {field: [message]}
    assert message in html.unescape(response.content.decode())
    assert Activity.objects.count() == 1


@pytest.fixture
def atlas_dt(challenge: Challenge, atlas: Experiment) -> Activity:
    return ActivityFactory(challenge=challenge, experiment=atlas, name="ATLAS DT", start=at(14), end=at(19))


def test_a_target_rate_is_typed_in_gbytes_and_stored_in_bytes(
    coordinator: Client, atlas_dt: Activity, cnaf: Site
) -> None:
    url = f"/challenges/tc22/activities/{atlas_dt.pk}/targets/new/"
    response = coordinator.post(url, {"site": cnaf.pk, "direction": "in", "rate": "0.29",
                                      "nominal_rate": "0.0967", "factors": "headroom=1.5, efficiency=2"})  # fmt: skip
    assert response.status_code == 302
    target = Target.objects.get()
    assert (target.rate, target.nominal_rate, target.factors) == (0.29e9, 0.0967e9, {"headroom": 1.5, "efficiency": 2})


def test_an_empty_rate_is_derived_from_the_nominal_rate_and_factors(
    coordinator: Client, atlas_dt: Activity, cnaf: Site
) -> None:
    url = f"/challenges/tc22/activities/{atlas_dt.pk}/targets/new/"
    data = {"site": cnaf.pk, "direction": "in", "nominal_rate": "0.2", "factors": '{"headroom": 1.5, "recovery": 2}'}
    assert coordinator.post(url, data).status_code == 302
    assert Target.objects.get().rate == pytest.approx(0.6e9)


def test_the_target_edit_form_shows_the_rate_in_gbytes(coordinator: Client, atlas_dt: Activity, cnaf: Site) -> None:
    target = TargetFactory(activity=atlas_dt, site=cnaf, rate=3.5e9)
    page = coordinator.get(f"/challenges/tc22/targets/{target.pk}/edit/").content.decode()
    assert 'name="rate" value="3.5"' in page


@pytest.mark.parametrize(
    "case",
    [
        ({"rate": "1"}, "site", "a site and a direction, or a link with both ends"),
        ({"site": "CNAF", "rate": "1"}, "direction", "'in' or 'out' of the site"),
        ({"site": "CNAF", "direction": "in", "link_from": "CERN", "link_to": "CNAF", "rate": "1"}, "site",
         "either a site and a direction, or a link, not both"),
        ({"link_from": "CNAF", "link_to": "CNAF", "rate": "1"}, "link_to", "a link joins two different sites"),
        ({"site": "KIT", "direction": "in", "rate": "1"}, "site", "KIT does not serve ATLAS"),
        ({"site": "CNAF", "direction": "in", "rate": "0"}, "rate", "a positive number of bytes per second"),
        ({"site": "CNAF", "direction": "in", "rate": "0.5", "nominal_rate": "0.0967", "factors": "headroom=1.5"},
         "rate", "5e+08 B/s differs from nominal x factors = 1.45e+08 B/s"),
        ({"site": "CNAF", "direction": "in", "rate": "1", "nominal_rate": "1", "factors": "headroom=-1"}, "factors",
         'named positive numbers, such as {"headroom": 1.5}'),
        ({"site": "CNAF", "direction": "in", "rate": "1", "factors": "headroom=lots"}, "factors",
         "'headroom=lots' is not name=number"),
        ({"site": "CNAF", "direction": "out", "rate": "1"}, "site", "the activity already has CNAF out"),
        ({"link_from": "CERN", "link_to": "CNAF", "rate": "1"}, "link_to", "the activity already has CERN -> CNAF"),
    ],
)  # fmt: skip
def test_the_target_form_shows_each_problem_in_place_and_stores_nothing(
    coordinator: Client,
    atlas_dt: Activity,
    atlas: Experiment,
    cnaf: Site,
    case: tuple[dict[str, str], str, str],
) -> None:
    data, field, message = case
    sites = {"CNAF": cnaf, "CERN": SiteFactory(name="CERN", experiments=[atlas]),
             "KIT": SiteFactory(name="KIT", experiments=[ExperimentFactory(name="CMS")])}  # fmt: skip
    TargetFactory(activity=atlas_dt, site=cnaf, direction="out")
    TargetFactory(activity=atlas_dt, site=None, direction="", link_from=sites["CERN"], link_to=cnaf)
    posted = {
        key: (sites[value].pk if key in ("site", "link_from", "link_to") else value) for key, value in data.items()
    }
    response = coordinator.post(f"/challenges/tc22/activities/{atlas_dt.pk}/targets/new/", posted)
    assert errors(response) == {field: [message]}
    assert message in html.unescape(response.content.decode())
    assert Target.objects.count() == 2


def test_a_coordinator_deletes_a_target(coordinator: Client, atlas_dt: Activity, cnaf: Site) -> None:
    target = TargetFactory(activity=atlas_dt, site=cnaf)
    response = coordinator.post(f"/challenges/tc22/targets/{target.pk}/delete/")
    assert response.status_code == 302 and not Target.objects.exists()
