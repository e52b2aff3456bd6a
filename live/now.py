"""The now board of a running challenge (reads only): every target's volume so far, its last 15 minutes' and last
hour's rates, what it still needs, where it is heading and its trend; every site's traffic in and out over the
last hour; how fresh each source of records is; the open alerts.

The board is taken at a minute boundary (`at`, the last whole minute, UTC), so that every rate is read from the
minute rollups without a partial minute at its end; a window that starts inside a minute is counted from its exact
start (results.rates.flows_series). Definitions as on the results pages; the projection's in results.projection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max, Sum
from django.utils import timezone

from challenges.models import Activity, Challenge, Target
from challenges.thresholds import Thresholds, challenge_thresholds
from ingest.consumer import consumer_lag
from results.choices import Origin
from results.models import RateRollup, TransferRecord
from results.projection import ENDED, VERDICT_ORDER, target_projection
from results.rates import flows_series, targets_rates_cached
from results.rollups import minute_floor
from sites.models import Experiment, Site

TREND_HOURS = 6
TREND_BUCKET_MINUTES = 10
SOURCES = {"fts": Origin.FTS, "rucio": Origin.RUCIO, "perfsonar": Origin.PERFSONAR, "runs": Origin.PROBE}


def board_minute(now: datetime | None = None) -> datetime:
    """The board's `at`: the last whole minute (UTC)."""
    return minute_floor(now or timezone.now())


@dataclass
class TargetNow:
    """One target at `at` (bytes, bytes per second)."""

    target: Target
    volume: float = 0.0
    last_15min_rate: float = 0.0
    last_hour_rate: float = 0.0
    required_rate: float | None = None
    projected_average_rate: float | None = None
    verdict: str = ""
    final_verdict: str | None = None
    trend: list[tuple[datetime, float]] = field(default_factory=list)
    # The minutes before `at` (oldest first) that the alerts read: bytes per minute over the trend's hours.
    minutes: list[float] = field(default_factory=list, repr=False)

    def recent_rate(self, minutes: int, *, skip: int = 0) -> float:
        """The mean rate of `minutes` minutes ending `skip` minutes before `at`."""
        values = self.minutes[len(self.minutes) - skip - minutes : len(self.minutes) - skip]
        return sum(values) / (minutes * 60) if minutes > 0 else 0.0


def challenge_targets_visible(*, challenge: Challenge, user: Any) -> list[Target]:
    """The challenge's targets the user may read (the access policy), with what the board shows of them."""
    return list(
        Target.objects.restrict(user, "view")
        .filter(activity__challenge=challenge)
        .select_related("activity__experiment", "activity__challenge", "site", "link_from", "link_to")
        .order_by("activity__start", "activity__name", "pk")
    )


def targets_now(*, targets: list[Target], at: datetime, thresholds: Thresholds) -> list[TargetNow]:
    """The numbers of these targets at `at`, in two reads of the rollup (the windows so far, the last hours) and the
    results table's cached rows for the targets that have ended."""
    running = [t for t in targets if t.activity.start <= at < t.activity.end]
    ended = [t for t in targets if t.activity.end <= at]
    since = at - timedelta(hours=TREND_HOURS)
    series = flows_series(
        targets=running + running,
        windows=[(t.activity.start, at) for t in running] + [(since, at) for _ in running],
    )
    so_far, recent = series[: len(running)], series[len(running) :]
    rows: dict[int, TargetNow] = {}
    for target, window, hours in zip(running, so_far, recent, strict=True):
        now = TargetNow(target, volume=window.volume, minutes=hours.minutes)
        now.last_15min_rate = now.recent_rate(15)
        now.last_hour_rate = now.recent_rate(60)
        projection = target_projection(
            target_rate=target.rate,
            start=target.activity.start,
            end=target.activity.end,
            at=at,
            volume=now.volume,
            last_hour_rate=now.last_hour_rate,
            at_risk_fraction=thresholds.at_risk_fraction,
        )
        now.verdict, now.required_rate = projection.verdict, projection.required_rate
        now.projected_average_rate = projection.projected_average_rate
        width = TREND_BUCKET_MINUTES
        now.trend = [
            (hours.first + timedelta(minutes=index), sum(hours.minutes[index : index + width]) / (width * 60))
            for index in range(0, len(hours.minutes), width)
        ]
        rows[target.pk] = now
    if ended:
        challenge = ended[0].activity.challenge
        finals = targets_rates_cached(
            targets=ended, max_window=challenge.max_window, stable_window=challenge.stable_window
        )
        for target, final in zip(ended, finals, strict=True):
            rows[target.pk] = TargetNow(target, volume=final.volume, verdict=ENDED, final_verdict=final.verdict)
    for target in targets:
        if target.pk not in rows:
            rows[target.pk] = TargetNow(target, verdict="not started")
    board = [rows[target.pk] for target in targets]
    board.sort(key=lambda row: (VERDICT_ORDER.get(row.verdict, 9), row.target.activity.start, row.target.pk))
    return board


def challenge_site_ids(*, challenge: Challenge) -> set[int]:
    """Every site the challenge's plan names: targets' sites and link ends, activities' sources."""
    ids: set[int] = set()
    for site, link_from, link_to in Target.objects.filter(activity__challenge=challenge).values_list(
        "site_id", "link_from_id", "link_to_id"
    ):
        ids.update(value for value in (site, link_from, link_to) if value)
    ids.update(
        value
        for value in challenge.activities.values_list("source_id", flat=True)
        if value  # type: ignore[attr-defined]
    )
    return ids


