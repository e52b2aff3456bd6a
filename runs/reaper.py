"""The reaper (`runs_reap`, on Celery beat every 30 s): nothing stays running forever.

Workers refresh `RunFile.heartbeat` while they copy, and `Run.heartbeat` while they run a one-task probe; the
reaper turns a running file whose heartbeat stopped into a failed try ("worker lost") and queues it again once,
ends a probe run whose heartbeat stopped (failed, "worker lost"), ends runs past their deadline, re-sends tasks
whose message was lost (a broker restarted without its data), and sees that ended runs' copies are kept or deleted
(runs.copies).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from measure.outcomes import FileOutcome
from results.choices import RecordState
from results.models import TransferRecord
from results.services import records_store

from . import dispatch, jobs
from .choices import FILE_ENDED, RUN_ENDED, FileState, RunState
from .copies import runs_copies_sweep
from .ends import run_end
from .engine import MAX_ATTEMPTS, file_record_new, file_requeue, files_record, run_top_up
from .kinds.registry import per_file, run_parameters
from .kinds.transfer import DEFAULT_TIMEOUT, TRANSFER, TransferParameters, transfer_parameters
from .limits import copy_task_limits, prepare_task_limits
from .models import Run, RunFile

logger = logging.getLogger(__name__)

HUNG_GRACE = 60.0  # seconds past its gfal2 timeout after which a copy still running is taken for hung


@dataclass
class ReapSummary:
    runs_failed: int = 0
    files_retried: int = 0
    files_failed: int = 0
    tasks_resent: int = 0
    records_stored: int = 0
    cleanups_sent: int = 0


def runs_reap(*, now: datetime | None = None, broker_lost: bool | None = None) -> ReapSummary:
    """End runs past their deadline (failed), retry once (else fail) files whose worker stopped beating ("worker
    lost"), re-send tasks whose message never reached a worker, so that nothing stays running forever. Messages
    are re-sent DISPATCH_RESEND_AFTER s after they were sent, or at once when the broker came back without its
    data (`broker_lost`; asked of the broker when not given)."""
    now = now or timezone.now()
    summary = ReapSummary()
    lost_after = timedelta(seconds=settings.DISPATCH_WORKER_LOST_AFTER)
    if broker_lost is None:
        broker_lost = dispatch.broker_lost_messages()
    resend_after = timedelta(0) if broker_lost else timedelta(seconds=settings.DISPATCH_RESEND_AFTER)
    agents_unheard = jobs.agents_unheard(now=now)  # agent hook: the portal was away, its agents unheard
    for run_id in Run.objects.filter(state__in=[RunState.QUEUED, RunState.RUNNING]).values_list("pk", flat=True):
        with transaction.atomic():
            run = (
                Run.objects.select_for_update().filter(pk=run_id, state__in=[RunState.QUEUED, RunState.RUNNING]).first()
            )
            if run is not None and not (agents_unheard and jobs.is_agent_queue(run_parameters(run).queue or "")):
                _run_reap(run, now=now, lost_after=lost_after, resend_after=resend_after, summary=summary)
    summary.files_failed += _ended_runs_lost_files(now=now, lost_after=lost_after)
    # Tries that ended but whose worker died before storing their record.
    unrecorded = RunFile.objects.filter(state__in=FILE_ENDED, recorded=False, end__lt=now - timedelta(seconds=30))
    summary.records_stored = files_record(list(unrecorded.values_list("pk", flat=True)))
    with transaction.atomic():
        summary.cleanups_sent = runs_copies_sweep(now=now, resend_all=broker_lost)
    if broker_lost and (summary.tasks_resent or summary.cleanups_sent):
        logger.warning(
            "the broker came back without its messages: %d tasks and %d clean-ups sent again",
            summary.tasks_resent,
            summary.cleanups_sent,
        )
    return summary


def _run_reap(run: Run, *, now: datetime, lost_after: timedelta, resend_after: timedelta, summary: ReapSummary) -> None:
    """With the active run's row locked: its deadline, a lost prepare message, a lost probe worker, or its files."""
    if run.deadline and run.deadline < now:
        message = f"deadline passed ({run.deadline.isoformat(timespec='seconds')}): ended by the reaper"
        end = run_end(
            run_id=run.pk, state=RunState.FAILED, message=message, files_error="the run's deadline passed", now=now
        )
        summary.runs_failed += end.ended
        return
    if run.state == RunState.QUEUED:
        if run.created_at < now - resend_after:
            queue = run_parameters(run).queue or dispatch.DEFAULT_QUEUE
            limits = prepare_task_limits(run.deadline, now=now)
            transaction.on_commit(lambda: dispatch.prepare_send(run.pk, queue, limits=limits))
            summary.tasks_resent += 1
        return
    if not per_file(run.kind):
        # A one-task probe: judged by its own heartbeat (and its deadline, above), never by files.
        last = run.heartbeat or run.started_at or run.created_at
        if last < now - lost_after:
            message = (
                f"worker lost: the worker running this {run.kind} probe stopped answering "
                f"(last heard at {last.isoformat(timespec='seconds')})"
            )
            summary.runs_failed += run_end(run_id=run.pk, state=RunState.FAILED, message=message, now=now).ended
        return
    _files_lost(run, now=now, lost_after=lost_after, summary=summary)
    unsent = RunFile.objects.filter(run=run, state=FileState.QUEUED, dispatched_at__lt=now - resend_after).exclude(
        task_id=""
    )
    limits = copy_task_limits(TRANSFER.parameters(run))
    for file in unsent:
        transaction.on_commit(
            lambda f=file: dispatch.file_send(f.pk, f.attempt, f.task_id, f.queue, limits=limits)  # type: ignore[misc]
        )
        summary.tasks_resent += 1
    unsent.update(dispatched_at=now)
    run_top_up(run)


def _files_lost(run: Run, *, now: datetime, lost_after: timedelta, summary: ReapSummary) -> None:
    """The running files of a run whose worker stopped beating: each try failed ("worker lost", or timed out when it
    ran past its timeout), with its record, and the file tried once more (or failed)."""
    lost = list(
        RunFile.objects.select_for_update(of=("self",))
        .select_related("run", "run__activity")
        .filter(run=run, state=FileState.RUNNING, heartbeat__lt=now - lost_after)
    )
    records = []
    for file in lost:
        again = file.attempt < MAX_ATTEMPTS
        message = _lost_message(file, now)
        records.append(lost_try_end(file, now=now, message=message, again=again))
        summary.files_retried += again
        summary.files_failed += not again
    if records:
        records_store(records=records)


def lost_try_end(
    file: RunFile, *, now: datetime, message: str, cancelled: bool = False, again: bool = False
) -> TransferRecord:
    """With the file row locked: end the try of a running file whose worker stopped answering, failed (or cancelled,
    in a cancelled run) with `message`, or queue the file once more (`again`). The file is marked recorded and the
    try's record, spanning its start to its last sign of life, is returned for the caller to store in the same
    transaction. The one end of a lost try, whether its run goes on or has ended."""
    record = file_record_new(
        file,
        FileOutcome(file.source_url, file.destination_url, 0, *_lost_span(file, now), False, message),
        RecordState.CANCELLED if cancelled else RecordState.FAILED,
        TRANSFER.parameters(file.run).concurrency or 1,
    )
    if again:
        file_requeue(file, message=message)
    else:
        file.state, file.end, file.error = FileState.CANCELLED if cancelled else FileState.FAILED, now, message
    file.recorded = True  # the lost try's record is the one returned here
    file.save(update_fields=["state", "task_id", "error", "end", "recorded", "destination_url"])
    return record


def copy_deadline_seconds(parameters: Mapping[str, Any] | TransferParameters) -> float:
    """How long a copy of a run with these parameters may run before it is taken for hung: its gfal2 timeout and a
    grace. Past it the worker stops the copy's heartbeat (gfal2 cannot always stop a hung XRootD copy) and the
    reaper ends the try."""
    return float(transfer_parameters(parameters).timeout or DEFAULT_TIMEOUT) + HUNG_GRACE


def _lost_span(file: RunFile, now: datetime) -> tuple[datetime, datetime]:
    """A lost try's [start, end): from its start to its last sign of life (its worker's last heartbeat), not to the
    reaper's visit, so that the minutes after its worker died do not count as the link's active time."""
    start = file.start or file.heartbeat or now
    return start, max(file.heartbeat or now, start)


def _lost_message(file: RunFile, now: datetime) -> str:
    parameters = TRANSFER.parameters(file.run)
    if file.start and (now - file.start).total_seconds() > copy_deadline_seconds(parameters):
        return (
            f"timed out: try {file.attempt} was still running {int((now - file.start).total_seconds())} s after it "
            f"started, past its {parameters.timeout or DEFAULT_TIMEOUT} s timeout (a hung copy)"
        )
    return f"worker lost: {file.worker or 'its worker'} stopped answering during try {file.attempt}"


def _ended_runs_lost_files(*, now: datetime, lost_after: timedelta) -> int:
    """Files still running in runs that have ended (cancelled, or failed at their deadline) whose worker stopped
    answering: their copies will never report, so they end here (cancelled or failed) with their record."""
    ended = 0
    stale = RunFile.objects.filter(
        state=FileState.RUNNING, heartbeat__lt=now - lost_after, run__state__in=RUN_ENDED
    ).values_list("pk", flat=True)
    for file_id in list(stale):
        with transaction.atomic():
            file = (
                RunFile.objects.select_for_update(of=("self",))
                .select_related("run", "run__activity")
                .filter(pk=file_id, state=FileState.RUNNING, heartbeat__lt=now - lost_after)
                .first()
            )
            if file is None:
                continue
            message = f"{_lost_message(file, now)}, after its run ended ({file.run.state})"
            cancelled = file.run.state == RunState.CANCELLED
            records_store(records=[lost_try_end(file, now=now, message=message, cancelled=cancelled)])
            ended += 1
    return ended
