"""#35's done-when on the namespaced testbed: TB-T1-A's agent, enrolled with `manage.py agent_enroll` and started
inside TB-T1-A's namespace with an empty environment (`env -i`, PATH only), runs a 10-file transfer run and then
an iperf3 run from TB-T1-A to TB-T0 over their 1 Gb/s link. Both end with `agent` naming TB-T1-A's agent, iperf3
reads at most the link's capacity, and the namespace's sockets, sampled while the runs go, show the agent talking
to the portal and never to PostgreSQL or Redis, though the relay offers both at the same address.

The portal (gunicorn on the test database) is bound on the bridge's address, TESTBED_PORTAL_ADDRESS, on a port of
its own, rather than reached through the relay: the relay's ports are fixed when the testbed comes up (the portal's
settings), while a test's server takes a free port; and the relay forwards only what the portal's own services
need, so the agent's one connection is the portal's own socket."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.management import call_command

from results.models import NetworkMeasurement, TransferRecord
from runs.models import Run, RunFile
from runs.services import run_start
from sites.models import Site, SiteAgent
from sites.services import sites_import
from testbed.grid import Testbed
from tests.runs.helpers import wait_for_run_end
from tests.testbed.helpers import PortalServer, logs

pytestmark = [pytest.mark.testbed, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

MB = 1024 * 1024
SITE = "TB-T1-A"
LINK_BYTES_PER_SECOND = 1e9 / 8  # the testbed's capacity between TB-T0 and TB-T1-A, each way


Connection = tuple[str, str]  # (local address:port, peer address:port)


def namespace_connections(namespace: str) -> dict[Connection, set[int]]:
    """Every TCP connection of the namespace now (any state but LISTEN), with the PIDs that hold it (none for a
    socket no process holds any more: TIME-WAIT)."""
    shown = subprocess.run(
        ["ip", "netns", "exec", namespace, "ss", "-tanpH"], capture_output=True, text=True, timeout=10
    ).stdout
    found = {}
    for line in shown.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0] != "LISTEN":
            found[(fields[3], fields[4])] = {int(pid) for pid in re.findall(r"pid=(\d+)", line)}
    return found


def port_of(address: str) -> int:
    return int(address.rpartition(":")[2])


def peer_of(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass
class Sockets:
    """A namespace's TCP connections sampled again and again: those made since `baseline` (the connections it
    held before the agent started, left by earlier tests' workers), and those the agent's process tree held."""

    namespace: str
    root_pid: int
    baseline: set[Connection]
    new: set[Connection] = field(default_factory=set)  # by any process of the namespace, or none (TIME-WAIT)
    agent: set[Connection] = field(default_factory=set)  # held by the agent or its children (iperf3)
    samples: int = 0

    def sample(self) -> None:
        tree = process_tree(self.root_pid)
        for connection, pids in namespace_connections(self.namespace).items():
            if connection not in self.baseline:
                self.new.add(connection)
            if pids & tree:
                self.agent.add(connection)
        self.samples += 1

    @property
    def agent_peers(self) -> set[tuple[str, int]]:
        return {peer_of(peer) for _, peer in self.agent}


def process_tree(root: int) -> set[int]:
    """root and every process descended from it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(children.get(pid, []))
    return tree


@pytest.fixture
def portal_on_bridge(netns_testbed: Testbed, tmp_path: Path) -> Iterator[PortalServer]:
    server = PortalServer(tmp_path, address=netns_testbed.portal_address)
    server.start()
    yield server
    server.stop()


@dataclass
class StartedAgent:
    pid: int
    sockets: Sockets
    watching: threading.Thread
    stop: threading.Event

    def stop_watching(self) -> None:
        self.stop.set()
        self.watching.join()


@pytest.fixture
def agent_in_namespace(
    netns_testbed: Testbed, portal_on_bridge: PortalServer, tmp_path: Path
) -> Iterator[StartedAgent]:
    """TB-T1-A's agent: enrolled by `manage.py agent_enroll` with the portal's URL on the bridge, the testbed's CA
    and bearer token added as the site's credentials, started inside TB-T1-A's namespace; its namespace's sockets
    watched from just before it starts until the test ends."""
    sites_import(document=netns_testbed.sites_document())
    enrolled = tmp_path / "enrolled.json"
    call_command("agent_enroll", SITE, "--portal-url", portal_on_bridge.url, "--output", str(enrolled))
    config = netns_testbed.site_agent_configure(SITE, json.loads(enrolled.read_text()), heartbeat=1)
    shutil.rmtree(netns_testbed.agent_spool(SITE), ignore_errors=True)
    namespace = netns_testbed.place_of(SITE).namespace
    baseline = set(namespace_connections(namespace))
    pid = netns_testbed.site_agent_start(SITE, config)
    sockets = Sockets(namespace, pid, baseline)
    watching, stop = watch(sockets)
    started = StartedAgent(pid, sockets, watching, stop)
    try:
        yield started
    finally:
        started.stop_watching()
        netns_testbed.site_agent_stop(SITE)


