"""The testbed's configuration, its sites and the endpoints it offers (plain data)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..certs import Pki

REPO = Path(__file__).resolve().parent.parent.parent
SYSTEM_PYTHON = "/usr/bin/python3"
XROOTD_USER = "xrootd"
# The throttle (`rint`, ms) hands out its bytes per interval. With its default of 1 s, a read that straddles an
# interval's edge takes two seconds' worth at once: an 8 MB file read at 8-16 MB/s from a 4 MB/s origin (measured).
# Every 100 ms, 8 MB reads in 2.0 s and 16 MB in 4.1 s.
ORIGIN_INTERVAL_MS = 100
NGINX_USER = "www-data"

# Fixed offsets from the base port, so that URLs stay the same from one start to the next when the ports are free.
PORT_OFFSETS = {
    "t0.root": 0,
    "t0.https": 1,
    "t1a.root": 2,
    "t1a.https": 3,
    "t1b.root": 4,
    "t1b.https": 5,
    "tape.root": 6,
    "tape.rest": 7,
    "tape.control": 8,
    "webdav.https": 9,
    "iperf3": 10,
    "origin.root": 11,
    "xcache.root": 12,
    # One iperf3 server per site, as a real site runs its perfSONAR node (TB-T0's is "iperf3").
    "iperf3.t1a": 13,
    "iperf3.t1b": 14,
    "iperf3.webdav": 15,
    # The token issuer (TESTBED_TOKENS=required only).
    "issuer": 16,
}
# The iperf3 servers: endpoint (port key) -> site key, process name.
IPERF3_SERVERS = {
    "iperf3": ("t0", "iperf3"),
    "iperf3.t1a": ("t1a", "iperf3-t1a"),
    "iperf3.t1b": ("t1b", "iperf3-t1b"),
    "iperf3.webdav": ("webdav", "iperf3-webdav"),
}
# The site (its key) each server process belongs to: on the namespaced testbed it runs in that site's namespace.
# The issuer and the relay run on the host (the portal's side).
PROCESS_SITES = {
    "t0": "t0",
    "t1a": "t1a",
    "t1b": "t1b",
    "tape": "tape",
    "tape-rest": "tape",
    "webdav": "webdav",
    "origin": "origin",
    "xcache": "xcache",
    **{process: site for site, process in IPERF3_SERVERS.values()},
}
NETWORKS = ("loopback", "namespaces")


@dataclass(frozen=True)
class DiskSite:
    """An XRootD storage site of the testbed."""

    key: str
    name: str
    tier: int


DISK_SITES = (
    DiskSite("t0", "TB-T0", 0),
    DiskSite("t1a", "TB-T1-A", 1),
    DiskSite("t1b", "TB-T1-B", 1),
)
TAPE_SITE = "TB-TAPE"
WEBDAV_SITE = "TB-WEBDAV"
ORIGIN_SITE = "TB-ORIGIN"
CACHE_SITE = "TB-XCACHE"
EXPERIMENTS = ("ATLAS", "CMS")


@dataclass
class TestbedConfig:
    """Where the testbed lives and how it behaves. Defaults suit tests: a tape that answers within seconds."""

    __test__ = False

    directory: Path
    host: str = "127.0.0.1"
    base_port: int = 21000
    tape_drives: int = 2
    tape_drive_rate: float = 200e6
    tape_mount_time: float = 2.0
    tape_stage_delay: float = 1.0
    tape_migration_delay: float = 5.0
    tape_evict: str = "migrated"
    tape_buffer_bytes: int = 0
    tape_max_request_files: int = 10000
    tape_capacity: int = 2_000_000_000
    # Bytes per second the slowed origin serves (XRootD's throttle plugin), so that a cache in front of it pays off.
    # The throttle hands it out in shares of 100 ms (ORIGIN_INTERVAL_MS): a file of N times the rate takes N seconds.
    origin_rate: float = 4e6
    bearer_token: str = "testbed"
    # "required": the XRootD doors and the Tape REST API check WLCG tokens of the testbed's issuer; "off": any
    # bearer value works (today's tests, faster).
    tokens: str = "off"
    token_lifetime: int = 1200
    # "loopback": every site on 127.0.0.1 (the default); "namespaces": each site in a network namespace of its own,
    # with its own address, MTU and link capacities (testbed/grid/netns.py, root only). A running testbed keeps the
    # network it was started with (state.json) whatever this says.
    network: str = "loopback"
    # The namespaced testbed's private /24 ("" = from the base port: netns.default_subnet).
    netns_subnet: str = ""
    # Its sites' MTUs and links' capacities other than the default's (JSON; netns.layout_shape).
    netns_layout: str = ""
    # Ports of 127.0.0.1 (PostgreSQL, Redis, the portal's web server) that the namespaced testbed relays to the
    # sites at the portal's address on the bridge (testbed/relay.py).
    relay_ports: tuple[int, ...] = ()

    @classmethod
    def from_settings(cls) -> TestbedConfig:
        from django.conf import settings

        return cls(
            directory=Path(settings.TESTBED_DIR),
            base_port=settings.TESTBED_BASE_PORT,
            tape_drives=settings.TESTBED_TAPE_DRIVES,
            tape_drive_rate=settings.TESTBED_TAPE_DRIVE_RATE,
            tape_mount_time=settings.TESTBED_TAPE_MOUNT_TIME,
            tape_stage_delay=settings.TESTBED_TAPE_STAGE_DELAY,
            tape_migration_delay=settings.TESTBED_TAPE_MIGRATION_DELAY,
            tape_evict=settings.TESTBED_TAPE_EVICT,
            tape_buffer_bytes=settings.TESTBED_TAPE_BUFFER_BYTES,
            tape_max_request_files=settings.TESTBED_TAPE_MAX_REQUEST_FILES,
            tape_capacity=settings.TESTBED_TAPE_CAPACITY,
            tokens=settings.TESTBED_TOKENS,
            network=settings.TESTBED_NETWORK,
            netns_subnet=settings.TESTBED_NETNS_SUBNET,
            netns_layout=settings.TESTBED_NETNS_LAYOUT,
            relay_ports=portal_ports(settings),
        )


def portal_ports(settings: Any) -> tuple[int, ...]:
    """The ports of the portal's services on this machine's loopback that a site must reach: PostgreSQL (and its
    replica), Redis (cache, broker, results) and the web server (PORTAL_URL)."""
    from urllib.parse import urlsplit

    urls = [
        getattr(settings, name, "")
        for name in ("REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "PORTAL_URL", "DATABASE_REPLICA_URL")
    ]
    ports = set()
    for url in urls:
        parts = urlsplit(str(url or ""))
        if parts.hostname in LOOPBACK_NAMES and parts.port:
            ports.add(parts.port)
    for database in settings.DATABASES.values():
        if database.get("HOST") in LOOPBACK_NAMES and database.get("PORT"):
            ports.add(int(database["PORT"]))
    return tuple(sorted(ports))


LOOPBACK_NAMES = ("127.0.0.1", "localhost")


@dataclass
class Endpoint:
    """One URL of the testbed, with the process that serves it."""

    name: str
    site: str
    url: str
    port: int
    process: str
    kind: str = "disk"
    implementation: str = "XRootD"
    tpc_modes: list[str] = field(default_factory=list)
    checksums: bool = True
    host: str = "127.0.0.1"  # the address its server listens on (its site's own on the namespaced testbed)


@dataclass
class EndpointStatus:
    endpoint: Endpoint
    running: bool
    answers: bool


class TestbedPart:
    """What each part of Testbed (its servers, its tokens) uses of the whole: the Testbed class gives it."""

    config: TestbedConfig
    dir: Path
    pki: Pki

    def ports(self) -> dict[str, int]:
        raise NotImplementedError

    def _pidfile(self, process: str) -> Path:
        raise NotImplementedError

    def _log(self, process: str) -> Path:
        raise NotImplementedError

    def endpoint(self, name: str) -> Endpoint:
        raise NotImplementedError

    def host_of(self, site_key: str | None) -> str:
        raise NotImplementedError

    def _start(self, process: str, argv: list[str], **kwargs: Any) -> None:
        raise NotImplementedError
