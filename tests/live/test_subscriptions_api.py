"""The alert subscriptions API: coordinators see and manage every subscription, anyone else their own, within what
the access policy lets them read (a DDM token of ATLAS cannot subscribe to CMS); one place to deliver to, names that
exist, no unknown field, no webhook into the portal's own network; lists in a bounded number of queries; and the
delivery log of an alert, read as the alerts are."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from live.delivery import alert_deliveries_create
from live.models import AlertSubscription
from sites.roles import membership_grant
from sites.tokens import token_issue
from tests.challenges.factories import ActivityFactory, ChallengeFactory
from tests.live.deliveries import alert_make, subscription_make
from tests.sites.factories import ExperimentFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/alerts/subscriptions/"
DELIVERIES = "/api/v1/alerts/deliveries/"
HOOK = "https://93.184.216.34/hooks/portal"  # a public address: checked without DNS


@pytest.fixture
def world() -> dict[str, Any]:
    atlas: Any = ExperimentFactory(name="ATLAS")
    cms: Any = ExperimentFactory(name="CMS")
    dc24 = ChallengeFactory(slug="dc24")
    ActivityFactory(challenge=dc24, experiment=atlas)
    cms_only = ChallengeFactory(slug="cms-only")
    ActivityFactory(challenge=cms_only, experiment=cms)
    SiteFactory(name="CERN-PROD")
    coordinator, viewer = UserFactory(username="coord"), UserFactory(username="viewer")
    membership_grant(user=coordinator, role="coordinator")
    _, ddm_key = token_issue(username="atlas-ddm", role="ddm", experiment=atlas)
    return {"atlas": atlas, "cms": cms, "dc24": dc24, "coordinator": coordinator, "viewer": viewer, "ddm": ddm_key}


def client(world: dict[str, Any], who: str) -> APIClient:
    api = APIClient()
    if who == "ddm":
        api.credentials(HTTP_AUTHORIZATION=f"Token {world['ddm']}")
    else:
        api.force_authenticate(world[who])
    return api


def body(**fields: Any) -> dict[str, Any]:
    return {"name": "ops", "url": HOOK, **fields}


def test_a_coordinator_subscribes_a_webhook_to_a_challenge(world: dict[str, Any]) -> None:
    response = client(world, "coordinator").post(
        URL,
        body(format="slack", challenge="dc24", experiments=["atlas"], sites=["CERN-PROD"], kinds=["no_traffic"]),
        format="json",
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert {key: value for key, value in data.items() if key not in ("id", "created_at")} == {
        "name": "ops",
        "url": HOOK,
        "email": "",
        "format": "slack",
        "challenge": "dc24",
        "experiments": ["ATLAS"],
        "sites": ["CERN-PROD"],
        "kinds": ["no_traffic"],
        "active": True,
        "created_by": "coord",
        "scope": None,
    }
    assert data["created_at"].endswith("Z")


def test_a_viewer_subscribes_by_email_to_everything(world: dict[str, Any]) -> None:
    response = client(world, "viewer").post(URL, {"name": "me", "email": "me@example.org"}, format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert (data["challenge"], data["experiments"], data["kinds"], data["created_by"]) == (None, [], [], "viewer")


def test_the_others_see_and_manage_only_their_own_subscriptions(world: dict[str, Any]) -> None:
    theirs = subscription_make(name="coordinator's", created_by=world["coordinator"])
    own = subscription_make(name="viewer's", created_by=world["viewer"])
    viewer, coordinator = client(world, "viewer"), client(world, "coordinator")
    assert [row["name"] for row in viewer.get(URL).json()["results"]] == ["viewer's"]
    assert [row["name"] for row in coordinator.get(URL).json()["results"]] == ["coordinator's", "viewer's"]
    assert viewer.get(f"{URL}{theirs.pk}/").status_code == 404
    assert viewer.patch(f"{URL}{theirs.pk}/", {"active": False}, format="json").status_code == 404
    assert viewer.delete(f"{URL}{theirs.pk}/").status_code == 404
    assert viewer.patch(f"{URL}{own.pk}/", {"active": False}, format="json").json()["active"] is False
    assert coordinator.patch(f"{URL}{own.pk}/", {"name": "renamed"}, format="json").status_code == 200
    assert viewer.delete(f"{URL}{own.pk}/").status_code == 204
    assert list(AlertSubscription.objects.values_list("name", flat=True)) == ["coordinator's"]


def test_a_ddm_token_of_atlas_cannot_subscribe_to_cms(world: dict[str, Any]) -> None:
    ddm = client(world, "ddm")
    refused = ddm.post(URL, body(experiments=["ATLAS", "CMS"]), format="json")
    assert refused.status_code == 403
    assert "may not subscribe to the alerts of CMS: your role reads those of ATLAS only" in refused.json()["detail"]
    hidden = ddm.post(URL, body(challenge="cms-only"), format="json")
    assert hidden.status_code == 400 and hidden.json() == {"challenge": ["no challenge 'cms-only'"]}
    assert not AlertSubscription.objects.exists()
    made = ddm.post(URL, body(experiments=["ATLAS"], challenge="dc24"), format="json")
    assert made.status_code == 201 and made.json()["created_by"] == "atlas-ddm"
    moved = ddm.patch(f"{URL}{made.json()['id']}/", {"experiments": ["CMS"]}, format="json")
    assert moved.status_code == 403
    assert list(AlertSubscription.objects.get().experiments.values_list("name", flat=True)) == ["ATLAS"]


def test_exactly_one_place_to_deliver_to(world: dict[str, Any]) -> None:
    api = client(world, "viewer")
    both = api.post(URL, body(email="me@example.org"), format="json")
    assert both.status_code == 400 and "not both" in both.json()["email"][0]
    neither = api.post(URL, {"name": "ops"}, format="json")
    assert neither.status_code == 400 and neither.json()["url"] == ["give a webhook url or an e-mail address"]
    made = api.post(URL, body(), format="json").json()
    switched = api.patch(f"{URL}{made['id']}/", {"email": "me@example.org"}, format="json")
    assert switched.status_code == 400 and "email" in switched.json()
    switched = api.patch(f"{URL}{made['id']}/", {"email": "me@example.org", "url": ""}, format="json")
    assert switched.status_code == 200 and (switched.json()["url"], switched.json()["email"]) == ("", "me@example.org")


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"kinds": ["no_traffic", "meteor_strike"]}, "kinds", 'no alert kind "meteor_strike"'),
        ({"experiments": ["ATLAS", "LHCX"]}, "experiments", "no experiment named 'LHCX'"),
        ({"sites": ["CERN-PROD", "NOWHERE", "ELSEWHERE"]}, "sites", "no site named 'NOWHERE', 'ELSEWHERE'"),
        ({"challenge": "dc99"}, "challenge", "no challenge 'dc99'"),
        ({"format": "xml"}, "format", '"xml" is not a valid choice.'),
        ({"url": "ftp://files.example.org/x"}, "url", "webhook URLs must be http or https"),
        ({"url": "http://10.0.0.1/hook"}, "url", "the webhook's host 10.0.0.1 is a private address: refused"),
        ({"url": "http://localhost/hook"}, "url", "the webhook's host localhost resolves to"),
        ({"url": "http://169.254.169.254/"}, "url", "the webhook's host 169.254.169.254 is a link-local address"),
    ],
)
def test_what_does_not_exist_or_may_not_be_posted_to_is_named(
    world: dict[str, Any], fields: dict[str, Any], field: str, message: str
) -> None:
    response = client(world, "coordinator").post(URL, body(**fields), format="json")
    assert response.status_code == 400
    assert message in str(response.json()[field])
    assert not AlertSubscription.objects.exists()


def test_an_unknown_field_is_refused(world: dict[str, Any]) -> None:
    response = client(world, "coordinator").post(URL, body(experiment="ATLAS"), format="json")
    assert response.status_code == 400
    assert response.json()["non_field_errors"][0].startswith("unknown field 'experiment' (known: name, url, email")


def test_a_body_that_is_not_an_object_is_a_400(world: dict[str, Any]) -> None:
    assert client(world, "coordinator").post(URL, [1, 2], format="json").status_code == 400


def test_a_subscription_is_changed_with_patch_not_put(world: dict[str, Any]) -> None:
    made = subscription_make(created_by=world["viewer"])
    assert client(world, "viewer").put(f"{URL}{made.pk}/", body(), format="json").status_code == 405


def test_anonymous_callers_are_refused(world: dict[str, Any]) -> None:
    assert APIClient().get(URL).status_code == 401
    assert APIClient().post(URL, body(), format="json").status_code == 401
    assert APIClient().get(DELIVERIES).status_code == 401


def test_the_list_takes_the_same_queries_for_one_subscription_or_twenty(world: dict[str, Any]) -> None:
    api = client(world, "coordinator")
    sites = [SiteFactory(name=f"S{n}") for n in range(3)]

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert api.get(URL).status_code == 200
        return len(captured)

    subscription_make(experiments=[world["atlas"]], sites=sites, challenge=world["dc24"], created_by=world["viewer"])
    queries()  # the caller's roles are read once per user object
    one = queries()
    for n in range(19):
        subscription_make(name=f"s{n}", experiments=[world["atlas"], world["cms"]], sites=sites[: n % 3])
    assert len(api.get(URL).json()["results"]) == 20
    assert queries() == one <= 5


def test_the_delivery_log_of_an_alert_is_read_as_the_alerts_are(world: dict[str, Any]) -> None:
    ddm_user = world["atlas"].memberships.get().user
    atlas_alert = alert_make(challenge=world["dc24"], experiment=world["atlas"], subject="a")
    cms_alert = alert_make(challenge=world["dc24"], experiment=world["cms"], subject="c")
    subscription_make(name="coordinator's", created_by=world["coordinator"])
    subscription_make(name="ddm's", created_by=ddm_user)
    alert_deliveries_create(alert=atlas_alert)
    alert_deliveries_create(alert=cms_alert)

    def log(who: str, alert: Any) -> list[str]:
        response = client(world, who).get(DELIVERIES, {"alert": alert.pk})
        assert response.status_code == 200
        return sorted(row["subscription_name"] for row in response.json()["results"])

    assert log("coordinator", atlas_alert) == ["coordinator's", "ddm's"]
    assert log("coordinator", cms_alert) == ["coordinator's"]
    assert log("ddm", atlas_alert) == ["ddm's"]  # their own subscriptions' deliveries
    assert log("ddm", cms_alert) == []  # another experiment's alert
    row = client(world, "coordinator").get(DELIVERIES, {"alert": cms_alert.pk}).json()["results"][0]
    assert {key: row[key] for key in ("alert", "alert_state", "status", "attempts", "response_code", "error")} == {
        "alert": cms_alert.pk,
        "alert_state": "open",
        "status": "pending",
        "attempts": 0,
        "response_code": None,
        "error": "",
    }
    assert client(world, "coordinator").get(DELIVERIES, {"alert": "x"}).status_code == 400
