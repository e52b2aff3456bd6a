"""What the namespaced testbed's tests share: its configuration beside the loopback testbed's, and the skip where
namespaces cannot be made."""

from __future__ import annotations

import pytest

from testbed.grid import TestbedConfig
from testbed.grid.netns import namespaces_unavailable

# This far above TESTBED_BASE_PORT (the loopback testbed takes 17 ports from it, the token testbed 50 above): the
# subnet follows from the base port, so it differs from any other testbed's too.
NETNS_TESTBED_PORT_OFFSET = 100


def netns_testbed_config() -> TestbedConfig:
    config = TestbedConfig.from_settings()
    config.directory = config.directory.with_name(config.directory.name + "-netns")
    config.base_port += NETNS_TESTBED_PORT_OFFSET
    config.network = "namespaces"
    config.tokens = "off"
    return config


def namespaces_or_skip() -> None:
    reason = namespaces_unavailable()
    if reason:
        pytest.skip(f"the namespaced testbed cannot run here: {reason}")
