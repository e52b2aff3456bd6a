"""The namespaced testbed (each site in a network namespace of its own), beside the loopback one the rest of the
suite uses: its own directory, ports and private /24, the same CA. Its tests are skipped, saying why, where
namespaces cannot be made (not root); CI runs as root, so they run there."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from common import processes
from testbed.certs import ensure_pki
from testbed.grid import Testbed, TestbedConfig
from testbed.grid.netns import network_leftovers
from tests.runs.conftest import coordinator, worker
from tests.testbed.helpers import namespaces_or_skip, netns_testbed_config

__all__ = ["coordinator", "worker"]


@pytest.fixture(scope="session")
def netns_testbed() -> Iterator[Testbed]:
    """The namespaced testbed, started for the session and removed whole after it: every namespace, veth pair,
    bridge, qdisc and the relay (checked)."""
    namespaces_or_skip()
    ordinary = Testbed(TestbedConfig.from_settings())
    ensure_pki(ordinary.pki.root)
    bed = Testbed(netns_testbed_config())
    bed.down()  # whatever an interrupted session left
    if not bed.pki.host_cert.exists():
        shutil.copytree(ordinary.pki.root, bed.pki.root, dirs_exist_ok=True)
    bed.up()
    layout = bed.layout
    assert layout is not None
    yield bed
    bed.down()
    assert network_leftovers(layout) == [], "testbed down left parts of the namespaced network"
    assert processes.pids_mentioning(f"{bed.dir}/", {"testbed.relay", "celery", "agent"}) == [], "down left a process"


@pytest.fixture
def site_workers(netns_testbed: Testbed, transactional_db: None) -> Iterator[list[str]]:
    """A real Celery worker for each of TB-T0, TB-T1-A and TB-T1-B, inside its site's namespace, reaching the test
    database and Redis through the relay; the namespaced testbed's sites in the registry."""
    from runs.dispatch import served_queues_forget
    from sites.services import sites_import
    from tests.runs.helpers import wait_for, worker_env

    sites_import(document=netns_testbed.sites_document())
    sites = ["TB-T0", "TB-T1-A", "TB-T1-B"]
    for site in sites:
        netns_testbed.site_worker_start(site, environment=worker_env(), concurrency=2)
    logs = [netns_testbed.dir / "log" / f"worker-{netns_testbed.place_of(site).key}.log" for site in sites]
    try:
        for log in logs:

            def ready(log: Path = log) -> bool:
                return log.exists() and " ready." in log.read_text(errors="replace")

            wait_for(ready, 60, f"{log} ready")
        served_queues_forget()
        yield sites
    finally:
        for site in sites:
            netns_testbed.site_worker_stop(site)
        served_queues_forget()
