"""The access policy at every door: every role against every URL the portal serves (pages, their CSV/JSON exports,
calendar feeds, the API), walked from the URL configuration itself so that a new door is checked the day it opens;
and every role's scoped token against an alert's actions (acknowledge, silence, subscribe).

For each role and each GET:
- never a 5xx;
- anonymous callers (ANONYMOUS_READ off) get the login page, 401 or 403 except at the few public doors, and never
  see the plan's names;
- a DDM service of ATLAS never sees anything of CMS's (an activity, a run, a record), wherever it looks;
- pages for coordinators only answer 403 to the other roles.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import get_resolver
from django.urls.resolvers import URLPattern, URLResolver
from django.utils import timezone
from rest_framework.test import APIClient

from challenges.models import Activity, Challenge, Target
from live.models import Alert, AlertDelivery
from reports.models import ExperimentReport, SiteReport
from results.models import FailureRule, TransferRecord
from results.services import records_store
from runs.models import Run
from sites.choices import Role
from sites.models import Capacity, Experiment, NetworkHost, Site, StorageEndpoint
from sites.roles import membership_grant
from sites.tokens import token_create, token_issue
from sweeps.models import Sweep, SweepStep
from tests.sites.factories import UserFactory

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "viewer", "ddm", "site-admin", "coordinator"]
HIDDEN = "CMS-HIDDEN"  # in the names of everything of CMS's
T0 = datetime(2024, 2, 12, tzinfo=UTC)

# Doors anyone may open: the login, health, the Plotly file, the API schema and its docs (they describe, not show).
PUBLIC = {"accounts/login/", "healthz", "challenges/plotly.min.js", "api/schema/", "api/docs/", "api/v1/status/"}
# Doors not walked: the admin (Django's own, staff only), logout (a POST), the format-suffix copies of API routes.
SKIPPED = re.compile(r"^(admin/|accounts/logout/)|\(\?P<format>")


def _routes(patterns: list[Any], prefix: str = "") -> Iterator[str]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern)


def _concrete(route: str, ids: dict[str, Any]) -> str:
    """A route with its parameters filled from the world: slugs the challenge, names CMS's site, numbers the id of
    CMS's object of the resource the number follows (its run, activity, target, record ...)."""
    route = route.replace("^", "").replace("$", "").replace("\\", "")
    route = re.sub(r"<slug:slug>|\(\?P<slug>[^)]*\)", ids["slug"], route)
    route = re.sub(r"<(?:str|path):name>", ids["site_name"], route)
    route = re.sub(r"<str:(?:action|step)>", "up", route)

    def number(match: re.Match[str]) -> str:
        before = route[: match.start()].rstrip("/").rsplit("/", 1)[-1]
        return str(ids.get(before, ids["default"]))

    return re.sub(r"<int:pk>|\(\?P<pk>[^)]*\)", number, route)


