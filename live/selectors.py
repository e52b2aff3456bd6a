"""Reads of the live app's own tables, through the access policy."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from challenges.models import Challenge

from .models import Alert


def alerts_visible(*, user: Any, challenge: Challenge | None = None, state: str | None = None) -> QuerySet[Alert]:
    """The alerts `user` may read (sites.roles' rule on their experiment), newest first, with what a row shows."""
    alerts = Alert.objects.restrict(user, "view").select_related(
        "challenge",
        "activity",
        "experiment",
        "site",
        "link_source",
        "link_destination",
        "acknowledged_by",
        "silenced_by",
    )
    if challenge is not None:
        alerts = alerts.filter(challenge=challenge)
    if state:
        alerts = alerts.filter(state=state)
    return alerts.order_by("-started_at", "-id")
