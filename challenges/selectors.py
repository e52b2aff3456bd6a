"""Reads of the plan for the pages and feeds: the clock grid, the site load planner, experiments at once.

Every selector costs a constant number of queries whatever the size of the plan. Times are bucketed from the
challenge's start (floored to the step, UTC); an activity counts in every bucket it overlaps, even partly,
because a planner would rather see a possible clash than miss one.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Prefetch, Q, QuerySet

from sites.models import Capacity, Site
from sites.roles import object_for

from .choices import TAPE_KINDS
from .models import Activity, Challenge, Target

WEEK = timedelta(days=7)
_TAPE_KIND_VALUES = frozenset(str(kind) for kind in TAPE_KINDS)


# --- the clock grid -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClockEntry:
    """One activity in a cell of the clock grid."""

    activity_id: int
    name: str
    mode: str
    kind: str


@dataclass(frozen=True)
class ClockCell:
    """What one experiment runs during one week."""

    week: datetime
    entries: tuple[ClockEntry, ...] = ()

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes running, each once, in order of first start."""
        return tuple(dict.fromkeys(entry.mode for entry in self.entries))

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(entry.kind for entry in self.entries))

    @property
    def labels(self) -> tuple[str, ...]:
        """ "DT (tape-write)" for each distinct mode and kind."""
        return tuple(dict.fromkeys(f"{entry.mode} ({entry.kind})" for entry in self.entries))


@dataclass(frozen=True)
class ClockRow:
    experiment: str
    cells: tuple[ClockCell, ...]


@dataclass(frozen=True)
class ClockGrid:
    """Experiments down, ISO weeks (Monday 00:00 UTC) across the challenge."""

    weeks: tuple[datetime, ...]
    rows: tuple[ClockRow, ...]

    def cell(self, *, experiment: str, week: datetime) -> ClockCell:
        for row in self.rows:
            if row.experiment == experiment:
                return row.cells[self.weeks.index(week)]
        raise KeyError(experiment)


def week_start(moment: datetime) -> datetime:
    """Monday 00:00 UTC of the ISO week holding the moment."""
    moment = moment.astimezone(UTC)
    return datetime(moment.year, moment.month, moment.day, tzinfo=UTC) - timedelta(days=moment.weekday())


def clock_grid(*, challenge: Challenge, user: Any = None) -> ClockGrid:
    """The grid coordinators draw by hand: for each experiment with activities and each week of the challenge,
    the modes (and kinds) of the activities overlapping that week. One query."""
    weeks: list[datetime] = []
    week = week_start(challenge.start)
    while week < challenge.end:
        weeks.append(week)
        week += WEEK
    entries: dict[str, list[list[ClockEntry]]] = {}
    activities = Activity.objects.filter(challenge=challenge)
    activities = activities if user is None else activities.restrict(user)
    for activity in activities.select_related("experiment").order_by("start", "pk"):
        cells = entries.setdefault(activity.experiment.name, [[] for _ in weeks])
        for index, week in enumerate(weeks):
            if activity.start < week + WEEK and activity.end > week:
                cells[index].append(ClockEntry(activity.pk, activity.name, activity.mode, activity.kind))
    rows = tuple(
        ClockRow(name, tuple(ClockCell(week, tuple(cell)) for week, cell in zip(weeks, entries[name], strict=True)))
        for name in sorted(entries, key=str.lower)
    )
    return ClockGrid(tuple(weeks), rows)


def challenges_visible(*, user: Any) -> QuerySet[Challenge]:
    """The challenges `user` may read (sites.roles' rule): all of them, or for a DDM service those with an activity
    of its experiment (a challenge without it does not exist for it)."""
    return Challenge.objects.restrict(user)  # type: ignore[no-any-return]


def challenge_for(
    *, slug: str, user: Any, action: str = "view", queryset: QuerySet[Challenge] | None = None
) -> Challenge:
    """The challenge of `slug`, loaded for the user and `action` through the access policy (sites.roles): a 404 when
    they may not read it, a 403 when they read it but may not take the action. Every page loads its challenge here;
    `queryset` adds what the page reads with it (select_related)."""
    queryset = Challenge.objects.all() if queryset is None else queryset
    return object_for(queryset=queryset, user=user, action=action, slug=slug)  # type: ignore[no-any-return]


