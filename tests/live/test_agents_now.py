"""Sites' agents on the now board and the agent_silent alert: an enrolled agent of a challenge's site that stops
calling the portal opens one alert about its site, which resolves once it is back; the board lists each agent with
what it last said."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from live.alerts import alerts_evaluate
from live.models import Alert
from sites.agents import agent_enroll, agent_report
from sites.models import SiteAgent
from sites.roles import membership_grant
from tests.live.scenario import Scenario, scenario_make
from tests.sites.factories import SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def live() -> Scenario:
    return scenario_make()


def silent_agents(live: Scenario) -> list[tuple[str, str, int | None]]:
    alerts = Alert.objects.filter(challenge=live.challenge, kind="agent_silent", state="open")
    return list(alerts.values_list("subject", "message", "site_id"))


def test_an_agent_silent_for_five_minutes_opens_one_alert_about_its_site_until_it_reports(live: Scenario) -> None:
    site = live.sites["A"]
    agent, _ = agent_enroll(site=site)
    agent_enroll(site=SiteFactory(name="ELSEWHERE"))  # a site the challenge does not use: never its alert
    SiteAgent.objects.filter(pk=agent.pk).update(last_seen=live.at - timedelta(minutes=4))
    alerts_evaluate(challenge=live.challenge, at=live.at)
    assert silent_agents(live) == []  # four minutes: not yet

    SiteAgent.objects.filter(pk=agent.pk).update(last_seen=live.at - timedelta(minutes=7))
    alerts_evaluate(challenge=live.challenge, at=live.at)
    ((subject, message, site_id),) = silent_agents(live)
    assert (subject, site_id) == (f"agent:{site.name}/agent", site.pk)
    assert f"the agent of {site.name} (agent) has not reported for 7 minutes" in message

    agent_report(agent=agent, version="1.0", kinds=["transfer"], in_flight=0)  # back
    SiteAgent.objects.filter(pk=agent.pk).update(last_seen=live.at)
    Alert.objects.filter(kind="agent_silent").update(last_seen_at=live.at - timedelta(minutes=10))
    done = alerts_evaluate(challenge=live.challenge, at=live.at)
    assert [alert.kind for alert in done.resolved] == ["agent_silent"]


def test_the_now_board_lists_the_agents_of_the_challenges_sites(live: Scenario) -> None:
    agent, _ = agent_enroll(site=live.sites["A"])
    agent_report(agent=agent, version="1.0", kinds=["transfer", "network"], in_flight=3)
    user = UserFactory(username="viewer-agents")
    membership_grant(user=user, role="coordinator")
    api = APIClient()
    api.force_authenticate(user)

    board = api.get(f"/api/v1/challenges/{live.challenge.slug}/now/").json()

    ((row),) = board["agents"]
    assert (row["site"], row["name"], row["version"], row["kinds"], row["in_flight"], row["silent"]) == (
        live.sites["A"].name,
        "agent",
        "1.0",
        ["transfer", "network"],
        3,
        False,
    )
