"""The tape daemon: `python -m testbed.tape ...` (see the package's docstring)."""

from __future__ import annotations

import argparse
import signal
import ssl
import threading
from pathlib import Path
from typing import Any

from .http import TapeHTTPServer
from .library import TapeLibrary
from .model import (
    log,
)
from .tokens import TokenPolicy


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m testbed.tape", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="holds disk/ (the disk buffer) and tape/")
    parser.add_argument("--host", default="127.0.0.1", help="address of the HTTPS server and in its URLs")
    parser.add_argument("--https-port", type=int, required=True, help="port of the Tape REST API over HTTPS")
    parser.add_argument("--control-port", type=int, required=True, help="plain HTTP port on --control-host")
    parser.add_argument(
        "--control-host", default="127.0.0.1", help="address of the control port (the namespaced testbed: 0.0.0.0)"
    )
    parser.add_argument("--cert", type=Path, required=True, help="host certificate (PEM)")
    parser.add_argument("--key", type=Path, required=True, help="host key (PEM)")
    parser.add_argument("--drives", type=int, default=1, help="number of tape drives")
    parser.add_argument("--drive-rate", type=float, default=100e6, help="read rate of a drive, bytes/s")
    parser.add_argument("--mount-time", type=float, default=0.0, help="seconds to switch the tape in a drive")
    parser.add_argument("--stage-delay", type=float, default=0.0, help="seconds before a requested file is eligible")
    parser.add_argument(
        "--migration-delay", type=float, default=None, help="seconds unchanged before a buffer file goes to tape"
    )
    parser.add_argument("--evict", choices=["migrated", "lru"], default="migrated", help="when buffer files go")
    parser.add_argument("--buffer-bytes", type=int, default=0, help="with --evict lru: the buffer's size")
    parser.add_argument("--max-request-files", type=int, default=0, help="largest stage request (0: no limit)")
    parser.add_argument("--tape-capacity", type=int, default=0, help="bytes a tape holds (0: a tape per directory)")
    parser.add_argument("--sitename", default="TESTBED-TAPE", help="sitename of the Tape REST discovery")
    parser.add_argument("--token-issuer", default="", help="require WLCG tokens of this issuer on the HTTPS door")
    parser.add_argument("--token-ca", default=None, help="CA directory to trust the issuer's HTTPS with")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    library = TapeLibrary(
        args.root,
        args.drives,
        args.drive_rate,
        args.mount_time,
        args.stage_delay,
        migration_delay=args.migration_delay,
        evict=args.evict,
        buffer_bytes=args.buffer_bytes,
        max_request_files=args.max_request_files,
        tape_capacity=args.tape_capacity,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(args.cert), str(args.key))
    door = f"https://{args.host}:{args.https_port}"
    tokens = TokenPolicy(args.token_issuer, door, args.token_ca) if args.token_issuer else None
    https = TapeHTTPServer(
        (args.host, args.https_port), library, args.sitename, door, ssl_context=context, tokens=tokens
    )
    control = TapeHTTPServer(
        (args.control_host, args.control_port),
        library,
        args.sitename,
        f"http://{args.control_host}:{args.control_port}",
        internal=True,
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log(f"got signal {signum}, stopping")
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    library.start()
    threads = [
        threading.Thread(target=server.serve_forever, args=(0.1,), name=name, daemon=True)
        for name, server in (("https", https), ("control", control))
    ]
    for thread in threads:
        thread.start()
    log(
        f"tape {args.sitename}: root={args.root} https://{args.host}:{args.https_port} "
        f"control=http://{args.control_host}:{args.control_port} drives={args.drives} "
        f"drive_rate={args.drive_rate:g}B/s "
        f"mount_time={args.mount_time:g}s stage_delay={args.stage_delay:g}s migration_delay={args.migration_delay} "
        f"evict={args.evict} max_request_files={args.max_request_files}"
    )
    stop.wait()  # the signal handler runs in this thread and sets it
    for server in (https, control):
        server.shutdown()
        server.server_close()
    library.stop()
    log("stopped")
    return 0
