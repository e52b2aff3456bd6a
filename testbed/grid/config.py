"""The testbed's configuration, its sites and the endpoints it offers (plain data)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

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
        )


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