def sites_now(*, challenge: Challenge, at: datetime, user: Any) -> list[dict[str, Any]]:
    """Every site of the challenge: bytes per second in and out over the last hour, over all experiments (that
    `user` may read) and per experiment (the per-site view that was missing after DC21)."""
    site_ids = challenge_site_ids(challenge=challenge)
    minutes = RateRollup.objects.restrict(user).filter(minute__gte=at - timedelta(hours=1), minute__lt=at)
    flows: dict[tuple[int, str], dict[int | None, float]] = {}
    for side, column in (("in", "destination_site_id"), ("out", "source_site_id")):
        for site_id, experiment_id, moved in (
            minutes.filter(**{f"{column}__in": site_ids})
            .values_list(column, "experiment_id")
            .annotate(moved=Sum("bytes"))
            .values_list(column, "experiment_id", "moved")
        ):
            flows.setdefault((site_id, side), {})[experiment_id] = float(moved or 0.0)
    names = dict(Experiment.objects.values_list("pk", "name"))
    result = []
    for site in Site.objects.filter(pk__in=site_ids).order_by("name"):
        inbound, outbound = flows.get((site.pk, "in"), {}), flows.get((site.pk, "out"), {})
        experiments = sorted({*inbound, *outbound} - {None}, key=lambda pk: names.get(pk, ""))
        result.append(
            {
                "site": site.name,
                "in_rate_last_hour": sum(inbound.values()) / 3600,
                "out_rate_last_hour": sum(outbound.values()) / 3600,
                "experiments": [
                    {
                        "experiment": names.get(pk, ""),
                        "in_rate_last_hour": inbound.get(pk, 0.0) / 3600,
                        "out_rate_last_hour": outbound.get(pk, 0.0) / 3600,
                    }
                    for pk in experiments
                ],
            }
        )
    return result


def sources_now(*, challenge: Challenge, at: datetime, user: Any = None) -> list[dict[str, Any]]:
    """How fresh each source of the challenge's records is: the latest record's end, its age, the records of the
    last hour (a record that ended after the board's minute is as fresh as can be: age 0). Records of the challenge's
    experiments, read per source through the index on origin and end (backwards from the latest, in the latest
    partitions): a source that never sent or went silent costs a lookup, not a scan of the challenge's records. With
    a user, of the experiments they may read."""
    activities = Activity.objects.filter(challenge=challenge)
    activities = activities if user is None else activities.restrict(user)
    experiments = set(activities.values_list("experiment_id", flat=True))
    # end >= start >= the challenge's start: said, it leaves out the partitions of older months.
    records = TransferRecord.objects.filter(
        experiment_id__in=experiments, start__lt=at, start__gte=challenge.start, end__gte=challenge.start
    )
    result = []
    for name, origin in SOURCES.items():
        of_source = records.filter(origin=origin)
        latest = of_source.aggregate(latest=Max("end"))["latest"]
        hour_ago = at - timedelta(hours=1)
        last_hour = of_source.filter(end__gt=hour_ago).count() if latest and latest > hour_ago else 0
        result.append(
            {
                "source": name,
                "latest_record_end": latest,
                "age_seconds": max((at - latest).total_seconds(), 0.0) if latest else None,
                "records_last_hour": last_hour,
                "consumer_lag_seconds": consumer_lag(format=name) if name != "runs" else None,
            }
        )
    return result


def target_row(row: TargetNow) -> dict[str, Any]:
    """A target's object of the now board's API (and of its page)."""
    target, activity = row.target, row.target.activity
    link = None
    if target.is_link:
        link = {"source": target.link_from.name, "destination": target.link_to.name}  # type: ignore[union-attr]
    return {
        "target": target.pk,
        "activity": activity.name,
        "experiment": activity.experiment.name,
        "site": target.site.name if target.site_id else None,  # type: ignore[union-attr]
        "link": link,
        "direction": target.direction or None,
        "target_rate": target.rate,
        "window_start": activity.start,
        "window_end": activity.end,
        "volume": row.volume,
        "last_15min_rate": row.last_15min_rate,
        "last_hour_rate": row.last_hour_rate,
        "required_rate": row.required_rate,
        "projected_average_rate": row.projected_average_rate,
        "verdict": row.verdict,
        "final_verdict": row.final_verdict,
        "trend": [{"at": at, "rate": rate} for at, rate in row.trend],
    }


def now_board(*, challenge: Challenge, user: Any, at: datetime | None = None) -> dict[str, Any]:
    """The now board as the API gives it and the page shows it, for what `user` may read."""
    from .selectors import alerts_visible

    at = board_minute(at)
    rows = targets_now(
        targets=challenge_targets_visible(challenge=challenge, user=user),
        at=at,
        thresholds=challenge_thresholds(challenge=challenge),
    )
    return {
        "at": at,
        "targets": [target_row(row) for row in rows],
        "sites": sites_now(challenge=challenge, at=at, user=user),
        "sources": sources_now(challenge=challenge, at=at, user=user),
        "alerts": list(alerts_visible(user=user, challenge=challenge, state="open")),
    }
