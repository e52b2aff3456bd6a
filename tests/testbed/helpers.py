"""What the namespaced testbed's tests share: its configuration beside the loopback testbed's, the skip where
namespaces cannot be made (a failure in CI, where they must run), and the portal served by gunicorn for agents."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from django.conf import settings

from common import processes
from testbed.grid import TestbedConfig
from testbed.grid.netns import namespaces_unavailable
from tests.workers import worker_database_url

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
    """Skip, saying why, where namespaces cannot be made; in CI (CI set, as CI runners set it) fail instead: CI
    runs as root, and a done-when checked there must not pass by being skipped."""
    reason = namespaces_unavailable()
    if not reason:
        return
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail(f"the namespaced testbed cannot run in CI: {reason}")
    pytest.skip(f"the namespaced testbed cannot run here: {reason}")


class PortalServer:
    """gunicorn serving the portal on the test database (threads: each agent's long poll holds one), bound on
    `address` (127.0.0.1, or the namespaced testbed's bridge, where its sites reach it)."""

    def __init__(self, directory: Path, address: str = "127.0.0.1", threads: int = 8) -> None:
        self.directory, self.address, self.threads = directory, address, threads
        self.port = processes.free_port(int(settings.TESTBED_BASE_PORT) + 300)
        self.pidfile = directory / "web.pid"
        hosts = ",".join(sorted({"localhost", "127.0.0.1", address}))
        self.env = {
            **os.environ,
            "DATABASE_URL": worker_database_url(),
            "DISPATCH_HEARTBEAT": "1",
            "ALLOWED_HOSTS": hosts,
        }

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def start(self) -> None:
        argv = [sys.executable, "-m", "gunicorn", "portal.wsgi", "--bind", f"{self.address}:{self.port}"]
        argv += ["--workers", "1", "--threads", str(self.threads), "--timeout", "60", "--graceful-timeout", "3"]
        log = self.directory / "web.log"
        processes.start(argv, pidfile=self.pidfile, logfile=log, env=self.env, cwd=settings.BASE_DIR)
        pid = processes.read_pid(self.pidfile)
        up = processes.wait_for_port(self.port, host=self.address, pid=pid, timeout=30)
        assert up, log.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        processes.stop(self.pidfile, timeout=10)


def logs(*paths: Path) -> str:
    """The tail of every log in these directories (or of these files), for a failure's message."""
    files = [p for path in paths for p in ([path] if path.is_file() else sorted(path.glob("*.log")))]
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in files)
