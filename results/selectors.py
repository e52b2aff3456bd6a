"""Reads of results for the pages and the API: target versus achieved (scoped to the experiments a user may
read), the rate of one target over time in bins, the statistics of its throughput samples, and the comparison
of a challenge with an earlier one. The numbers themselves are defined in results/targets/rates.py."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet

from challenges.models import Challenge, Target

from .models import TransferRecord
from .targets.figures import challenge_figures, targets_figures
from .targets.rates import TargetRates, challenge_targets

BIN_CHOICES = (1, 5, 10, 60)  # minutes
RECORD_RELATIONS = ("experiment", "source_site", "destination_site")


def records_visible_to(*, user: Any) -> QuerySet[TransferRecord]:
    """The records a user may read (the access policy: TransferRecord.objects.restrict), oldest first, with their
    experiment and sites."""
    return TransferRecord.objects.restrict(user).select_related(*RECORD_RELATIONS).order_by("start", "id")


def targets_for_challenge(
    *,
    challenge: Challenge,
    experiment: str | None = None,
    activity: str | None = None,
    site: str | None = None,
    user: Any = None,
) -> QuerySet[Target]:
    """The challenge's targets with the filters of the table; with a user, those they may read (Target's
    restrict: a DDM service reads its own experiment's)."""
    targets = challenge_targets(challenge=challenge, experiment=experiment, activity=activity, site=site)
    return targets if user is None else targets.restrict(user)  # type: ignore[attr-defined, no-any-return]


# The figures of a challenge's targets: results.targets.figures, the one definition (the views and the API call it
# under the name they have always used).
challenge_rates = challenge_figures


def target_figures(*, challenge: Challenge, target: Target, at: datetime | None = None) -> TargetRates:
    """One target's figures with every minute of its window (its page's plots)."""
    return targets_figures(challenge=challenge, targets=[target], at=at, with_minutes=True)[0]


@dataclass(frozen=True)
class RateFilterChoices:
    """What the filters of a challenge's table offer: its experiments, activities and sites (or link ends)."""

    experiments: list[str]
    activities: list[str]
    sites: list[str]


def rate_filter_choices(*, challenge: Challenge, user: Any = None) -> RateFilterChoices:
    """The filter options of the challenge's targets (those the user may read, when given), in one query."""
    rows = targets_for_challenge(challenge=challenge, user=user).values_list(
        "activity__experiment__name", "activity__name", "site__name", "link_from__name", "link_to__name"
    )
    experiments: set[str] = set()
    activities: set[str] = set()
    sites: set[str] = set()
    for experiment, activity, site, link_from, link_to in rows:
        experiments.add(experiment)
        activities.add(activity)
        sites.update(name for name in (site, link_from, link_to) if name)
    return RateFilterChoices(
        experiments=sorted(experiments, key=str.lower),
        activities=sorted(activities, key=str.lower),
        sites=sorted(sites, key=str.lower),
    )


# --- one target over time -------------------------------------------------------------------------------------


def default_bin_minutes(*, duration: timedelta) -> int:
    """Bins a plot can show: minutes up to 6 hours, 10 minutes up to 3 days, hours beyond."""
    if duration <= timedelta(hours=6):
        return 1
    if duration <= timedelta(days=3):
        return 10
    return 60


@dataclass(frozen=True)
class RateSeries:
    """The mean rate (bytes per second) of each bin of `bin_minutes` whole minutes of the activity; the last bin
    may be shorter and is averaged over its own length."""

    bin_minutes: int
    starts: list[datetime]
    ends: list[datetime]
    rates: list[float]


