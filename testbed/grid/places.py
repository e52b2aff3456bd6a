"""The Testbed's sites as places (the namespaced testbed): which network the testbed runs, where each process
runs and at which address its site answers, the relay that lets the sites reach the portal, a command or a Celery
worker started inside a site's namespace."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from common import processes

from .config import LOOPBACK_NAMES, PROCESS_SITES, REPO, TestbedPart
from .netns import NetworkLayout, SitePlace, default_layout, namespace_argv

# The environment variables that name a service of the portal by URL: a site's worker reaches each at the
# portal's address on the bridge (through the relay) instead of 127.0.0.1.
PORTAL_URL_VARIABLES = (
    "DATABASE_URL",
    "DATABASE_REPLICA_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "CELERY_RESULT_BACKEND",
    "PORTAL_URL",
)


class PlacesMixin(TestbedPart):
    """The network side of Testbed: loopback, or a namespace per site (testbed/grid/netns.py)."""

    state_file: Path

    def _saved_state(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}
        return state

    @property
    def layout(self) -> NetworkLayout | None:
        """The namespaced layout: the running testbed's (kept in state.json from `up` to `down`, whatever the
        configuration says), else the configured one; None for the loopback testbed."""
        saved = self._saved_state().get("network")
        if saved:
            return NetworkLayout.from_dict(saved)
        if self.config.network == "namespaces":
            return default_layout(self.config.base_port, self.config.netns_subnet, self.config.netns_layout)
        return None

    @property
    def network(self) -> str:
        return "namespaces" if self.layout is not None else "loopback"

    def host_of(self, site_key: str | None) -> str:
        """The address of a site's servers (the portal's for the host's own processes, site_key None)."""
        layout = self.layout
        if layout is None:
            return self.config.host
        return layout.portal_address if site_key is None else layout.site(site_key).address

    @property
    def portal_address(self) -> str:
        """Where the sites reach the host: the bridge's address, or 127.0.0.1 on the loopback testbed."""
        layout = self.layout
        return layout.portal_address if layout is not None else self.config.host

    def place_of(self, site: str) -> SitePlace:
        """A site's place by name or key; a KeyError that says why on the loopback testbed."""
        layout = self.layout
        if layout is None:
            raise KeyError(
                "the testbed runs on loopback: its sites have no namespace (testbed up --network namespaces)"
            )
        return layout.site(site)

    def _start(self, process: str, argv: list[str], **kwargs: Any) -> None:
        """Start a server process of the testbed: in its site's namespace on the namespaced testbed."""
        layout = self.layout
        site = PROCESS_SITES.get(process)
        if layout is not None and site is not None:
            argv = namespace_argv(layout.site(site), argv)
        kwargs.setdefault("logfile", self._log(process))
        processes.start(argv, pidfile=self._pidfile(process), **kwargs)

    # --- the relay to the portal's services -----------------------------------------------------------------

    def _start_relay(self) -> None:
        layout = self.layout
        assert layout is not None
        if not self.config.relay_ports:
            raise RuntimeError(
                "no port of the portal to relay to the sites (its DATABASE_URL and REDIS_URL on loopback)"
            )
        argv = [sys.executable, "-m", "testbed.relay", "--listen", layout.portal_address, "--allow", layout.subnet]
        argv += [arg for port in self.config.relay_ports for arg in ("--port", str(port))]
        self._start("relay", [*argv, "--testbed", f"{self.dir}/"], cwd=REPO)

    def relay_ports(self) -> list[int]:
        saved = self._saved_state().get("relay_ports")
        return [int(port) for port in saved] if saved else list(self.config.relay_ports)

    def portal_environment(self, environment: dict[str, str]) -> dict[str, str]:
        """environment as a process inside a site's namespace needs it: every URL of the portal's services on
        127.0.0.1 rewritten to the portal's address (the relay listens there on the same ports)."""
        result = dict(environment)
        layout = self.layout
        if layout is None:
            return result
        for name in PORTAL_URL_VARIABLES:
            value = result.get(name)
            if not value:
                continue
            parts = urlsplit(value)
            if parts.hostname in LOOPBACK_NAMES:
                netloc = parts.netloc.rsplit("@", 1)
                host_port = netloc[-1].replace(parts.hostname or "", layout.portal_address, 1)
                rewritten = f"{netloc[0]}@{host_port}" if len(netloc) == 2 else host_port
                result[name] = urlunsplit(parts._replace(netloc=rewritten))
        return result

    # --- commands and workers inside a site ------------------------------------------------------------------

    def site_argv(self, site: str, argv: list[str]) -> list[str]:
        """argv as it runs inside the site's namespace (`manage.py testbed exec SITE -- CMD`)."""
        return namespace_argv(self.place_of(site), argv)

    def _worker_pidfile(self, key: str) -> Path:
        return self.dir / "run" / f"worker-{key}.pid"

    def site_worker_start(self, site: str, *, environment: dict[str, str], concurrency: int = 4) -> int:
        """A Celery worker for the site's queue (`site.<NAME>`) inside its namespace, reaching PostgreSQL and Redis
        through the relay: what measures from the site measures over the site's own links. Until the site agent
        exists, this is how a FROM x TO table is measured from where it says. Returns its PID (the running
        one's if it runs)."""
        place = self.place_of(site)
        pidfile = self._worker_pidfile(place.key)
        running = processes.read_pid(pidfile)
        if running is not None:
            return running
        env = self.portal_environment(environment)
        env.update(
            {
                "PROBES_TESTBED": "true",
                "TESTBED_DIR": str(self.config.directory),
                "TESTBED_BASE_PORT": str(self.config.base_port),
            }
        )
        logfile = self.dir / "log" / f"worker-{place.key}.log"
        argv = [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool", "threads"]
        argv += ["--concurrency", str(concurrency), "-Q", f"site.{place.name}", "-n", f"{place.name}@%h"]
        # --logfile names the testbed's directory, so that `down` finds a worker whose PID file was lost.
        argv += ["--without-gossip", "--without-mingle", "-l", "info", "--logfile", str(logfile)]
        return processes.start(
            namespace_argv(place, argv), pidfile=pidfile, logfile=logfile.with_suffix(".out"), env=env, cwd=REPO
        )

    def site_worker_stop(self, site: str) -> bool:
        return processes.stop(self._worker_pidfile(self.place_of(site).key))

    def site_workers(self) -> dict[str, int]:
        """The sites whose worker runs: name -> PID."""
        layout = self.layout
        if layout is None:
            return {}
        found = {place.name: processes.read_pid(self._worker_pidfile(place.key)) for place in layout.sites}
        return {name: pid for name, pid in found.items() if pid is not None}

    def _site_workers_stop(self) -> list[str]:
        layout = self.layout
        if layout is None:
            return []
        return [f"worker-{p.key}" for p in layout.sites if processes.stop(self._worker_pidfile(p.key))]
