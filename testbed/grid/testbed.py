"""The Testbed: its processes and endpoints kept between commands (ports, PIDs), up, down and status, what
clients need, and the sites document."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from common import processes

from ..certs import Pki, ensure_pki
from .agents import AgentsMixin
from .config import (
    CACHE_SITE,
    DISK_SITES,
    EXPERIMENTS,
    IPERF3_SERVERS,
    ORIGIN_SITE,
    PORT_OFFSETS,
    SYSTEM_PYTHON,
    TAPE_SITE,
    WEBDAV_SITE,
    XROOTD_USER,
    Endpoint,
    EndpointStatus,
    TestbedConfig,
)
from .netns import NetworkLayout, network_down, network_up
from .places import PlacesMixin
from .servers import ServersMixin
from .tokens import TokensMixin


class Testbed(PlacesMixin, AgentsMixin, TokensMixin, ServersMixin):
    """The testbed's processes and endpoints, kept in `<directory>/state.json` between commands."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, config: TestbedConfig) -> None:
        self.config = config
        # XRootD and nginx workers drop root and open these files by path: the directory must be theirs to reach.
        self.dir = processes.reachable_directory(config.directory, XROOTD_USER)
        self.state_file = self.dir / "state.json"
        self.pki = Pki(self.dir / "pki")

    # --- ports and endpoints ---------------------------------------------------------------------------

    def _load_ports(self) -> dict[str, int]:
        try:
            ports = json.loads(self.state_file.read_text())["ports"]
            return {key: int(value) for key, value in ports.items()}
        except (OSError, ValueError, KeyError):
            return {}

    def ports(self) -> dict[str, int]:
        """The ports in use (from the state file), else the ones the next start would try first."""
        saved = self._load_ports()
        return {key: saved.get(key, self.config.base_port + offset) for key, offset in PORT_OFFSETS.items()}

    def _assign_ports(self, running: set[str]) -> dict[str, int]:
        """Ports for the next start: kept for running processes, else the saved or preferred one if free, else
        the next free port above it."""
        current = self.ports()
        kept = {key: port for key, port in current.items() if self._owner(key) in running}
        chosen: dict[str, int] = dict(kept)
        for key, offset in PORT_OFFSETS.items():
            if key in kept:
                continue
            preferred = current[key] if processes.port_free(current[key]) else self.config.base_port + offset
            chosen[key] = processes.free_port(preferred, set(chosen.values()))
        return {key: chosen[key] for key in PORT_OFFSETS}

    def endpoints(self) -> list[Endpoint]:
        """Every URL of the testbed: each disk site's root:// and davs:// doors, the tape's two, the plain WebDAV
        site, the slowed origin and its cache, and the iperf3 servers. On loopback every URL names 127.0.0.1; on the
        namespaced testbed each names its site's own address."""
        ports, layout = self.ports(), self.layout

        def host_of(port_key: str) -> str:
            key = IPERF3_SERVERS[port_key][0] if port_key in IPERF3_SERVERS else port_key.split(".", 1)[0]
            return self.config.host if layout is None else layout.site(key).address

        def door(name: str, site: str, scheme: str, process: str, **kwargs: Any) -> Endpoint:
            root, host = ("//data" if scheme == "root" else "/data"), host_of(name)
            url = f"{scheme}://{host}:{ports[name]}{root}"
            return Endpoint(name, site, url, ports[name], process, host=host, **kwargs)

        result: list[Endpoint] = []
        for site in DISK_SITES:
            result.append(door(f"{site.key}.root", site.name, "root", site.key, tpc_modes=["pull"]))
            result.append(
                door(f"{site.key}.https", site.name, "davs", site.key, tpc_modes=["pull", "push", "streamed"])
            )
        result += [
            door("tape.root", TAPE_SITE, "root", "tape", kind="tape", tpc_modes=["pull"]),
            door("tape.rest", TAPE_SITE, "davs", "tape-rest", kind="tape", implementation="other", checksums=False),
            door(
                "webdav.https",
                WEBDAV_SITE,
                "davs",
                "webdav",
                implementation="other",
                tpc_modes=["streamed"],
                checksums=False,
            ),
            door("origin.root", ORIGIN_SITE, "root", "origin"),
            door("xcache.root", CACHE_SITE, "root", "xcache", kind="cache", checksums=False),
        ]
        site_names = {site.key: site.name for site in DISK_SITES} | {"webdav": WEBDAV_SITE}
        for name, (site_key, process) in IPERF3_SERVERS.items():
            host = host_of(name)
            url = f"iperf3://{host}:{ports[name]}"
            result.append(
                Endpoint(name, site_names[site_key], url, ports[name], process, "network", "iperf3", host=host)
            )
        return result

    def endpoint(self, name: str) -> Endpoint:
        for endpoint in self.endpoints():
            if endpoint.name == name:
                return endpoint
        raise KeyError(name)

    def url(self, name: str, path: str = "") -> str:
        """The URL of endpoint `name` (for example "t0.root") with path appended below its /data root."""
        base = self.endpoint(name).url
        return f"{base}/{path.lstrip('/')}" if path else base

    # --- processes -------------------------------------------------------------------------------------

    def _pidfile(self, process: str) -> Path:
        return self.dir / "run" / f"{process}.pid"

    def _process_names(self) -> list[str]:
        iperf3 = [process for _, process in IPERF3_SERVERS.values()]
        issuer = ["issuer"] if self.tokens_required else []
        relay = ["relay"] if self.layout is not None else []
        return [
            *issuer,
            *relay,
            *(site.key for site in DISK_SITES),
            "tape-rest",
            "tape",
            "webdav",
            *iperf3,
            "origin",
            "xcache",
        ]

    def running(self) -> dict[str, bool]:
        return {name: processes.read_pid(self._pidfile(name)) is not None for name in self._process_names()}

    @contextlib.contextmanager
    def frozen(self, process: str) -> Iterator[None]:
        """A server that stops answering without closing anything (SIGSTOP, SIGCONT when the block ends): its
        kernel still accepts connections, nothing else happens, as when a storage node hangs. Copies to or from it
        stall."""
        pid = processes.read_pid(self._pidfile(process))
        if pid is None:
            raise RuntimeError(f"{process} is not running")
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def is_up(self) -> bool:
        return all(self.running().values())

    def up(self) -> list[str]:
        """Start whatever is not running. Returns the names of the processes it started.

        Ports are checked free before the servers bind them, so another program may take one in between: a start
        that fails is undone and tried once more with fresh ports.
        """
        for tool in ("xrootd", "nginx", "iperf3", "openssl"):
            if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
                raise RuntimeError(f"{tool} is not installed: run bin/portal (it installs the testbed's packages)")
        self.dir.mkdir(parents=True, exist_ok=True)
        layout, made = self.layout, False
        if layout is not None:
            if self.tokens_required:
                raise RuntimeError("the namespaced testbed does not check tokens yet: TESTBED_TOKENS=off, or loopback")
            if not any(self.running().values()):
                network_up(layout)  # NamespacesUnavailable (a RuntimeError) says why not
                made = True
        try:
            # The servers' certificate names every address a client may use: each site's own when namespaced.
            ensure_pki(self.pki.root, addresses=layout.addresses if layout is not None else ())
            try:
                started = self._start_missing()
            except RuntimeError:
                started = self._start_missing()
        except Exception:
            if made:  # a start that failed leaves no namespace behind
                self.down()
                network_down(layout)  # type: ignore[arg-type]
            raise
        self.write_sites_document()
        return started

    def _start_missing(self) -> list[str]:
        running = {name for name, alive in self.running().items() if alive}
        ports = self._assign_ports(running)
        layout = self.layout
        state: dict[str, Any] = {"ports": ports, "host": self.config.host}
        if layout is not None:
            state |= {"network": layout.to_dict(), "relay_ports": list(self.config.relay_ports)}
        self.state_file.write_text(json.dumps(state, indent=2))
        started: list[str] = []
        starters: dict[str, Callable[[], None]] = {
            **({"issuer": self._start_issuer} if self.tokens_required else {}),
            **({"relay": self._start_relay} if layout is not None else {}),
            **{site.key: functools.partial(self._start_xrootd_site, site) for site in DISK_SITES},
            "tape-rest": self._start_tape_daemon,
            "tape": self._start_tape_xrootd,
            "webdav": self._start_nginx,
            **{process: functools.partial(self._start_iperf3, name) for name, (_, process) in IPERF3_SERVERS.items()},
            "origin": self._start_origin,
            "xcache": self._start_xcache,
        }
        try:
            for name, start in starters.items():
                if name not in running:
                    start()
                    started.append(name)
            waits = [(e.name, e.host, e.port, e.process) for e in self.endpoints()]
            if self.tokens_required:
                waits.insert(0, ("issuer", self.host_of(None), ports["issuer"], "issuer"))
            if layout is not None:
                waits += [("relay", layout.portal_address, port, "relay") for port in self.config.relay_ports]
            for name, host, port, process in waits:
                pid = processes.read_pid(self._pidfile(process))
                if not processes.wait_for_port(port, host=host, pid=pid, timeout=20):
                    raise RuntimeError(f"{name} did not start: see {self._log(process)}")
            time.sleep(0.3)  # a server that lost its port to another program exits: check that ours still run
            dead = [name for name in started if processes.read_pid(self._pidfile(name)) is None]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited after starting: see {self.dir / 'log'}")
        except Exception:
            for name in started:
                processes.stop(self._pidfile(name))
            raise
        return started

    def down(self, only: Iterable[str] | None = None) -> list[str]:
        """Stop the testbed's processes (or only those named). Returns the names of those that were running.

        Stopping all of a namespaced testbed also stops its sites' agents and workers and removes its namespaces,
        veth pairs, bridge and their qdiscs (whatever still runs in a namespace is stopped with it), and forgets its
        layout: the next `up` makes the network the configuration asks for."""
        names = [name for name in reversed(self._process_names()) if only is None or name in set(only)]
        stopped = [*self._site_agents_stop(), *self._site_workers_stop()] if only is None else []
        stopped += [name for name in names if processes.stop(self._pidfile(name))]
        if only is None:
            # Servers of this testbed whose PID files were lost (a killed launcher, a deleted run/ directory): their
            # command lines name files in its directory (with the slash: not those of var/testbed-faults beside it).
            programs = {
                "xrootd",
                "nginx",
                "iperf3",
                "testbed.tape",
                "testbed.issuer",
                "testbed.relay",
                "unshare",
                "celery",
                "agent",
            }
            for pid in processes.pids_mentioning(f"{self.dir}/", programs):
                processes.stop_pid(pid)
            layout = self._saved_state().get("network")
            if layout:
                network_down(NetworkLayout.from_dict(layout))
                state = self._saved_state()
                state.pop("network", None)
                self.state_file.write_text(json.dumps(state, indent=2))
        return stopped

    def status(self) -> list[EndpointStatus]:
        running = self.running()
        return [
            EndpointStatus(endpoint, running[endpoint.process], processes.port_answers(endpoint.port, endpoint.host))
            for endpoint in self.endpoints()
        ]

    def _owner(self, port_key: str) -> str:
        if port_key in IPERF3_SERVERS:
            return IPERF3_SERVERS[port_key][1]
        prefix = port_key.split(".", maxsplit=1)[0]
        if prefix == "tape":
            return "tape" if port_key == "tape.root" else "tape-rest"
        return prefix

    def _log(self, process: str) -> Path:
        """The log of a process. XRootD writes to <log dir>/<instance name>/<file name> by itself."""
        if process in {site.key for site in DISK_SITES} | {"tape", "origin", "xcache"}:
            return self.dir / "log" / process / "xrootd.log"
        return self.dir / "log" / f"{process}.log"

    # --- what clients need -----------------------------------------------------------------------------

    def client_environment(self) -> dict[str, str]:
        """Environment for gfal2 clients: the testbed CA and a bearer token (XrdHttpTPC rejects gridsite creds);
        with tokens required, no bearer token but the issuer and its client, for the portal's
        TOKEN_SOURCE=client-credentials (the testbed's own secret: a test credential, never a real one)."""
        # GFAL_PYTHONBIN: the gfal-* scripts look for `python`, which Debian does not install by default.
        environment = {"X509_CERT_DIR": str(self.pki.cert_dir), "GFAL_PYTHONBIN": SYSTEM_PYTHON}
        if not self.tokens_required:
            return {**environment, "BEARER_TOKEN": self.config.bearer_token}
        client_id, secret = self.client_credentials()
        return {
            **environment,
            "TESTBED_TOKENS": "required",
            "TOKEN_SOURCE": "client-credentials",
            "TOKEN_ISSUER": self.issuer_url,
            "TOKEN_CLIENT_ID": client_id,
            "TOKEN_CLIENT_SECRET": secret,
            "TOKEN_CA_DIR": str(self.pki.cert_dir),
        }

    def https_prefixes(self) -> Iterator[str]:
        """The davs:// URL prefixes of the testbed, for per-prefix gfal2 credentials."""
        for endpoint in self.endpoints():
            if endpoint.url.startswith("davs://"):
                yield endpoint.url.rsplit("/", 1)[0] + "/"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(capath=str(self.pki.cert_dir))

    def tape_rest_status(self) -> dict[str, Any]:
        """The tape daemon's own status (drives, queue) from its control port."""
        url = f"http://{self.host_of('tape')}:{self.ports()['tape.control']}/status"
        with urllib.request.urlopen(url, timeout=5) as response:
            result: dict[str, Any] = json.load(response)
            return result

    # --- the sites document ----------------------------------------------------------------------------

    @property
    def sites_document_path(self) -> Path:
        return self.dir / "sites.json"

    def sites_document(self) -> dict[str, Any]:
        """The testbed's sites in the registry's import format, so the demo's sites match the running servers."""
        tiers = {site.name: site.tier for site in DISK_SITES} | {
            TAPE_SITE: 1,
            WEBDAV_SITE: 2,
            ORIGIN_SITE: 2,
            CACHE_SITE: 2,
        }
        rses = {TAPE_SITE: "DATATAPE", WEBDAV_SITE: "SCRATCHDISK", CACHE_SITE: "CACHE"}
        loopback_rate = 1.25e9  # 10 Gb/s: the nominal network capacity we give every testbed site
        sites: dict[str, dict[str, Any]] = {
            name: {
                "name": name,
                "tier": tier,
                "country": "CH",
                "experiments": list(EXPERIMENTS),
                "capacity": {"network_rate": loopback_rate},
                "endpoints": [],
                "network_hosts": [],
            }
            for name, tier in tiers.items()
        }
        sites[TAPE_SITE]["capacity"].update(
            {
                "tape_drives": self.config.tape_drives,
                "tape_drive_rate": self.config.tape_drive_rate,
                "staging_request_limit": 1000,
            }
        )
        for endpoint in self.endpoints():
            site = sites[endpoint.site]
            if endpoint.kind == "network":
                site["network_hosts"].append(endpoint.url.removeprefix("iperf3://"))
                continue
            rse = f"{endpoint.site.replace('-', '_')}_{rses.get(endpoint.site, 'DATADISK')}"
            site["endpoints"].append(
                {
                    "url": endpoint.url,
                    "implementation": endpoint.implementation,
                    "kind": endpoint.kind,
                    "tpc_modes": endpoint.tpc_modes,
                    "rse": [rse],
                }
            )
        return {"experiments": [{"name": name} for name in EXPERIMENTS], "sites": list(sites.values())}

    def write_sites_document(self) -> Path:
        # Whole or not at all: `load_demo` may read it meanwhile (the tests run it beside the testbed's tests).
        partial = self.sites_document_path.with_suffix(".json.partial")
        partial.write_text(json.dumps(self.sites_document(), indent=2) + "\n")
        partial.replace(self.sites_document_path)
        return self.sites_document_path


def remove_state(config: TestbedConfig) -> None:
    """Forget the testbed entirely (data, certificates, configs): for `testbed reset`."""
    if config.directory.exists():
        shutil.rmtree(config.directory)


__all__ = ["Endpoint", "EndpointStatus", "Testbed", "TestbedConfig", "remove_state"]