@pytest.fixture
def world() -> dict[str, Any]:
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    own = Site.objects.create(name="OWN", tier=1, country="IT")
    other = Site.objects.create(name="OTHER", tier=1, country="DE")
    for site in (own, other):
        site.experiments.set([atlas, cms])
        endpoint = StorageEndpoint(site=site, kind="disk")
        endpoint.set_url(f"davs://{site.name.lower()}.example.org:443/data")
        endpoint.save()
        NetworkHost.objects.create(site=site, address=f"ps.{site.name.lower()}.example.org")
        Capacity.objects.create(site=site, network_rate=1e9)
    challenge = Challenge.objects.create(name="DC", slug="dc", start=T0, end=T0 + timedelta(days=7))
    made: dict[str, Activity] = {}
    for experiment, name in ((atlas, "ATLAS-VISIBLE-EXPORT"), (cms, f"{HIDDEN}-ACTIVITY")):
        activity = Activity.objects.create(
            challenge=challenge,
            name=name,
            experiment=experiment,
            mode="T0 export",
            kind="transfer",
            start=T0,
            end=T0 + timedelta(days=1),
            ddm_activities=[f"{experiment.name} export"],
        )
        Target.objects.create(activity=activity, site=other, direction="in", rate=1e9)
        made[experiment.name] = activity
    cms_run = Run.objects.create(
        activity=made["CMS"], kind="network", state="finished", parameters={"host": f"{HIDDEN}-host"},
        summary={"rate": 1e8, "path_mtu": 1500, "local_mtu": 9000},
    )  # fmt: skip
    records_store(
        records=[
            TransferRecord(
                experiment=experiment, source_site=own, destination_site=other, bytes=10**9, state="failed",
                error_message=f"{experiment.name} says {HIDDEN if experiment == cms else 'fine'}",
                start=T0 + timedelta(hours=1), end=T0 + timedelta(hours=1, minutes=1), mode="pull",
                origin="fts", origin_id=f"{experiment.name}-{HIDDEN if experiment == cms else 'record'}",
                ddm_activity=f"{experiment.name} export",
            )
            for experiment in (atlas, cms)
        ]
    )  # fmt: skip
    cms_sweep = Sweep.objects.create(name=f"{HIDDEN}-SWEEP", activity=made["CMS"], state="finished")
    SweepStep.objects.create(
        sweep=cms_sweep, index=0, kind="network", source=own, destination=other, run=cms_run, state="ended",
        queue="default",
    )  # fmt: skip
    report = SiteReport.objects.create(challenge=challenge, site=own, notes="all fine")
    cms_story = ExperimentReport.objects.create(challenge=challenge, experiment=cms, status="submitted",
                                                narrative=f"{HIDDEN} told its story")  # fmt: skip
    return {
        "atlas": atlas,
        "own": own,
        "ids": {
            "slug": "dc",
            "site_name": "OTHER",
            "runs": cms_run.pk,
            "sweeps": cms_sweep.pk,
            "activities": made["CMS"].pk,
            "targets": made["CMS"].targets.get().pk,
            "records": TransferRecord.objects.get(experiment=cms).pk,
            "experiments": cms.pk,
            "sites": other.pk,
            "endpoints": other.endpoints.get().pk,
            "hosts": other.network_hosts.get().pk,
            "capacities": Capacity.objects.get(site=other).pk,
            "reports": report.pk,
            "dc": report.pk,  # reports/dc/<pk>/
            "experiment-reports": cms_story.pk,  # reports/dc/experiment-reports/<pk>/
            "rules": FailureRule.objects.values_list("pk", flat=True).first() or 1,
            "default": 1,
        },
    }


def client_for(role: str, world: dict[str, Any]) -> Client:
    client = Client()
    if role == "anonymous":
        return client
    user = UserFactory(username=f"user-{role}")
    scope: dict[str, Any] = {}
    if role == "site-admin":
        scope = {"site": world["own"]}
    elif role == "ddm":
        scope = {"experiment": world["atlas"]}
    membership_grant(user=user, role=Role(role), **scope)
    _, key = token_create(user=user)
    if role in ("ddm",):  # a DDM service calls with its token: pages and exports take it on GET
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {key}"
    else:
        client.force_login(user)
    return client


def _doors(world: dict[str, Any]) -> list[str]:
    doors = []
    for route in _routes(get_resolver().url_patterns):
        if SKIPPED.search(route):
            continue
        path = "/" + _concrete(route, world["ids"])
        doors.append(path)
        if not path.startswith("/api/") and not path.endswith((".ics", ".js")):
            doors += [f"{path}?format=csv", f"{path}?format=json"]
    return sorted(set(doors))


def _body(response: Any) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


@pytest.mark.parametrize("role", ROLES)
def test_every_door_for_every_role(role: str, world: dict[str, Any]) -> None:
    client = client_for(role, world)
    problems: list[str] = []
    walked = answered = 0
    seen: set[str] = set()
    for path in _doors(world):
        response = client.get(path)
        walked += 1
        answered += response.status_code == 200
        body = _body(response)
        seen |= {marker for marker in ("ATLAS-VISIBLE", HIDDEN) if marker in body}
        route = path.split("?")[0].lstrip("/")
        if response.status_code >= 500:
            problems.append(f"{path}: {response.status_code}")
        if role == "anonymous":
            if route not in PUBLIC and response.status_code not in (301, 302, 401, 403, 404, 405):
                problems.append(f"{path}: anonymous got {response.status_code}")
            if "ATLAS-VISIBLE" in body or HIDDEN in body:
                problems.append(f"{path}: anonymous sees the plan")
        if role == "ddm" and HIDDEN in body:
            problems.append(f"{path}: an ATLAS DDM service sees CMS's ({response.status_code})")
    assert walked > 60  # the walk found the doors
    assert not problems, "\n".join(problems)
    # The walk is no empty ritual: the signed-in roles get through and see the plan; all but the DDM service see
    # CMS's too.
    if role != "anonymous":
        assert answered > 40 and "ATLAS-VISIBLE" in seen
        assert (HIDDEN in seen) == (role != "ddm")


