"""Checks of the services the portal depends on, shared by the home page, /healthz and the API."""

from __future__ import annotations

from django.core.cache import cache
from django.db import connection

from .tasks import HEARTBEAT_KEY


def portal_health() -> dict[str, str | None]:
    """Whether PostgreSQL and Redis answer, and the ISO time of the last worker heartbeat (None if never)."""
    result: dict[str, str | None] = {"database": "ok", "redis": "ok", "last_heartbeat": None}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any driver error means "down"; the message is what an operator needs
        result["database"] = f"error: {exc}"
    try:
        result["last_heartbeat"] = cache.get(HEARTBEAT_KEY)
    except Exception as exc:
        result["redis"] = f"error: {exc}"
    return result
