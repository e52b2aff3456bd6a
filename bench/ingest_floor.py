"""bench/ingest_floor: what storing a record costs PostgreSQL at the least, with nothing of the portal's path around
it: the rows that bench/ingest.py stored, COPied again (binary, batches of 5,000, one transaction each) into

  bare     a table of the same columns without an index (bench/ingest.py's bare COPY, but binary),
  records  the records table itself (partitioned, its 12 indexes and its per-statement reference triggers),
  keys     the records table and each row's two keys COPied into results_recordkey (a unique index, no conflict
           handling: the cheapest claim there could be),
  claims   the records table and the two keys claimed as the portal claims them (INSERT ... ON CONFLICT DO NOTHING
           from a temporary table),

and prints, for each, the rows per second, and the CPU per row of the PostgreSQL backend (read from /proc) and of
this process (making the keys and sending). The sum of a variant's CPU per row against the 50 us that 40,000
messages/s allow on two cores tells what is left for parsing, HTTP and the rollups.

    eval "$(bin/portal services | grep export)"
    .venv/bin/python bench/ingest.py --messages 200000 --stomp-messages 0   # makes the rows (once)
    .venv/bin/python bench/ingest_floor.py

It works in a copy of bench/ingest.py's database (<DATABASE_URL's name>_ingest_bench_floor, made from it as a
template and dropped at the end), so nothing of that database changes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VARIANTS = ("bare", "records", "keys", "claims")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def urls(database: str | None) -> tuple[str, str, str]:
    url = os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit('set DATABASE_URL first: eval "$(bin/portal services | grep export)"')
    parts = urlsplit(url.replace("postgres://", "postgresql://", 1))
    source = database or parts.path.lstrip("/") + "_ingest_bench"
    floor = source + "_floor"
    return (
        urlunsplit(parts._replace(path="/postgres")),
        source,
        urlunsplit(parts._replace(path=f"/{floor}")),
    )


def batches_read(conn, columns: str, rows: int, batch: int) -> list[bytes]:
    """The stored rows, `batch` at a time, in COPY's binary format (read before any clock starts)."""
    blobs = []
    for first in range(0, rows, batch):
        data = bytearray()
        query = (
            f"COPY (SELECT {columns} FROM results_transferrecord ORDER BY id OFFSET {first} LIMIT {batch}) "
            "TO STDOUT (FORMAT BINARY)"
        )
        with conn.cursor() as cursor, cursor.copy(query) as copy:
            for chunk in copy:
                data += chunk
        blobs.append(bytes(data))
    return blobs


def variant_run(conn, name: str, blobs: list[bytes], columns: str, batch: int) -> tuple[float, float, float]:
    """Wall seconds, backend CPU seconds and this process's CPU seconds of storing every blob."""
    from psycopg import postgres
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class KeyDumper(Dumper):
        format = Format.BINARY
        oid = postgres.types["uuid"].oid

        def dump(self, obj: bytes) -> bytes:
            return obj

    table = "floor_bare" if name == "bare" else "results_transferrecord"
    backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    conn.commit()
    wall = backend_cpu = own_cpu = 0.0
    for blob in blobs:
        keys = [os.urandom(16) for _ in range(2 * batch)]  # fresh keys, made outside the clock
        began, cpu_began, own_began = time.perf_counter(), _cpu_seconds(backend), _own_cpu()
        with conn.cursor() as cursor:
            cursor.adapters.register_dumper(None, KeyDumper)
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(blob)
            if name == "keys":
                with cursor.copy("COPY results_recordkey (key) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(["uuid"])
                    for key in keys:
                        copy.write_row((key,))
            elif name == "claims":
                cursor.execute("CREATE TEMP TABLE floor_keys (key uuid) ON COMMIT DROP")
                with cursor.copy("COPY floor_keys (key) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(["uuid"])
                    for key in keys:
                        copy.write_row((key,))
                cursor.execute(
                    "INSERT INTO results_recordkey (key) SELECT key FROM floor_keys ORDER BY key "
                    "ON CONFLICT DO NOTHING RETURNING key"
                )
                cursor.fetchall()
        conn.commit()
        wall += time.perf_counter() - began
        backend_cpu += _cpu_seconds(backend) - cpu_began
        own_cpu += _own_cpu() - own_began
    return wall, backend_cpu, own_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--database", default=None, help="bench/ingest.py's database (default: its own default)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    args = parser.parse_args()
    variants = [name for name in args.variants.split(",") if name]
    if unknown := set(variants) - set(VARIANTS):
        raise SystemExit(f"--variants: unknown {', '.join(sorted(unknown))}")

    import psycopg

    admin_url, source, floor_url = urls(args.database)
    floor = floor_url.rsplit("/", 1)[1]
    with psycopg.connect(admin_url, autocommit=True) as admin:
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [source]).fetchone():
            raise SystemExit(f"no database {source}: run bench/ingest.py --messages 200000 first")
        admin.execute(f'DROP DATABASE IF EXISTS "{floor}"')
        admin.execute(f'CREATE DATABASE "{floor}" TEMPLATE "{source}"')
    try:
        with psycopg.connect(floor_url) as conn:
            stored = conn.execute("SELECT count(*) FROM results_transferrecord").fetchone()[0]
            if stored < args.rows:
                raise SystemExit(f"{source} holds {stored:,} records, fewer than --rows {args.rows:,}")
            names = [
                row[0]
                for row in conn.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = 'results_transferrecord'::regclass "
                    "AND attnum > 0 AND NOT attisdropped AND attname <> 'id' ORDER BY attnum"
                )
            ]
            columns = ", ".join(f'"{name}"' for name in names)
            conn.execute(f"CREATE TABLE floor_bare AS SELECT {columns} FROM results_transferrecord WITH NO DATA")
            indexes = conn.execute(
                "SELECT count(*) FROM pg_index i JOIN pg_inherits p ON p.inhrelid = i.indrelid "
                "WHERE p.inhparent = 'results_transferrecord'::regclass GROUP BY p.inhrelid LIMIT 1"
            ).fetchone()
            conn.commit()
            blobs = batches_read(conn, columns, args.rows, args.batch)
            conn.commit()
            print(
                f"{args.rows:,} stored records of {source} in {len(blobs)} batches of {args.batch:,} "
                f"({sum(map(len, blobs)) / args.rows:,.0f} bytes a row in binary COPY); the records table "
                f"starts with {stored:,} rows, its partitions {indexes[0] if indexes else '?'} indexes each; "
                f"load average {os.getloadavg()[0]:.2f}"
            )
            for name in variants:
                wall, backend, own = variant_run(conn, name, blobs, columns, args.batch)
                rows = len(blobs) * args.batch
                print(
                    f"{name:8} {rows / wall:>9,.0f} rows/s; CPU per row: PostgreSQL {backend / rows * 1e6:5.1f} us, "
                    f"this process {own / rows * 1e6:4.1f} us, wall {wall / rows * 1e6:5.1f} us "
                    f"(load average {os.getloadavg()[0]:.2f})"
                )
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{floor}"')


if __name__ == "__main__":
    main()