def challenge_activities(*, challenge: Challenge, user: Any = None) -> QuerySet[Activity]:
    """The challenge's activities (those the user may see, when given) with challenge, experiment, source and
    targets (and their sites) loaded: two queries."""
    activities = Activity.objects.filter(challenge=challenge)
    return (
        (activities if user is None else activities.restrict(user))
        .select_related("challenge", "experiment", "source")
        .prefetch_related(Prefetch("targets", queryset=Target.objects.select_related("site", "link_from", "link_to")))
    )


def activities_overlapping(*, challenge: Challenge, user: Any = None) -> QuerySet[Activity]:
    """Activities of any challenge, of the experiments of this challenge's, whose windows overlap this challenge's
    (those the user may see, when given), with targets: what may claim the same transfers as its activities."""
    experiments = Activity.objects.filter(challenge=challenge).values("experiment_id")
    activities = Activity.objects.filter(
        experiment_id__in=experiments, start__lt=challenge.end, end__gt=challenge.start
    )
    return (
        (activities if user is None else activities.restrict(user))
        .select_related("challenge", "experiment")
        .prefetch_related(Prefetch("targets", queryset=Target.objects.select_related("site", "link_from", "link_to")))
        .order_by("start", "pk")
    )


def site_activities(*, site: Site, user: Any = None) -> QuerySet[Activity]:
    """Activities of every challenge that target or source the site (those the user may see, when given), with
    their challenge and targets."""
    touching = Target.objects.filter(Q(site=site) | Q(link_from=site) | Q(link_to=site)).values("activity_id")
    activities = Activity.objects.filter(Q(source=site) | Q(pk__in=touching))
    return (
        (activities if user is None else activities.restrict(user))
        .select_related("challenge", "experiment", "source")
        .prefetch_related(Prefetch("targets", queryset=Target.objects.select_related("site", "link_from", "link_to")))
        .order_by("start", "pk")
    )


def target_derivation(*, target: Target) -> str | None:
    """ "nominal 0.0967 GB/s x headroom 1.5 x efficiency 2 = 0.290 GB/s", or None without a nominal rate."""
    if target.nominal_rate is None:
        return None
    factors = "".join(f" x {name} {float(value):g}" for name, value in target.factors.items())
    return f"nominal {target.nominal_rate / 1e9:#.3g} GB/s{factors} = {target.rate / 1e9:#.3g} GB/s"


# --- time buckets ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Buckets:
    origin: datetime
    step: int
    count: int

    def index_floor(self, moment: datetime) -> int:
        return min(max(math.floor((moment - self.origin).total_seconds() / self.step), 0), self.count)

    def index_ceil(self, moment: datetime) -> int:
        return min(max(math.ceil((moment - self.origin).total_seconds() / self.step), 0), self.count)

    def at(self, index: int) -> datetime:
        return self.origin + timedelta(seconds=index * self.step)


def _buckets(challenge: Challenge, step: int) -> _Buckets:
    if step <= 0:
        raise ValueError("step must be a positive number of seconds")
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    origin = epoch + timedelta(seconds=math.floor((challenge.start - epoch).total_seconds() / step) * step)
    count = math.ceil((challenge.end - origin).total_seconds() / step)
    return _Buckets(origin, step, count)


def _boundaries(spans: Iterable[tuple[int, int]], count: int) -> list[int]:
    """The bucket indexes where something starts or stops, with 0 and count: between two, nothing changes."""
    points = {0, count}
    for first, stop in spans:
        points.update((first, stop))
    return sorted(points)


# --- the site load planner ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SiteColumn:
    """A site of the load planner with what it can do (None: unknown, never oversubscribed)."""

    site_id: int
    name: str
    network_capacity: float | None
    tape_capacity: float | None


