"""`manage.py testbed agents`: an agent for every site of the namespaced testbed, enrolled with the portal and
started inside its site's namespace (testbed/grid/agents.py starts and stops them); `--stop` stops them and revokes
the keys the testbed made, and only those (its agents are named `testbed`: a site's own agent keeps its key)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from sites.agents import agent_config, agent_enroll, agent_revoke, agent_rotate
from sites.models import Site, SiteAgent

from .grid import Testbed
from .grid.agents import TESTBED_AGENT_NAME


@dataclass(frozen=True)
class AgentStarted:
    site: str
    pid: int | None  # None: the site is not in the registry (import the testbed's sites document first)
    note: str


def testbed_portal_url(testbed: Testbed) -> str:
    """The portal as the sites reach it: PORTAL_URL with a loopback host turned into the portal's address on the
    bridge (the relay carries its port there)."""
    return testbed.portal_environment({"PORTAL_URL": settings.PORTAL_URL})["PORTAL_URL"]


def testbed_agents_start(*, testbed: Testbed, portal_url: str, heartbeat: float = 2.0) -> list[AgentStarted]:
    """Enrol (or give a new key to) the testbed's agent of every site in the registry and start it in the site's
    namespace; an agent that runs already is left as it is."""
    layout = testbed.layout
    if layout is None:
        raise RuntimeError("the testbed runs on loopback: no namespace for agents (testbed up --network namespaces)")
    running = testbed.site_agents()
    started = []
    for place in layout.sites:
        if place.name in running:
            started.append(AgentStarted(place.name, running[place.name], "running already"))
            continue
        site = Site.objects.filter(name=place.name).first()
        if site is None:
            started.append(AgentStarted(place.name, None, "not in the registry: no agent"))
            continue
        with transaction.atomic():
            agent = SiteAgent.objects.filter(site=site, name=TESTBED_AGENT_NAME, revoked__isnull=True).first()
            if agent is not None:
                key, note = agent_rotate(agent=agent), "enrolled again (a new key)"
            else:
                (agent, key), note = agent_enroll(site=site, name=TESTBED_AGENT_NAME), "enrolled"
        enrolled = agent_config(agent=agent, key=key, portal_url=portal_url)
        config = testbed.site_agent_configure(place.name, enrolled, heartbeat=heartbeat)
        started.append(AgentStarted(place.name, testbed.site_agent_start(place.name, config), note))
    return started


def testbed_agents_stop(*, testbed: Testbed) -> tuple[list[str], int]:
    """Stop every site's agent and revoke the testbed's own agents of the testbed's sites (not a site's other
    agents): their sites' work goes to their Celery queues again. Returns the stopped and how many were revoked."""
    layout = testbed.layout
    stopped = [place.name for place in layout.sites if testbed.site_agent_stop(place.name)] if layout else []
    names = [place.name for place in layout.sites] if layout else []
    revoked = 0
    for agent in SiteAgent.objects.filter(site__name__in=names, name=TESTBED_AGENT_NAME, revoked__isnull=True):
        agent_revoke(agent=agent)
        revoked += 1
    return stopped, revoked
