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
from datetime import UTC, datetime
from typing import Any

from django.db import connection
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


# One query per target. The sums come from the target's flow rows; the best windows from a dense minute series
# (one row per minute, empty minutes as 0) with a running total, where the bytes of the window starting at minute
# i are through[i + width - 1] - through[i] + bytes[i]. Every step is a single pass; windows that would run past
# the full minutes get no lead() value and drop out.
FLOW_RATES = """
WITH flow AS (
    SELECT minute, bytes, files_ok, files_failed
    FROM results_flowrollup
    WHERE experiment_id = %(experiment)s AND flow = %(flow)s AND site_id = %(site)s AND peer_id = %(peer)s
      AND minute >= %(first)s AND minute < %(last)s
), series AS (
    SELECT m AS minute, coalesce(flow.bytes, 0) AS bytes,
           sum(coalesce(flow.bytes, 0)) OVER (ORDER BY m ROWS UNBOUNDED PRECEDING) AS through
    FROM generate_series(%(first)s::timestamptz, %(last)s::timestamptz - interval '1 minute', interval '1 minute') AS m
    LEFT JOIN flow ON flow.minute = m
), windows AS (
    SELECT minute,
           lead(through, %(max_width)s - 1) OVER (ORDER BY minute) - through + bytes AS max_bytes,
           lead(through, %(stable_width)s - 1) OVER (ORDER BY minute) - through + bytes AS stable_bytes
    FROM series
)
SELECT
    (SELECT coalesce(sum(bytes), 0) FROM flow),
    (SELECT coalesce(sum(files_ok), 0) FROM flow),
    (SELECT coalesce(sum(files_failed), 0) FROM flow),
    (SELECT ARRAY[extract(epoch FROM minute)::float8, max_bytes] FROM windows WHERE max_bytes IS NOT NULL
     ORDER BY max_bytes DESC, minute LIMIT 1),
    (SELECT ARRAY[extract(epoch FROM minute)::float8, stable_bytes] FROM windows WHERE stable_bytes IS NOT NULL
     ORDER BY stable_bytes DESC, minute LIMIT 1)
"""


def _flow(target: Target) -> dict[str, Any]:
    """The FlowRollup key of a target."""
    if target.is_link:
        return {
            "experiment": target.activity.experiment_id,
            "flow": "link",
            "site": target.link_from_id,
            "peer": target.link_to_id,
        }
    return {"experiment": target.activity.experiment_id, "flow": target.direction, "site": target.site_id, "peer": 0}


def target_rates(*, target: Target, max_window: int, stable_window: int, with_minutes: bool = False) -> TargetRates:
    """Every number of one target (see the module's definitions); with_minutes also fills the per-minute series
    that plots draw."""
    start, end = target.activity.start, target.activity.end
    result = TargetRates(target=target, start=start, end=end)
    first_full = minute_floor(start) if start == minute_floor(start) else minute_floor(start) + MINUTE
    last_full = max(minute_floor(end), first_full)  # minutes in [first_full, last_full) lie wholly inside
    widths = {name: _window_width(seconds) for name, seconds in (("max", max_window), ("stable", stable_window))}
    key = _flow(target) | {"first": first_full, "last": last_full}
    with connection.cursor() as cursor:
        cursor.execute(FLOW_RATES, key | {f"{name}_width": max(width, 1) for name, width in widths.items()})
        sums, ok, failed, max_best, stable_best = cursor.fetchone()
    volume = float(sums)
    result.files_ok, result.files_failed = int(ok), int(failed)
    if first_full > start:  # the partial minute at the start
        moved, ok, failed = _edge(target, start, min(first_full, end), (start, end))
        volume, result.files_ok, result.files_failed = (
            volume + moved,
            result.files_ok + ok,
            result.files_failed + failed,
        )
    if minute_floor(end) < end and minute_floor(end) >= first_full:  # the partial minute at the end
        moved, ok, failed = _edge(target, minute_floor(end), end, (start, end))
        volume, result.files_ok, result.files_failed = (
            volume + moved,
            result.files_ok + ok,
            result.files_failed + failed,
        )
    duration = (end - start).total_seconds()
    result.volume = volume
    result.average_rate = volume / duration if duration > 0 else 0.0
    result.max_rate, result.max_window_start = _best(max_best if widths["max"] else None, max_window)
    if result.max_window_start is None:  # shorter than the window: the whole activity
        result.max_rate = result.average_rate
    if duration >= stable_window:
        result.stable_rate, result.stable_window_start = _best(stable_best if widths["stable"] else None, stable_window)
        if result.stable_window_start is None:
            result.stable_rate = None
    if with_minutes:
        rows = dict(
            RateRollup.objects.filter(_flow_filter(target), minute__gte=first_full, minute__lt=last_full)
            .values("minute")
            .annotate(total=Sum("bytes"))
            .values_list("minute", "total")
        )
        count = int((last_full - first_full) / MINUTE)
        result.minutes = [
            (first_full + index * MINUTE, rows.get(first_full + index * MINUTE, 0.0)) for index in range(count)
        ]
    return result


def _window_width(window: int) -> int:
    """A window's width in whole minutes (0 when it is not a positive whole number of minutes)."""
    return window // 60 if window > 0 and window % 60 == 0 else 0


def _best(best: list[Any] | None, window: int) -> tuple[float, datetime | None]:
    """The highest mean rate of a window and where it starts; (0, None) when no window fits."""
    if best is None:
        return 0.0, None
    return float(best[1]) / window, datetime.fromtimestamp(float(best[0]), tz=UTC)


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
