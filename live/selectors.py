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


def alert_marks(*, target: Any, user: Any, start: Any, end: Any) -> list[Any]:
    """The alerts of a target (its own, and those of its link or site) that `user` may read and that overlap
    [start, end), as marks on its rate plot (results.markers)."""
    from django.db.models import Q

    from results.markers import PlotMark

    about = Q(target=target)
    if target.is_link:
        about |= Q(link_source_id=target.link_from_id, link_destination_id=target.link_to_id, target__isnull=True)
    else:
        about |= Q(site_id=target.site_id, target__isnull=True)
    alerts = (
        Alert.objects.restrict(user, "view")
        .filter(about, challenge_id=target.activity.challenge_id, started_at__lt=end)
        .filter(Q(resolved_at__isnull=True) | Q(resolved_at__gt=start))
        .order_by("started_at")
    )
    return [
        PlotMark(
            start=alert.started_at,
            end=alert.resolved_at,
            label=f"{alert.get_kind_display()}{' (resolved)' if alert.resolved_at else ''}: {alert.message}",
        )
        for alert in alerts[:100]
    ]
