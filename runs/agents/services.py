"""The portal's side of a site's agent: it takes its site's jobs by long poll (`jobs_claim`), beats for the work it
has in flight (`agent_heartbeat`), and reports each job's result once (`job_result_store`). The portal writes every
row itself, through the paths the Celery workers' tasks take (runs.engine file_claim / file_finish / run_prepare,
runs.probes.runs run_probe_begin / run_probe_store, runs.copies run_copies_deleted), so that the records go through
results.services as ever and the reaper treats an agent's work as a worker's: a file whose agent stopped beating is
a lost try, tried once more; a probe whose agent stopped beating ends as "worker lost".

A result delivered twice (the agent's spool sends again what it could not see acknowledged) is stored once: the
job is done after the first, under its row lock. A job of another site is refused (403, logged: sites.roles).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from measure.outcomes import FileOutcome, outcome_from_dict
from sites.agents import agent_report
from sites.models import SiteAgent
from sites.roles import agent_object_for, agent_restrict

from .. import engine
from ..choices import JobKind, JobState, RunState
from ..copies import run_copies_deleted
from ..credentials import run_credential_store
from ..jobs import agent_channel
from ..models import AgentJob, Run
from ..probes.runs import run_probe_begin, run_probe_store, runs_heartbeat
from .payloads import job_payload

logger = logging.getLogger(__name__)

CLAIM_POLL_INTERVAL = 2.0  # s at most between looks for new work during a long poll
MAX_WAIT = 25.0  # s a claim waits at most (below the usual 30 s idle timeouts of proxies)


def jobs_claim(*, agent: SiteAgent, most: int, wait: float) -> list[dict[str, Any]]:
    """Up to `most` of the agent's site's waiting jobs, each taken for this agent, as the payloads it runs; when
    none waits, wait up to `wait` s for one to be offered (the long poll): woken by the offer's NOTIFY
    (runs.jobs), and looking again at least every CLAIM_POLL_INTERVAL s in case a notification went astray."""
    deadline = time.monotonic() + min(max(wait, 0.0), MAX_WAIT)
    channel = agent_channel(agent.site_id)
    listening = deadline > time.monotonic() and not connection.in_atomic_block
    if listening:
        with connection.cursor() as cursor:
            cursor.execute(f"LISTEN {channel}")
    try:
        while True:
            jobs = _claim_once(agent=agent, most=most)
            remaining = deadline - time.monotonic()
            if jobs or remaining <= 0:
                return [job_payload(job) for job in jobs]
            if listening:
                for _ in connection.connection.notifies(timeout=min(remaining, CLAIM_POLL_INTERVAL), stop_after=1):
                    break
            else:
                time.sleep(min(remaining, 0.2))
    finally:
        if listening:
            with connection.cursor() as cursor:
                cursor.execute(f"UNLISTEN {channel}")


def _claim_once(*, agent: SiteAgent, most: int) -> list[AgentJob]:
    with transaction.atomic():
        waiting = list(
            agent_restrict(queryset=AgentJob.objects.filter(state=JobState.QUEUED), agent=agent)
            .select_for_update(skip_locked=True)
            .order_by("id")[:most]
        )
        now, taken = timezone.now(), []
        for job in waiting:
            if _job_begin(job, agent=agent):
                job.state, job.agent, job.claimed_at, job.heartbeat = JobState.CLAIMED, agent, now, now
                taken.append(job)
            else:
                job.state = JobState.STALE
            job.save(update_fields=["state", "agent", "claimed_at", "heartbeat"])
        if taken:
            Run.objects.filter(pk__in={job.run_id for job in taken}, agent__isnull=True).update(agent=agent)
    return list(AgentJob.objects.filter(pk__in=[job.pk for job in taken]).select_related("run", "file"))


def _job_begin(job: AgentJob, *, agent: SiteAgent) -> bool:
    """What a worker does as it receives the message: a file's try claimed, a probe's run begun. False when the
    message is stale (a duplicate, a try the reaper superseded, a run that ended)."""
    if job.kind == JobKind.TRANSFER and job.file_id is not None:
        return engine.file_claim(job.file_id, job.attempt, job.task_id, f"agent {agent}") is not None
    if job.kind == JobKind.PROBE:
        return run_probe_begin(job.run_id) is not None
    if job.kind == JobKind.PREPARE:
        return Run.objects.filter(pk=job.run_id, state=RunState.QUEUED).exists()
    return True


def agent_heartbeat(
    *, agent: SiteAgent, version: str, kinds: Sequence[str], in_flight: Sequence[tuple[int, int]]
) -> list[int]:
    """The agent is alive and says so: its version, probe kinds and jobs in flight, (job id, bytes so far) each.
    Beats for those jobs' files and probes as a worker's watcher does; returns the ids of those it must stop (their
    run ended, or the job is not, or no longer, this agent's)."""
    agent_report(agent=agent, version=version, kinds=kinds, in_flight=len(in_flight))
    now = timezone.now()
    progress = dict(in_flight)
    jobs = list(
        agent_restrict(queryset=AgentJob.objects.all(), agent=agent).filter(
            pk__in=list(progress), agent=agent, state=JobState.CLAIMED
        )
    )
    AgentJob.objects.filter(pk__in=[job.pk for job in jobs]).update(heartbeat=now)
    files = {job.file_id: job for job in jobs if job.kind == JobKind.TRANSFER and job.file_id is not None}
    engine.file_heartbeat(sorted(files), progress={fid: (progress[job.pk], now) for fid, job in files.items()})
    runs_heartbeat(sorted({job.run_id for job in jobs if job.kind == JobKind.PROBE}))
    stopped = engine.runs_stopped(sorted({job.run_id for job in jobs if job.kind != JobKind.COPIES_DELETE}))
    mine = {job.pk for job in jobs}
    return sorted({pk for pk in progress if pk not in mine} | {job.pk for job in jobs if job.run_id in stopped})


def job_result_store(*, agent: SiteAgent, job_id: int, attempt: int, result: dict[str, Any]) -> bool:
    """Store what the agent reports of one job, once: False when it was stored already (a second delivery), or
    when the engine dropped it (a try the reaper had ended meanwhile: its file was given another).
    PermissionDenied for another site's job; ValidationError when the result does not fit the job."""
    with transaction.atomic():
        job = agent_object_for(queryset=AgentJob.objects.select_for_update(), agent=agent, pk=job_id)
        if job.attempt != attempt:
            raise ValidationError({"attempt": [f"job {job.pk} is attempt {job.attempt}, not {attempt}"]})
        if job.state == JobState.DONE:
            return False
        if job.state == JobState.QUEUED or job.agent_id != agent.pk:
            raise ValidationError({"detail": [f"job {job.pk} was not taken by this agent"]})
        stored = _result_apply(job, result)
        job.state, job.reported_at, job.result = JobState.DONE, timezone.now(), result
        job.save(update_fields=["state", "reported_at", "result"])
    return stored


def _result_apply(job: AgentJob, result: dict[str, Any]) -> bool:
    """Hand the result to the engine's own writers (they drop what is stale: a try the reaper ended, a run that
    ended meanwhile keeps its end and gains what was measured)."""
    if credential := result.get("credential"):
        run_credential_store(job.run_id, credential)
    if job.kind == JobKind.TRANSFER and job.file_id is not None:
        return engine.file_finish(job.file_id, job.attempt, job.task_id, _outcome(result.get("outcome"), "outcome"))
    if job.kind == JobKind.PREPARE:
        error = str(result.get("error") or "")

        def ensure_test_file(base: str, size: int) -> str:
            if error:
                raise RuntimeError(error)
            return base

        def credential(run: Run) -> None:
            if error and result.get("stage") == "credential":
                raise RuntimeError(error)

        engine.run_prepare(job.run_id, ensure_test_file=ensure_test_file, credential=credential)
    elif job.kind == JobKind.PROBE:
        outcomes = [_outcome(item, "outcomes") for item in result.get("outcomes") or []]
        run_probe_store(job.run_id, outcomes, dict(result.get("summary") or {}), str(result.get("error") or ""))
    elif job.kind == JobKind.COPIES_DELETE:
        errors = [str(error) for error in result.get("errors") or []]
        run_copies_deleted(job.run_id, deleted=int(result.get("deleted") or 0), errors=errors)
    return True


def _outcome(data: Any, field: str) -> FileOutcome:
    if not isinstance(data, dict):
        raise ValidationError(
            {field: ["an outcome: an object with source_url, destination_url, bytes, start, end, ok"]}
        )
    try:
        return outcome_from_dict(data)
    except (KeyError, ValueError, TypeError) as exc:
        raise ValidationError({field: [f"not an outcome: {exc}"]}) from None
