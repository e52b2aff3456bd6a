"""The dispatch engine the Celery tasks call (runs.tasks stays thin).

A transfer run is a set of RunFile rows. The run keeps exactly C files in flight across all workers: whenever a
file ends (or a run starts, or the reaper frees a file), `run_top_up` locks the run row, counts the files in flight
(running, or queued with a task already sent) and sends one task per missing slot, each for the next queued file
taken with SELECT ... FOR UPDATE SKIP LOCKED. A task first claims its file (queued -> running, only when the
file still carries that task's id and attempt), so that a message delivered twice, or after the reaper gave its
file to another try, does nothing. Every try of every file ends as one results.TransferRecord (origin "probe",
origin_id run/file/attempt), stored with the file's new state in one transaction.

One-task runs (staging, network, cache, io) are begun and stored by runs.probes.runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Case, Count, DateTimeField, F, PositiveBigIntegerField, Q, Value, When
from django.db.models.expressions import RawSQL
from django.utils import timezone

from measure.outcomes import FileOutcome
from measure.transfer import DESTINATION_FULL, EXISTS, STALLED
from results.choices import RecordState
from results.models import TransferRecord
from results.services import probe_record_new, records_store
from sites.models import Experiment

from . import dispatch
from .choices import FILE_ENDED, RUN_ENDED, FileState, RunState
from .copies import run_copies_settle
from .ends import run_end
from .kinds.registry import run_parameters
from .kinds.transfer import TRANSFER
from .limits import copy_task_limits
from .models import Run, RunFile

MAX_ATTEMPTS = 2  # a file whose worker died (runs.reaper) or whose copy stalled is tried once more


def run_experiment_id(run: Run) -> int | None:
    """The experiment a run's records count for: its activity's, else the one an ad hoc run named."""
    if run.activity_id is not None:
        return run.activity.experiment_id  # type: ignore[union-attr]
    name = run_parameters(run).experiment
    return Experiment.objects.filter(name=name).values_list("pk", flat=True).first() if name else None


def file_record_new(file: RunFile, outcome: FileOutcome, state: str, concurrency: int | None) -> TransferRecord:
    """The transfer record of one try of one file of a transfer run."""
    run = file.run
    return probe_record_new(
        run_id=run.pk,
        activity_id=run.activity_id,
        experiment_id=run_experiment_id(run),
        outcome=outcome,
        state=state,
        concurrency=concurrency,
        origin_id=f"run{run.pk}-file{file.index}-try{file.attempt}",
        attempt=file.attempt,
    )


def run_top_up(run: Run) -> None:
    """With the run row locked: send tasks for the next queued files until C are in flight; end the run when
    every file has ended."""
    if run.state not in (RunState.QUEUED, RunState.RUNNING):
        return
    parameters = TRANSFER.parameters(run)
    concurrency = parameters.concurrency or 1
    files = RunFile.objects.filter(run=run)
    in_flight = files.filter(Q(state=FileState.RUNNING) | (Q(state=FileState.QUEUED) & ~Q(task_id=""))).count()
    free = concurrency - in_flight
    if free > 0:
        claimed = list(
            files.filter(state=FileState.QUEUED, task_id="")
            .order_by("index")
            .select_for_update(skip_locked=True)[:free]
        )
        now = timezone.now()
        for file in claimed:
            file.attempt += 1
            file.task_id = str(uuid.uuid4())
            file.dispatched_at = now
        RunFile.objects.bulk_update(claimed, ["attempt", "task_id", "dispatched_at"])
        limits = copy_task_limits(parameters)
        for file in claimed:
            transaction.on_commit(
                lambda f=file: dispatch.file_send(f.pk, f.attempt, f.task_id, f.queue, limits=limits)  # type: ignore[misc]
            )
        in_flight += len(claimed)
    if in_flight == 0 and not files.filter(Q(state=FileState.QUEUED) | Q(recorded=False, attempt__gt=0)).exists():
        _run_end(run)


def file_requeue(file: RunFile, *, message: str) -> None:
    """Give a file whose try failed through no fault of the link (its worker died, its copy stalled) one more try:
    queued again, to a name of its own (the first try's copy may live on at the destination server: a third-party
    copy is the server's), with the reason kept. The caller stores the failed try's record and saves the file."""
    file.state, file.task_id, file.error = FileState.QUEUED, "", message
    file.destination_url = f"{file.destination_url.split('.try')[0]}.try{file.attempt + 1}"
    file.recorded = True  # the failed try's record is stored by the caller


def run_outcome(*, total: int, ok: int) -> tuple[str, str]:
    """A run's end state and words from its files: finished (all ok), partly (some failed), failed (none ok)."""
    if total and ok == total:
        return RunState.FINISHED, f"finished: {ok} of {total} files ok"
    if total and ok == 0:
        return RunState.FAILED, f"failed: none of {total} files ok"
    if total:
        return RunState.PARTLY, f"finished with {total - ok} of {total} failed"
    return RunState.FINISHED, "finished"


def _run_end(run: Run) -> None:
    """With the run row locked and every file ended: end the run by its files (runs.ends, the one writer)."""
    counts = RunFile.objects.filter(run=run).aggregate(
        done=Count("id", filter=Q(state=FileState.DONE)), total=Count("id")
    )
    state, message = run_outcome(total=counts["total"], ok=counts["done"])
    if state == RunState.FAILED:
        error = (
            RunFile.objects.filter(run=run, state=FileState.FAILED).exclude(error="").values_list("error", flat=True)
        )
        if first := error.first():
            message += f" (e.g. {first[:300]})"
    run_end(run_id=run.pk, state=state, message=message)
    run.refresh_from_db()


def _run_stop(run: Run, *, message: str) -> None:
    """With the run row locked: end an active run as failed now (its queued files cancelled, copies in flight
    stopped by their workers, which watch the run's state)."""
    run_end(run_id=run.pk, state=RunState.FAILED, message=message)
    run.refresh_from_db()


def run_space_problem(run: Run, *, free_space: Callable[[str], int | None]) -> str:
    """Why the run cannot fit ("" when it can, or when no endpoint tells its free space): for each destination
    endpoint, the bytes its files will write against the free space it reports (the testbed's disk, or a
    storage's space token), the test file at the source included when it is not there yet."""
    needs: dict[str, int] = {}
    for destination, size in RunFile.objects.filter(run=run).values_list("destination_url", "size"):
        base = destination.split("/portal-runs/")[0]
        needs[base] = needs.get(base, 0) + size
    parameters = TRANSFER.parameters(run)
    source, size = parameters.source, parameters.file_size or 0
    if source and size:
        needs[source] = needs.get(source, 0) + size
    for base, need in needs.items():
        free = free_space(base)
        if free is not None and need > free:
            return (
                f"not enough space at {base}: this run writes {need / 1e9:.3g} GB there and {free / 1e9:.3g} GB are "
                "free; delete kept copies (manage.py runs_cleanup) or run fewer or smaller files"
            )
    return ""


def run_prepare(
    run_id: int,
    *,
    ensure_test_file: Callable[[str, int], str],
    free_space: Callable[[str], int | None] = lambda url: None,
    credential: Callable[[Run], Any] | None = None,
) -> None:
    """Start a transfer run: obtain its credentials (`credential`: its tokens, where the deployment uses them),
    check that it fits on its destinations, make sure its test file exists (once per endpoint and size), then send
    the first C tasks. A run without its tokens (the issuer's answer), that cannot fit, or whose test file cannot be
    made, fails with the reason, writing nothing."""
    run = Run.objects.get(pk=run_id)
    if run.state != RunState.QUEUED:
        return
    error = ""
    if credential is not None:
        try:
            credential(run)
        except Exception as exc:  # measure.tokens.TokenError: the issuer unreachable or refusing the client
            error = f"no token for the run's storage: {exc}"
    error = error or run_space_problem(run, free_space=free_space)
    parameters = TRANSFER.parameters(run)
    size = parameters.file_size or 0
    if not error and parameters.source and size:
        try:
            ensure_test_file(parameters.source, size)
        except Exception as exc:  # gfal2.GError and friends: the run fails with the reason
            error = f"could not create the test file at {parameters.source}: {getattr(exc, 'message', exc)}"
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.state != RunState.QUEUED:
            return
        run.started_at = timezone.now()
        run.save(update_fields=["started_at"])
        if error:
            _run_stop(run, message=error)
            return
        run.state = RunState.RUNNING
        run.save(update_fields=["state"])
        run_top_up(run)


def file_claim(file_id: int, attempt: int, task_id: str, worker: str) -> RunFile | None:
    """queued -> running for the task the file was sent with; None when this message is stale (a duplicate, a
    retry superseded it, or the run was cancelled). The try's name joins the names the run may have written (its
    clean-up deletes those, and nothing else)."""
    now = timezone.now()
    claimed = RunFile.objects.filter(
        pk=file_id, attempt=attempt, task_id=task_id, state=FileState.QUEUED, run__state=RunState.RUNNING
    ).update(
        state=FileState.RUNNING,
        worker=worker,
        heartbeat=now,
        start=now,
        end=None,
        error="",
        progress_bytes=0,
        progress_at=None,
        written=RawSQL(
            "CASE WHEN written @> jsonb_build_array(destination_url) THEN written "
            "ELSE written || jsonb_build_array(destination_url) END",
            [],
        ),
    )
    if not claimed:
        return None
    return RunFile.objects.select_related("run", "run__activity").get(pk=file_id)


def file_finish(file_id: int, attempt: int, task_id: str, outcome: FileOutcome) -> bool:
    """End a try: the file's new state and the next file's task first (a short transaction, so the next copy
    starts at once), then the try's record, stored once. False when the file was taken from this try meanwhile
    (the reaper declared its worker lost): then nothing is stored. A worker that dies between the two leaves an
    ended file with recorded=False, which the reaper records from the file's own fields."""
    run_id = RunFile.objects.filter(pk=file_id).values_list("run_id", flat=True).first()
    if run_id is None:
        return False
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        file = (
            RunFile.objects.select_for_update()
            .filter(pk=file_id, attempt=attempt, task_id=task_id, state=FileState.RUNNING)
            .first()
        )
        if file is None:
            return False
        if outcome.details.get("cause") == STALLED and file.attempt < MAX_ATTEMPTS and run.state not in RUN_ENDED:
            # A try stopped by its stall guard is a failed transfer (its record says so); the file gets another.
            concurrency = TRANSFER.parameters(run).concurrency or 1
            records_store(records=[file_record_new(file, outcome, RecordState.FAILED, concurrency)])
            file_requeue(file, message=outcome.error)
            file.save(update_fields=["state", "task_id", "error", "destination_url", "recorded"])
            run_top_up(run)
            return True
        if outcome.ok:
            file.state = FileState.DONE
        elif run.state in RUN_ENDED and outcome.details.get("cancelled"):
            file.state = FileState.CANCELLED
        else:
            file.state = FileState.FAILED
        if outcome.details.get("cause") == DESTINATION_FULL and run.state not in RUN_ENDED:
            # Every later file would fail the same way: stop the run now, not file after file.
            _run_stop(run, message=f"{outcome.error} (stopped at file {file.index}: the run cannot go on)")
        if outcome.details.get("cause") == EXISTS:
            # Refused before it wrote a byte: the file there is someone else's, and the clean-up must leave it.
            file.written = [url for url in file.written if url != file.destination_url]
        file.start, file.end = outcome.start, max(outcome.end, outcome.start)
        # A copy whose size could not be asked afterwards (details["after_copy"]) moved its planned size all the
        # same: gfal2 compared the checksums at both ends.
        file.bytes = (outcome.bytes or file.size) if outcome.ok else 0
        file.mode = outcome.mode[:16]
        file.error = outcome.error
        file.recorded = False
        file.save(update_fields=["state", "start", "end", "bytes", "mode", "error", "recorded", "written"])
        run_top_up(run)
    files_record([file_id])
    return True


RECORD_STATES = {FileState.DONE: RecordState.OK, FileState.FAILED: RecordState.FAILED}


def files_record(file_ids: Sequence[int]) -> int:
    """Store the record of each ended, not yet recorded file (its last try), then end its run when that was the
    last one. Only the file row is locked while storing, so that other files' dispatch never waits for it;
    storing twice is harmless anyway (records_store keeps one record per origin_id)."""
    stored = 0
    runs_touched: set[int] = set()
    for file_id in file_ids:
        with transaction.atomic():
            file = (
                RunFile.objects.select_for_update(of=("self",))
                .select_related("run", "run__activity")
                .filter(pk=file_id, state__in=FILE_ENDED, recorded=False)
                .first()
            )
            if file is None:
                continue
            outcome = FileOutcome(
                file.source_url,
                file.destination_url,
                file.bytes,
                file.start or file.end or timezone.now(),
                file.end or timezone.now(),
                file.state == FileState.DONE,
                error=file.error,
                mode=file.mode,
            )
            state = RECORD_STATES.get(FileState(file.state), RecordState.CANCELLED)
            concurrency = TRANSFER.parameters(file.run).concurrency or 1
            records_store(records=[file_record_new(file, outcome, state, concurrency)])
            file.recorded = True
            file.save(update_fields=["recorded"])
            stored += 1
            runs_touched.add(file.run_id)
    for run_id in runs_touched:
        unfinished = Q(state__in=[FileState.QUEUED, FileState.RUNNING]) | Q(recorded=False, attempt__gt=0)
        if not RunFile.objects.filter(unfinished, run_id=run_id).exists():
            with transaction.atomic():
                run = Run.objects.select_for_update().get(pk=run_id)
                run_top_up(run)
                run_copies_settle(run)  # an ended (cancelled, stopped) run whose last copy in flight just ended
    return stored


def file_heartbeat(file_ids: Sequence[int], *, progress: dict[int, tuple[int, datetime]] | None = None) -> None:
    """The worker copying these files is alive, in one UPDATE; `progress` (file id -> bytes copied so far and when
    gfal2 reported them) feeds the live rate."""
    if not file_ids:
        return
    updates: dict[str, Any] = {"heartbeat": timezone.now()}
    if progress:
        updates["progress_bytes"] = Case(
            *[When(pk=pk, then=Value(done)) for pk, (done, _) in progress.items()],
            default=F("progress_bytes"),
            output_field=PositiveBigIntegerField(),
        )
        updates["progress_at"] = Case(
            *[When(pk=pk, then=Value(at)) for pk, (_, at) in progress.items()],
            default=F("progress_at"),
            output_field=DateTimeField(),
        )
    RunFile.objects.filter(pk__in=file_ids, state=FileState.RUNNING).update(**updates)


def runs_stopped(run_ids: Sequence[int]) -> set[int]:
    """Those of run_ids that ended (cancelled, or failed by the reaper): their copies in flight must stop."""
    if not run_ids:
        return set()
    return set(Run.objects.filter(pk__in=run_ids, state__in=RUN_ENDED).values_list("pk", flat=True))
