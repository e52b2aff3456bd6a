"""Writes of runs that people (and the clock) ask for: start and cancel. Starting checks the parameters
(runs.parameters), creates the run and its files in one transaction and sends the first task after the commit."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from challenges.models import Activity
from sites.models import Site
from sites.roles import user_may

from . import dispatch
from .choices import CopiesState, RunState
from .ends import run_end
from .kinds.registry import runnable_kinds
from .limits import prepare_task_limits
from .models import Run, RunFile
from .parameters import run_plan


def _may_start(*, user: Any, activity: Activity | None) -> bool:
    """The access policy's "start": of an activity the user reads, or an ad hoc run (of no activity)."""
    if activity is None:
        return user_may(user=user, action="start")
    return bool(Activity.objects.restrict(user, "start").filter(pk=activity.pk).exists())


def run_start(
    *,
    user: Any,
    activity: Activity | None = None,
    kind: str | None = None,
    parameters: dict[str, Any] | None = None,
    trigger: str = "user",
    site: Site | None = None,
) -> Run:
    """Start a run of an activity (its parameters the defaults of `parameters`) or an ad hoc run of `kind`.

    Coordinators only (PermissionDenied); ValidationError with per-field messages for bad parameters or an
    endpoint of a scheme the workers cannot speak, and then nothing is created. The tasks are sent once the
    transaction commits. `trigger="schedule"` is the clock's own start (no user), `trigger="sweep"` a sweep's step
    (its coordinator was checked when the sweep was made). `site`: the site whose worker runs the probe's client
    (a sweep's link is measured from its source), instead of the plan's."""
    if trigger not in ("schedule", "sweep") and not _may_start(user=user, activity=activity):
        raise PermissionDenied("Only coordinators start runs.")
    if activity is None and not kind:
        raise ValidationError({"kind": ["give an activity to run, or the kind of an ad hoc run"]})
    kind = kind or (activity.kind if activity else "")
    if activity is not None and kind != activity.kind:
        raise ValidationError({"kind": [f"the activity is a {activity.kind} activity, not {kind}"]})
    if kind not in runnable_kinds():
        raise ValidationError(
            {"kind": [f"runs of kind {kind!r} are not supported (known: {', '.join(runnable_kinds())})"]}
        )
    given = dict(parameters or {})
    plan = run_plan(kind, activity, given)
    plan.site = site or plan.site
    queue = dispatch.queue_for_site(plan.site)
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.create(
            activity=activity,
            kind=kind,
            parameters={
                **plan.parameters,
                "queue": queue,
                "site": plan.site.name if plan.site else None,
                "experiment": plan.experiment.name if plan.experiment else None,
                "trigger": trigger,
            },
            created_by=user if getattr(user, "is_authenticated", False) else None,
            copies=CopiesState.PRESENT if plan.files else CopiesState.NONE,
            deadline=now + timedelta(seconds=plan.deadline_seconds),
        )
        if plan.files:
            run.directory = run_directory_new(run.pk)
            run.save(update_fields=["directory"])
            RunFile.objects.bulk_create(
                [
                    RunFile(
                        run=run,
                        index=index,
                        source_url=source,
                        destination_url=destination.replace("{run}", run.directory),
                        size=size,
                        queue=queue,
                    )
                    for index, (source, destination, size) in enumerate(plan.files)
                ]
            )
        limits = prepare_task_limits(run.deadline, now=now)
        transaction.on_commit(lambda: dispatch.prepare_send(run.pk, queue, limits=limits))
    return run


def run_directory_new(run_id: int) -> str:
    """`run-ID-RANDOM`: the directory of a run's copies. The id alone is not enough: every database numbers its runs
    from 1, and so does a database restored from a backup after the runs it lost; with the same storage behind two
    of them, one would overwrite and then delete the other's copies."""
    return f"run-{run_id}-{secrets.token_hex(6)}"


def run_cancel(run: Run, *, user: Any, message: str = "", system: bool = False) -> Run:
    """Cancel a run: its queued files are cancelled at once, copies in flight are aborted by their workers (which
    watch the run's state) and end as cancelled. Coordinators only; an ended run cannot be cancelled."""
    if not system and not Run.objects.restrict(user, "cancel").filter(pk=run.pk).exists():
        raise PermissionDenied("Only coordinators cancel runs.")
    who = getattr(user, "username", "") if user is not None else ""
    message = message or (f"cancelled by {who}" if who else "cancelled")
    end = run_end(run_id=run.pk, state=RunState.CANCELLED, message=message, files_error="cancelled before it started")
    if not end.ended:
        raise ValidationError({"state": [f"the run has already ended ({end.run.state})"]})
    return end.run
