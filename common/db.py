"""Which database a read uses: the primary, or a streaming replica (DATABASE_REPLICA_URL) where the caller allows it.

Every app may read through `read_connection()` (raw SQL) or `read_alias()` (the ORM's `.using()`); the roof's
router (portal/db_router.py) sends the ORM's reads the same way. A read goes to the replica only when all hold:
- settings.DATABASES has a "replica" alias (DATABASE_REPLICA_URL is set);
- the caller is inside `replica_reads()` (the roof's middleware enters it for GET and HEAD requests);
- no `primary_reads()` is open, nothing was written through the ORM since `replica_reads()` began, and the
  primary is not inside a transaction: a reader sees its own writes, and a replica that lags a second behind
  never hides what was just written.
Writes always use the primary (`django.db.connection`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

REPLICA = "replica"


@dataclass
class _Reads:
    """What the current context allows: replica reads, until something is written (then the primary's)."""

    replica: bool = False
    wrote: bool = False


_reads: ContextVar[_Reads] = ContextVar("db_reads", default=_Reads())  # noqa: B039 - never mutated: see below


def replica_configured() -> bool:
    """Whether a replica alias exists (DATABASE_REPLICA_URL was set)."""
    return REPLICA in settings.DATABASES


def replica_reads_now() -> bool:
    """Whether a read made now may go to the replica (see the module's rules)."""
    reads = _reads.get()
    return (
        reads.replica and not reads.wrote and replica_configured() and not connections[DEFAULT_DB_ALIAS].in_atomic_block
    )


@contextmanager
def replica_reads() -> Iterator[None]:
    """Inside: reads may go to the replica (what the roof's middleware does for a GET), until a write."""
    token = _reads.set(_Reads(replica=True))
    try:
        yield
    finally:
        _reads.reset(token)


@contextmanager
def primary_reads() -> Iterator[None]:
    """Inside: every read uses the primary, even within replica_reads() (a reader that must see the latest)."""
    token = _reads.set(_Reads(replica=False))
    try:
        yield
    finally:
        _reads.reset(token)


def reads_wrote() -> None:
    """Note a write: until the current replica_reads() ends, reads use the primary (read your own writes). The
    router calls it for every write through the ORM."""
    reads = _reads.get()
    if reads.replica:  # the default outside replica_reads() is shared and never changed
        reads.wrote = True


def read_alias() -> str:
    """The database alias a read made now should use: "replica" or "default"."""
    return REPLICA if replica_reads_now() else DEFAULT_DB_ALIAS


def read_connection() -> BaseDatabaseWrapper:
    """The connection a raw-SQL reader should use now: the replica's inside replica_reads() (outside a transaction
    and before any write), else the primary's. A reader's transaction (SET LOCAL) is opened on it:
    `transaction.atomic(using=connection.alias)`."""
    return connections[read_alias()]