@pytest.mark.parametrize("role", ["viewer", "ddm", "site-admin"])
def test_coordinator_pages_are_refused_to_the_other_roles(role: str, world: dict[str, Any]) -> None:
    client = client_for(role, world)
    for path in (
        "/challenges/new/",
        "/challenges/dc/edit/",
        "/challenges/dc/activities/new/",
        f"/challenges/dc/activities/{world['ids']['activities']}/edit/",
        "/results/failures/rules/",
        "/ingest/unknown-hosts/",
    ):
        assert client.get(path).status_code in (403, 404), path


# What each role's token may do to an alert (acknowledge, silence): to ATLAS's alert about OWN, to CMS's about OTHER
# (a DDM service of ATLAS does not read CMS's: 404), and which of the two an e-mail subscription it makes hears of.
ALERT_ACTS = {
    "viewer": (403, 403, {"ATLAS", "CMS"}),
    "ddm": (200, 404, {"ATLAS"}),
    "site-admin": (200, 403, {"ATLAS", "CMS"}),
    "coordinator": (200, 200, {"ATLAS", "CMS"}),
}


@pytest.mark.parametrize("role", sorted(ALERT_ACTS))
def test_acknowledge_silence_and_subscribe_with_a_scoped_token(role: str, world: dict[str, Any]) -> None:
    challenge, other = Challenge.objects.get(slug="dc"), Site.objects.get(name="OTHER")
    alerts = {
        experiment.name: Alert.objects.create(
            challenge=challenge, kind="no_traffic", subject=f"site:{site.pk}:{experiment.name}", experiment=experiment,
            site=site, message=f"{experiment.name}: no transfer", started_at=T0, last_seen_at=T0,
        )
        for experiment, site in ((world["atlas"], world["own"]), (Experiment.objects.get(name="CMS"), other))
    }  # fmt: skip
    scope = {"site-admin": {"site": world["own"]}, "ddm": {"experiment": world["atlas"]}}.get(role, {})
    _, key = token_issue(username=f"token-{role}", role=role, **scope)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    own_status, other_status, hears = ALERT_ACTS[role]
    until = (timezone.now() + timedelta(hours=1)).isoformat()
    for experiment, expected in (("ATLAS", own_status), ("CMS", other_status)):
        alert = alerts[experiment]
        acknowledged = api.post(f"/api/v1/alerts/{alert.pk}/acknowledge/")
        silenced = api.post(f"/api/v1/alerts/{alert.pk}/silence/", {"until": until}, format="json")
        assert (acknowledged.status_code, silenced.status_code) == (expected, expected), (role, experiment)
    Alert.objects.update(silenced_until=None)  # so that the subscription's catch-up is not held back by a silence
    made = api.post("/api/v1/alerts/subscriptions/", {"name": "all", "email": "x@example.org"}, format="json")
    assert made.status_code == 201, made.json()
    heard = AlertDelivery.objects.filter(subscription_id=made.json()["id"]).values_list(
        "alert__experiment__name", flat=True
    )
    assert set(heard) == hears


# --- actions: every role, and tokens scoped to one role, against every kind of write ---------------------------

# Who acts: the roles (through a token on the API, logged in on pages) and two superusers calling with a token
# scoped to one of their roles, which must act as that role alone (their memberships ∩ the token's scope).
ACTORS = [*ROLES, "superuser-as-ddm", "superuser-as-site-admin"]

