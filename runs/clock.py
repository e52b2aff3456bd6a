"""The clock's runs (`activities_auto_run`, on Celery beat): an auto-run activity gets a run when its window
opens (and, with auto_run_repeat, the next one whenever the last finished: a steady load), and its scheduled run is
cancelled when the window closes."""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from challenges.models import Activity

from .choices import RunState
from .ends import run_end
from .models import Run
from .services import run_cancel, run_start

logger = logging.getLogger(__name__)


def _due(activity: Activity) -> bool:
    """Whether the clock starts a run of this open auto-run activity now: once per window; with auto_run_repeat,
    again whenever its last scheduled run finished (finished or partly), never after one that failed or was
    cancelled (a refused start is kept as a failed run: repeating it every 30 s would only repeat the refusal)."""
    scheduled = activity.runs.filter(parameters__trigger="schedule", created_at__gte=activity.start)
    if not activity.auto_run_repeat:
        return not scheduled.exists()
    last = scheduled.order_by("-created_at", "-pk").values_list("state", flat=True).first()
    return last is None or last in (RunState.FINISHED, RunState.PARTLY)


def activities_auto_run(*, now: datetime | None = None) -> list[Run]:
    """The clock: start a run of every auto-run activity whose window is open and that has no scheduled run yet;
    cancel the scheduled runs of activities whose window has closed."""
    now = now or timezone.now()
    started: list[Run] = []
    open_activities = Activity.objects.filter(auto_run=True, start__lte=now, end__gt=now)
    for activity in open_activities.select_related("experiment", "source"):
        if not _due(activity):
            continue
        try:
            run = run_start(user=None, activity=activity, trigger="schedule")
        except ValidationError as exc:
            # Kept as a failed run with the reason, on the activity's runs list: a warning in a log nobody reads
            # would leave the coordinator wondering why nothing ran, and the clock would retry every 30 s.
            reason = "; ".join(exc.messages)
            logger.warning("auto-run of activity %s refused: %s", activity.pk, reason)
            with transaction.atomic():
                refused = Run.objects.create(
                    activity=activity,
                    kind=activity.kind,
                    parameters={"trigger": "schedule", "experiment": activity.experiment.name},
                )
                message = f"the clock could not start this activity: {reason}"
                run_end(run_id=refused.pk, state=RunState.FAILED, message=message, now=now)
            continue
        Run.objects.filter(pk=run.pk).update(
            deadline=min(run.deadline or activity.end, activity.end + timedelta(minutes=5))
        )
        started.append(run)
    closing = Run.objects.filter(
        activity__auto_run=True, activity__end__lte=now, state__in=[RunState.QUEUED, RunState.RUNNING]
    )
    for run in closing:
        with contextlib.suppress(ValidationError):
            run_cancel(run, user=None, message="the activity's window closed", system=True)
    return started
