"""Writes of sweeps: start, cancel, and the advance from one step to the next.

Sweeps that share a site run one after the other, in the order they were made: a later one stays queued, saying
which sweep it waits for, until that one has ended.

A sweep runs its steps one at a time, each as an ordinary run (runs.services.run_start) on its source site's
queue. When a step's run has ended and its copies are gone (or kept), `sweep_advance` starts the next step; it is
sent when a step's run ends or its copies are kept or deleted (runs.signals, received in sweeps.signals) and by
Celery beat every SWEEPS_ADVANCE_EVERY seconds, so that a sweep resumes by itself after a worker restart or a lost
message. The advance holds the sweep's row lock: two advances at once start one step.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import current_app
from celery.exceptions import SoftTimeLimitExceeded
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from challenges.models import Activity
from common.problems import problems_raise
from runs.choices import RUN_ENDED, CopiesState
from runs.kinds.registry import run_parameters
from runs.models import Run
from runs.services import run_cancel, run_start
from sites.roles import user_may

from .choices import SWEEP_ENDED, SWEEP_UNDER_WAY, StepState, SweepState
from .models import Sweep, SweepStep
from .plan import sweep_plan, sweep_space_problems

logger = logging.getLogger(__name__)

ADVANCE_TASK = "sweeps.sweep_advance"
# A step whose run ended waits for its copies to be deleted (so that the next step has the disk); a clean-up that
# never reports does not hold the sweep longer than this.
COPIES_WAIT = timedelta(minutes=10)


def free_space(url: str) -> int | None:
    """Bytes free where url writes, as the workers' probe context tells (settings.PROBE_CONTEXT)."""
    from runs.tasks import probe_context

    return probe_context().free_space(url)