@dataclass(frozen=True)
class SiteHourLoad:
    """One site's load through a span of hours, bytes per second, with what each experiment adds."""

    network_in: float = 0.0
    network_out: float = 0.0
    tape_in: float = 0.0
    tape_out: float = 0.0
    network_capacity: float | None = None
    tape_capacity: float | None = None
    network_by_experiment: tuple[tuple[str, float], ...] = ()
    tape_by_experiment: tuple[tuple[str, float], ...] = ()

    @property
    def network(self) -> float:
        return self.network_in + self.network_out

    @property
    def tape(self) -> float:
        return self.tape_in + self.tape_out

    @property
    def idle(self) -> bool:
        return not (self.network_by_experiment or self.tape_by_experiment)

    @property
    def network_oversubscribed(self) -> bool:
        return self.network_capacity is not None and self.network > self.network_capacity

    @property
    def tape_oversubscribed(self) -> bool:
        return self.tape_capacity is not None and self.tape > self.tape_capacity

    @property
    def oversubscribed(self) -> bool:
        return self.network_oversubscribed or self.tape_oversubscribed

    @property
    def oversubscribed_experiments(self) -> tuple[str, ...]:
        """The experiments whose targets add up to the oversubscription, by name."""
        names: set[str] = set()
        if self.network_oversubscribed:
            names.update(name for name, _ in self.network_by_experiment)
        if self.tape_oversubscribed:
            names.update(name for name, _ in self.tape_by_experiment)
        return tuple(sorted(names, key=str.lower))


@dataclass(frozen=True)
class LoadSpan:
    """A run of hours [start, end) through which every site's load stays the same; `loads` follows the sites."""

    start: datetime
    end: datetime
    hours: float
    loads: tuple[SiteHourLoad, ...]


@dataclass(frozen=True)
class SiteLoad:
    """The load planner: for each site (columns) and each hour, collapsed into spans of identical hours."""

    start: datetime
    end: datetime
    step: int
    sites: tuple[SiteColumn, ...]
    spans: tuple[LoadSpan, ...]

    def at(self, *, site: str, when: datetime) -> SiteHourLoad:
        """The load of the named site in the hour holding `when`."""
        column = [column.name for column in self.sites].index(site)
        for span in self.spans:
            if span.start <= when < span.end:
                return span.loads[column]
        raise KeyError(when)

    def hourly(self) -> Iterator[tuple[datetime, tuple[SiteHourLoad, ...]]]:
        """Every step of the challenge with the loads of the sites, uncollapsed."""
        for span in self.spans:
            moment = span.start
            while moment < span.end:
                yield moment, span.loads
                moment += timedelta(seconds=self.step)

    def oversubscribed_hours(self, *, site: str) -> list[datetime]:
        column = [column.name for column in self.sites].index(site)
        return [moment for moment, loads in self.hourly() if loads[column].oversubscribed]


@dataclass
class _Contribution:
    site_id: int
    tape: bool
    direction: str
    experiment: str
    rate: float
    first: int
    stop: int


def _capacities(capacity: Capacity | None) -> tuple[float | None, float | None]:
    if capacity is None:
        return None, None
    return capacity.network_rate, capacity.tape_rate


def site_load(*, challenge: Challenge, step: int = 3600, user: Any = None) -> SiteLoad:
    """For each site touched by a target and each hour of the challenge, the sum of the targets of the activities
    running then: network load for the other kinds, tape load for tape kinds (in and out kept apart, both count),
    a link loading its source (out) and its destination (in); compared with the network rate and with drives x
    per-drive rate. Walks the activities' boundaries: one query, work proportional to targets x boundaries."""
    buckets = _buckets(challenge, step)
    activities = Activity.objects.filter(challenge=challenge)
    activities = activities if user is None else activities.restrict(user)
    targets = Target.objects.filter(activity__in=activities).select_related(
        "activity__experiment", "site__capacity", "link_from__capacity", "link_to__capacity"
    )
    sites: dict[int, Site] = {}
    contributions: list[_Contribution] = []
    for target in targets:
        activity = target.activity
        first, stop = buckets.index_floor(activity.start), buckets.index_ceil(activity.end)
        if first >= stop:
            continue
        ends: list[tuple[Site, str]]
        if target.site is not None:
            ends = [(target.site, target.direction)]
        else:
            assert target.link_from is not None and target.link_to is not None
            ends = [(target.link_from, "out"), (target.link_to, "in")]
        for site, direction in ends:
            sites[site.pk] = site
            contributions.append(
                _Contribution(
                    site.pk,
                    activity.kind in _TAPE_KIND_VALUES,
                    direction,
                    activity.experiment.name,
                    target.rate,
                    first,
                    stop,
                )
            )
    ordered = sorted(sites.values(), key=lambda site: (site.tier, site.name.lower()))
    columns = tuple(SiteColumn(site.pk, site.name, *_capacities(site.capacity_or_none)) for site in ordered)
    points = _boundaries(((c.first, c.stop) for c in contributions), buckets.count)
    spans: list[LoadSpan] = []
    for first, stop in itertools.pairwise(points):
        active = [c for c in contributions if c.first <= first and c.stop >= stop]
        loads = tuple(_site_hour_load(column, [c for c in active if c.site_id == column.site_id]) for column in columns)
        if spans and spans[-1].loads == loads:
            previous = spans.pop()
            spans.append(
                LoadSpan(previous.start, buckets.at(stop), previous.hours + (stop - first) * step / 3600, loads)
            )
        else:
            spans.append(LoadSpan(buckets.at(first), buckets.at(stop), (stop - first) * step / 3600, loads))
    return SiteLoad(buckets.origin, buckets.at(buckets.count), step, columns, tuple(spans))


