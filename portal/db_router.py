"""Reads of pages and exports on a streaming replica (DATABASE_REPLICA_URL), everything else on the primary.

Only the reads of a GET or HEAD request (pages, exports, the read API) go to the replica, and only those of the
apps whose tables are large (REPLICA_APPS): sessions, users, tokens and the login lockout stay on the primary, so
that a replica a few seconds behind never logs anyone out. Writes, reads inside a transaction (read your own
writes), Celery tasks, ingestion and management commands use the primary. Without DATABASE_REPLICA_URL there is
no "replica" alias and every query goes to the primary, as before.

Raw SQL through `django.db.connection` always uses the primary; a reader that wants the replica asks
`read_connection()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse

REPLICA = "replica"
REPLICA_APPS = frozenset({"results", "challenges", "live", "runs", "sweeps", "reports"})
_reads_on_replica: ContextVar[bool] = ContextVar("reads_on_replica", default=False)


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES


def _replica_now() -> bool:
    return _reads_on_replica.get() and replica_configured() and not connections[DEFAULT_DB_ALIAS].in_atomic_block


@contextmanager
def replica_reads() -> Iterator[None]:
    """Inside: reads of the large apps' models may go to the replica (what the middleware does for a GET)."""
    token = _reads_on_replica.set(True)
    try:
        yield
    finally:
        _reads_on_replica.reset(token)


def read_connection() -> BaseDatabaseWrapper:
    """The connection a raw-SQL reader of the large tables should use now: the replica's inside replica_reads()
    (outside a transaction), else the primary's."""
    return connections[REPLICA if _replica_now() else DEFAULT_DB_ALIAS]


class ReplicaRouter:
    """Django's database router for the replica (DATABASE_ROUTERS)."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        if model._meta.app_label in REPLICA_APPS and _replica_now():
            return REPLICA
        return DEFAULT_DB_ALIAS

    def db_for_write(self, model: type[Any], **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # one database, two servers

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS


class ReplicaReadsMiddleware:
    """GET and HEAD requests read from the replica, including while a streamed export is written out."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.method not in ("GET", "HEAD") or not replica_configured():
            return self.get_response(request)
        with replica_reads():
            response = self.get_response(request)
        if isinstance(response, StreamingHttpResponse) and not response.is_async:
            response.streaming_content = _on_replica(response.streaming_content)
        return response


def _on_replica(chunks: Iterator[Any]) -> Iterator[Any]:
    with replica_reads():
        yield from chunks
