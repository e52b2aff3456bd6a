"""What people do with alerts (writes): acknowledge one, silence one until a time. Who may is the access policy's
(`Alert.objects.restrict(user, "acknowledge" | "silence")`, sites.roles): a coordinator any alert, a DDM service
its experiment's, a site admin those about their own sites, a viewer none. A silence lasts at most
ALERT_SILENCE_MAX_SECONDS (a week unless configured)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from common.times import iso_utc
from common.units import window_text
from sites.models import Site
from sites.roles import action_reach

from .models import Alert


def _refusal(user: Any, action: str, doing: str) -> str:
    """Why the access policy does not let the user act on this alert, in their role's words."""
    reach = action_reach(user=user, action=action)
    if not reach:
        return f"Viewers read alerts; {doing} one takes another role."
    parts = []
    if reach.site_ids:
        names = ", ".join(Site.objects.filter(pk__in=reach.site_ids).order_by("name").values_list("name", flat=True))
        parts.append(f"a site admin, those about their own sites ({names})")
    if reach.experiment_ids:
        parts.append("a DDM service, those of its experiment")
    allowed = "; ".join(parts) or "no alert"
    return f"This alert is not yours to act on: {doing} an alert takes a coordinator, or {allowed}."


def _may_act(alert: Alert, user: Any, action: str) -> None:
    if not Alert.objects.restrict(user, action).filter(pk=alert.pk).exists():
        doing = "acknowledging" if action == "acknowledge" else "silencing"
        raise PermissionDenied(_refusal(user, action, doing))


def _length_text(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    if days and not rest:
        return f"{days} day{'s' if days > 1 else ''}"
    return window_text(seconds)


def _until_problem(until: datetime, now: datetime) -> str | None:
    """Why a silence cannot end at `until`, or None."""
    if timezone.is_naive(until):
        return "give a time with its zone, e.g. 2026-11-25T18:00:00Z"
    if until <= now:
        return f"{until.isoformat()} has passed: silence until a time to come"
    longest = int(settings.ALERT_SILENCE_MAX_SECONDS)
    if until - now > timedelta(seconds=longest):
        return (
            f"a silence lasts at most {_length_text(longest)} (ALERT_SILENCE_MAX_SECONDS): until "
            f"{iso_utc(now + timedelta(seconds=longest))} at the latest, not {iso_utc(until)}"
        )
    return None


def alert_acknowledge(*, alert: Alert, user: Any) -> Alert:
    """Mark that someone is on it: who and when (again by another person: the latest stands). Raises
    PermissionDenied when the access policy does not let the user act on this alert."""
    _may_act(alert, user, "acknowledge")
    with transaction.atomic():
        locked = Alert.objects.select_for_update().get(pk=alert.pk)
        locked.acknowledged_by, locked.acknowledged_at = user, timezone.now()
        locked.save(update_fields=["acknowledged_by", "acknowledged_at"])
    return locked


def alert_silence(*, alert: Alert, user: Any, until: datetime | None) -> Alert:
    """No deliveries of this alert before `until` (None lifts the silence). Raises PermissionDenied when the access
    policy does not let the user act on this alert, and ValidationError on `until` for a time without its zone, in
    the past, or further ahead than ALERT_SILENCE_MAX_SECONDS."""
    _may_act(alert, user, "silence")
    if until is not None and (problem := _until_problem(until, timezone.now())):
        raise ValidationError({"until": [problem]})
    with transaction.atomic():
        locked = Alert.objects.select_for_update().get(pk=alert.pk)
        locked.silenced_until, locked.silenced_by = until, user if until is not None else None
        locked.save(update_fields=["silenced_until", "silenced_by"])
    return locked
