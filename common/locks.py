"""Locks across processes and machines, held in PostgreSQL (the one thing every web process and worker shares)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


def advisory_key(name: str) -> int:
    """A signed 64-bit key for pg_advisory_lock from a name."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


@contextmanager
def advisory_lock(name: str) -> Iterator[None]:
    """Hold the session-level advisory lock of `name` for the block: one holder at a time on the whole database.
    A holder that dies loses its session, and with it the lock."""
    key = advisory_key(name)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [key])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


@contextmanager
def advisory_lock_try(name: str) -> Iterator[bool]:
    """Take the session-level advisory lock of `name` for the block if no one else holds it: yields whether it was
    taken (then released after the block). For work that another holder is already doing, so a caller skips instead of
    waiting. Session locks stack: the holder may take `advisory_lock(name)` again inside the block."""
    key = advisory_key(name)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        taken = bool(cursor.fetchone()[0])
    try:
        yield taken
    finally:
        if taken:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
