"""Starting the testbed's servers: XRootD disk sites, the tape (its daemon and XRootD in front), nginx WebDAV, the
slowed origin and XCache, iperf3; the files the tape and the origin hold; the cache's flush."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from common import processes

from .config import (
    IPERF3_SERVERS,
    NGINX_USER,
    ORIGIN_INTERVAL_MS,
    REPO,
    SYSTEM_PYTHON,
    TAPE_SITE,
    XROOTD_USER,
    DiskSite,
    TestbedPart,
)
from .netns import NetworkLayout


class ServersMixin(TestbedPart):
    """The server side of Testbed: how each process is configured and started."""

    @property
    def layout(self) -> NetworkLayout | None:
        raise NotImplementedError

    def token_wrapped(self, argv: list[str]) -> list[str]:
        raise NotImplementedError

    @property
    def tokens_required(self) -> bool:
        raise NotImplementedError

    @property
    def issuer_url(self) -> str:
        raise NotImplementedError

    def xrootd_token_lines(self, key: str, audiences: list[str]) -> list[str]:
        raise NotImplementedError

    def xrootd_token_env(self, key: str) -> dict[str, str] | None:
        raise NotImplementedError

    # --- PKI for servers that drop privileges ----------------------------------------------------------

    def _server_credentials(self, user: str) -> tuple[Path, Path]:
        """A copy of the host certificate and key owned by user (XRootD insists the key is the user's own)."""
        target = self.dir / "pki" / f"host-{user}"
        target.mkdir(parents=True, exist_ok=True)
        cert, key = target / "hostcert.pem", target / "hostkey.pem"
        # Replaced whole (never truncated in place): a server started just before may be reading them.
        for source, copy in ((self.pki.host_cert, cert), (self.pki.host_key, key)):
            if copy.exists() and copy.read_bytes() == source.read_bytes():
                continue
            partial = copy.with_suffix(".part")
            shutil.copyfile(source, partial)
            partial.chmod(0o600)
            partial.replace(copy)
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
        return self.token_wrapped(argv)

    def _xrootd_start(self, key: str, config: Path, output: str) -> None:
        """Start the XRootD server `key` with its configuration file (its stdout and stderr to log/OUTPUT)."""
        self._start(
            key, self._xrootd_argv(key, config), logfile=self.dir / "log" / output, env=self.xrootd_token_env(key)
        )

    def _xrootd_common(self, key: str, root_port: int, *, tpc: bool = True) -> list[str]:
        base = self.site_dir(key)
        for sub in ("admin", "run"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        lines = [
            f"all.adminpath {base / 'admin'}",
            f"all.pidpath {base / 'run'}",
            f"xrd.port {root_port}",
            # XRootD listens on every interface; accept connections from this machine only (on the namespaced
            # testbed: from the testbed's sites and the portal's address too).
            "xrd.allow host localhost",
            "xrd.allow host 127.0.0.1",
            *self._xrootd_allowed(),
        ]
        if tpc:
            lines += [
                # More checksum jobs at once than third-party copies (xfr 8) can end at once: XRootD 5.5.3's queue
                # of waiting checksum jobs can lose one, and gfal2's copy then waits for its answer for 30 minutes
                # (docs/testbed.md, "A copy that moved every byte and did not return"); with no job ever waiting,
                # none is lost. Sites at the default (4) still meet it: measure/arrival.py copes.
                "xrootd.chksum max 64 adler32",
                # Native third-party copy: the destination pulls with xrdcp. ttl: a source keeps a copy's
                # authorization 15 s by default (XrdOfsTPCConfig.hh, maxTTL) waiting for the destination to come; under
                # load a copy queued behind the destination's 8 (xfr) came later and failed with "[3010] ...
                # authorization expired" (bench/probes.py, 2026-11-27, 1 of 160 copies).
                "ofs.tpc autorm ttl 60 300 xfr 8 pgm /usr/bin/xrdcp --server",
            ]
        return lines

    def _xrootd_allowed(self) -> list[str]:
        """On the namespaced testbed: the sites and the portal, by address and by name (what their addresses
        resolve to in each site's /etc/hosts)."""
        if self.layout is None:
            return []
        names = [f"xrd.allow host {address}" for address in self.layout.addresses]
        return [*names, f"xrd.allow host {self.layout.bridge.removesuffix('br')}-*"]

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
            *self.xrootd_token_lines(site.key, self._audiences(f"{site.key}.root", f"{site.key}.https")),
        ]
        config = base / "xrootd.cfg"
        config.write_text("\n".join(lines) + "\n")
        if processes.is_root():
            processes.chown_tree(base, XROOTD_USER)
        self._xrootd_start(site.key, config, f"{site.key}.out")

    def _audiences(self, *port_keys: str) -> list[str]:
        """The audiences a door accepts: its URL's scheme and address (davs:// as https://), as WLCG tokens name
        a storage."""
        ports = self.ports()
        scheme = {"root": "root", "https": "https", "rest": "https"}
        return [f"{scheme[key.rsplit('.', 1)[1]]}://{self.endpoint(key).host}:{ports[key]}" for key in port_keys]

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
            self.host_of("tape"),
            # On the namespaced testbed the control port answers the host too (at the tape site's address).
            "--control-host",
            "127.0.0.1" if self.layout is None else "0.0.0.0",
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
            "--migration-delay",
            str(self.config.tape_migration_delay),
            "--evict",
            self.config.tape_evict,
            "--buffer-bytes",
            str(self.config.tape_buffer_bytes),
            "--max-request-files",
            str(self.config.tape_max_request_files),
            "--tape-capacity",
            str(self.config.tape_capacity),
            "--sitename",
            TAPE_SITE,
        ]
        if self.tokens_required:
            argv += ["--token-issuer", self.issuer_url, "--token-ca", str(self.pki.cert_dir)]
        self._start("tape-rest", argv, cwd=REPO)

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
            *self.xrootd_token_lines("tape", self._audiences("tape.root")),
        ]
        config = base / "xrootd.cfg"
        config.write_text("\n".join(lines) + "\n")
        if processes.is_root():
            processes.chown_tree(base, XROOTD_USER)
        self._xrootd_start("tape", config, "tape.out")

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
        conf.write_text(f"""# Generated by testbed/grid/servers.py: plain WebDAV, no third-party copy, no checksums.
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
        listen {self.host_of("webdav")}:{port} ssl;
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
        self._start("webdav", argv, logfile=self.dir / "log" / "webdav.out")

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
            # XCache hands the client's token on to the origin (the authz CGI): the origin takes the cache's audience.
            *self.xrootd_token_lines("origin", self._audiences("origin.root", "xcache.root")),
        ]
        config = base / "xrootd.cfg"
        config.write_text("\n".join(lines) + "\n")
        if processes.is_root():
            processes.chown_tree(base, XROOTD_USER)
        self._xrootd_start("origin", config, "origin.out")

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
            f"pss.origin {self.host_of('origin')}:{ports['origin.root']}",
            f"oss.localroot {self.cache_dir}",
            "pfc.ram 1g",  # XRootD 5.5 refuses less than 1g; it is an upper bound, not an allocation
            "pfc.blocksize 1M",
            "pfc.prefetch 0",
            "pfc.diskusage 0.90 0.95",
            *self.xrootd_token_lines("xcache", self._audiences("xcache.root")),
        ]
        config = base / "xrootd.cfg"
        config.write_text("\n".join(lines) + "\n")
        if processes.is_root():
            processes.chown_tree(base, XROOTD_USER)
        self._xrootd_start("xcache", config, "xcache.out")

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

    def _start_iperf3(self, name: str = "iperf3") -> None:
        """The iperf3 server of endpoint `name` (one per site: IPERF3_SERVERS)."""
        port = self.ports()[name]
        process = IPERF3_SERVERS[name][1]
        # --logfile names this testbed's directory, so that `down` can find a server whose PID file was lost.
        argv = [
            "iperf3",
            "--server",
            "--port",
            str(port),
            "--bind",
            self.host_of(IPERF3_SERVERS[name][0]),
            "--logfile",
            str(self._log(process)),
        ]
        self._start(process, argv)