# What each action is, as a user sends it. {atlas}/{cms} name ATLAS's and CMS's row of the kind the path is about;
# the site admin administers OWN, the DDM service serves ATLAS; the alert of CMS is about OTHER.
API_ACTIONS: dict[str, tuple[str, str, Any]] = {
    "start a run of ATLAS's activity": ("post", "/api/v1/runs/", {"activity": "{atlas_activity}"}),
    "cancel CMS's run": ("post", "/api/v1/runs/{cms_run}/cancel/", None),
    "cancel ATLAS's run": ("post", "/api/v1/runs/{atlas_run}/cancel/", None),
    "delete the copies of CMS's run": ("post", "/api/v1/runs/{cms_run}/delete-copies/", None),
    "cancel CMS's sweep": ("post", "/api/v1/sweeps/{cms_sweep}/cancel/", None),
    "import a plan": ("post", "/api/v1/challenges/import/", {}),
    "rename the challenge": ("patch", "/api/v1/challenges/dc/", {"name": "DC renamed"}),
    "change CMS's target": ("patch", "/api/v1/targets/{cms_target}/", {"rate": 2e9}),
    "delete CMS's activity": ("delete", "/api/v1/activities/{cms_activity}/", None),
    "acknowledge ATLAS's alert about OWN": ("post", "/api/v1/alerts/{atlas_alert}/acknowledge/", None),
    "silence CMS's alert about OTHER": ("post", "/api/v1/alerts/{cms_alert}/silence/", {"until": "{until}"}),
    "subscribe to CMS's alerts": (
        "post",
        "/api/v1/alerts/subscriptions/",
        {"name": "cms", "email": "x@example.org", "experiments": ["CMS"]},
    ),
    "send records": ("post", "/api/v1/ingest/fts/", []),
    "send optimizer decisions": ("post", "/api/v1/ingest/fts-optimizer/", []),
    "change OTHER's site": ("patch", "/api/v1/sites/{other_site}/", {"country": "FR"}),
    "change OWN's site": ("patch", "/api/v1/sites/{own_site}/", {"country": "FR"}),
    "write OTHER's report": ("post", "/api/v1/reports/", {"challenge": "dc", "site": "OTHER", "notes": "x"}),
    "change OWN's draft report": ("patch", "/api/v1/reports/{own_report}/", {"notes": "changed"}),
    "write ATLAS's experiment report": (
        "post",
        "/api/v1/experiment-reports/",
        {"challenge": "dc", "experiment": "ATLAS", "narrative": "x"},
    ),
    "write CMS's experiment report": (
        "post",
        "/api/v1/experiment-reports/",
        {"challenge": "dc", "experiment": "CMS", "narrative": "x"},
    ),
    "make a snapshot of the challenge report": ("post", "/api/v1/challenges/dc/report/snapshots/", None),
}
PAGE_ACTIONS: dict[str, tuple[str, str]] = {
    "the challenge's form": ("get", "/challenges/dc/edit/"),
    "the form of CMS's activity": ("get", "/challenges/dc/activities/{cms_activity}/edit/"),
    "delete CMS's target": ("post", "/challenges/dc/targets/{cms_target}/delete/"),
    "the run form of ATLAS's activity": ("get", "/challenges/dc/activities/{atlas_activity}/run/"),
    "cancel CMS's run (page)": ("post", "/challenges/runs/{cms_run}/cancel/"),
    "cancel ATLAS's run (page)": ("post", "/challenges/runs/{atlas_run}/cancel/"),
    "the sweep form": ("get", "/sweeps/new/"),
    "cancel CMS's sweep (page)": ("post", "/sweeps/{cms_sweep}/cancel/"),
    "the report form of OTHER": ("get", "/reports/dc/new/?site=OTHER"),
    "the report form of OWN": ("get", "/reports/dc/new/?site=OWN"),
    "the experiment report form of ATLAS": ("get", "/reports/dc/experiments/new/?experiment=ATLAS"),
    "the experiment report form of CMS": ("get", "/reports/dc/experiments/new/?experiment=CMS"),
    "edit CMS's experiment report (page)": ("get", "/reports/dc/experiment-reports/{cms_story}/edit/"),
    "the failure rules": ("get", "/results/failures/rules/"),
    "the tokens page": ("get", "/tokens/"),
}
# The expected answer of each action for each actor, in ACTORS' order: anonymous, viewer, ddm (ATLAS), site-admin
# (OWN), coordinator, a superuser's token scoped to ATLAS's DDM role, one scoped to OWN's site admin. 403: the actor's
# roles may not take the action at all (whatever the row, so it learns nothing of rows it does not read), or it reads
# the row but may not act on it; 404: it could take the action but does not read the row. 302 for anonymous pages:
# the login page; for the report form of OWN: its existing report. Starting ATLAS's run is let through to the checks
# of its parameters (400: the activity names no source) and deleting a queued run's copies to the run's state (400).
EXPECTED: dict[str, tuple[int, ...]] = {
    "start a run of ATLAS's activity": (401, 403, 403, 403, 400, 403, 403),
    "cancel CMS's run": (401, 403, 403, 403, 200, 403, 403),
    "cancel ATLAS's run": (401, 403, 403, 403, 200, 403, 403),
    "delete the copies of CMS's run": (401, 403, 403, 403, 400, 403, 403),
    "cancel CMS's sweep": (401, 403, 403, 403, 200, 403, 403),
    "import a plan": (401, 403, 403, 403, 400, 403, 403),
    "rename the challenge": (401, 403, 403, 403, 200, 403, 403),
    "change CMS's target": (401, 403, 403, 403, 200, 403, 403),
    "delete CMS's activity": (401, 403, 403, 403, 204, 403, 403),
    "acknowledge ATLAS's alert about OWN": (401, 403, 200, 200, 200, 200, 200),
    "silence CMS's alert about OTHER": (401, 403, 404, 403, 200, 404, 403),
    "subscribe to CMS's alerts": (401, 201, 403, 201, 201, 403, 201),
    "send records": (401, 403, 200, 403, 200, 200, 403),
    "send optimizer decisions": (401, 403, 200, 403, 200, 200, 403),
    "change OTHER's site": (401, 403, 403, 404, 200, 403, 404),
    "change OWN's site": (401, 403, 403, 200, 200, 403, 200),
    "write OTHER's report": (401, 403, 403, 403, 201, 403, 403),
    "change OWN's draft report": (401, 404, 404, 200, 200, 404, 200),
    "write ATLAS's experiment report": (401, 403, 201, 403, 201, 201, 403),
    "write CMS's experiment report": (401, 403, 403, 403, 400, 403, 403),
    "make a snapshot of the challenge report": (401, 403, 403, 403, 201, 403, 403),
    "the challenge's form": (302, 403, 403, 403, 200, 403, 403),
    "the form of CMS's activity": (302, 403, 403, 403, 200, 403, 403),
    "delete CMS's target": (302, 403, 403, 403, 302, None, None),
    "the run form of ATLAS's activity": (302, 403, 403, 403, 200, 403, 403),
    "cancel CMS's run (page)": (302, 403, 403, 403, 302, None, None),
    "cancel ATLAS's run (page)": (302, 403, 403, 403, 302, None, None),
    "the sweep form": (302, 403, 403, 403, 200, 403, 403),
    "cancel CMS's sweep (page)": (302, 403, 403, 403, 302, None, None),
    "the report form of OTHER": (302, 403, 403, 403, 200, 403, 403),
    "the report form of OWN": (302, 403, 403, 302, 302, 403, 302),
    "the experiment report form of ATLAS": (302, 403, 200, 403, 200, 200, 403),
    "the experiment report form of CMS": (302, 403, 403, 403, 302, 403, 403),
    "edit CMS's experiment report (page)": (302, 403, 404, 403, 200, 404, 403),
    "the failure rules": (302, 403, 403, 403, 200, 403, 403),
    "the tokens page": (302, 403, 403, 403, 200, 403, 403),
}  # None: a page form is posted from a session, never with a token (the pages take tokens on GET only)


