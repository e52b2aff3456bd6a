"""Reads of pages and exports on a streaming replica (DATABASE_REPLICA_URL), everything else on the primary.

Only the reads of a GET or HEAD request (pages, exports, the read API) go to the replica, and only those of the
apps whose tables are large (REPLICA_APPS): sessions, users, tokens and the login lockout stay on the primary, so
that a replica a few seconds behind never logs anyone out. Writes, reads inside a transaction or after a write
(read your own writes), Celery tasks, ingestion and management commands use the primary. Without
DATABASE_REPLICA_URL there is no "replica" alias and every query goes to the primary, as before.

When a read may use the replica is decided once, in common/db.py, for the ORM (this router) and for the raw SQL of
the apps' heavy readers (`common.db.read_connection()`) alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse

from common.db import REPLICA, read_connection, reads_wrote, replica_configured, replica_reads, replica_reads_now

__all__ = ["REPLICA", "REPLICA_APPS", "ReplicaReadsMiddleware", "ReplicaRouter", "read_connection", "replica_reads"]

REPLICA_APPS = frozenset({"results", "challenges", "live", "runs", "sweeps", "reports"})


class ReplicaRouter:
    """Django's database router for the replica (DATABASE_ROUTERS)."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        if model._meta.app_label in REPLICA_APPS and replica_reads_now():
            return REPLICA
        return DEFAULT_DB_ALIAS

    def db_for_write(self, model: type[Any], **hints: Any) -> str:
        if model._meta.app_label in REPLICA_APPS:
            reads_wrote()  # the rest of this request reads the primary: it sees what it wrote (a token's last use not)
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