def rate_series(*, rates: TargetRates, bin_minutes: int) -> RateSeries:
    """Rebin the per-minute bytes of `rates.minutes` into mean rates over bins of `bin_minutes`."""
    if bin_minutes <= 0:
        raise ValueError("bin_minutes must be positive")
    starts: list[datetime] = []
    ends: list[datetime] = []
    values: list[float] = []
    minutes = rates.minutes
    for index in range(0, len(minutes), bin_minutes):
        chunk = minutes[index : index + bin_minutes]
        starts.append(chunk[0][0])
        ends.append(chunk[-1][0] + timedelta(minutes=1))
        values.append(sum(moved for _, moved in chunk) / (60 * len(chunk)))
    return RateSeries(bin_minutes=bin_minutes, starts=starts, ends=ends, rates=values)


@dataclass(frozen=True)
class ThroughputStats:
    """Min, mean, max and the (population) standard deviation of throughput samples, bytes per second."""

    count: int
    minimum: float | None
    mean: float | None
    maximum: float | None
    standard_deviation: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "min": self.minimum,
            "mean": self.mean,
            "max": self.maximum,
            "std": self.standard_deviation,
        }


def throughput_stats(*, samples: Iterable[float]) -> ThroughputStats:
    """Statistics of the samples; every figure is None without samples."""
    values = list(samples)
    if not values:
        return ThroughputStats(count=0, minimum=None, mean=None, maximum=None, standard_deviation=None)
    mean = math.fsum(values) / len(values)
    variance = math.fsum((value - mean) ** 2 for value in values) / len(values)
    return ThroughputStats(
        count=len(values),
        minimum=min(values),
        mean=mean,
        maximum=max(values),
        standard_deviation=math.sqrt(variance),
    )


# --- comparing with an earlier challenge ----------------------------------------------------------------------


def match_key(rates: TargetRates) -> tuple[str, str, str, str, str, str]:
    """What makes a row of one challenge the same as a row of another: experiment, mode, site or link, direction
    (names compared without case)."""
    target = rates.target
    activity = target.activity
    if target.is_link:
        place = ("link", target.link_from.name.lower(), target.link_to.name.lower())  # type: ignore[union-attr]
    else:
        place = ("site", target.site.name.lower(), "")  # type: ignore[union-attr]
    return (activity.experiment.name.lower(), activity.mode.lower(), *place, target.direction or "")


@dataclass
class ComparedRow:
    """One row of the comparison: the target of this challenge, its match in the earlier one, or both, and the
    ratio this / earlier of the stable rates (of the averages when either has no stable rate)."""

    current: TargetRates | None
    earlier: TargetRates | None
    ratio: float | None = None
    basis: str | None = None  # "stable" or "average"
    key: tuple[str, ...] = field(default=(), repr=False)

    @property
    def matched(self) -> bool:
        return self.current is not None and self.earlier is not None


def _ratio(current: TargetRates, earlier: TargetRates) -> tuple[float | None, str]:
    if current.stable_rate is not None and earlier.stable_rate is not None:
        this, that, basis = current.stable_rate, earlier.stable_rate, "stable"
    else:
        this, that, basis = current.average_rate, earlier.average_rate, "average"
    return (this / that if that else None), basis


def rates_compare(*, current: list[TargetRates], earlier: list[TargetRates]) -> list[ComparedRow]:
    """Pair the rows of two challenges by `match_key`, in their order when a key repeats (the first ATLAS DT into
    CNAF with the first, ...). Rows without a partner stay, on their own side; unmatched earlier rows come after
    the rows of this challenge."""
    waiting: dict[tuple[str, ...], list[TargetRates]] = defaultdict(list)
    for rates in earlier:
        waiting[match_key(rates)].append(rates)
    rows: list[ComparedRow] = []
    for rates in current:
        key = match_key(rates)
        partner = waiting[key].pop(0) if waiting.get(key) else None
        row = ComparedRow(current=rates, earlier=partner, key=key)
        if partner is not None:
            row.ratio, row.basis = _ratio(rates, partner)
        rows.append(row)
    unmatched = {id(rates) for left in waiting.values() for rates in left}
    rows.extend(
        ComparedRow(current=None, earlier=rates, key=match_key(rates)) for rates in earlier if id(rates) in unmatched
    )
    return rows
