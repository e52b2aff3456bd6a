"""iCalendar feeds of the plan: one VEVENT per activity, for a challenge or for a site across challenges."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from django.utils import timezone
from icalendar import Calendar, Event

from .models import Activity, Challenge
from .selectors import target_derivation

PRODID = "-//Data Challenge Portal//challenges//EN"
UID_DOMAIN = "data-challenge-portal"


def activity_uid(*, activity: Activity) -> str:
    """Stable across edits of the activity (its id only), so calendars update the event rather than add one."""
    return f"activity-{activity.pk}@{UID_DOMAIN}"


def activity_description(*, activity: Activity) -> str:
    lines = [f"{activity.experiment.name} {activity.mode}, {activity.kind}"]
    if activity.source is not None:
        lines.append(f"source: {activity.source.name}")
    targets = list(activity.targets.all())
    lines.append("targets:" if targets else "no targets")
    for target in targets:
        derivation = target_derivation(target=target)
        line = f"- {target.place}: {target.rate / 1e9:.3g} GB/s"
        lines.append(line + (f" ({derivation})" if derivation else ""))
    return "\n".join(lines)


def activities_calendar(
    *,
    activities: Iterable[Activity],
    name: str,
    url_of: Callable[[Challenge], str] | None = None,
    now: datetime | None = None,
) -> bytes:
    """The activities as an iCalendar document (UTC times). Each activity needs its challenge, experiment, source
    and targets loaded (see selectors.challenge_activities and site_activities)."""
    stamp = (now or timezone.now()).astimezone(UTC)
    calendar = Calendar()
    calendar.add("prodid", PRODID)
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    calendar.add("x-wr-calname", name)
    calendar.add("x-wr-timezone", "UTC")
    for activity in activities:
        event = Event()
        event.add("uid", activity_uid(activity=activity))
        event.add("dtstamp", stamp)
        event.add("dtstart", activity.start.astimezone(UTC))
        event.add("dtend", activity.end.astimezone(UTC))
        event.add("summary", f"{activity.name} ({activity.kind})")
        event.add("description", activity_description(activity=activity))
        event.add("categories", [activity.experiment.name, activity.challenge.name])
        if url_of is not None:
            event.add("url", url_of(activity.challenge))
        calendar.add_component(event)
    return calendar.to_ical()
