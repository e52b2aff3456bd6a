"""A target's figures, computed once for every surface: the results table and its CSV/JSON, the target's page, the
rates API, the now board and its API, the link panel and the alerts' texts read `targets_figures` and only format
what it gives. Definitions (also on "About these numbers"; the rollup's in rates.py, the projection's in
projection.py, a network target's in network.py):

- the figures are taken at `at`, the last whole minute (UTC);
- before the window: nothing moved, verdict "not started";
- while it runs: volume = bytes inside [A, at); average = volume / (at - A) ("so far"); max and stable as for a whole
  window, over what has passed; last 15 minutes' and last hour's rates = the bytes of those minutes before `at`
  (inside the window) / 900 s and / 3600 s, or / the time since the window opened when that is shorter; the
  required rate and projected average, and the live verdict with the plan's own at_risk_fraction
  (challenges.thresholds);
- once it has ended: the whole window's figures and the final verdict (met, partly, missed);
- a network target: its iperf3 runs' measurements (latest, best, mean) and their verdict, no projection.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db.models import Count, F, Q
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from challenges.models import Challenge, Target
from challenges.thresholds import challenge_thresholds

from ..choices import Verdict
from ..models import TransferRecord
from ..store.rollups import minute_floor
from .network import network_figures
from .projection import Projection, SoFar, target_projection
from .rates import TargetRates, challenge_targets, targets_rates_cached, targets_rates_compute

RECENT_MINUTES = 60  # the last hour: what every surface's "last hour" and "last 15 minutes" read


def figures_minute(now: datetime | None = None) -> datetime:
    """The minute figures are taken at: the last whole minute (UTC)."""
    return minute_floor(now or timezone.now())


def targets_figures(
    *,
    challenge: Challenge,
    targets: Iterable[Target],
    at: datetime | None = None,
    with_minutes: bool = False,
    recent_minutes: int = RECENT_MINUTES,
) -> list[TargetRates]:
    """The figures of these targets of `challenge` at `at` (default: the last whole minute), in their order: the
    ended ones from the cache of computed rows where the rollups have not changed, the running ones computed with
    their minutes (one query), the network ones from their measurements (one query). `recent_minutes` keeps that
    many minutes before `at` on each running row (`recent`: the board's trend and the alerts read them);
    with_minutes keeps every minute of every window (the target's page)."""
    targets = list(targets)
    at = figures_minute(at)
    windows = (challenge.max_window, challenge.stable_window)
    live = [index for index, t in enumerate(targets) if with_minutes or t.activity.start <= at < t.activity.end]
    rows: dict[int, TargetRates] = dict(
        zip(
            live,
            targets_rates_compute(
                targets=[targets[index] for index in live],
                max_window=windows[0],
                stable_window=windows[1],
                with_minutes=True,
            ),
            strict=True,
        )
    )
    rest = [index for index in range(len(targets)) if index not in rows]
    rows |= dict(
        zip(
            rest,
            targets_rates_cached(
                targets=[targets[index] for index in rest], max_window=windows[0], stable_window=windows[1]
            ),
            strict=True,
        )
    )
    result = [rows[index] for index in range(len(targets))]
    fraction = challenge_thresholds(challenge=challenge).at_risk_fraction
    for row in result:
        _so_far(row, at=at, at_risk_fraction=fraction, recent_minutes=recent_minutes)
    measured = network_figures(targets=targets, at=at)
    for row in result:
        row.network = measured.get(row.target.pk)
        if row.network is not None:
            _network_figures(row)
    runs_outside_windows(rates=result)
    return result


def _so_far(row: TargetRates, *, at: datetime, at_risk_fraction: float, recent_minutes: int) -> None:
    """A row whose window has not ended at `at`: its numbers so far and its live verdict (see the module)."""
    if at >= row.end:
        return
    if at < row.start:
        row.volume = row.average_rate = row.max_rate = 0.0
        row.stable_rate = None
        row.so_far = SoFar(at, 0.0, 0.0, 0.0, Projection(Verdict.NOT_STARTED, None, None))
        return
    passed = row.series_index(at)
    later = sum(row.series[passed:])
    volume = max(row.volume - later - row.end_edge_bytes, 0.0)
    before = row.series[:passed]
    row.recent = before[-recent_minutes:] if recent_minutes > 0 else []
    elapsed = (at - row.start).total_seconds()
    last_hour = _recent(before, volume, elapsed, minutes=60)
    last_15 = _recent(before, volume, elapsed, minutes=15)
    projection = target_projection(
        target_rate=row.target.rate,
        start=row.start,
        end=row.end,
        at=at,
        volume=volume,
        last_hour_rate=last_hour,
        at_risk_fraction=at_risk_fraction,
    )
    row.so_far = SoFar(at, elapsed, volume, last_hour, projection, last_15min_rate=last_15)
    row.volume = volume
    row.average_rate = row.so_far.average_rate
    if row.max_window_start is None:  # shorter than the max window: the whole activity's average, so far
        row.max_rate = row.average_rate


def _recent(before: list[float], volume: float, elapsed: float, *, minutes: int) -> float:
    """The rate of the last `minutes` minutes before `at` inside the window: their bytes over their length, or over
    the time since the window opened when that is shorter (a window 10 minutes old has no last hour: its rate is
    that of its 10 minutes, not a sixth of it)."""
    moved = sum(before[-minutes:])
    if len(before) < minutes:  # the window's start lies inside them: its partial first minute counts too
        moved = volume
    span = min(minutes * 60.0, elapsed)
    return moved / span if span > 0 else 0.0


def _network_figures(row: TargetRates) -> None:
    """A network target's rates are its measurements: average the mean, max the best; no volume, no projection."""
    network = row.network
    row.average_rate = network.mean_rate or 0.0
    row.max_rate = network.best.rate if network.best else 0.0
    row.max_window_start = row.stable_window_start = None
    row.stable_rate = None
    if row.so_far is not None:
        row.so_far = SoFar(
            row.so_far.at, row.so_far.elapsed_seconds, row.volume, 0.0, Projection(row.verdict, None, None)
        )


def runs_outside_windows(*, rates: list[TargetRates]) -> None:
    """How many runs of each row's activity ran wholly outside its window (their records count for nothing), in one
    query on the records of the activities' runs."""
    activity_ids = {row.target.activity_id for row in rates}
    if not activity_ids:
        return
    outside = Q(start__gte=F("activity__end")) | Q(end__lte=F("activity__start"))
    counts = dict(
        TransferRecord.objects.filter(activity_id__in=activity_ids, run__isnull=False)
        .values("activity_id")
        .annotate(runs=Count("run_id", distinct=True, filter=outside))
        .values_list("activity_id", "runs")
    )
    for row in rates:
        row.runs_outside_window = counts.get(row.target.activity_id, 0)


def challenge_figures(
    *,
    challenge: Challenge,
    experiment: str | None = None,
    activity: str | None = None,
    site: str | None = None,
    user: Any = None,
    at: datetime | None = None,
) -> list[TargetRates]:
    """The figures of every (filtered) target of the challenge that `user` may read (all without a user)."""
    targets = challenge_targets(challenge=challenge, experiment=experiment, activity=activity, site=site)
    if user is not None:
        targets = targets.restrict(user)  # type: ignore[attr-defined]
    return targets_figures(challenge=challenge, targets=targets, at=at)


# --- the one row every surface formats ------------------------------------------------------------------------


def target_url(target: Target) -> str | None:
    """The target's page (None where the results pages are not routed)."""
    try:
        return reverse("results:target", args=[target.activity.challenge.slug, target.pk])
    except NoReverseMatch:
        return None


def place_row(target: Target) -> dict[str, Any]:
    """Where a target is, named the same way on every surface: `site` and `direction`, or `link` {from, to}."""
    if target.is_link:
        return {"site": None, "link": {"from": target.link_from.name, "to": target.link_to.name}, "direction": None}  # type: ignore[union-attr]
    return {"site": target.site.name, "link": None, "direction": target.direction}  # type: ignore[union-attr]


def figures_row(row: TargetRates) -> dict[str, Any]:
    """A target's figures as the rates API, the now API and the exports give them (bytes, B/s, ISO times)."""
    target = row.target
    activity = target.activity
    so_far = row.so_far
    network = row.network
    return {
        "id": target.pk,
        "url": target_url(target),
        "activity": activity.name,
        "experiment": activity.experiment.name,
        "mode": activity.mode,
        "kind": activity.kind,
        **place_row(target),
        "target_rate": target.rate,
        "window_start": row.start,
        "window_end": row.end,
        "window_ended": row.ended,
        "at": so_far.at if so_far is not None else None,
        "measured_by": row.measured_by,
        "volume": None if network is not None else row.volume,
        "average_rate": row.average_rate,
        "max_rate": row.max_rate,
        "stable_rate": row.stable_rate,
        "last_15min_rate": None if so_far is None or network is not None else so_far.last_15min_rate,
        "last_hour_rate": None if so_far is None or network is not None else so_far.last_hour_rate,
        "required_rate": so_far.projection.required_rate if so_far is not None else None,
        "projected_average_rate": so_far.projection.projected_average_rate if so_far is not None else None,
        "files_ok": row.files_ok,
        "files_failed": row.files_failed,
        "failure_ratio": row.failure_ratio,
        "verdict": row.verdict.value,
        "runs_outside_window": row.runs_outside_window,
        "network": network.as_dict() if network is not None else None,
        "so_far": None
        if so_far is None
        else {
            "at": so_far.at,
            "elapsed_seconds": so_far.elapsed_seconds,
            "volume": so_far.volume,
            "average_rate": so_far.average_rate,
            "last_15min_rate": so_far.last_15min_rate,
            "last_hour_rate": so_far.last_hour_rate,
            "required_rate": so_far.projection.required_rate,
            "projected_average_rate": so_far.projection.projected_average_rate,
        },
    }


def recent_rate(minutes: Sequence[float], count: int, *, skip: int = 0) -> float:
    """The mean rate of `count` minutes ending `skip` minutes before the end of `minutes` (bytes per minute)."""
    values = minutes[max(len(minutes) - skip - count, 0) : max(len(minutes) - skip, 0)]
    return sum(values) / (count * 60) if count > 0 else 0.0
