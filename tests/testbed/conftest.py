"""The namespaced testbed (each site in a network namespace of its own), beside the loopback one the rest of the
suite uses: its own directory, ports and private /24, the same CA. Its tests are skipped, saying why, where
namespaces cannot be made (not root); CI runs as root, so they run there."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from testbed.certs import ensure_pki
from testbed.grid import Testbed, TestbedConfig
from testbed.grid.netns import network_leftovers
from tests.testbed.helpers import namespaces_or_skip, netns_testbed_config


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
