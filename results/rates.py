"""Target versus achieved: the rate definitions, computed from the per-minute rollup.

Definitions (also written on the results page):
- A successful transfer's bytes are spread uniformly over its real [start, end); failed and cancelled transfers
  add no bytes.
- For a target of an activity with window [A, B): the records of the activity's experiment into the site
  (direction in), out of it (out), or over the link; only the part of each transfer inside [A, B) counts.
- average rate = bytes inside [A, B) / (B - A).
- max rate = the highest mean rate over any window of `max_window` seconds that lies inside [A, B) and starts on
  a minute boundary (the whole activity if it is shorter).
- stable rate = the same with `stable_window`; empty when the activity is shorter than that window.
- volume, files ok, files failed, failure ratio (of files ending inside [A, B)).
- verdict: met when stable >= target, partly when only max >= target, missed otherwise; without a stable rate the
  average stands in for it.
Rates are bytes per second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet, Sum

from challenges.models import Challenge, Target

from .choices import RecordState
from .models import RateRollup, TransferRecord
from .rollups import MINUTE, minute_floor

MET, PARTLY, MISSED = "met", "partly", "missed"


@dataclass
class TargetRates:
    """The achieved numbers of one target, in bytes and bytes per second."""

    target: Target
    start: datetime
    end: datetime
    volume: float = 0.0
    average_rate: float = 0.0
    max_rate: float = 0.0
    max_window_start: datetime | None = None
    stable_rate: float | None = None
    stable_window_start: datetime | None = None
    files_ok: int = 0
    files_failed: int = 0
    minutes: list[tuple[datetime, float]] = field(default_factory=list, repr=False)

    @property
    def failure_ratio(self) -> float | None:
        total = self.files_ok + self.files_failed
        return self.files_failed / total if total else None

    @property
    def verdict(self) -> str:
        sustained = self.stable_rate if self.stable_rate is not None else self.average_rate
        if sustained >= self.target.rate:
            return MET
        if self.max_rate >= self.target.rate:
            return PARTLY
        return MISSED

    def as_row(self) -> dict[str, Any]:
        """The API's row: the keys of GET /api/v1/challenges/SLUG/rates/."""
        target = self.target
        row: dict[str, Any] = {
            "activity": target.activity.name,
            "experiment": target.activity.experiment.name,
            "mode": target.activity.mode,
        }
        if target.is_link:
            row["link"] = {"from": target.link_from.name, "to": target.link_to.name}  # type: ignore[union-attr]
        else:
            row["site"] = target.site.name  # type: ignore[union-attr]
        row |= {
            "direction": target.direction or None,
            "target_rate": target.rate,
            "average_rate": self.average_rate,
            "max_rate": self.max_rate,
            "stable_rate": self.stable_rate,
            "volume": self.volume,
            "files_ok": self.files_ok,
            "files_failed": self.files_failed,
            "failure_ratio": self.failure_ratio,
            "verdict": self.verdict,
        }
        return row


def _flow_filter(target: Target, prefix: str = "") -> Q:
    """Records (or rollup rows) of the target's experiment through its site or link."""
    activity = target.activity
    condition = Q(**{f"{prefix}experiment_id": activity.experiment_id})
    if target.is_link:
        return condition & Q(
            **{f"{prefix}source_site_id": target.link_from_id, f"{prefix}destination_site_id": target.link_to_id}
        )
    side = "destination_site_id" if target.direction == "in" else "source_site_id"
    return condition & Q(**{f"{prefix}{side}": target.site_id})


def _edge(
    target: Target, lower: datetime, upper: datetime, window: tuple[datetime, datetime]
) -> tuple[float, int, int]:
    """Exact bytes of [lower, upper) and files ending there, from the raw records: only for the partial minutes
    at the edges of a window that does not start or end on a minute boundary."""
    if upper <= lower:
        return 0.0, 0, 0
    moved = 0.0
    ok = failed = 0
    records = (
        TransferRecord.objects.filter(_flow_filter(target))
        .filter(Q(start__lt=upper, end__gt=lower) | Q(end__gte=lower, end__lt=upper))
        .values_list("start", "end", "bytes", "state")
    )
    for start, end, size, state in records:
        if state == RecordState.OK:
            if end > start:
                overlap = (min(end, upper) - max(start, lower)).total_seconds()
                moved += max(overlap, 0.0) * size / (end - start).total_seconds()
            elif lower <= start < upper:
                moved += size
        if lower <= end < upper and window[0] <= end < window[1]:
            ok += state == RecordState.OK
            failed += state == RecordState.FAILED
    return moved, ok, failed


