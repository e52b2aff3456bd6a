"""A run's end, written in one place: `run_end` is the only writer of an ended state (finished, partly, failed,
cancelled) on a Run, whoever ends it: the engine when the last file has ended or the run cannot go on, a one-task
probe storing its outcome, the reaper (deadline, lost probe worker), a cancel (a person, the clock, a sweep), the
clock's run that could not start. tests/test_architecture.py checks that no other module writes one.

Under the run's row lock it ends an active run once: state, finished_at and message together, its files still
queued cancelled (they will never be sent), its copies kept or their deletion sent (runs.copies, after the commit),
and `runs.signals.run_ended` sent so that what follows a run's end (a sweep's next step) is enqueued after the
commit. Ending a run that has ended already changes nothing and says so (`RunEnd.ended` is False): two ends at
once, such as a cancel and the reaper's deadline, leave the first one's state and reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from .choices import RUN_ENDED, FileState
from .copies import run_copies_settle
from .models import Run, RunFile
from .signals import run_ended


@dataclass(frozen=True)
class RunEnd:
    """What run_end did: `ended` False when the run had ended already (then `run` is as that end left it)."""

    run: Run
    ended: bool


def run_end(*, run_id: int, state: str, message: str, files_error: str = "", now: datetime | None = None) -> RunEnd:
    """End the run `run_id` in `state` (one of RUN_ENDED) with `message`, its queued files cancelled with
    `files_error` (the message when not given), under its row lock; a no-op on a run that has ended already.
    Callers that hold the run's row keep their instance true with `run.refresh_from_db()`."""
    if state not in RUN_ENDED:
        raise ValueError(f"{state!r} is not an ended state of a run (one of {', '.join(RUN_ENDED)})")
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.state in RUN_ENDED:
            return RunEnd(run=run, ended=False)
        now = now or timezone.now()
        run.state, run.finished_at, run.message = state, now, message
        run.save(update_fields=["state", "finished_at", "message"])
        RunFile.objects.filter(run=run, state=FileState.QUEUED).update(
            state=FileState.CANCELLED, end=now, error=files_error or message, recorded=True
        )
        run_copies_settle(run)  # at once when nothing is in flight; else when the last copy in flight ends
        run_ended.send(sender=Run, run=run)
    return RunEnd(run=run, ended=True)
