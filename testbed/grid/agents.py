"""The sites' agents on the namespaced testbed: each site's agent (`python -m agent`) started inside its site's
namespace, so that what measures from a site measures over that site's own links (`manage.py testbed agents`).

Each agent runs with an empty environment (`env -i`, PATH only): its configuration file, the one
`manage.py agent_enroll` writes with the testbed's CA and bearer token added as the site's grid credentials, carries
everything. It reaches the portal at the portal's address on the bridge (TESTBED_PORTAL_ADDRESS) and nothing else of
the portal's. Configurations, spools and logs live under the testbed's directory (agents/, log/agent-KEY.log).
Plain Python: enrolling an agent is the portal's business (the management command does it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from common import processes

from .config import REPO, TestbedPart
from .netns import NetworkLayout, SitePlace, namespace_argv

AGENT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # iperf3, tracepath: all it is given
TESTBED_AGENT_NAME = "testbed"  # the SiteAgent name of the agents the testbed enrols (an operator's keep theirs)


class AgentsMixin(TestbedPart):
    """Start, stop and list the sites' agents inside their namespaces."""

    @property
    def layout(self) -> NetworkLayout | None:
        raise NotImplementedError

    def place_of(self, site: str) -> SitePlace:
        raise NotImplementedError

    def agent_config_path(self, site: str) -> Path:
        return self.dir / "agents" / f"{self.place_of(site).key}.json"

    def agent_spool(self, site: str) -> Path:
        return self.dir / "agents" / f"spool-{self.place_of(site).key}"

    def agent_log(self, site: str) -> Path:
        return self.dir / "log" / f"agent-{self.place_of(site).key}.log"

    def _agent_pidfile(self, key: str) -> Path:
        return self.dir / "run" / f"agent-{key}.pid"

    def agent_credentials(self) -> dict[str, Any]:
        """The testbed's grid credentials as an agent's configuration holds a site's: the CA directory, and the
        bearer token for the davs:// doors (the XRootD doors take the CA and no token: TESTBED_TOKENS=off)."""
        return {
            "x509_cert_dir": str(self.pki.cert_dir),
            "bearer_token": self.config.bearer_token,
            "bearer_prefixes": list(self.https_prefixes()),
        }

    def https_prefixes(self) -> Any:
        raise NotImplementedError

    def site_agent_configure(self, site: str, enrolled: dict[str, Any], *, heartbeat: float = 2.0) -> Path:
        """Write the site's agent configuration: what `agent_enroll` gave (portal URL, key, site, name), with the
        testbed's credentials and a spool under the testbed's directory. Mode 0600: it holds the agent's key."""
        config = {
            **enrolled,
            "spool": str(self.agent_spool(site)),
            "heartbeat": heartbeat,
            "credentials": self.agent_credentials(),
        }
        path = self.agent_config_path(site)
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump(config, handle, indent=2)
        return path

    def site_agent_argv(self, site: str, config: Path) -> list[str]:
        """The agent as it runs inside the site's namespace: `env -i PATH=...`, so nothing of this process's
        environment (the portal's DATABASE_URL, REDIS_URL, SECRET_KEY) reaches it."""
        argv = ["env", "-i", f"PATH={AGENT_PATH}", sys.executable, "-m", "agent", "--config", str(config)]
        return namespace_argv(self.place_of(site), argv)

    def site_agent_start(self, site: str, config: Path | None = None) -> int:
        """Start the site's agent in its namespace (its PID: `ip netns exec`, `unshare`, `sh` and `env` each exec
        the next). Returns the running one's PID if it runs."""
        key = self.place_of(site).key
        pidfile = self._agent_pidfile(key)
        running = processes.read_pid(pidfile)
        if running is not None:
            return running
        config = config or self.agent_config_path(site)
        if not config.exists():
            raise FileNotFoundError(f"{config}: enrol the agent first (manage.py testbed agents)")
        argv = self.site_agent_argv(site, config)
        return processes.start(argv, pidfile=pidfile, logfile=self.agent_log(site), env={"PATH": AGENT_PATH}, cwd=REPO)

    def site_agent_stop(self, site: str) -> bool:
        return processes.stop(self._agent_pidfile(self.place_of(site).key))

    def site_agents(self) -> dict[str, int]:
        """The sites whose agent runs: name -> PID."""
        layout = self.layout
        if layout is None:
            return {}
        found = {place.name: processes.read_pid(self._agent_pidfile(place.key)) for place in layout.sites}
        return {name: pid for name, pid in found.items() if pid is not None}

    def _site_agents_stop(self) -> list[str]:
        layout = self.layout
        if layout is None:
            return []
        return [f"agent-{p.key}" for p in layout.sites if processes.stop(self._agent_pidfile(p.key))]
