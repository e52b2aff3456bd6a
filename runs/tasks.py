"""Celery tasks of runs: thin wrappers that load ids and call the engine (runs.engine) and the probes.

Start a worker for a site with `celery -A portal worker -Q site.<SITE NAME> --pool threads --concurrency N`
(N at least the concurrency of the runs it serves, plus a few); a worker on `-Q default` serves every site
without a worker of its own. The probes get their gfal2 contexts (CA, tokens, options) from the probe context that
settings.PROBE_CONTEXT names, never from the testbed itself.
"""

from __future__ import annotations

import functools
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils.module_loading import import_string

from common.locks import advisory_lock
from measure.context import ProbeContext
from measure.outcomes import FileOutcome, utcnow

from . import clock, engine, reaper
from .copies import run_copies_deleted, run_copies_to_delete
from .credentials import (
    Grants,
    copy_grants,
    delete_grants,
    run_credential_check,
    test_file_grants,
    token_source_from_settings,
)
from .dispatch import COPIES_DELETE_TASK, PREPARE_TASK, TRANSFER_TASK
from .kinds.base import ProbeResult
from .kinds.registry import kind_for, kinds
from .kinds.transfer import TRANSFER
from .limits import (
    COPIES_DELETE_LIMIT,
    COPIES_DELETE_SOFT_LIMIT,
    RUN_TASK_LIMIT,
    RUN_TASK_SOFT_LIMIT,
    TICK_LIMIT,
    TICK_SOFT_LIMIT,
)
from .models import Run
from .probes.runs import run_probe_begin, run_probe_store
from .watcher import watcher

logger = logging.getLogger(__name__)


def probe_context() -> ProbeContext:
    """The deployment's probe context (settings.PROBE_CONTEXT, a dotted path to a ProbeContext class), made anew
    each time so that it follows the settings, with the token source settings.TOKEN_SOURCE names (its tokens are
    cached by the process, not by the context)."""
    context_class = import_string(settings.PROBE_CONTEXT)
    context: ProbeContext = context_class()
    if (source := token_source_from_settings()) is not None:
        context.token_source = source
    return context


def gfal2_context(grants: Grants | None = None) -> Any:
    """A fresh gfal2 context as the probe context makes it (cheap: about 1 ms), each URL of `grants` with its own
    token when the deployment uses tokens."""
    return probe_context().gfal2_context(grants or [])


def _worker_name(task: Any) -> str:
    return str(getattr(task.request, "hostname", "") or socket.gethostname())


# A run's tasks carry limits of their own, from the run's timeouts (runs.limits); these are for a message without.
@shared_task(
    bind=True,
    name=PREPARE_TASK,
    ignore_result=True,
    acks_late=True,
    soft_time_limit=RUN_TASK_SOFT_LIMIT,
    time_limit=RUN_TASK_LIMIT,
)
def run_prepare(self: Any, run_id: int) -> None:
    """First task of a run: a transfer run gets its test file and its first C file tasks; the other kinds run
    their probe here."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        return
    kind = kind_for(run.kind)
    if kind is not None and kind.per_file:
        from measure.testfiles import test_file

        checksum = TRANSFER.parameters(run).checksum or "ADLER32"

        def ensure_test_file(base: str, size: int) -> str:
            # One maker of a test file at a time, on every worker: the others wait, then find it made.
            with advisory_lock(f"testfile {base} {size}"):
                return test_file(gfal2_context(test_file_grants(base)), base, size, checksum=checksum)

        context = probe_context()
        engine.run_prepare(
            run_id,
            ensure_test_file=ensure_test_file,
            free_space=context.free_space,
            credential=functools.partial(run_credential_check, context=context),
        )
    else:
        run_probe(run_id)


@shared_task(
    bind=True,
    name=TRANSFER_TASK,
    ignore_result=True,
    acks_late=True,
    soft_time_limit=RUN_TASK_SOFT_LIMIT,
    time_limit=RUN_TASK_LIMIT,
)
def transfer_file_task(self: Any, file_id: int, attempt: int) -> None:
    """Copy one file of a transfer run (try `attempt`), store its record, send the run's next file."""
    from measure.stall import peers as stall_peers
    from measure.transfer import transfer_file

    received, received_at = time.monotonic(), time.time()
    file = engine.file_claim(file_id, attempt, self.request.id, _worker_name(self))
    logger.debug("file %s try %s: claimed in %.3f s", file_id, attempt, time.monotonic() - received)
    if file is None:
        logger.info("file %s try %s: stale message, dropped", file_id, attempt)
        return
    parameters = TRANSFER.parameters(file.run)
    cancelled = threading.Event()
    try:
        ctx = gfal2_context(copy_grants(file.source_url, file.destination_url))
    except Exception as exc:  # no token (the issuer went away mid-run): the file fails with the issuer's answer
        now = utcnow()
        outcome = FileOutcome(file.source_url, file.destination_url, 0, file.start or now, now, False, str(exc))
        engine.file_finish(file_id, attempt, self.request.id, outcome)
        return
    watcher.add(file.pk, file.run_id, ctx, cancelled, hung_after=reaper.copy_deadline_seconds(parameters))
    try:
        try:
            outcome = transfer_file(
                ctx,
                file.source_url,
                file.destination_url,
                **parameters.copy_options(),
                cancel=cancelled,
                progress=functools.partial(watcher.report, file.pk),
                peers=stall_peers,
                # A copy finished on a look at its destination leaves its call to gfal2, which deletes the destination
                # when that call expires (measured: 30 min later, XrdCl's request timeout): not for copies a run keeps.
                size=0 if parameters.keeps_copies else file.size,
            )
        except SoftTimeLimitExceeded:  # a copy gfal2 did not stop: the try fails (a stale finish is dropped)
            now = utcnow()
            error = "timed out: the copy did not stop at its timeout, and its task's soft time limit passed"
            outcome = FileOutcome(file.source_url, file.destination_url, 0, file.start or now, now, False, error)
        except Exception as exc:  # a bug or an odd URL must still end the file, with the reason
            now = utcnow()
            outcome = FileOutcome(file.source_url, file.destination_url, 0, file.start or now, now, False, str(exc))
    finally:
        watcher.remove(file.pk)
    if "arrived" in outcome.details:  # a storage that holds a finished copy's call: worth an operator's look
        logger.warning(
            "file %s try %s: all its bytes arrived and gfal2's copy call had not returned %s s later: %s",
            file_id,
            attempt,
            outcome.details["arrived"]["grace"],
            outcome.details["arrived"],
        )
    finishing = time.monotonic()
    engine.file_finish(file_id, attempt, self.request.id, outcome)
    # Where a slow copy's time went (bench/probes.py reads these lines): the task received (epoch s), then seconds
    # from there to the copy's start, gfal2's phases from the copy's start, and the record stored.
    timeline = {
        "received": round(received_at, 3),
        "started": round(outcome.start.timestamp() - received_at, 3),
        **outcome.details.get("phases", {}),
        "recorded": round(time.monotonic() - received, 3),
        "finish": round(time.monotonic() - finishing, 3),
    }
    logger.info("file %s try %s: timeline %s", file_id, attempt, json.dumps(timeline))


