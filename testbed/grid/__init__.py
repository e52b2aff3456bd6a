"""The local grid testbed: real storage servers on loopback, started, checked and stopped by PID.

Plain Python (no Django): the management command `manage.py testbed up|down|status`, the test suite and the
demo all drive it through :class:`Testbed`.

What runs (every URL uses 127.0.0.1, the name XRootD's third-party copy sees its peers by):
- three disk sites (XRootD): root:// with native third-party copy and davs:// with HTTP third-party copy (pull
  and push), ADLER32 checksums on both;
- a tape site: XRootD with a prepare plugin and an emulated tape (files offline until staged), and the WLCG
  Tape REST API in front of the same tape (testbed/tape/);
- a plain WebDAV site (nginx): streamed copies only, no checksums;
- an iperf3 server;
- a slowed origin (XRootD whose reads are throttled by libXrdThrottle) and an XRootD proxy file cache (XCache:
  libXrdPss + libXrdPfc) in front of it, for the cache probe.
State (ports, PIDs, configs, data, logs) lives under the testbed directory, by default var/testbed/.
"""

from .config import (
    CACHE_SITE,
    DISK_SITES,
    EXPERIMENTS,
    ORIGIN_SITE,
    PORT_OFFSETS,
    TAPE_SITE,
    WEBDAV_SITE,
    DiskSite,
    Endpoint,
    EndpointStatus,
    TestbedConfig,
)
from .testbed import Testbed, remove_state

__all__ = [
    "CACHE_SITE",
    "DISK_SITES",
    "EXPERIMENTS",
    "ORIGIN_SITE",
    "PORT_OFFSETS",
    "TAPE_SITE",
    "WEBDAV_SITE",
    "DiskSite",
    "Endpoint",
    "EndpointStatus",
    "Testbed",
    "TestbedConfig",
    "remove_state",
]
