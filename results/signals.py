"""Re-attribution when the plan changes: any save or delete of an activity or a target (page, API, admin, plan
document, a challenge deleted with its activities) gathers the records it may concern into one Scope per
transaction, and sends one Celery task once the transaction commits."""

from __future__ import annotations

import logging
from typing import Any

from django.db import connection, transaction
from django.db.models.signals import post_delete, post_save, pre_save

from challenges.models import Activity, Target
from challenges.signals import plan_changed

from .store.attribution import Scope

_PENDING = "_results_attribution_scope"
logger = logging.getLogger(__name__)


def _send(scope: Scope) -> None:
    from .tasks import records_reattribute_task

    try:
        records_reattribute_task.delay(scope.as_json())
    except Exception:  # the plan is saved; a broker down must not turn that into an error page
        logger.exception("re-attribution not sent (run manage.py records_reattribute): %s", scope.as_json())


def _send_pending() -> None:
    # The first callback of a transaction sends everything gathered; the others find nothing left. A scope left by
    # a rolled-back transaction goes with the next one: re-attribution is idempotent.
    scope = getattr(connection, _PENDING, None)
    setattr(connection, _PENDING, None)
    if scope:
        _send(scope)


def _activity_changed(activity: Activity) -> None:
    if activity.pk is None or activity.experiment_id is None or activity.start is None or activity.end is None:
        return
    scope = getattr(connection, _PENDING, None) or Scope()
    setattr(connection, _PENDING, scope)
    scope.add(experiment_id=activity.experiment_id, start=activity.start, end=activity.end, activity_id=activity.pk)
    transaction.on_commit(_send_pending)  # outside a transaction: at once


def _on_activity_pre_save(sender: Any, instance: Activity, **kwargs: Any) -> None:
    # The window and experiment it had: records inside them may no longer be its.
    if instance.pk is not None:
        old = Activity.objects.filter(pk=instance.pk).values("experiment_id", "start", "end").first()
        if old is not None:
            _activity_changed(Activity(pk=instance.pk, **old))


def _on_activity_saved(sender: Any, instance: Activity, **kwargs: Any) -> None:
    _activity_changed(instance)


def _on_target_changed(sender: Any, instance: Target, **kwargs: Any) -> None:
    activity = Activity.objects.filter(pk=instance.activity_id).only("experiment_id", "start", "end").first()
    if activity is not None:
        _activity_changed(activity)


def _on_plan_changed(sender: Any, activities: list[Activity], **kwargs: Any) -> None:
    for activity in activities:
        _activity_changed(activity)


def signals_connect() -> None:
    pre_save.connect(_on_activity_pre_save, sender=Activity, dispatch_uid="results-attribution-activity-old")
    post_save.connect(_on_activity_saved, sender=Activity, dispatch_uid="results-attribution-activity")
    post_delete.connect(_on_activity_saved, sender=Activity, dispatch_uid="results-attribution-activity-gone")
    post_save.connect(_on_target_changed, sender=Target, dispatch_uid="results-attribution-target")
    post_delete.connect(_on_target_changed, sender=Target, dispatch_uid="results-attribution-target-gone")
    plan_changed.connect(_on_plan_changed, dispatch_uid="results-attribution-plan")
