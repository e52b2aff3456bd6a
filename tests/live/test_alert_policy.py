"""The access policy on alerts, through the API as people use it (issue #34): a subscription made with a token keeps
that token's scope for as long as it lives; a site admin acknowledges and silences only the alerts about their own
sites; a silence lasts at most ALERT_SILENCE_MAX_SECONDS; and a new subscription hears of the alerts already open
(#33)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from live.delivery import alert_deliveries_create
from live.models import Alert, AlertDelivery
from sites.roles import membership_grant, membership_revoke
from sites.tokens import token_issue
from tests.challenges.factories import ActivityFactory, ChallengeFactory
from tests.live.deliveries import alert_make
from tests.sites.factories import ExperimentFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db

SUBSCRIPTIONS = "/api/v1/alerts/subscriptions/"


@pytest.fixture
def world() -> dict[str, Any]:
    """ATLAS and CMS in challenge dc24; sites SITE-A1, SITE-B and SITE-C."""
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    challenge = ChallengeFactory(slug="dc24")
    ActivityFactory(challenge=challenge, experiment=atlas)
    ActivityFactory(challenge=challenge, experiment=cms)
    sites = {name: SiteFactory(name=name) for name in ("SITE-A1", "SITE-B", "SITE-C")}
    return {"atlas": atlas, "cms": cms, "challenge": challenge, **sites}


def link_alert(world: dict[str, Any], experiment: str, source: str, destination: str, **fields: Any) -> Alert:
    """An open throughput drop of the experiment on the link source -> destination."""
    return alert_make(
        challenge=world["challenge"],
        experiment=world[experiment],
        link_source=world[source],
        link_destination=world[destination],
        **{"subject": f"link:{source}-{destination}:{experiment}", **fields},
    )


def with_token(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def logged_in(role: str, **scope: Any) -> APIClient:
    user = UserFactory(username=f"{role}-policy")
    membership_grant(user=user, role=role, **scope)
    api = APIClient()
    api.force_authenticate(user)
    return api


def delivered(subscription_id: int) -> list[tuple[int, str]]:
    return sorted(AlertDelivery.objects.filter(subscription_id=subscription_id).values_list("alert_id", "alert_state"))


@pytest.fixture
def viewer_with_atlas_token(world: dict[str, Any]) -> tuple[Any, APIClient]:
    """A viewer who also holds an ATLAS-scoped DDM token, calling with that token."""
    token, key = token_issue(username="vi", role="ddm", experiment=world["atlas"])
    membership_grant(user=token.user, role="viewer")
    return token.user, with_token(key)


def test_a_subscription_made_with_an_atlas_token_hears_no_cms_alert(
    world: dict[str, Any], viewer_with_atlas_token: tuple[Any, APIClient]
) -> None:
    _, api = viewer_with_atlas_token
    made = api.post(SUBSCRIPTIONS, {"name": "all", "email": "x@example.org"}, format="json")
    assert made.status_code == 201, made.json()
    assert made.json()["scope"] == {"role": "ddm", "site": None, "experiment": "ATLAS"}
    cms_alert = link_alert(world, "cms", "SITE-B", "SITE-C")
    atlas_alert = link_alert(world, "atlas", "SITE-B", "SITE-C")
    for alert in (cms_alert, atlas_alert):
        alert_deliveries_create(alert=alert)
    assert api.get(f"/api/v1/alerts/{cms_alert.pk}/").status_code == 404
    assert api.get(f"/api/v1/alerts/{atlas_alert.pk}/").status_code == 200
    assert delivered(made.json()["id"]) == [(atlas_alert.pk, "open")]


def test_a_token_scoped_subscription_hears_nothing_once_its_role_is_revoked(
    world: dict[str, Any], viewer_with_atlas_token: tuple[Any, APIClient]
) -> None:
    user, api = viewer_with_atlas_token
    made = api.post(SUBSCRIPTIONS, {"name": "all", "email": "x@example.org"}, format="json").json()
    membership_revoke(user=user, role="ddm", experiment=world["atlas"])  # the token goes with it
    alert = link_alert(world, "atlas", "SITE-B", "SITE-C")
    alert_deliveries_create(alert=alert)
    # Still a viewer, who reads every alert: but the subscription was made within the DDM role only.
    assert delivered(made["id"]) == []


def test_the_same_user_logged_in_subscribes_with_all_of_their_roles(
    world: dict[str, Any], viewer_with_atlas_token: tuple[Any, APIClient]
) -> None:
    user, _ = viewer_with_atlas_token
    api = APIClient()
    api.force_authenticate(user)
    made = api.post(SUBSCRIPTIONS, {"name": "all", "email": "x@example.org"}, format="json").json()
    cms_alert = link_alert(world, "cms", "SITE-B", "SITE-C")
    alert_deliveries_create(alert=cms_alert)
    assert delivered(made["id"]) == [(cms_alert.pk, "open")]


def test_a_site_admin_may_not_silence_an_alert_about_other_sites(world: dict[str, Any]) -> None:
    alert = link_alert(world, "cms", "SITE-B", "SITE-C")
    admin = logged_in("site-admin", site=world["SITE-A1"])
    until = (timezone.now() + timedelta(days=30, hours=23)).isoformat()
    silenced = admin.post(f"/api/v1/alerts/{alert.pk}/silence/", {"until": until}, format="json")
    assert silenced.status_code == 403
    assert "a site admin, those about their own sites (SITE-A1)" in silenced.json()["detail"]
    assert admin.post(f"/api/v1/alerts/{alert.pk}/acknowledge/").status_code == 403
    alert.refresh_from_db()
    assert (alert.silenced_until, alert.acknowledged_by) == (None, None)


def test_a_site_admin_acknowledges_and_silences_the_alerts_of_their_own_site(world: dict[str, Any]) -> None:
    alert = link_alert(world, "cms", "SITE-B", "SITE-A1")
    admin = logged_in("site-admin", site=world["SITE-A1"])
    until = (timezone.now() + timedelta(hours=4)).isoformat()
    assert admin.post(f"/api/v1/alerts/{alert.pk}/acknowledge/").json()["acknowledged_by"] == "site-admin-policy"
    silenced = admin.post(f"/api/v1/alerts/{alert.pk}/silence/", {"until": until}, format="json")
    assert silenced.status_code == 200 and silenced.json()["silenced_by"] == "site-admin-policy"


def test_a_silence_longer_than_a_week_is_refused_by_its_field(world: dict[str, Any]) -> None:
    alert = link_alert(world, "cms", "SITE-B", "SITE-C")
    coordinator = logged_in("coordinator")
    until = (timezone.now() + timedelta(days=7, minutes=5)).isoformat()
    refused = coordinator.post(f"/api/v1/alerts/{alert.pk}/silence/", {"until": until}, format="json")
    assert refused.status_code == 400
    (message,) = refused.json()["until"]
    assert message.startswith("a silence lasts at most 7 days (ALERT_SILENCE_MAX_SECONDS): until ")
    alert.refresh_from_db()
    assert alert.silenced_until is None
    week = (timezone.now() + timedelta(days=6, hours=23)).isoformat()
    assert coordinator.post(f"/api/v1/alerts/{alert.pk}/silence/", {"until": week}, format="json").status_code == 200


def test_the_longest_silence_is_a_setting(world: dict[str, Any], settings: Any) -> None:
    settings.ALERT_SILENCE_MAX_SECONDS = 3600
    alert = link_alert(world, "cms", "SITE-B", "SITE-C")
    until = (timezone.now() + timedelta(hours=2)).isoformat()
    refused = logged_in("coordinator").post(f"/api/v1/alerts/{alert.pk}/silence/", {"until": until}, format="json")
    assert refused.status_code == 400 and "at most 1 h" in refused.json()["until"][0]


def test_a_new_subscription_hears_of_each_alert_already_open_once(world: dict[str, Any]) -> None:
    open_alerts = [link_alert(world, "atlas", "SITE-B", "SITE-C", subject=f"open:{n}") for n in range(7)]
    link_alert(world, "atlas", "SITE-B", "SITE-C", subject="gone", state="resolved", resolved_at=timezone.now())
    link_alert(world, "atlas", "SITE-B", "SITE-C", subject="hushed", silenced_until=timezone.now() + timedelta(hours=1))
    link_alert(world, "atlas", "SITE-B", "SITE-C", subject="other kind", kind="failure_spike")
    api = logged_in("viewer")
    made = api.post(
        SUBSCRIPTIONS,
        {"name": "mid-week", "email": "x@example.org", "kinds": ["throughput_drop"]},
        format="json",
    )
    assert made.status_code == 201, made.json()
    expected = sorted((alert.pk, "open") for alert in open_alerts)
    assert delivered(made.json()["id"]) == expected
    # Telling it again, as a change to it or the next evaluation does, sends nothing twice.
    assert api.patch(f"{SUBSCRIPTIONS}{made.json()['id']}/", {"name": "renamed"}, format="json").status_code == 200
    for alert in open_alerts:
        alert_deliveries_create(alert=alert)
    assert delivered(made.json()["id"]) == expected


def test_a_new_token_scoped_subscription_hears_only_of_the_open_alerts_its_scope_reads(
    world: dict[str, Any], viewer_with_atlas_token: tuple[Any, APIClient]
) -> None:
    atlas_alert = link_alert(world, "atlas", "SITE-B", "SITE-C")
    link_alert(world, "cms", "SITE-B", "SITE-C")
    _, api = viewer_with_atlas_token
    made = api.post(SUBSCRIPTIONS, {"name": "all", "email": "x@example.org"}, format="json").json()
    assert delivered(made["id"]) == [(atlas_alert.pk, "open")]
