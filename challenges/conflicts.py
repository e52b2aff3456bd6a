"""Activities that can claim the same transfers: of one experiment, with overlapping windows, a flow in common and
DDM activity names that do not tell them apart. results.store.attribution gives each such transfer to one of them by its
written order; the clock page lists these pairs so that coordinators can separate them (by their DDM activities, or
by their windows)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

from .choices import UNCLAIMING_KINDS
from .models import Activity, Challenge, Target
from .selectors import activities_overlapping


@dataclass(frozen=True)
class Conflict:
    first: Activity
    second: Activity
    flow: str  # what both can claim, e.g. "transfers into CNAF" or "CERN → CNAF"

    @property
    def message(self) -> str:
        a, b = self.first, self.second
        where = "" if a.challenge_id == b.challenge_id else f" (of {b.challenge.name})"
        return (
            f"{a.name} and {b.name}{where} both claim {a.experiment.name} {self.flow} between "
            f"{max(a.start, b.start):%Y-%m-%d %H:%M} and {min(a.end, b.end):%Y-%m-%d %H:%M} UTC: each such transfer "
            "counts for one of them only. Give them different DDM activities to tell them apart."
        )


def _names(activity: Activity) -> set[str]:
    return {name.lower() for name in activity.ddm_activities}


def _ddm_overlap(a: Activity, b: Activity) -> bool:
    """Whether a transfer can pass both DDM filters with neither winning outright: both take any name, or they
    share one (a named activity takes its names before one that takes any)."""
    first, second = _names(a), _names(b)
    return (not first and not second) or bool(first & second)


def _shared_flow(a: Iterable[Target], b: Iterable[Target]) -> str | None:
    """A flow some transfer could be on for a target of each; None when none can."""
    for one in a:
        for other in b:
            found = _flow_of_both(one, other) or _flow_of_both(other, one)
            if found:
                return found
    return None


def _flow_of_both(one: Target, other: Target) -> str | None:
    if one.is_link:
        link = f"{one.link_from} → {one.link_to}"
        claims = (
            (other.link_from_id, other.link_to_id) == (one.link_from_id, one.link_to_id)
            if other.is_link
            else (other.direction == "in" and other.site_id == one.link_to_id)
            or (other.direction == "out" and other.site_id == one.link_from_id)
        )
        return link if claims else None
    if other.is_link:
        return None  # seen the other way round
    if one.direction == other.direction and one.site_id == other.site_id:
        return f"transfers {'into' if one.direction == 'in' else 'out of'} {one.site}"
    if one.direction == "out" and other.direction == "in":
        return f"{one.site} → {other.site}"
    return None


def conflicts_find(activities: Sequence[Activity]) -> list[Conflict]:
    """The pairs of these activities (targets prefetched) that can claim the same transfers."""
    found: list[Conflict] = []
    # A network activity claims no transfers: its targets are measured by its iperf3 runs (results.store.attribution).
    activities = [activity for activity in activities if activity.kind not in UNCLAIMING_KINDS]
    for a, b in combinations(activities, 2):
        if a.experiment_id != b.experiment_id or not (a.start < b.end and b.start < a.end):
            continue
        if not _ddm_overlap(a, b):
            continue
        flow = _shared_flow(a.targets.all(), b.targets.all())
        if flow:
            found.append(Conflict(first=a, second=b, flow=flow))
    return found


def challenge_conflicts(*, challenge: Challenge, user: object = None) -> list[Conflict]:
    """The conflicts that involve this challenge's activities, with each other or with another challenge's (those the
    user may see): one query for the activities, one for their targets."""
    activities = list(activities_overlapping(challenge=challenge, user=user))
    ours = [activity for activity in activities if activity.challenge_id == challenge.pk]
    theirs = [activity for activity in activities if activity.challenge_id != challenge.pk]
    conflicts = conflicts_find(ours)
    for a in ours:
        conflicts.extend(conflict for b in theirs for conflict in conflicts_find([a, b]))
    return conflicts