def sweep_start(*, user: Any, data: dict[str, Any], activity: Activity | None = None) -> Sweep:
    """Check the sweep (ValidationError by field, the disk check included: nothing is created), create it and its
    steps, and send its first advance once the transaction commits. Coordinators only."""
    allowed = user_may(user=user, action="start")
    if activity is not None:
        allowed = Activity.objects.restrict(user, "start").filter(pk=activity.pk).exists()
    if not allowed:
        raise PermissionDenied("Only coordinators start sweeps.")
    plan = sweep_plan(data, activity=activity)
    problems_raise(sweep_space_problems(plan, free_space))
    with transaction.atomic():
        sweep = Sweep.objects.create(
            name=plan.name,
            activity=activity,
            parameters=plan.parameters,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        SweepStep.objects.bulk_create(
            [
                SweepStep(
                    sweep=sweep,
                    index=index,
                    kind=step.kind,
                    source=step.source,
                    destination=step.destination,
                    mode=step.mode,
                    concurrency=step.concurrency,
                )
                for index, step in enumerate(plan.steps)
            ]
        )
        sweep.parameters["steps"] = [step.parameters for step in plan.steps]
        sweep.save(update_fields=["parameters"])
        transaction.on_commit(lambda: advance_send(sweep.pk))
    return sweep


def advance_send(sweep_id: int) -> None:
    current_app.send_task(ADVANCE_TASK, args=(sweep_id,))


def sweep_cancel(sweep: Sweep, *, user: Any) -> Sweep:
    """Cancel a sweep: its pending steps are cancelled and the run of its current step is cancelled (its copies
    deleted like every run's). Coordinators only; an ended sweep cannot be cancelled."""
    if not Sweep.objects.restrict(user, "cancel").filter(pk=sweep.pk).exists():
        raise PermissionDenied("Only coordinators cancel sweeps.")
    with transaction.atomic():
        locked = Sweep.objects.select_for_update().get(pk=sweep.pk)
        if locked.state in SWEEP_ENDED:
            raise ValidationError({"state": [f"the sweep has already ended ({locked.state})"]})
        now = timezone.now()
        locked.state, locked.finished_at = SweepState.CANCELLED, now
        locked.message = f"cancelled by {getattr(user, 'username', '') or 'a coordinator'}"
        locked.save(update_fields=["state", "finished_at", "message"])
        locked.steps.filter(state=StepState.PENDING).update(state=StepState.CANCELLED, finished_at=now)
        current = locked.steps.filter(state=StepState.RUNNING).select_related("run").first()
        if current is not None and current.run is not None:
            try:
                with transaction.atomic():  # the run may have ended since it was read: nothing to cancel then
                    run_cancel(current.run, user=user, message=f"its sweep was {locked.message}", system=True)
            except ValidationError:
                pass
        # The current step stays running until its run has ended and its copies are gone (sweep_advance ends it):
        # until then a later sweep that shares a site waits, as it would for a sweep under way.
        if current is None:
            _wake_later(locked)
        else:
            transaction.on_commit(lambda: advance_send(locked.pk))
    return locked


def _step_over(step: SweepStep, now: Any) -> bool:
    """The step's run has ended and its copies are gone or kept (or their clean-up is overdue)."""
    run = step.run
    if run is None:
        return True  # its run was deleted
    if run.state not in RUN_ENDED:
        return False
    if run.copies in (CopiesState.PRESENT, CopiesState.DELETING):
        return run.finished_at is not None and now - run.finished_at > COPIES_WAIT
    return True


def _step_start(sweep: Sweep, step: SweepStep) -> Run:
    """The step's run, from its source site's worker (ValidationError when the run is refused)."""
    parameters = dict(sweep.parameters["steps"][step.index])
    activity = sweep.activity
    same_kind = activity is not None and activity.kind == step.kind
    with transaction.atomic():  # a refused run leaves nothing, and the sweep goes on
        run = run_start(
            user=sweep.created_by,
            activity=activity if same_kind else None,
            kind=step.kind,
            parameters=parameters,
            trigger="sweep",
            site=step.source,
        )
        if activity is not None and not same_kind:
            # A transfer activity's sweep measures its links' network too: those runs are its runs as well.
            Run.objects.filter(pk=run.pk).update(activity=activity)
    return run


def sweep_advance(sweep_id: int) -> None:
    """Start the sweep's next step when its current one is over; end the sweep after its last step."""
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update(of=("self",)).filter(pk=sweep_id).select_related("activity").first()
        if sweep is None:
            return
        now = timezone.now()
        if sweep.state in SWEEP_ENDED:
            _cancelled_step_end(sweep, now)
            return
        if sweep.state == SweepState.QUEUED and _waits(sweep):
            return
        current = sweep.steps.filter(state=StepState.RUNNING).select_related("run").first()
        if current is not None:
            if not _step_over(current, now):
                return
            current.state = StepState.ENDED
            current.finished_at = (current.run.finished_at if current.run else None) or now
            current.save(update_fields=["state", "finished_at"])
        for step in sweep.steps.filter(state=StepState.PENDING).select_related("source").order_by("index"):
            try:
                run = _step_start(sweep, step)
            except ValidationError as exc:
                step.state, step.finished_at = StepState.NOT_STARTED, now
                step.message = "; ".join(exc.messages)[:2000]
                step.save(update_fields=["state", "finished_at", "message"])
                continue
            step.run, step.state, step.started_at = run, StepState.RUNNING, now
            step.queue = run_parameters(run).queue
            step.save(update_fields=["run", "state", "started_at", "queue"])
            if sweep.state == SweepState.QUEUED:
                sweep.state, sweep.started_at, sweep.message = SweepState.RUNNING, now, ""
                sweep.save(update_fields=["state", "started_at", "message"])
            return
        _sweep_end(sweep, now)


def _cancelled_step_end(sweep: Sweep, now: Any) -> None:
    """An ended (cancelled) sweep's step still running: ended once its run has ended and its copies are gone, and
    then the sweeps that wait for this one's sites are woken."""
    current = sweep.steps.filter(state=StepState.RUNNING).select_related("run").first()
    if current is None or not _step_over(current, now):
        return
    current.state = StepState.ENDED
    current.finished_at = (current.run.finished_at if current.run else None) or now
    current.save(update_fields=["state", "finished_at"])
    _wake_later(sweep)


def _waits(sweep: Sweep) -> bool:
    """Whether an earlier sweep under way measures one of this sweep's sites (sweeps sharing a site run one after
    the other, in the order they were made, so that they do not disturb each other); says so in its message."""
    sites = {site for pair in sweep.steps.values_list("source_id", "destination_id") for site in pair}
    earlier = (
        # an earlier sweep under way, or cancelled with its last step's run still ending
        SweepStep.objects.filter(Q(sweep__state__in=SWEEP_UNDER_WAY) | Q(sweep__steps__state=StepState.RUNNING))
        .filter(sweep_id__lt=sweep.pk)
        .filter(Q(source_id__in=sites) | Q(destination_id__in=sites))
        .values_list("sweep_id", "sweep__name")
        .order_by("sweep_id")
        .first()
    )
    if earlier is None:
        return False
    message = f"waits for sweep {earlier[0]} ({earlier[1]}), which measures some of the same sites"
    if sweep.message != message:
        sweep.message = message
        sweep.save(update_fields=["message"])
    return True


def _wake_later(sweep: Sweep) -> None:
    """The sweeps made after this one that may wait for it: their advance, once this one's end is committed."""
    waiting = Sweep.objects.filter(state=SweepState.QUEUED, pk__gt=sweep.pk).order_by("pk")
    for later in waiting.values_list("pk", flat=True):
        transaction.on_commit(lambda later=later: advance_send(later))


def _sweep_end(sweep: Sweep, now: Any) -> None:
    steps = list(sweep.steps.values_list("state", "message"))
    refused = [message for state, message in steps if state == StepState.NOT_STARTED]
    ran = len(steps) - len(refused)
    sweep.started_at = sweep.started_at or now
    sweep.finished_at = now
    if steps and not ran:
        sweep.state = SweepState.FAILED
        sweep.message = f"no step could start: {refused[0]}"
    else:
        sweep.state = SweepState.FINISHED
        sweep.message = f"{ran} of {len(steps)} steps ran" + (
            f"; {len(refused)} could not start (first: {refused[0]})" if refused else ""
        )
    sweep.save(update_fields=["state", "started_at", "finished_at", "message"])
    _wake_later(sweep)


def sweeps_advance() -> int:
    """Beat: advance every sweep under way, and every cancelled one whose last step's run is still ending (a lost
    message or a restarted worker does not stall it; one sweep's error does not stall the others)."""
    moving = Q(state__in=SWEEP_UNDER_WAY) | Q(steps__state=StepState.RUNNING)
    ids = list(Sweep.objects.filter(moving).distinct().order_by("pk").values_list("pk", flat=True))
    for sweep_id in ids:
        try:
            sweep_advance(sweep_id)
        except SoftTimeLimitExceeded:  # out of time: the next beat goes on with the sweeps after this one
            raise
        except Exception:  # the broker or the database away a moment: the next beat tries again
            logger.exception("sweep %s could not advance", sweep_id)
    return len(ids)