def run_probe(run_id: int) -> None:
    """Run a one-task probe (staging, network, cache, io: its kind's, PROBES); its files become records, its
    summary the run's. Its tokens (where the deployment uses them) are obtained first: an issuer that cannot give
    them fails it."""
    run = run_probe_begin(run_id)
    if run is None:
        return
    outcomes: list[FileOutcome] = []
    summary: dict[str, Any] = {}
    error = ""
    cancelled = threading.Event()  # set by the watcher when the run ends (cancelled, reaped) under the probe
    watcher.add_probe(run_id, cancelled)
    try:
        context = probe_context()
        run_credential_check(run, context)
        probe = PROBES.get(run.kind) or _probe_of(run.kind)
        if probe is None:
            error = f"no probe for runs of kind {run.kind}"
        else:
            outcomes, summary, error = probe(run, context, cancelled)
    except Exception as exc:  # the probe's own failure ends the run with its reason
        logger.exception("run %s", run_id)
        error = f"{run.kind} probe failed: {getattr(exc, 'message', '') or exc}"
    finally:
        watcher.remove_probe(run_id)
    run_probe_store(run_id, outcomes, summary, error)


# The probe of each one-task kind (runs.kinds: its `run_probe`, which calls its measure/ code).
PROBES: dict[str, Callable[[Run, ProbeContext, threading.Event], ProbeResult]] = {
    served: kind.run_probe for kind in kinds() if not kind.per_file for served in kind.serves
}


def _probe_of(activity_kind: str) -> Callable[[Run, ProbeContext, threading.Event], ProbeResult] | None:
    """The probe of a one-task kind registered after this module was imported (runs.kinds.registry)."""
    kind = kind_for(activity_kind)
    return kind.run_probe if kind is not None and not kind.per_file else None


@shared_task(
    name=COPIES_DELETE_TASK,
    ignore_result=True,
    acks_late=True,
    soft_time_limit=COPIES_DELETE_SOFT_LIMIT,
    time_limit=COPIES_DELETE_LIMIT,
)
def run_copies_delete(run_id: int) -> None:
    """Delete an ended run's destination copies with gfal2 (idempotent: a second pass finds them gone)."""
    from measure.cleanup import copies_delete

    wanted = run_copies_to_delete(run_id)
    try:
        ctx = gfal2_context(delete_grants(wanted.urls, wanted.directories))
    except Exception as exc:  # no token to delete with: the copies stay, and the run says why
        run_copies_deleted(run_id, deleted=0, errors=[f"no credential to delete with: {exc}"])
        return
    try:
        result = copies_delete(ctx, wanted.urls, wanted.directories)
    except SoftTimeLimitExceeded:  # the run says so; the run page's button deletes the rest (deleting is idempotent)
        error = f"the clean-up did not finish within {COPIES_DELETE_SOFT_LIMIT} s"
        run_copies_deleted(run_id, deleted=0, errors=[error])
        return
    run_copies_deleted(run_id, deleted=result.deleted, errors=result.errors)


@shared_task(name="runs.runs_reap", ignore_result=True, soft_time_limit=TICK_SOFT_LIMIT, time_limit=TICK_LIMIT)
def runs_reap() -> dict[str, int]:
    """Beat: end runs past their deadline, retry or fail files whose worker was lost, re-send lost messages."""
    summary = reaper.runs_reap()
    return summary.__dict__


@shared_task(
    name="runs.activities_auto_run", ignore_result=True, soft_time_limit=TICK_SOFT_LIMIT, time_limit=TICK_LIMIT
)
def activities_auto_run() -> list[int]:
    """Beat: start the runs of auto-run activities whose window opened; cancel those whose window closed."""
    return [run.pk for run in clock.activities_auto_run()]
