"""The messages for a site's agent: where runs.dispatch would send a Celery message to a site whose work its agent
does, it offers an AgentJob instead (the queue `agent.<SITE>`), which the agent takes by long poll (runs.agents).

Offering is idempotent, as sending a Celery message twice is harmless: one job per try of a file (the engine's
file id and attempt), and for a run's first task or its clean-up a new job only when none is waiting or being
worked on (a job whose agent stopped beating is offered anew, as the reaper re-sends a lost message).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, connection, transaction
from django.db.models import Max, Q
from django.utils import timezone

from challenges.choices import ActivityKind
from sites.models import Site

from .choices import JobKind, JobState
from .models import AgentJob, Run, RunFile

AGENT_QUEUE_PREFIX = "agent."
RUN_TASK_KINDS = (ActivityKind.TRANSFER, ActivityKind.TAPE_WRITE)  # runs.parameters.TRANSFER_KINDS


def agent_queue(site_name: str) -> str:
    """The queue name a run of a site with an agent carries (runs.dispatch routes it here)."""
    return f"{AGENT_QUEUE_PREFIX}{site_name}"


def is_agent_queue(queue: str) -> bool:
    return queue.startswith(AGENT_QUEUE_PREFIX)


def agent_channel(site_id: int) -> str:
    """The PostgreSQL channel a job offered to the site's agent is announced on (its long poll LISTENs to it)."""
    return f"agent_jobs_{int(site_id)}"


def _announce(site: Site) -> None:
    """NOTIFY the site's waiting long polls, when the offer commits (PostgreSQL delivers it then)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, '')", [agent_channel(site.pk)])


REAPER_PASS_KEY = "portal:runs:reaper-pass"


def agents_unheard(*, now: datetime) -> bool:
    """Whether the reaper must spare sites' agents' work this pass: its previous pass is older than
    DISPATCH_WORKER_LOST_AFTER (or unknown), so the portal itself was away (stopped, or beat was) and the agents,
    which beat through the portal's API, could not be heard; their next heartbeat (every few seconds) comes before
    the next pass. Notes this pass's time."""
    previous = cache.get(REAPER_PASS_KEY)
    cache.set(REAPER_PASS_KEY, now.timestamp(), timeout=None)
    return previous is None or now.timestamp() - float(previous) > settings.DISPATCH_WORKER_LOST_AFTER


def job_lost_before() -> timedelta:
    """A claimed job whose agent has not beaten for it this long is lost (the reaper's DISPATCH_WORKER_LOST_AFTER)."""
    return timedelta(seconds=settings.DISPATCH_WORKER_LOST_AFTER)


def _site(queue: str) -> Site | None:
    return Site.objects.filter(name=queue.removeprefix(AGENT_QUEUE_PREFIX)).first()


def agent_file_offer(*, queue: str, file_id: int, attempt: int, task_id: str) -> AgentJob | None:
    """Offer one try of one file (the engine's file_send); None when it is offered already, or when its file or the
    site is not there any more (the reaper then ends the try)."""
    site, file = _site(queue), RunFile.objects.filter(pk=file_id).only("run_id").first()
    if site is None or file is None:
        return None
    try:
        with transaction.atomic():
            job, created = AgentJob.objects.get_or_create(
                run_id=file.run_id,
                kind=JobKind.TRANSFER,
                file_id=file_id,
                attempt=attempt,
                defaults={"site": site, "task_id": task_id},
            )
            if created:
                _announce(site)
    except IntegrityError:  # offered at the same moment by another process
        return None
    return job if created else None


def agent_job_offer(*, queue: str, kind: str, run_id: int) -> AgentJob | None:
    """Offer a run's message to its site's agent: "prepare" (a transfer run's first task, or a whole one-task
    probe) or "copies-delete". None when the site or the run is not there any more, or a live job is offered."""
    site, run = _site(queue), Run.objects.filter(pk=run_id).only("kind").first()
    if site is None or run is None:
        return None
    if kind == JobKind.PREPARE and run.kind not in RUN_TASK_KINDS:
        kind = JobKind.PROBE
    return _run_job_offer(site=site, run_id=run_id, kind=kind)


def _run_job_offer(*, site: Site, run_id: int, kind: str) -> AgentJob | None:
    """A run's job (its first task, its clean-up): a new one unless one is waiting or its agent still beats."""
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run_id).first()  # one offer of a run's job at a time
        jobs = AgentJob.objects.filter(run_id=run_id, kind=kind, file__isnull=True)
        live = Q(state=JobState.QUEUED) | Q(state=JobState.CLAIMED, heartbeat__gte=timezone.now() - job_lost_before())
        if jobs.filter(live).exists():
            return None
        jobs.filter(state=JobState.CLAIMED).update(state=JobState.STALE)  # lost with its agent: never reported
        attempt = (jobs.aggregate(last=Max("attempt"))["last"] or 0) + 1
        _announce(site)
        return AgentJob.objects.create(site=site, run_id=run_id, kind=kind, attempt=attempt)