def test_an_agent_inside_its_sites_namespace_measures_the_sites_link_and_never_reaches_the_database_or_redis(
    netns_testbed: Testbed, agent_in_namespace: StartedAgent, portal_on_bridge: PortalServer, coordinator: Any
) -> None:
    pid, sockets, place = agent_in_namespace.pid, agent_in_namespace.sockets, netns_testbed.place_of(SITE)
    # Started with nothing in its environment but PATH, in TB-T1-A's network namespace.
    assert environment_of(pid) == {"PATH"}, environment_of(pid)
    assert same_netns(pid, place.namespace)
    agent_logs = lambda: logs(portal_on_bridge.directory, netns_testbed.agent_log(SITE))  # noqa: E731
    transfer: Run | None = None
    try:
        transfer = run_start(
            user=coordinator,
            kind="transfer",
            parameters={
                "source": netns_testbed.endpoint("t1a.root").url,
                "destinations": [netns_testbed.endpoint("t0.root").url],
                "file_size": 4 * MB,
                "file_count": 10,
                "concurrency": 5,
                "experiment": "ATLAS",
                "timeout": 60,
            },
        )
        wait_or_explain(transfer, agent_logs)
        # Then iperf3, alone on the link: the transfer's copies go the same way (TB-T0 pulls from TB-T1-A).
        iperf3 = netns_testbed.endpoint("iperf3")  # TB-T0's iperf3 server, at TB-T0's address
        network = run_start(
            user=coordinator,
            kind="network",
            site=Site.objects.get(name=SITE),
            parameters={"host": iperf3.host, "port": iperf3.port, "duration": 3, "streams": 1},
        )
        wait_or_explain(network, agent_logs)
    finally:
        agent_in_namespace.stop_watching()
        if transfer is not None:
            for directory in netns_testbed.site_dir("t0").glob(f"**/portal-runs/{transfer.directory or 'none'}"):
                shutil.rmtree(directory, ignore_errors=True)

    agent = SiteAgent.objects.get(site__name=SITE, revoked__isnull=True)
    for run in (transfer, network):
        assert run.state == "finished", f"{run.kind}: {run.message}\n{agent_logs()}"
        assert run.agent == agent and run.agent.site.name == SITE
    assert transfer.parameters["queue"] == f"agent.{SITE}"
    assert sorted(TransferRecord.objects.filter(run=transfer).values_list("state", "bytes")) == [("ok", 4 * MB)] * 10
    assert set(RunFile.objects.filter(run=transfer).values_list("worker", flat=True)) == {f"agent {SITE}/agent"}

    rate = float(network.summary["rate"])
    print(f"iperf3 {SITE} -> TB-T0 by the agent in {place.namespace}: {rate * 8 / 1e9:.3f} Gb/s")
    assert 0.3 * LINK_BYTES_PER_SECOND < rate <= LINK_BYTES_PER_SECOND
    assert NetworkMeasurement.objects.filter(run=network).count() == 1

    # The sockets: the agent (and its iperf3) talked to the portal and to TB-T0; nothing in the namespace ever
    # held a connection to the ports of PostgreSQL or Redis, which the relay serves at the portal's address.
    database = int(settings.DATABASES["default"]["PORT"] or 5432)
    redis = {urlsplit(url).port or 6379 for url in (settings.REDIS_URL, settings.CELERY_BROKER_URL)}
    forbidden = {database, *redis}
    assert forbidden <= set(netns_testbed.relay_ports())  # the relay offers them at the portal's address
    print(f"{sockets.samples} samples of {place.namespace}'s sockets; the agent's peers: {sorted(sockets.agent_peers)}")
    assert sockets.samples >= 20
    assert (netns_testbed.portal_address, portal_on_bridge.port) in sockets.agent_peers
    assert (iperf3.host, iperf3.port) in sockets.agent_peers  # its child processes are watched too
    assert not {peer for _, peer in sockets.agent if port_of(peer) in forbidden}, sockets.agent
    # Nor any connection the namespace made meanwhile, held by a process or left in TIME-WAIT.
    assert not {peer for _, peer in sockets.new if port_of(peer) in forbidden}, sockets.new
    assert reachable_from(netns_testbed, SITE, netns_testbed.portal_address, database)  # the check could fail


def wait_or_explain(run: Run, explain: Callable[[], str]) -> None:
    try:
        wait_for_run_end(run, 120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain()}") from None


def watch(sockets: Sockets) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            sockets.sample()
            stop.wait(0.1)

    thread = threading.Thread(target=loop, name="sockets", daemon=True)
    thread.start()
    return thread, stop


def environment_of(pid: int) -> set[str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return {entry.split(b"=", 1)[0].decode() for entry in entries if entry}


def same_netns(pid: int, namespace: str) -> bool:
    """The process is in the named namespace: `ip netns identify PID` names it."""
    named = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True, timeout=10)
    return namespace in named.stdout.split()


def reachable_from(bed: Testbed, site: str, host: str, port: int) -> bool:
    """A TCP connection from inside the site's namespace to host:port gets through."""
    code = f"import socket; socket.create_connection(({host!r}, {port}), timeout=5).close()"
    done = subprocess.run(bed.site_argv(site, ["python3", "-c", code]), capture_output=True, timeout=30)
    return done.returncode == 0