def _site_hour_load(column: SiteColumn, active: list[_Contribution]) -> SiteHourLoad:
    sums: dict[tuple[bool, str], list[float]] = defaultdict(list)
    by_experiment: dict[bool, dict[str, list[float]]] = {False: defaultdict(list), True: defaultdict(list)}
    for contribution in active:
        sums[(contribution.tape, contribution.direction)].append(contribution.rate)
        by_experiment[contribution.tape][contribution.experiment].append(contribution.rate)

    def named(tape: bool) -> tuple[tuple[str, float], ...]:
        return tuple((name, math.fsum(rates)) for name, rates in sorted(by_experiment[tape].items()))

    return SiteHourLoad(
        network_in=math.fsum(sums[(False, "in")]),
        network_out=math.fsum(sums[(False, "out")]),
        tape_in=math.fsum(sums[(True, "in")]),
        tape_out=math.fsum(sums[(True, "out")]),
        network_capacity=column.network_capacity,
        tape_capacity=column.tape_capacity,
        network_by_experiment=named(False),
        tape_by_experiment=named(True),
    )


# --- experiments at once --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConcurrencySpan:
    """A run of hours [start, end) through which the same experiments run."""

    start: datetime
    end: datetime
    hours: float
    experiments: tuple[str, ...] = field(default=())

    @property
    def count(self) -> int:
        return len(self.experiments)


@dataclass(frozen=True)
class ExperimentsConcurrency:
    start: datetime
    end: datetime
    step: int
    spans: tuple[ConcurrencySpan, ...]

    @property
    def peak(self) -> int:
        return max((span.count for span in self.spans), default=0)

    def at(self, when: datetime) -> ConcurrencySpan:
        for span in self.spans:
            if span.start <= when < span.end:
                return span
        raise KeyError(when)

    def hourly(self) -> Iterator[tuple[datetime, ConcurrencySpan]]:
        for span in self.spans:
            moment = span.start
            while moment < span.end:
                yield moment, span
                moment += timedelta(seconds=self.step)


def experiments_concurrency(*, challenge: Challenge, step: int = 3600, user: Any = None) -> ExperimentsConcurrency:
    """Per hour of the challenge, which experiments run an activity (and so how many at once). One query."""
    buckets = _buckets(challenge, step)
    windows: list[tuple[str, int, int]] = []
    activities = Activity.objects.filter(challenge=challenge)
    activities = activities if user is None else activities.restrict(user)
    for name, start, end in activities.values_list("experiment__name", "start", "end"):
        first, stop = buckets.index_floor(start), buckets.index_ceil(end)
        if first < stop:
            windows.append((name, first, stop))
    points = _boundaries(((first, stop) for _, first, stop in windows), buckets.count)
    spans: list[ConcurrencySpan] = []
    for first, stop in itertools.pairwise(points):
        running = tuple(sorted({name for name, a, b in windows if a <= first and b >= stop}, key=str.lower))
        hours = (stop - first) * step / 3600
        if spans and spans[-1].experiments == running:
            previous = spans.pop()
            spans.append(ConcurrencySpan(previous.start, buckets.at(stop), previous.hours + hours, running))
        else:
            spans.append(ConcurrencySpan(buckets.at(first), buckets.at(stop), hours, running))
    return ExperimentsConcurrency(buckets.origin, buckets.at(buckets.count), step, tuple(spans))
