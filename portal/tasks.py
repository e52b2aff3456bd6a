"""Tasks of the project itself: a ping for health checks and the beat heartbeat shown on the home page."""

from __future__ import annotations

import socket

from celery import shared_task
from django.core.cache import cache
from django.utils import timezone

HEARTBEAT_KEY = "portal:celery:heartbeat"


# A broker round trip and a cache write: a second at most.
PING_SOFT_LIMIT, PING_LIMIT = 10, 15


@shared_task(name="portal.tasks.ping", soft_time_limit=PING_SOFT_LIMIT, time_limit=PING_LIMIT)
def ping(payload: str) -> dict[str, str]:
    """Echo the payload with the worker's host name: proves a broker round trip."""
    return {"payload": payload, "worker": socket.gethostname()}


@shared_task(name="portal.tasks.heartbeat", ignore_result=True, soft_time_limit=PING_SOFT_LIMIT, time_limit=PING_LIMIT)
def heartbeat() -> None:
    """Record when a worker last ran a beat-scheduled task, so pages can tell whether workers and beat are alive."""
    cache.set(HEARTBEAT_KEY, timezone.now().isoformat(timespec="seconds"), timeout=None)
