"""The local grid testbed: real storage servers on loopback, started, checked and stopped by PID.

Plain Python (no Django): the management command `manage.py testbed up|down|status`, the test suite and the
demo all drive it through :class:`Testbed`.

What runs (every URL uses 127.0.0.1, the name XRootD's third-party copy sees its peers by):
- three disk sites (XRootD): root:// with native third-party copy and davs:// with HTTP third-party copy (pull
  and push), ADLER32 checksums on both;
- a tape site: XRootD with a prepare plugin and an emulated tape (files offline until staged), and the WLCG
  Tape REST API in front of the same tape (testbed/tape.py);
- a plain WebDAV site (nginx): streamed copies only, no checksums;
- an iperf3 server;
- a slowed origin (XRootD whose reads are throttled by libXrdThrottle) and an XRootD proxy file cache (XCache:
  libXrdPss + libXrdPfc) in front of it, for the cache probe.
State (ports, PIDs, configs, data, logs) lives under the testbed directory, by default var/testbed/.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portal import processes

from .certs import Pki, ensure_pki

REPO = Path(__file__).resolve().parent.parent
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
    # Bytes per second the slowed origin serves (XRootD's throttle plugin), so that a cache in front of it pays off.
    # The throttle hands it out in shares of 100 ms (ORIGIN_INTERVAL_MS): a file of N times the rate takes N seconds.
    origin_rate: float = 4e6
    bearer_token: str = "testbed"

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


class Testbed:
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
        host = self.config.host
        ports = self.ports()
        result: list[Endpoint] = []
        for site in DISK_SITES:
            result.append(
                Endpoint(
                    f"{site.key}.root",
                    site.name,
                    f"root://{host}:{ports[f'{site.key}.root']}//data",
                    ports[f"{site.key}.root"],
                    site.key,
                    tpc_modes=["pull"],
                )
            )
            result.append(
                Endpoint(
                    f"{site.key}.https",
                    site.name,
                    f"davs://{host}:{ports[f'{site.key}.https']}/data",
                    ports[f"{site.key}.https"],
                    site.key,
                    tpc_modes=["pull", "push", "streamed"],
                )
            )
        result.append(
            Endpoint(
                "tape.root",
                TAPE_SITE,
                f"root://{host}:{ports['tape.root']}//data",
                ports["tape.root"],
                "tape",
                kind="tape",
                tpc_modes=["pull"],
            )
        )
        result.append(
            Endpoint(
                "tape.rest",
                TAPE_SITE,
                f"davs://{host}:{ports['tape.rest']}/data",
                ports["tape.rest"],
                "tape-rest",
                kind="tape",
                implementation="other",
                checksums=False,
            )
        )
        result.append(
            Endpoint(
                "webdav.https",
                WEBDAV_SITE,
                f"davs://{host}:{ports['webdav.https']}/data",
                ports["webdav.https"],
                "webdav",
                implementation="other",
                tpc_modes=["streamed"],
                checksums=False,
            )
        )
        result.append(
            Endpoint(
                "origin.root",
                ORIGIN_SITE,
                f"root://{host}:{ports['origin.root']}//data",
                ports["origin.root"],
                "origin",
            )
        )
        result.append(
            Endpoint(
                "xcache.root",
                CACHE_SITE,
                f"root://{host}:{ports['xcache.root']}//data",
                ports["xcache.root"],
                "xcache",
                kind="cache",
                checksums=False,
            )
        )
        result.append(
            Endpoint(
                "iperf3",
                DISK_SITES[0].name,
                f"iperf3://{host}:{ports['iperf3']}",
                ports["iperf3"],
                "iperf3",
                kind="network",
                implementation="iperf3",
            )
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
        return [site.key for site in DISK_SITES] + ["tape-rest", "tape", "webdav", "iperf3", "origin", "xcache"]

    def running(self) -> dict[str, bool]:
        return {name: processes.read_pid(self._pidfile(name)) is not None for name in self._process_names()}

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
        ensure_pki(self.pki.root)
        try:
            started = self._start_missing()
        except RuntimeError:
            started = self._start_missing()
        self.write_sites_document()
        return started

    def _start_missing(self) -> list[str]:
        running = {name for name, alive in self.running().items() if alive}
        ports = self._assign_ports(running)
        self.state_file.write_text(json.dumps({"ports": ports, "host": self.config.host}, indent=2))
        started: list[str] = []
        starters: dict[str, Callable[[], None]] = {
            **{site.key: functools.partial(self._start_xrootd_site, site) for site in DISK_SITES},
            "tape-rest": self._start_tape_daemon,
            "tape": self._start_tape_xrootd,
            "webdav": self._start_nginx,
            "iperf3": self._start_iperf3,
            "origin": self._start_origin,
            "xcache": self._start_xcache,
        }
        try:
            for name, start in starters.items():
                if name not in running:
                    start()
                    started.append(name)
            for endpoint in self.endpoints():
                pid = processes.read_pid(self._pidfile(endpoint.process))
                if not processes.wait_for_port(endpoint.port, pid=pid, timeout=20):
                    raise RuntimeError(f"{endpoint.name} did not start: see {self._log(endpoint.process)}")
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
        """Stop the testbed's processes (or only those named). Returns the names of those that were running."""
        names = [name for name in reversed(self._process_names()) if only is None or name in set(only)]
        stopped = [name for name in names if processes.stop(self._pidfile(name))]
        if only is None:
            # Servers of this testbed whose PID files were lost (a killed launcher, a deleted run/ directory).
            for pid in processes.pids_mentioning(str(self.dir), {"xrootd", "nginx", "iperf3", "testbed.tape"}):
                processes.stop_pid(pid)
        return stopped

    def status(self) -> list[EndpointStatus]:
        running = self.running()
        return [
            EndpointStatus(endpoint, running[endpoint.process], processes.port_answers(endpoint.port))
            for endpoint in self.endpoints()
        ]

    def _owner(self, port_key: str) -> str:
        prefix = port_key.split(".", maxsplit=1)[0]
        if prefix == "tape":
            return "tape" if port_key == "tape.root" else "tape-rest"
        return prefix

    def _log(self, process: str) -> Path:
        """The log of a process. XRootD writes to <log dir>/<instance name>/<file name> by itself."""
        if process in {site.key for site in DISK_SITES} | {"tape", "origin", "xcache"}:
            return self.dir / "log" / process / "xrootd.log"
        return self.dir / "log" / f"{process}.log"

    # --- PKI for servers that drop privileges ----------------------------------------------------------

    def _server_credentials(self, user: str) -> tuple[Path, Path]:
        """A copy of the host certificate and key owned by user (XRootD insists the key is the user's own)."""
        target = self.dir / "pki" / f"host-{user}"
        target.mkdir(parents=True, exist_ok=True)
        cert, key = target / "hostcert.pem", target / "hostkey.pem"
        shutil.copyfile(self.pki.host_cert, cert)
        shutil.copyfile(self.pki.host_key, key)
        key.chmod(0o600)
        if processes.is_root():
            processes.chown_tree(target, user)
        return cert, key

    # --- XRootD disk sites -----------------------------------------------------------------------------

    def site_dir(self, key: str) -> Path:
        return self.dir / "sites" / key

    def _xrootd_argv(self, key: str, config: Path) -> list[str]:
        self._log(key).parent.mkdir(parents=True, exist_ok=True)
        if processes.is_root():
            processes.chown_tree(self._log(key).parent, XROOTD_USER)
        argv = ["xrootd", "-c", str(config), "-l", str(self.dir / "log" / "xrootd.log"), "-n", key]
        if processes.is_root():
            argv += ["-R", XROOTD_USER]  # XRootD refuses to run as root
        return argv

    def _xrootd_common(self, key: str, root_port: int, *, tpc: bool = True) -> list[str]:
        base = self.site_dir(key)
        for sub in ("admin", "run"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        lines = [
            f"all.adminpath {base / 'admin'}",
            f"all.pidpath {base / 'run'}",
            f"xrd.port {root_port}",
            # XRootD listens on every interface; accept connections from this machine only.
            "xrd.allow host localhost",
            "xrd.allow host 127.0.0.1",
        ]
        if tpc:
            lines += [
                "xrootd.chksum adler32",
                # Native third-party copy: the destination pulls with xrdcp.
                "ofs.tpc autorm xfr 8 pgm /usr/bin/xrdcp --server",
            ]
        return lines

    def _start_xrootd_site(self, site: DiskSite) -> None:
        ports = self.ports()
        base = self.site_dir(site.key)
        data = base / "data"
        (data / "data").mkdir(parents=True, exist_ok=True)
        cert, key = self._server_credentials(XROOTD_USER)
        lines = [
            "all.export /",
            f"oss.localroot {data}",
            *self._xrootd_common(site.key, ports[f"{site.key}.root"]),
            # HTTP(S) and HTTP third-party copy; XrdHttp 5.5 loads the TPC handler only with TLS on.
            f"xrd.protocol XrdHttp:{ports[f'{site.key}.https']} libXrdHttp.so",
            f"xrd.tls {cert} {key}",
            f"xrd.tlsca certdir {self.pki.cert_dir}",
            "http.exthandler xrdtpc libXrdHttpTPC.so",
        ]
        config = base / "xrootd.cfg"
        config.write_text("\n".join(lines) + "\n")
        if processes.is_root():
            processes.chown_tree(base, XROOTD_USER)
        processes.start(
            self._xrootd_argv(site.key, config),
            pidfile=self._pidfile(site.key),
            logfile=self.dir / "log" / f"{site.key}.out",
        )

    # --- the tape site ---------------------------------------------------------------------------------

    @property
    def tape_dir(self) -> Path:
        return self.dir / "sites" / "tape"

    def _start_tape_daemon(self) -> None:
        ports = self.ports()
        (self.tape_dir / "disk" / "data").mkdir(parents=True, exist_ok=True)
        (self.tape_dir / "tape" / "data").mkdir(parents=True, exist_ok=True)
        if processes.is_root():
            processes.chown_tree(self.tape_dir, XROOTD_USER)
        argv = [
            sys.executable,
            "-m",
            "testbed.tape",
            "--root",
            str(self.tape_dir),
            "--host",
            self.config.host,
            "--https-port",
            str(ports["tape.rest"]),
            "--control-port",
            str(ports["tape.control"]),
            "--cert",
            str(self.pki.host_cert),
            "--key",
            str(self.pki.host_key),
            "--drives",
            str(self.config.tape_drives),
            "--drive-rate",
            str(self.config.tape_drive_rate),
            "--mount-time",
            str(self.config.tape_mount_time),
            "--stage-delay",
            str(self.config.tape_stage_delay),
            "--sitename",
            TAPE_SITE,
        ]
        processes.start(argv, pidfile=self._pidfile("tape-rest"), logfile=self._log("tape-rest"), cwd=REPO)

    def _start_tape_xrootd(self) -> None:
        ports = self.ports()
        base = self.tape_dir
        wrappers = base / "bin"
        wrappers.mkdir(parents=True, exist_ok=True)
        prep, mss = wrappers / "prep.sh", wrappers / "mss.sh"
        # Copies of the programs (standalone, stdlib only), so that XRootD's user need not reach the checkout.
        for program in ("tape_prep.py", "tape_mss.py"):
            shutil.copyfile(REPO / "testbed" / program, wrappers / program)
        control = f"http://127.0.0.1:{ports['tape.control']}"
        prep.write_text(f'#!/bin/sh\nexec {SYSTEM_PYTHON} {wrappers / "tape_prep.py"} --control {control} "$@"\n')
        mss.write_text(f'#!/bin/sh\nexec {SYSTEM_PYTHON} {wrappers / "tape_mss.py"} --tape-root {base / "tape"} "$@"\n')
        prep.chmod(0o755)
        mss.chmod(0o755)
        lines = [
            # Files that exist only under tape/ stat as offline; opening them needs a stage first.
            "all.export /data nostage mig",
            f"oss.localroot {base / 'disk'}",
            f"oss.msscmd {mss}",
            f"ofs.preplib libXrdOfsPrepGPI.so -admit all -maxreq 64 -run {prep}",
            *self._xrootd_common("tape", ports["tape.root"]),
        ]
        config = base / "xrootd.cfg"
        config.write_text("\n".join(lines) + "\n")
        if processes.is_root():
            processes.chown_tree(base, XROOTD_USER)
        processes.start(
            self._xrootd_argv("tape", config), pidfile=self._pidfile("tape"), logfile=self.dir / "log" / "tape.out"
        )

    def tape_put(self, path: str, data: bytes) -> Path:
        """Put a file on the emulated tape only (offline until staged), as if the site had migrated it.

        path is relative to the endpoints' /data root, as in :meth:`url`.
        """
        root = self.tape_dir / "tape"
        target = root / "data" / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if processes.is_root():
            for entry in (target, *target.parents):
                if entry == root:
                    break
                shutil.chown(entry, XROOTD_USER, XROOTD_USER)
        return target

    def tape_disk_path(self, path: str) -> Path:
        """Where a staged copy of path (relative to /data) appears in the tape site's disk buffer."""
        return self.tape_dir / "disk" / "data" / path.lstrip("/")

    # --- the plain WebDAV site (nginx) -----------------------------------------------------------------

    def _start_nginx(self) -> None:
        port = self.ports()["webdav.https"]
        base = self.site_dir("webdav")
        for sub in ("data/data", "tmp", "logs"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        conf = base / "nginx.conf"
        module = Path("/usr/lib/nginx/modules/ngx_http_dav_ext_module.so")
        user_line = f"user {NGINX_USER};" if processes.is_root() else ""
        conf.write_text(f"""# Generated by testbed/grid.py: plain WebDAV, no third-party copy, no checksums.
{f"load_module {module};" if module.exists() else ""}
{user_line}
worker_processes 1;
pid {self.dir / "run" / "nginx-master.pid"};
error_log {self._log("webdav")} info;
events {{ worker_connections 256; }}
http {{
    access_log {self.dir / "log" / "webdav-access.log"};
    client_body_temp_path {base / "tmp"};
    proxy_temp_path {base / "tmp"};
    fastcgi_temp_path {base / "tmp"};
    uwsgi_temp_path {base / "tmp"};
    scgi_temp_path {base / "tmp"};
    client_max_body_size 0;
    server {{
        listen 127.0.0.1:{port} ssl;
        server_name localhost;
        ssl_certificate {self.pki.host_cert};
        ssl_certificate_key {self.pki.host_key};
        root {base / "data"};
        location / {{
            # davix sends MKCOL without the trailing slash that nginx's dav module insists on.
            if ($request_method = MKCOL) {{ rewrite ^(.*[^/])$ $1/ break; }}
            dav_methods PUT DELETE MKCOL MOVE;
            dav_ext_methods PROPFIND OPTIONS;
            create_full_put_path on;
            dav_access user:rw group:rw all:r;
            autoindex on;
        }}
    }}
}}
""")
        if processes.is_root():
            processes.chown_tree(base / "data", NGINX_USER)
            processes.chown_tree(base / "tmp", NGINX_USER)
        argv = ["nginx", "-p", str(base), "-c", str(conf), "-g", "daemon off;"]
        processes.start(argv, pidfile=self._pidfile("webdav"), logfile=self.dir / "log" / "webdav.out")

    # --- the slowed origin and the proxy file cache (XCache) in front of it ----------------------------------

    def _start_origin(self) -> None:
        """An XRootD server whose data moves at origin_rate: the throttle plugin stacked on the default file system.

        XRootD 5.5.3 needs the stacking form `xrootd.fslib ++ libXrdThrottle.so`; the older form
        `xrootd.fslib libXrdThrottle.so` with `throttle.fslib libXrdOfs.so` crashes it at start (SIGSEGV).
        """
        ports = self.ports()
        base = self.site_dir("origin")
        (base / "data" / "data").mkdir(parents=True, exist_ok=True)
        lines = [
            "all.export /",
            f"oss.localroot {base / 'data'}",
            *self._xrootd_common("origin", ports["origin.root"]),
            "xrootd.fslib ++ libXrdThrottle.so",
            f"throttle.throttle data {int(self.config.origin_rate)} concurrency 1000 rint {ORIGIN_INTERVAL_MS}",
        ]
        config = base / "xrootd.cfg"
        config.write_text("\n".join(lines) + "\n")
        if processes.is_root():
            processes.chown_tree(base, XROOTD_USER)
        processes.start(
            self._xrootd_argv("origin", config),
            pidfile=self._pidfile("origin"),
            logfile=self.dir / "log" / "origin.out",
        )

    def origin_put(self, path: str, data: bytes) -> Path:
        """Put a file on the slowed origin directly on its disk (no throttled upload); path is below /data."""
        root = self.site_dir("origin") / "data"
        target = root / "data" / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if processes.is_root():
            for entry in (target, *target.parents):
                if entry == root:
                    break
                shutil.chown(entry, XROOTD_USER, XROOTD_USER)
        return target

    @property
    def cache_dir(self) -> Path:
        """Where the proxy file cache keeps its copies (data and .cinfo files) of what it has read."""
        return self.site_dir("xcache") / "cache"

    def _start_xcache(self) -> None:
        """XCache: a caching proxy (libXrdPss + libXrdPfc) whose origin is the slowed origin; reads of
        root://cache//data/PATH are served from the cache directory once the origin's copy has come through."""
        ports = self.ports()
        base = self.site_dir("xcache")
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            "all.export /",
            *self._xrootd_common("xcache", ports["xcache.root"], tpc=False),  # a proxy: no TPC, no checksums
            "ofs.osslib libXrdPss.so",
            "pss.cachelib libXrdPfc.so",
            f"pss.origin {self.config.host}:{ports['origin.root']}",
            f"oss.localroot {self.cache_dir}",
            "pfc.ram 1g",  # XRootD 5.5 refuses less than 1g; it is an upper bound, not an allocation
            "pfc.blocksize 1M",
            "pfc.prefetch 0",
            "pfc.diskusage 0.90 0.95",
        ]
        config = base / "xrootd.cfg"
        config.write_text("\n".join(lines) + "\n")
        if processes.is_root():
            processes.chown_tree(base, XROOTD_USER)
        processes.start(
            self._xrootd_argv("xcache", config),
            pidfile=self._pidfile("xcache"),
            logfile=self.dir / "log" / "xcache.out",
        )

    def cache_url_of(self, origin_url: str) -> str:
        """The URL that reads origin_url (a root:// URL of the origin) through the cache."""
        origin, cache = self.endpoint("origin.root").url, self.endpoint("xcache.root").url
        if not origin_url.startswith(origin + "/") and origin_url != origin:
            raise ValueError(f"{origin_url} is not a URL of the testbed's origin {origin}")
        return cache + origin_url.removeprefix(origin)

    def cache_flush(self, *, wait: float = 10.0) -> None:
        """Empty the cache: delete every cached file (and its .cinfo), so that the next read goes to the origin.
        XCache may keep a file it is still writing open and serve a new read of it from there whatever was
        deleted (once a read right after a flush came at 789 MB/s, not from the 4 MB/s origin): the flush deletes
        again until the proxy holds none of its files open (at most `wait` s)."""
        if not self.cache_dir.exists():
            return
        deadline = time.monotonic() + wait
        while True:
            for entry in self.cache_dir.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
            if not self._cache_files_open() or time.monotonic() > deadline:
                return
            time.sleep(0.1)

    def _cache_files_open(self) -> bool:
        """Whether the XCache process holds a file of the cache directory open (False when it cannot be told)."""
        pid = processes.read_pid(self._pidfile("xcache"))
        if pid is None:
            return False
        prefix = str(self.cache_dir) + "/"
        try:
            descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            return False
        for descriptor in descriptors:
            try:
                if os.readlink(descriptor).startswith(prefix):
                    return True
            except OSError:
                continue
        return False

    # --- iperf3 ----------------------------------------------------------------------------------------

    def _start_iperf3(self) -> None:
        port = self.ports()["iperf3"]
        # --logfile names this testbed's directory, so that `down` can find a server whose PID file was lost.
        argv = [
            "iperf3",
            "--server",
            "--port",
            str(port),
            "--bind",
            self.config.host,
            "--logfile",
            str(self._log("iperf3")),
        ]
        processes.start(argv, pidfile=self._pidfile("iperf3"), logfile=self._log("iperf3"))

    # --- what clients need -----------------------------------------------------------------------------

    def client_environment(self) -> dict[str, str]:
        """Environment for gfal2 clients: the testbed CA and a bearer token (XrdHttpTPC rejects gridsite creds)."""
        # GFAL_PYTHONBIN: the gfal-* scripts look for `python`, which Debian does not install by default.
        return {
            "X509_CERT_DIR": str(self.pki.cert_dir),
            "BEARER_TOKEN": self.config.bearer_token,
            "GFAL_PYTHONBIN": SYSTEM_PYTHON,
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
        url = f"http://127.0.0.1:{self.ports()['tape.control']}/status"
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
        self.sites_document_path.write_text(json.dumps(self.sites_document(), indent=2) + "\n")
        return self.sites_document_path


def remove_state(config: TestbedConfig) -> None:
    """Forget the testbed entirely (data, certificates, configs): for `testbed reset`."""
    if config.directory.exists():
        shutil.rmtree(config.directory)


__all__ = ["Endpoint", "EndpointStatus", "Testbed", "TestbedConfig", "remove_state"]
