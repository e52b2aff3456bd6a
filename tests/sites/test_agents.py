"""Site agents' credentials: enrolment writes what an agent needs and nothing of the portal's secrets; a rotated
key replaces the old one at once; a revoked agent is refused; an agent's key opens the agents' API only."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from sites.models import SiteAgent
from tests.sites.factories import SiteFactory

pytestmark = pytest.mark.django_db

HEARTBEAT = {"version": "1.0", "kinds": ["transfer"], "in_flight": []}


def enroll(tmp_path: Path, *extra: str, name: str = "agent.json") -> dict[str, str]:
    output = tmp_path / name
    call_command(
        "agent_enroll", "TB-T1-A", "--portal-url", "https://portal.example.org", "--output", str(output), *extra
    )
    return json.loads(output.read_text())


def beat(key: str) -> int:
    response = Client().post(
        "/api/v1/agent/heartbeat/", HEARTBEAT, content_type="application/json", HTTP_AUTHORIZATION=f"Agent {key}"
    )
    return response.status_code


def test_enrolment_writes_the_agents_key_and_site_and_none_of_the_portals_secrets(tmp_path: Path) -> None:
    SiteFactory(name="TB-T1-A")
    config = enroll(tmp_path, "--ca-bundle", "/etc/pki/portal-ca.pem")

    text = (tmp_path / "agent.json").read_text()
    assert (config["site"], config["portal_url"], config["ca_bundle"]) == (
        "TB-T1-A",
        "https://portal.example.org",
        "/etc/pki/portal-ca.pem",
    )
    assert config["key"].startswith("agt_") and beat(config["key"]) == 200
    database = settings.DATABASES["default"]
    secrets = [settings.SECRET_KEY, str(settings.CELERY_BROKER_URL), os.environ.get("DATABASE_URL", "")]
    secrets += [str(database.get("PASSWORD") or ""), str(database["NAME"])]
    for secret in filter(None, secrets):
        assert secret not in text
    for word in ("DATABASE", "REDIS", "SECRET", "BROKER", "postgres", "redis://"):
        assert word not in text
    assert stat.S_IMODE((tmp_path / "agent.json").stat().st_mode) == 0o600
    assert SiteAgent.objects.get().key_hash != config["key"]  # the database keeps its hash only


def test_a_rotated_key_replaces_the_old_one_at_once(tmp_path: Path) -> None:
    SiteFactory(name="TB-T1-A")
    old = enroll(tmp_path)["key"]
    new = enroll(tmp_path, "--rotate", name="rotated.json")["key"]

    assert (beat(old), beat(new)) == (401, 200)
    assert SiteAgent.objects.get().rotated is not None


def test_a_revoked_agent_is_refused_and_its_site_has_no_agent_any_more(tmp_path: Path) -> None:
    from sites.agents import site_has_agent

    site = SiteFactory(name="TB-T1-A")
    key = enroll(tmp_path)["key"]
    call_command("agent_revoke", "TB-T1-A")

    assert beat(key) == 401
    assert not site_has_agent(site=site)
    enroll(tmp_path, name="again.json")  # enrolled anew after a revocation
    assert site_has_agent(site=site)


def test_a_second_live_agent_of_the_same_name_is_refused(tmp_path: Path) -> None:
    SiteFactory(name="TB-T1-A")
    enroll(tmp_path)
    with pytest.raises(CommandError, match="has an agent named 'agent' already"):
        enroll(tmp_path, name="second.json")


def test_an_agents_key_opens_the_agents_api_only(tmp_path: Path) -> None:
    SiteFactory(name="TB-T1-A")
    key = enroll(tmp_path)["key"]
    response = Client().get("/api/v1/runs/", HTTP_AUTHORIZATION=f"Agent {key}")
    assert response.status_code in (401, 403)


def test_a_users_token_does_not_open_the_agents_api(tmp_path: Path) -> None:
    from sites.tokens import token_create
    from tests.sites.factories import UserFactory

    _, key = token_create(user=UserFactory())
    response = Client().post(
        "/api/v1/agent/heartbeat/", HEARTBEAT, content_type="application/json", HTTP_AUTHORIZATION=f"Token {key}"
    )
    assert response.status_code == 401 and response.json()["detail"]


def coordinator_client() -> Client:
    from sites.roles import membership_grant
    from tests.sites.factories import UserFactory

    user = UserFactory(username="coordinator")
    membership_grant(user=user, role="coordinator")
    client = Client()
    client.force_login(user)
    return client


def test_a_coordinator_enrols_rotates_and_revokes_an_agent_through_the_api() -> None:
    SiteFactory(name="TB-T1-A")
    api = coordinator_client()
    enrolled = api.post(
        "/api/v1/agents/",
        {"site": "TB-T1-A", "portal_url": "https://portal.example.org"},
        content_type="application/json",
    )
    assert enrolled.status_code == 201, enrolled.content
    agent_id, first = enrolled.json()["agent"]["id"], enrolled.json()["config"]["key"]
    assert beat(first) == 200
    assert "key" not in json.dumps(api.get("/api/v1/agents/").json())  # listed without any key

    rotated = api.post(
        f"/api/v1/agents/{agent_id}/rotate/",
        {"portal_url": "https://portal.example.org"},
        content_type="application/json",
    )
    second = rotated.json()["config"]["key"]
    assert (beat(first), beat(second)) == (401, 200)

    assert api.post(f"/api/v1/agents/{agent_id}/revoke/").json()["revoked"]
    assert beat(second) == 401


def test_a_site_admin_may_not_enrol_an_agent_even_for_their_own_site() -> None:
    from sites.roles import membership_grant
    from tests.sites.factories import UserFactory

    site = SiteFactory(name="TB-T1-A")
    admin = UserFactory(username="admin")
    membership_grant(user=admin, role="site-admin", site=site)
    client = Client()
    client.force_login(admin)
    answer = client.post(
        "/api/v1/agents/",
        {"site": "TB-T1-A", "portal_url": "https://portal.example.org"},
        content_type="application/json",
    )
    assert answer.status_code == 403 and not SiteAgent.objects.exists()