def target_rates(*, target: Target, max_window: int, stable_window: int) -> TargetRates:
    """Every number of one target (see the module's definitions)."""
    start, end = target.activity.start, target.activity.end
    result = TargetRates(target=target, start=start, end=end)
    first_full = minute_floor(start) if start == minute_floor(start) else minute_floor(start) + MINUTE
    last_full = minute_floor(end)  # minutes in [first_full, last_full) lie wholly inside [start, end)
    rows = (
        RateRollup.objects.filter(_flow_filter(target), minute__gte=first_full, minute__lt=last_full)
        .values("minute")
        .annotate(bytes=Sum("bytes"), ok=Sum("files_ok"), failed=Sum("files_failed"))
        .order_by("minute")
    )
    by_minute: dict[datetime, float] = {}
    for row in rows:
        by_minute[row["minute"]] = row["bytes"]
        result.files_ok += row["ok"]
        result.files_failed += row["failed"]
    count = max(int((last_full - first_full) / MINUTE), 0)
    series = [by_minute.get(first_full + index * MINUTE, 0.0) for index in range(count)]
    result.minutes = [(first_full + index * MINUTE, value) for index, value in enumerate(series)]
    volume = sum(series)
    if first_full > start:  # the partial minute at the start
        edge_end = min(first_full, end)
        moved, ok, failed = _edge(target, start, edge_end, (start, end))
        volume, result.files_ok, result.files_failed = (
            volume + moved,
            result.files_ok + ok,
            result.files_failed + failed,
        )
    if last_full < end and last_full >= first_full:  # the partial minute at the end
        moved, ok, failed = _edge(target, last_full, end, (start, end))
        volume, result.files_ok, result.files_failed = (
            volume + moved,
            result.files_ok + ok,
            result.files_failed + failed,
        )
    duration = (end - start).total_seconds()
    result.volume = volume
    result.average_rate = volume / duration if duration > 0 else 0.0
    result.max_rate, result.max_window_start = _best_window(series, first_full, max_window)
    if result.max_window_start is None:  # shorter than the window: the whole activity
        result.max_rate = result.average_rate
    if duration >= stable_window:
        result.stable_rate, result.stable_window_start = _best_window(series, first_full, stable_window)
        if result.stable_window_start is None:
            result.stable_rate = None
    return result


def _best_window(series: list[float], first: datetime, window: int) -> tuple[float, datetime | None]:
    """The highest mean rate over `window` seconds starting on a minute boundary, and where it starts."""
    width = window // 60
    if width <= 0 or width > len(series):
        return 0.0, None
    total = sum(series[:width])
    best, best_index = total, 0
    for index in range(1, len(series) - width + 1):
        total += series[index + width - 1] - series[index - 1]
        if total > best:
            best, best_index = total, index
    return best / window, first + timedelta(minutes=best_index)


def challenge_targets(
    *, challenge: Challenge, experiment: str | None = None, activity: str | None = None, site: str | None = None
) -> QuerySet[Target]:
    """The targets of a challenge, filtered by experiment name, activity name and site (or link end) name."""
    targets = (
        Target.objects.filter(activity__challenge=challenge)
        .select_related("activity__experiment", "site", "link_from", "link_to")
        .order_by("activity__start", "activity__experiment__name", "activity__name", "site__name", "direction", "pk")
    )
    if experiment:
        targets = targets.filter(activity__experiment__name__iexact=experiment)
    if activity:
        targets = targets.filter(activity__name=activity)
    if site:
        targets = targets.filter(Q(site__name=site) | Q(link_from__name=site) | Q(link_to__name=site))
    return targets


def rates_for_challenge(
    *, challenge: Challenge, experiment: str | None = None, activity: str | None = None, site: str | None = None
) -> list[TargetRates]:
    """Target versus achieved for every (filtered) target of the challenge."""
    return [
        target_rates(target=target, max_window=challenge.max_window, stable_window=challenge.stable_window)
        for target in challenge_targets(challenge=challenge, experiment=experiment, activity=activity, site=site)
    ]
