"""The now board of a running challenge (reads only): every target's volume so far, its last 15 minutes' and last
hour's rates, what it still needs, where it is heading and its trend; every site's traffic in and out over the
last hour; how fresh each source of records is; the open alerts.

The board is taken at a minute boundary (`at`, the last whole minute, UTC), so that every rate is read from the
minute rollups without a partial minute at its end. Every target's figures come from results.targets.figures, the one
definition the results pages, their exports and the APIs read; the board adds the trend of the same minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max, Sum
from django.utils import timezone

from challenges.models import Activity, Challenge, Target
from ingest.consumer import consumer_lag
from results.choices import VERDICT_ORDER, Origin
from results.models import RateRollup, TransferRecord
from results.store.rollups import minute_floor
from results.targets.figures import figures_row, recent_rate, targets_figures
from results.targets.rates import TargetRates
from sites.models import Experiment, Site

TREND_HOURS = 6
TREND_BUCKET_MINUTES = 10
SOURCES = {"fts": Origin.FTS, "rucio": Origin.RUCIO, "perfsonar": Origin.PERFSONAR, "runs": Origin.PROBE}


def board_minute(now: datetime | None = None) -> datetime:
    """The board's `at`: the last whole minute (UTC)."""
    return minute_floor(now or timezone.now())


@dataclass
class TargetNow:
    """One target at `at` on the board: its figures (results.targets.figures, the one definition every surface
    reads) and the 6-hour trend drawn from the same minutes."""

    figures: TargetRates
    trend: list[tuple[datetime, float]] = field(default_factory=list)

    @property
    def target(self) -> Target:
        return self.figures.target

    @property
    def verdict(self) -> str:
        return self.figures.verdict.value

    @property
    def volume(self) -> float:
        return self.figures.volume

    @property
    def minutes(self) -> list[float]:
        """The bytes of each minute before `at` (oldest first) over the trend's hours, inside the window."""
        return self.figures.recent

    def recent_rate(self, minutes: int, *, skip: int = 0) -> float:
        """The mean rate of `minutes` minutes ending `skip` minutes before `at`."""
        return recent_rate(self.minutes, minutes, skip=skip)

    @property
    def projected_average_rate(self) -> float | None:
        so_far = self.figures.so_far
        return so_far.projection.projected_average_rate if so_far is not None else None

    @property
    def required_rate(self) -> float | None:
        so_far = self.figures.so_far
        return so_far.projection.required_rate if so_far is not None else None


def challenge_targets_visible(*, challenge: Challenge, user: Any) -> list[Target]:
    """The challenge's targets the user may read (the access policy), with what the board shows of them."""
    return list(
        Target.objects.restrict(user, "view")
        .filter(activity__challenge=challenge)
        .select_related("activity__experiment", "activity__challenge", "site", "link_from", "link_to")
        .order_by("activity__start", "activity__name", "pk")
    )


def targets_now(*, challenge: Challenge, targets: list[Target], at: datetime) -> list[TargetNow]:
    """The board's rows of these targets at `at`: their figures with the trend's hours of minutes, worst first."""
    figures = targets_figures(challenge=challenge, targets=targets, at=at, recent_minutes=TREND_HOURS * 60)
    board = []
    width = TREND_BUCKET_MINUTES
    for row in figures:
        minutes = row.recent
        first = at - timedelta(minutes=len(minutes))
        trend = [
            (first + timedelta(minutes=index), sum(minutes[index : index + width]) / (width * 60))
            for index in range(0, len(minutes), width)
        ]
        board.append(TargetNow(row, trend))
    board.sort(
        key=lambda row: (
            row.figures.ended,
            VERDICT_ORDER.get(row.figures.verdict, 9),
            row.target.activity.start,
            row.target.pk,
        )
    )
    return board


def challenge_site_ids(*, challenge: Challenge, user: Any) -> set[int]:
    """Every site the challenge's plan names in the activities `user` may read (the access policy: a CMS service's
    token does not learn the sites only ATLAS's targets use): targets' sites and link ends, activities' sources."""
    targets = Target.objects.restrict(user).filter(activity__challenge=challenge)
    activities = Activity.objects.restrict(user).filter(challenge=challenge)
    ids: set[int] = set()
    for site, link_from, link_to in targets.values_list("site_id", "link_from_id", "link_to_id"):
        ids.update(value for value in (site, link_from, link_to) if value)
    ids.update(value for value in activities.values_list("source_id", flat=True) if value)
    return ids


def _site_flows(minutes: Any, site_ids: set[int]) -> dict[tuple[int, str], dict[int | None, float]]:
    """(site, in|out) -> experiment -> bytes of these rollup minutes."""
    flows: dict[tuple[int, str], dict[int | None, float]] = {}
    for side, column in (("in", "destination_site_id"), ("out", "source_site_id")):
        for site_id, experiment_id, moved in (
            minutes.filter(**{f"{column}__in": site_ids})
            .values_list(column, "experiment_id")
            .annotate(moved=Sum("bytes"))
            .values_list(column, "experiment_id", "moved")
        ):
            flows.setdefault((site_id, side), {})[experiment_id] = float(moved or 0.0)
    return flows


def sites_now(*, challenge: Challenge, at: datetime, user: Any) -> list[dict[str, Any]]:
    """Every site of the challenge that `user` may see: bytes per second in and out over the last hour of the
    challenge's own activities, over all experiments (that `user` may read) and per experiment; beside them, apart,
    what moved there for no activity (ad hoc runs, records no activity claims), never added to the challenge's."""
    site_ids = challenge_site_ids(challenge=challenge, user=user)
    minutes = RateRollup.objects.restrict(user).filter(minute__gte=at - timedelta(hours=1), minute__lt=at)
    activity_ids = list(challenge.activities.values_list("pk", flat=True))  # type: ignore[attr-defined]
    flows = _site_flows(minutes.filter(activity_id__in=activity_ids), site_ids)
    apart = _site_flows(minutes.filter(activity_id__isnull=True), site_ids)
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
                "outside_in_rate_last_hour": sum(apart.get((site.pk, "in"), {}).values()) / 3600,
                "outside_out_rate_last_hour": sum(apart.get((site.pk, "out"), {}).values()) / 3600,
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
    """A target's object of the now board's API (and of its page): the row every surface gives
    (results.targets.figures.figures_row) and the trend."""
    figures = figures_row(row.figures)
    return figures | {
        "target": row.target.pk,  # the id under its older name, kept for clients of the first board
        "final_verdict": figures["verdict"] if figures["window_ended"] else None,
        "trend": [{"at": at, "rate": rate} for at, rate in row.trend],
    }


def now_board(*, challenge: Challenge, user: Any, at: datetime | None = None) -> dict[str, Any]:
    """The now board as the API gives it and the page shows it, for what `user` may read."""
    from .agents import agents_now
    from .selectors import alerts_visible

    at = board_minute(at)
    rows = targets_now(challenge=challenge, targets=challenge_targets_visible(challenge=challenge, user=user), at=at)
    return {
        "at": at,
        "targets": [target_row(row) for row in rows],
        "sites": sites_now(challenge=challenge, at=at, user=user),
        "sources": sources_now(challenge=challenge, at=at, user=user),
        "agents": agents_now(site_ids=challenge_site_ids(challenge=challenge, user=user), at=at),
        "alerts": list(alerts_visible(user=user, challenge=challenge, state="open")),
    }
