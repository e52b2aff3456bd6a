"""The namespaced testbed: each site in a network namespace of its own, with its own address, MTU and link
capacities, measured for real from inside the sites (tracepath, iperf3), and the commands that show and use it."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from testbed.grid import Testbed, TestbedConfig
from testbed.grid.netns import (
    NamespacesUnavailable,
    default_layout,
    namespaces_unavailable,
    network_down,
    network_leftovers,
    network_up,
    place_status,
)
from tests.testbed.helpers import namespaces_or_skip

pytestmark = pytest.mark.testbed


def in_site(bed: Testbed, site: str, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(bed.site_argv(site, list(argv)), capture_output=True, text=True, timeout=timeout)


def probe_from(bed: Testbed, site: str, endpoint: str, duration: int = 2) -> dict[str, Any]:
    """The portal's network probe (iperf3, then tracepath), run inside the site's namespace."""
    target = bed.endpoint(endpoint)
    code = (
        "import json; from measure.network import network_probe; "
        f"print(json.dumps(network_probe({target.host!r}, {target.port}, duration={duration}).to_dict()))"
    )
    done = in_site(bed, site, sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    print(f"{site} -> {target.site}:\n{result['tracepath']}iperf3 {result['rate'] * 8 / 1e9:.3f} Gb/s")
    return result


def settings_of(bed: Testbed) -> dict[str, Any]:
    return {"TESTBED_DIR": bed.config.directory, "TESTBED_BASE_PORT": bed.config.base_port}


def test_each_site_has_its_own_namespace_address_and_mtu(netns_testbed: Testbed) -> None:
    layout = netns_testbed.layout
    assert layout is not None
    subnet = ipaddress.ip_network(layout.subnet)
    addresses = set()
    for place in layout.sites:
        now = place_status(place)
        assert now.exists and now.address == place.address, now
        assert ipaddress.ip_address(now.address) in subnet
        assert now.mtu == (1500 if place.name == "TB-T1-B" else 9000), now
        addresses.add(now.address)
    assert len(addresses) == len(layout.sites)
    t0, t1a = layout.site("TB-T0"), layout.site("TB-T1-A")
    # 1 Gb/s between TB-T0 and TB-T1-A, each way (shaped where the packets leave), nothing else.
    assert place_status(t0).shaped == {t1a.address: 1e9}
    assert place_status(t1a).shaped == {t0.address: 1e9}
    assert place_status(layout.site("TB-T1-B")).shaped == {}


def test_the_namespaced_testbed_has_a_subnet_of_its_own(netns_testbed: Testbed) -> None:
    loopback = Testbed(TestbedConfig.from_settings())
    assert loopback.layout is None and loopback.network == "loopback"  # the default stays loopback
    layout = netns_testbed.layout
    assert layout is not None
    assert netns_testbed.config.base_port != loopback.config.base_port
    assert layout.portal_address != "127.0.0.1" and ipaddress.ip_network(layout.subnet).is_private


def test_the_sites_document_points_at_the_sites_own_addresses(netns_testbed: Testbed) -> None:
    layout = netns_testbed.layout
    assert layout is not None
    document = netns_testbed.sites_document()
    for site in document["sites"]:
        address = layout.site(site["name"]).address
        for endpoint in site["endpoints"]:
            assert f"://{address}:" in endpoint["url"], endpoint
        for host in site["network_hosts"]:
            assert host.startswith(f"{address}:"), host


def test_every_endpoint_answers_at_its_sites_address(netns_testbed: Testbed) -> None:
    rows = netns_testbed.status()
    assert rows and all(row.answers for row in rows), [row.endpoint.url for row in rows if not row.answers]


def test_from_the_1500_site_the_path_mtu_is_1500_and_reaches_the_far_end(netns_testbed: Testbed) -> None:
    result = probe_from(netns_testbed, "TB-T1-B", "iperf3")  # TB-T0's iperf3 server
    assert (result["local_mtu"], result["path_mtu"], result["reached"]) == (1500, 1500, True)
    assert result["ok"] and result["warnings"] == []


def test_from_the_9000_side_the_path_mtu_is_9000_and_large_packets_do_not_get_through(
    netns_testbed: Testbed,
) -> None:
    result = probe_from(netns_testbed, "TB-T0", "iperf3.t1b")
    assert (result["local_mtu"], result["path_mtu"], result["reached"]) == (9000, 9000, False)
    assert result["small_packets_reached"] is True  # 1500-byte packets do: the mismatch, not a dead host
    assert any(text.startswith("MTU mismatch") for text in result["warnings"]), result["warnings"]
    assert result["ok"], result  # TCP still works: both ends agree on 1460-byte segments


def test_between_two_9000_sites_the_path_mtu_is_9000(netns_testbed: Testbed) -> None:
    result = probe_from(netns_testbed, "TB-T0", "iperf3.t1a")
    assert (result["local_mtu"], result["path_mtu"], result["reached"]) == (9000, 9000, True)
    assert result["warnings"] == []


def test_iperf3_from_t1a_to_t0_reads_at_most_the_links_1_gbps(netns_testbed: Testbed) -> None:
    capped = probe_from(netns_testbed, "TB-T1-A", "iperf3", duration=3)["rate"] * 8
    assert 0.3e9 < capped <= 1e9, capped
    # The capacity is the link's, not the site's: TB-T1-A to TB-T1-B is not capped.
    free = probe_from(netns_testbed, "TB-T1-A", "iperf3.t1b", duration=3)["rate"] * 8
    assert free > 1.2e9, free


def test_testbed_exec_runs_a_command_inside_a_site_and_returns_its_status(netns_testbed: Testbed) -> None:
    env = {
        **os.environ,
        "TESTBED_DIR": str(netns_testbed.config.directory),
        "TESTBED_BASE_PORT": str(netns_testbed.config.base_port),
    }
    manage = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "testbed", "exec"]
    shown = subprocess.run(
        [*manage, "TB-T1-B", "--", "cat", "/sys/class/net/eth0/mtu"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (shown.returncode, shown.stdout.strip()) == (0, "1500"), shown.stderr
    failed = subprocess.run([*manage, "t1a", "--", "sh", "-c", "exit 3"], env=env, timeout=60)
    assert failed.returncode == 3
    unknown = subprocess.run([*manage, "TB-NOWHERE", "--", "true"], capture_output=True, text=True, env=env)
    assert unknown.returncode != 0 and "no testbed site 'TB-NOWHERE'" in unknown.stderr


def test_status_and_env_show_the_sites_places_and_the_portals_address(netns_testbed: Testbed) -> None:
    layout = netns_testbed.layout
    assert layout is not None
    with override_settings(**settings_of(netns_testbed)):
        out = StringIO()
        call_command("testbed", "status", stdout=out)
        text = out.getvalue()
        env = StringIO()
        call_command("testbed", "env", stdout=env)
        status = StringIO()
        call_command("testbed", "status", "--json", stdout=status)
    t1b = layout.site("TB-T1-B")
    assert f"network: namespaces on {layout.subnet}" in text
    assert f"TB-T1-B    {t1b.namespace} {t1b.address} MTU 1500; no capacity set" in text
    assert "1 Gb/s to TB-T1-A" in text and "1 Gb/s to TB-T0" in text
    assert f"export TESTBED_PORTAL_ADDRESS={layout.portal_address}" in env.getvalue().splitlines()
    sites = {site["site"]: site for site in json.loads(status.getvalue())["network"]["sites"]}
    assert sites["TB-T0"]["capacities"] == [{"to": "TB-T1-A", "bits_per_second": 1e9}]
    assert (sites["TB-T1-A"]["mtu"], sites["TB-T1-B"]["mtu"]) == (9000, 1500)


def test_a_site_reaches_the_portals_postgresql_through_the_relay(netns_testbed: Testbed) -> None:
    database = settings.DATABASES["default"]
    url = f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}/postgres"
    env = netns_testbed.portal_environment({"DATABASE_URL": url})
    assert env["DATABASE_URL"].startswith(f"postgresql://{database['USER']}@{netns_testbed.portal_address}:")
    code = f"import psycopg; print(psycopg.connect({env['DATABASE_URL']!r}).execute('select 1').fetchone()[0])"
    done = in_site(netns_testbed, "TB-T1-A", sys.executable, "-c", code)
    assert (done.returncode, done.stdout.strip()) == (0, "1"), done.stderr
    # Without the relay the site has no way to the host's loopback.
    direct = in_site(
        netns_testbed, "TB-T1-A", sys.executable, "-c", code.replace(netns_testbed.portal_address, "127.0.0.1")
    )
    assert direct.returncode != 0


def test_down_removes_every_namespace_veth_bridge_and_qdisc() -> None:
    namespaces_or_skip()
    layout = default_layout(base_port=int(settings.TESTBED_BASE_PORT) + 199)
    try:
        network_up(layout)
        assert set(network_leftovers(layout)) >= {place.namespace for place in layout.sites} | {layout.bridge}
        assert place_status(layout.site("TB-T0")).shaped  # the htb classes are there
    finally:
        removed = network_down(layout)
    assert layout.bridge in removed
    assert network_leftovers(layout) == []


def test_without_root_namespaces_are_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert namespaces_unavailable() == "network namespaces need root (ip netns, veth pairs and tc)"
    with pytest.raises(NamespacesUnavailable, match="need root"):
        network_up(default_layout(base_port=int(settings.TESTBED_BASE_PORT) + 198))
