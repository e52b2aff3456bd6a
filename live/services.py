"""What people do with alerts (writes): acknowledge one, silence one until a time. Who may is decided by the access
policy: anyone who may read the alert (sites.roles), but a viewer, whose role reads and never writes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from sites.roles import user_roles

from .models import Alert


def _may_act(user: Any) -> None:
    roles = user_roles(user=user)
    if not roles or roles <= {"viewer"}:
        raise PermissionDenied("Viewers read alerts; acknowledging or silencing one takes another role.")


def alert_acknowledge(*, alert: Alert, user: Any) -> Alert:
    """Mark that someone is on it: who and when (again by another person: the latest stands)."""
    _may_act(user)
    with transaction.atomic():
        locked = Alert.objects.select_for_update().get(pk=alert.pk)
        locked.acknowledged_by, locked.acknowledged_at = user, timezone.now()
        locked.save(update_fields=["acknowledged_by", "acknowledged_at"])
    return locked


def alert_silence(*, alert: Alert, user: Any, until: datetime | None) -> Alert:
    """No deliveries of this alert before `until` (None lifts the silence). A time in the past, or more than 30 days
    ahead, is refused."""
    _may_act(user)
    now = timezone.now()
    if until is not None:
        if timezone.is_naive(until):
            raise ValidationError({"until": ["give a time with its zone, e.g. 2026-11-25T18:00:00Z"]})
        if until <= now:
            raise ValidationError({"until": [f"{until.isoformat()} has passed: silence until a time to come"]})
        if (until - now).days > 30:
            raise ValidationError({"until": ["at most 30 days ahead"]})
    with transaction.atomic():
        locked = Alert.objects.select_for_update().get(pk=alert.pk)
        locked.silenced_until, locked.silenced_by = until, user if until is not None else None
        locked.save(update_fields=["silenced_until", "silenced_by"])
    return locked
