"""The namespaced testbed's way for its sites to reach the portal's services, which listen on 127.0.0.1 only.

    python -m testbed.relay --listen ADDRESS --allow SUBNET --port 5432 --port 6379 [--testbed DIR]

For each port P it listens on ADDRESS:P (the portal's address on the testbed's bridge, TESTBED_PORTAL_ADDRESS) and
relays every connection to 127.0.0.1:P, byte for byte, both ways: a worker inside a site's namespace reaches
PostgreSQL, Redis or the portal's web server at TESTBED_PORTAL_ADDRESS on their usual ports. Connections from any
address outside SUBNET (the testbed's own) are closed at once: only the testbed's sites and the host reach it, and
the portal's services keep listening on loopback. Plain Python, stdlib only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import signal
import sys

CHUNK = 65536


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


async def _relay(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    *,
    port: int,
    allowed: ipaddress.IPv4Network,
) -> None:
    peer = client_writer.get_extra_info("peername")
    if not peer or ipaddress.ip_address(peer[0]) not in allowed:
        print(f"refused {peer} on port {port}: not in {allowed}", flush=True)
        client_writer.close()
        return
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        print(f"127.0.0.1:{port} does not answer for {peer[0]}: {exc}", flush=True)
        client_writer.close()
        return
    try:
        await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))
    finally:
        for writer in (client_writer, server_writer):
            writer.close()


async def serve(address: str, ports: list[int], allowed: ipaddress.IPv4Network) -> None:
    servers = []
    for port in ports:

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int = port) -> None:
            await _relay(reader, writer, port=port, allowed=allowed)

        servers.append(await asyncio.start_server(handle, address, port, reuse_address=True))
        print(f"relay {address}:{port} -> 127.0.0.1:{port} (from {allowed} only)", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.relay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, help="the address to listen on (the portal's, on the bridge)")
    parser.add_argument("--allow", required=True, help="the only source addresses accepted (the testbed's subnet)")
    parser.add_argument("--port", type=int, action="append", required=True, help="a port of 127.0.0.1 to relay")
    parser.add_argument("--testbed", default="", help="the testbed's directory (names the relay's testbed)")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.listen, sorted(set(args.port)), ipaddress.IPv4Network(args.allow)))
    except OSError as exc:
        print(f"relay failed: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
