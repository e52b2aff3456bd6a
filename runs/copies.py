"""What a transfer run leaves on its destinations: nothing, unless it was asked to keep its copies.

When a transfer run has ended (finished, partly, failed, cancelled, reaped) and none of its files is still being
copied, `run_copies_settle` marks its copies kept (parameter keep_copies; tape writes keep theirs by default, the
recalls read them) or sends the clean-up task to the run's queue, so that the copies are deleted by a worker, with
gfal2, where the copies were made. The reaper calls it too, for runs whose end it did not see (a worker died), and
sends the task again when a clean-up never reported. Kept copies are listed by `manage.py runs_cleanup` and deleted
on request (that command, the run page's button, or the API).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet, Sum
from django.utils import timezone

from . import dispatch
from .choices import RUN_ENDED, CopiesState, FileState
from .kinds.registry import run_parameters
from .models import Run, RunFile
from .signals import run_copies_settled

RESEND_CLEANUP_AFTER = timedelta(minutes=10)


def run_copies_settle(run: Run) -> None:
    """With the run row locked and the run ended: keep or start deleting its copies once no copy is in flight
    (a third-party copy still running would write after the delete)."""
    if run.state not in RUN_ENDED or run.copies != CopiesState.PRESENT:
        return
    if RunFile.objects.filter(run=run, state=FileState.RUNNING).exists():
        return  # the last file to end settles it (runs.engine.files_record), or the reaper
    if run_parameters(run).keeps_copies:
        run.copies = CopiesState.KEPT
        run.copies_message = "kept (keep_copies): delete them with the run page's button or manage.py runs_cleanup"
    else:
        run.copies = CopiesState.DELETING
        run.copies_message = ""
        queue = run_parameters(run).queue or dispatch.DEFAULT_QUEUE
        transaction.on_commit(lambda: dispatch.copies_delete_send(run.pk, queue))
    run.save(update_fields=["copies", "copies_message"])
    if run.copies == CopiesState.KEPT:
        run_copies_settled.send(sender=Run, run=run)


def run_copies_delete(run: Run, *, user: Any, system: bool = False) -> Run:
    """Delete the copies of an ended run that kept them (or whose clean-up failed): coordinators only."""
    if not system and not Run.objects.restrict(user, "cancel").filter(pk=run.pk).exists():
        raise PermissionDenied("Only coordinators delete a run's copies.")
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.state not in RUN_ENDED:
            raise ValidationError({"copies": ["the run has not ended: its copies are deleted when it ends"]})
        if locked.copies not in (CopiesState.KEPT, CopiesState.FAILED, CopiesState.DELETING):
            raise ValidationError(
                {"copies": [f"nothing to delete: the run's copies are {locked.get_copies_display()}"]}
            )
        locked.copies, locked.copies_message = CopiesState.DELETING, ""
        locked.save(update_fields=["copies", "copies_message"])
        queue = run_parameters(locked).queue or dispatch.DEFAULT_QUEUE
        transaction.on_commit(lambda: dispatch.copies_delete_send(locked.pk, queue))
    return locked


@dataclass
class CopiesToDelete:
    """Every name a run's tries may have written (`RunFile.written`: a retried file writes `<name>.tryN`; a name
    refused because a file was already there is not among them) and the run's directories."""

    urls: list[str] = field(default_factory=list)
    directories: list[str] = field(default_factory=list)


def run_copies_to_delete(run_id: int) -> CopiesToDelete:
    """The names the run's tries may have written, and their directories (removed only when empty)."""
    found = CopiesToDelete()
    directories: set[str] = set()
    for written in RunFile.objects.filter(run_id=run_id, attempt__gt=0).values_list("written", flat=True):
        for url in written:
            found.urls.append(url)
            directories.add(url.rsplit("/", 1)[0])
    found.directories = sorted(directories)
    return found


def run_copies_deleted(run_id: int, *, deleted: int, errors: list[str]) -> None:
    """What the clean-up task did: all gone, or which could not be deleted (the first few errors)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if errors:
            run.copies = CopiesState.FAILED
            shown = "; ".join(errors[:3])
            run.copies_message = f"{len(errors)} could not be deleted ({deleted} deleted): {shown}"
        else:
            run.copies = CopiesState.DELETED
            run.copies_message = f"{deleted} deleted at {timezone.now().isoformat(timespec='seconds')}"
        run.save(update_fields=["copies", "copies_message"])
        run_copies_settled.send(sender=Run, run=run)


def runs_copies_sweep(*, now: datetime, resend_all: bool = False) -> int:
    """The reaper's part: settle ended runs whose end nobody settled, re-send clean-ups that never reported (after
    RESEND_CLEANUP_AFTER, or all of them when the broker lost its messages: `resend_all`)."""
    sent = 0
    pending = list(Run.objects.filter(state__in=RUN_ENDED, copies=CopiesState.PRESENT).values_list("pk", flat=True))
    for run_id in pending:
        with transaction.atomic():
            run = Run.objects.select_for_update().get(pk=run_id)
            run_copies_settle(run)
            sent += run.copies == CopiesState.DELETING
    stale = Run.objects.filter(copies=CopiesState.DELETING).exclude(pk__in=pending)
    if not resend_all:
        stale = stale.filter(finished_at__lt=now - RESEND_CLEANUP_AFTER)
    for run in stale:
        queue = run_parameters(run).queue or dispatch.DEFAULT_QUEUE
        transaction.on_commit(lambda r=run.pk, q=queue: dispatch.copies_delete_send(r, q))  # type: ignore[misc]
        sent += 1
    return sent


def runs_with_copies() -> QuerySet[Run]:
    """Runs whose copies are still on the destinations after they ended (kept, or a clean-up that failed), with the
    bytes their successful copies hold."""
    return (
        Run.objects.filter(copies__in=[CopiesState.KEPT, CopiesState.FAILED, CopiesState.DELETING])
        .annotate(copies_bytes=Sum("files__bytes"))
        .select_related("activity")
        .order_by("finished_at", "pk")
    )