@pytest.fixture
def acted_on(world: dict[str, Any]) -> dict[str, Any]:
    """The rows the actions act on, beside the world's: a queued run of each experiment's activity and an alert of
    each (ATLAS's about OWN, CMS's about OTHER)."""
    challenge, other = Challenge.objects.get(slug="dc"), Site.objects.get(name="OTHER")
    atlas, cms = world["atlas"], Experiment.objects.get(name="CMS")
    activities = {activity.experiment.name: activity for activity in Activity.objects.filter(challenge=challenge)}
    runs = {
        name: Run.objects.create(activity=activity, kind="transfer", state="queued")
        for name, activity in activities.items()
    }
    Sweep.objects.filter(activity=activities["CMS"]).update(state="running")
    alerts = {
        experiment.name: Alert.objects.create(
            challenge=challenge, kind="no_traffic", subject=f"site:{site.pk}:{experiment.name}", experiment=experiment,
            site=site, message=f"{experiment.name}: no transfer", started_at=T0, last_seen_at=T0,
        )
        for experiment, site in ((atlas, world["own"]), (cms, other))
    }  # fmt: skip
    return {
        "atlas_activity": activities["ATLAS"].pk,
        "cms_activity": activities["CMS"].pk,
        "atlas_run": runs["ATLAS"].pk,
        "cms_run": runs["CMS"].pk,
        "cms_sweep": world["ids"]["sweeps"],
        "cms_target": world["ids"]["targets"],
        "atlas_alert": alerts["ATLAS"].pk,
        "cms_alert": alerts["CMS"].pk,
        "own_site": world["own"].pk,
        "other_site": other.pk,
        "own_report": world["ids"]["reports"],
        "cms_story": world["ids"]["experiment-reports"],
        "until": (timezone.now() + timedelta(hours=1)).isoformat(),
    }


