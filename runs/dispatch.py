"""Where a run's tasks go and what the workers speak: gfal2's URL schemes, one Celery queue per site, and the two
messages the engine sends (a run's first task, a file's copy). Tasks are sent by name, so that the engine never
imports runs.tasks (which imports the engine)."""

from __future__ import annotations

import logging
import secrets
from functools import cache
from typing import Any

import redis
from celery import current_app
from django.conf import settings
from django.core.cache import cache as django_cache

from sites.agents import site_has_agent
from sites.models import Site

from . import jobs

logger = logging.getLogger(__name__)

DEFAULT_QUEUE = "default"
PREPARE_TASK = "runs.run_prepare"
TRANSFER_TASK = "runs.transfer_file"
COPIES_DELETE_TASK = "runs.run_copies_delete"

# gfal2 plugin name (before the version) -> URL schemes it speaks
PLUGIN_SCHEMES: dict[str, tuple[str, ...]] = {
    "file": ("file",),
    "http": ("http", "https", "dav", "davs"),
    "xrootd": ("root", "xroot", "roots", "xroots"),
    "gridftp": ("gsiftp", "ftp"),
    "srm": ("srm",),
    "sftp": ("sftp",),
    "dcap": ("dcap", "gsidcap"),
    "mock": ("mock",),
}


@cache
def worker_schemes() -> frozenset[str]:
    """URL schemes the workers' gfal2 can speak: the plugins gfal2 loads here (workers run this same image)."""
    from measure.context import gfal2_context_new

    names = gfal2_context_new().get_plugin_names()
    schemes: set[str] = set()
    for name in names:
        schemes.update(PLUGIN_SCHEMES.get(str(name).split("-")[0].lower(), ()))
    return frozenset(schemes)


def site_queue(site_name: str) -> str:
    """The queue a worker at this site consumes: `celery -A portal worker -Q site.<SITE NAME>`."""
    return f"site.{site_name}"


SERVED_QUEUES_KEY = "portal:celery:served-queues"


def served_queues() -> set[str]:
    """Queues some live worker consumes (asked of the workers, remembered for 15 s)."""
    cached = django_cache.get(SERVED_QUEUES_KEY)
    if cached is not None:
        return set(cached)
    replies = current_app.control.inspect(timeout=settings.DISPATCH_INSPECT_TIMEOUT).active_queues() or {}
    queues = {queue["name"] for worker_queues in replies.values() for queue in worker_queues}
    django_cache.set(SERVED_QUEUES_KEY, sorted(queues), timeout=15)
    return queues


def served_queues_forget() -> None:
    django_cache.delete(SERVED_QUEUES_KEY)


def queue_for_site(site: Site | None) -> str:
    """`agent.<NAME>` when the site has an agent (runs.jobs), `site.<NAME>` when a worker serves that site, else the
    default queue."""
    if site is not None and site_has_agent(site=site):  # agent hook (runs.jobs)
        return jobs.agent_queue(site.name)
    if site is not None:
        name = site_queue(site.name)
        if name in served_queues():
            return name
    return DEFAULT_QUEUE


def prepare_send(run_id: int, queue: str, *, limits: tuple[int, int] | None = None) -> None:
    """The first task of a run (test file, then the first files; or the whole probe), with its (soft, hard) time
    limits (runs.limits.prepare_task_limits)."""
    if jobs.is_agent_queue(queue):  # agent hook: the site's agent takes it (runs.jobs)
        jobs.agent_job_offer(queue=queue, kind="prepare", run_id=run_id)
        return
    current_app.send_task(PREPARE_TASK, args=(run_id,), queue=queue, **_limits(limits))


def copies_delete_send(run_id: int, queue: str) -> None:
    """The clean-up of an ended run's destination copies, on the queue its copies were made from."""
    if jobs.is_agent_queue(queue):  # agent hook (runs.jobs)
        jobs.agent_job_offer(queue=queue, kind="copies-delete", run_id=run_id)
        return
    current_app.send_task(COPIES_DELETE_TASK, args=(run_id,), queue=queue)


def file_send(file_id: int, attempt: int, task_id: str, queue: str, *, limits: tuple[int, int] | None = None) -> None:
    """One try of one file, under the task id the file row carries (a stale message is then recognised), with its
    (soft, hard) time limits (runs.limits.copy_task_limits)."""
    if jobs.is_agent_queue(queue):  # agent hook (runs.jobs)
        jobs.agent_file_offer(queue=queue, file_id=file_id, attempt=attempt, task_id=task_id)
        return
    current_app.send_task(TRANSFER_TASK, args=(file_id, attempt), task_id=task_id, queue=queue, **_limits(limits))


def _limits(limits: tuple[int, int] | None) -> dict[str, Any]:
    """A message's own time limits, which a worker applies instead of the task's."""
    return {} if limits is None else {"soft_time_limit": limits[0], "time_limit": limits[1]}


BROKER_EPOCH_KEY = "portal:broker:epoch"


def broker_lost_messages() -> bool:
    """Whether the broker came back without its data since the last look (a Redis restarted without saving, or
    restored): the epoch key this sets is gone then, and with it every queued message. True also on the very first
    look; the caller resends what is in flight, which is harmless (a duplicate message finds its file claimed and is
    dropped). False for a broker that is not Redis, or that cannot be reached now (the next look tells)."""
    url = str(settings.CELERY_BROKER_URL or "")
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return False
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        with client:
            return bool(client.set(BROKER_EPOCH_KEY, secrets.token_hex(8), nx=True))
    except redis.RedisError as exc:
        logger.warning("broker epoch: %s", exc)
        return False
