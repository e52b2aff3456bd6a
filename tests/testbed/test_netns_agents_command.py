"""`manage.py testbed agents`: on the namespaced testbed, an agent for every site in the registry, enrolled with the
portal and started inside its site's namespace with an empty environment; `testbed status` shows each one's PID;
`testbed agents --stop` and `testbed down` stop them and revoke the keys the testbed made, and no other agent's."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from common import processes
from sites.agents import agent_enroll
from sites.models import Site, SiteAgent
from sites.services import sites_import
from testbed.certs import ensure_pki
from testbed.grid import Testbed, TestbedConfig
from testbed.grid.agents import TESTBED_AGENT_NAME
from testbed.grid.netns import network_leftovers
from tests.runs.helpers import wait_for
from tests.testbed.helpers import PortalServer, logs, namespaces_or_skip, netns_testbed_config

pytestmark = [pytest.mark.testbed, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


@pytest.fixture
def portal_on_bridge(netns_testbed: Testbed, tmp_path: Path) -> Iterator[PortalServer]:
    server = PortalServer(tmp_path, address=netns_testbed.portal_address, threads=24)  # a long poll per agent
    server.start()
    yield server
    server.stop()


def run_testbed_command(bed: Testbed, *args: str) -> str:
    out = StringIO()
    with override_settings(TESTBED_DIR=bed.config.directory, TESTBED_BASE_PORT=bed.config.base_port):
        call_command("testbed", *args, stdout=out)
    return out.getvalue()


def namespace_of(pid: int) -> str:
    return subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True).stdout.strip()


def test_testbed_agents_starts_one_agent_per_site_inside_its_namespace_and_stop_revokes_only_its_own(
    netns_testbed: Testbed, portal_on_bridge: PortalServer
) -> None:
    sites_import(document=netns_testbed.sites_document())
    operators = agent_enroll(site=Site.objects.get(name="TB-T0"), name="agent")[0]  # a site's own agent
    layout = netns_testbed.layout
    assert layout is not None
    in_registry = [place for place in layout.sites if Site.objects.filter(name=place.name).exists()]
    assert len(in_registry) >= 3
    try:
        printed = run_testbed_command(netns_testbed, "agents", "--portal-url", portal_on_bridge.url)
        print(printed)
        agents = netns_testbed.site_agents()
        assert set(agents) == {place.name for place in in_registry}, printed
        for place in in_registry:
            pid = agents[place.name]
            assert namespace_of(pid) == place.namespace
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert [entry.split(b"=")[0] for entry in environment if entry] == [b"PATH"]
            config: dict[str, Any] = json.loads(netns_testbed.agent_config_path(place.name).read_text())
            assert config["portal_url"] == portal_on_bridge.url and config["spool"].startswith(str(netns_testbed.dir))

        def all_beat() -> bool:
            beating = SiteAgent.objects.filter(name=TESTBED_AGENT_NAME, revoked__isnull=True, last_seen__isnull=False)
            return beating.count() == len(in_registry)

        wait_for(all_beat, 60, lambda: logs(netns_testbed.dir / "log", portal_on_bridge.directory))
        status = json.loads(run_testbed_command(netns_testbed, "status", "--json"))
        shown = {row["site"]: row["agent"] for row in status["network"]["sites"]}
        assert {site: pid for site, pid in shown.items() if pid} == agents
        assert "running already" in run_testbed_command(netns_testbed, "agents", "--portal-url", portal_on_bridge.url)
        assert netns_testbed.site_agents() == agents  # the same processes, keys unchanged

        stopped = run_testbed_command(netns_testbed, "agents", "--stop")
        assert f"{len(in_registry)} testbed keys revoked" in stopped, stopped
        assert netns_testbed.site_agents() == {}
        assert not any(processes.pid_alive(pid) for pid in agents.values())
        assert not SiteAgent.objects.filter(name=TESTBED_AGENT_NAME, revoked__isnull=True).exists()
        operators.refresh_from_db()
        assert operators.revoked is None  # the site's own agent keeps its key
    finally:
        for place in layout.sites:
            netns_testbed.site_agent_stop(place.name)


def test_testbed_down_stops_the_agents_and_revokes_only_the_testbeds_keys(tmp_path: Path) -> None:
    """On a namespaced testbed of its own (down removes it whole): `testbed down` after `testbed agents`."""
    namespaces_or_skip()
    config = netns_testbed_config()
    config.directory = config.directory.with_name(config.directory.name + "-down")
    config.base_port += 50  # beside the session's namespaced testbed: ports and subnet of its own
    bed = Testbed(config)
    ordinary = Testbed(TestbedConfig.from_settings())
    ensure_pki(ordinary.pki.root)
    shutil.copytree(ordinary.pki.root, bed.pki.root, dirs_exist_ok=True)
    bed.down()
    bed.up()
    layout = bed.layout
    assert layout is not None
    portal = PortalServer(tmp_path, address=bed.portal_address, threads=24)
    try:
        portal.start()
        sites_import(document=bed.sites_document())
        operators = agent_enroll(site=Site.objects.get(name="TB-T1-A"), name="agent")[0]
        run_testbed_command(bed, "agents", "--portal-url", portal.url)
        agents = bed.site_agents()
        assert len(agents) == Site.objects.filter(name__in=[p.name for p in layout.sites]).count() >= 3

        printed = run_testbed_command(bed, "down")
        assert f"{len(agents)} testbed keys revoked" in printed, printed
        assert not any(processes.pid_alive(pid) for pid in agents.values())
        assert not SiteAgent.objects.filter(name=TESTBED_AGENT_NAME, revoked__isnull=True).exists()
        operators.refresh_from_db()
        assert operators.revoked is None
        assert network_leftovers(layout) == []
    finally:
        portal.stop()
        bed.down()