def _key_for(actor: str, world: dict[str, Any]) -> str | None:
    """The API key an actor calls with (None: anonymous)."""
    if actor == "anonymous":
        return None
    scope = {"site-admin": {"site": world["own"]}, "ddm": {"experiment": world["atlas"]}}
    if actor.startswith("superuser-as-"):
        role = actor.removeprefix("superuser-as-")
        user = UserFactory(username=actor, is_superuser=True, is_staff=True)
        membership = membership_grant(user=user, role=role, **scope[role])
        return token_create(user=user, membership=membership)[1]
    user = UserFactory(username=f"api-{actor}")
    membership_grant(user=user, role=Role(actor), **scope.get(actor, {}))
    return token_create(user=user)[1]


def _filled(value: Any, rows: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return value.format(**rows) if "{" in value else value
    if isinstance(value, dict):
        return {name: _filled(item, rows) for name, item in value.items()}
    return value


def test_every_action_has_its_expected_answer_for_every_actor() -> None:
    assert set(EXPECTED) == set(API_ACTIONS) | set(PAGE_ACTIONS)
    assert {len(answers) for answers in EXPECTED.values()} == {len(ACTORS)}


@pytest.mark.parametrize("actor", ACTORS)
def test_every_api_action_for_every_actor(actor: str, world: dict[str, Any], acted_on: dict[str, Any]) -> None:
    api = APIClient()
    if (key := _key_for(actor, world)) is not None:
        api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    answers = {}
    for name, (method, path, body) in API_ACTIONS.items():
        data = _filled(body, acted_on)
        if isinstance(data, dict) and isinstance(data.get("activity"), str):
            data["activity"] = int(data["activity"])
        response = getattr(api, method)(_filled(path, acted_on), data, format="json")
        answers[name] = response.status_code
    expected = {name: EXPECTED[name][ACTORS.index(actor)] for name in API_ACTIONS}
    assert answers == expected


@pytest.mark.parametrize("actor", ACTORS)
def test_every_page_action_for_every_actor(actor: str, world: dict[str, Any], acted_on: dict[str, Any]) -> None:
    client = Client()
    if actor in ("viewer", "ddm", "site-admin", "coordinator"):
        user = UserFactory(username=f"page-{actor}")
        scope = {"site-admin": {"site": world["own"]}, "ddm": {"experiment": world["atlas"]}}.get(actor, {})
        membership_grant(user=user, role=Role(actor), **scope)
        client.force_login(user)
    elif actor != "anonymous":
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {_key_for(actor, world)}"
    answers, expected = {}, {}
    for name, (method, path) in PAGE_ACTIONS.items():
        if (status := EXPECTED[name][ACTORS.index(actor)]) is None:
            continue
        answers[name] = getattr(client, method)(_filled(path, acted_on)).status_code
        expected[name] = status
    assert answers == expected


def test_a_challenge_of_another_experiment_only_is_no_page_for_a_ddm_service(world: dict[str, Any]) -> None:
    """Every page and API door of a challenge that plans CMS's activities only answers ATLAS's DDM service as a
    challenge that does not exist does (404; 403 at the forms its role may not open for any challenge), never with
    what it holds, and the challenge list leaves it out."""
    challenge = Challenge.objects.create(name=f"{HIDDEN}-CHALLENGE", slug="cms-only", start=T0, end=T0 + timedelta(7))
    Activity.objects.create(
        challenge=challenge, name=f"{HIDDEN}-ONLY", experiment=Experiment.objects.get(name="CMS"), mode="T0 export",
        kind="transfer", start=T0, end=T0 + timedelta(days=1),
    )  # fmt: skip
    client = client_for("ddm", world)
    routes = [
        route
        for route in _routes(get_resolver().url_patterns)
        if ("<slug:slug>" in route or "(?P<slug>" in route) and "<int:" not in route and not SKIPPED.search(route)
    ]
    assert len(routes) > 15  # the walk found the challenge's doors
    answers, unknown = {}, {}
    for route in routes:
        response = client.get("/" + _concrete(route, {**world["ids"], "slug": "cms-only"}))
        answers[route] = response.status_code
        assert HIDDEN not in _body(response), route
        unknown[route] = client.get("/" + _concrete(route, {**world["ids"], "slug": "no-such"})).status_code
    assert answers == unknown
    assert set(answers.values()) <= {403, 404} and list(answers.values()).count(404) > 15
    assert HIDDEN not in _body(client.get("/challenges/?format=json"))
