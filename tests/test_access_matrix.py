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
from reports.models import SiteReport
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
