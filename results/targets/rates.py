"""Target versus achieved: the rate definitions, computed from the rollups (per flow, an hour of minutes a row).

Definitions (also written on the results page):
- A successful transfer's bytes are spread uniformly over its real [start, end); failed and cancelled transfers
  add no bytes.
- For a target of an activity with window [A, B): the records that count for the activity (results.store.attribution:
  its runs', and the ingested transfers its rules give it) into the site (direction in), out of it (out), or over
  the link; only the part of each transfer inside [A, B) counts.
- average rate = bytes inside [A, B) / (B - A).
- max rate = the highest mean rate over any window of `max_window` seconds that lies inside [A, B) and starts on
  a minute boundary (the whole activity if it is shorter).
- stable rate = the same with `stable_window`; empty when the activity is shorter than that window.
- volume, files ok, files failed, failure ratio (of files ending inside [A, B)).
- verdict: met when stable >= target, partly when only max >= target, missed otherwise; without a stable rate the
  average stands in for it. Only once the window has ended: before, the live verdict of results.targets.projection, with
  the volume and average so far (`so_far`).
Rates are bytes per second.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from itertools import accumulate, islice
from operator import sub
from typing import Any

import psycopg
from django.core.cache import cache
from django.db.models import Q, QuerySet
from redis.exceptions import RedisError

from challenges.models import Challenge, Target
from common.db import read_alias, read_connection

from ..choices import RecordState, Verdict
from ..models import MINUTES_PER_HOUR, RollupVersion, TransferRecord
from ..store.rollups import MINUTE, minute_floor
from .projection import SoFar


@dataclass
class TargetRates:
    """A target's figures, in bytes and bytes per second: what its flow moved inside its window (this module), and,
    set by results.targets.figures, its numbers so far while the window runs and a network target's measurements.
    Every surface (table, exports, page, APIs, now board, alerts) reads these and only formats them."""

    target: Target
    start: datetime
    end: datetime
    volume: float = 0.0
    # Bytes inside the window / the part of it that has passed: the whole window once it has ended, so far before
    # (results.targets.figures sets it from `so_far`).
    average_rate: float = 0.0
    max_rate: float = 0.0
    max_window_start: datetime | None = None
    stable_rate: float | None = None
    stable_window_start: datetime | None = None
    files_ok: int = 0
    files_failed: int = 0
    # The bytes of each full minute of the window, from `series_first` on (with_minutes): the plots' series and the
    # figures so far read them. Kept as numbers: a running target of two weeks has 20,160 of them, and making a
    # (minute, bytes) pair of each for 30 targets took 0.4 s of every read of a running challenge's table.
    series: list[float] = field(default_factory=list, repr=False)
    series_first: datetime | None = field(default=None, repr=False)
    # Set by results.targets.figures for a window that has not ended (or not begun): the live numbers.
    so_far: SoFar | None = None
    runs_outside_window: int = 0  # runs of the activity that ran wholly outside its window (count for nothing)
    # A network target: what its activity's iperf3 runs measured inside the window (results.targets.network).
    network: Any = None
    # The bytes per minute of the last minutes before `at` (oldest first) that figures read: the board's trend, alerts.
    recent: list[float] = field(default_factory=list, repr=False)
    end_edge_bytes: float = field(default=0.0, repr=False)  # of a window that does not end on a minute

    @property
    def failure_ratio(self) -> float | None:
        total = self.files_ok + self.files_failed
        return self.files_failed / total if total else None

    @property
    def ended(self) -> bool:
        return self.so_far is None

    @property
    def minutes(self) -> list[tuple[datetime, float]]:
        """(minute, bytes) of each full minute of `series` (a plot's data)."""
        first = self.series_first
        if first is None:
            return []
        return [(first + index * MINUTE, moved) for index, moved in enumerate(self.series)]

    def series_index(self, moment: datetime) -> int:
        """How many minutes of `series` begin before `moment`."""
        if self.series_first is None:
            return 0
        passed = -((self.series_first - moment) // MINUTE)  # the minutes that begin before `moment`: a ceiling
        return min(max(passed, 0), len(self.series))

    @property
    def measured_by(self) -> str:
        """What measures the target: "iperf3" for a network target, "transfers" (records) for every other."""
        return "iperf3" if self.network is not None else "transfers"

    @property
    def verdict(self) -> Verdict:
        """The one verdict (results.choices.Verdict): a network target's from its measurements; otherwise met,
        partly or missed once the window has ended, and before it the live verdict (never missed)."""
        if self.network is not None:
            return self.network.verdict(target_rate=self.target.rate, ended=self.ended, started=self.started)
        if self.so_far is not None and self.so_far.projection.verdict is not None:
            return self.so_far.projection.verdict
        sustained = self.stable_rate if self.stable_rate is not None else self.average_rate
        if sustained >= self.target.rate:
            return Verdict.MET
        if self.max_rate >= self.target.rate:
            return Verdict.PARTLY
        return Verdict.MISSED

    @property
    def started(self) -> bool:
        return self.so_far is None or self.so_far.elapsed_seconds > 0


def _flow_filter(target: Target, prefix: str = "") -> Q:
    """Records (or rollup rows) that count for the target's activity, through its site or link."""
    condition = Q(**{f"{prefix}activity_id": target.activity_id})
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


# One query for all the targets. Per target, the FlowRollup rows of its flow that overlap its full minutes
# [first, last): each row's place (`lead`: minutes from `first` to the row's hour, negative for an hour that starts
# before `first`) and its 60 minutes of bytes, as one two-dimensional array in hour order, and the files that
# ended inside [first, last): the hour's totals for whole hours, the sum of the array's slice for the partial hours
# at the ends. The arrays come from a subquery ordered by hour, which the unique index delivers without sorting;
# PostgreSQL's aggregates keep the order of such a subquery (its documentation: "supplying the input values from a
# sorted subquery will usually work"). The best windows are then found in Python from a running total
# (itertools.accumulate): the bytes of the window starting at minute i are through[i + width] - through[i]. Rows
# come back in binary: the arrays hold tens of thousands of floats, and text would cost more than the scan.
FLOW_HOURS_READ = """
SELECT f.leads, f.bytes, f.files_ok, f.files_failed
FROM unnest(%(activity)s::bigint[], %(flow)s::text[], %(site)s::bigint[], %(peer)s::bigint[],
            %(first)s::timestamptz[], %(last)s::timestamptz[], %(minutes)s::int[])
     WITH ORDINALITY AS t(activity_id, flow, site_id, peer_id, first, last, minutes, position)
CROSS JOIN LATERAL (
    SELECT array_agg(s.lead) AS leads, array_agg(s.bytes) AS bytes, coalesce(sum(s.ok), 0)::bigint AS files_ok,
           coalesce(sum(s.failed), 0)::bigint AS files_failed
    FROM (
        SELECT l.lead, r.bytes,
               CASE WHEN l.lead >= 0 AND l.lead + 60 <= t.minutes THEN r.hour_files_ok
                    ELSE (SELECT sum(v) FROM unnest(r.files_ok[greatest(1, 1 - l.lead):least(60, t.minutes - l.lead)])
                          AS v) END AS ok,
               CASE WHEN l.lead >= 0 AND l.lead + 60 <= t.minutes THEN r.hour_files_failed
                    ELSE (SELECT sum(v)
                          FROM unnest(r.files_failed[greatest(1, 1 - l.lead):least(60, t.minutes - l.lead)])
                          AS v) END AS failed
        FROM results_flowrollup r
        CROSS JOIN LATERAL (
            SELECT ((date_part('epoch', r.hour) - date_part('epoch', t.first)) / 60)::int AS lead
        ) AS l
        WHERE r.activity_id = t.activity_id AND r.flow = t.flow AND r.site_id = t.site_id
          AND r.peer_id = t.peer_id AND r.hour > t.first - interval '1 hour' AND r.hour < t.last
        ORDER BY r.hour
    ) AS s
) AS f
ORDER BY t.position
"""


FlowKey = tuple[int, str, int, int]


def _flow(target: Target) -> FlowKey:
    """The FlowRollup key of a target: (activity, flow, site, peer)."""
    if target.is_link:
        return (target.activity_id, "link", target.link_from_id, target.link_to_id)  # type: ignore[return-value]
    return (target.activity_id, target.direction, target.site_id, 0)  # type: ignore[return-value]


def _full_minutes(start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """[first, last): the minutes that lie wholly inside [start, end)."""
    first_full = minute_floor(start) if start == minute_floor(start) else minute_floor(start) + MINUTE
    return first_full, max(minute_floor(end), first_full)


@contextmanager
def _binary_cursor() -> Iterator[Any]:
    """A cursor whose results come back in PostgreSQL's binary format (arrays of floats load without parsing
    text), wrapped as Django wraps its own so that it is logged and counted like any query. On the replica where
    the request allows it (common.db), as the cache's version is read."""
    connection = read_connection()
    connection.ensure_connection()
    raw = psycopg.Cursor(connection.connection)
    raw.format = psycopg.pq.Format.BINARY
    # django-stubs types the argument as Django's wrapper; at run time it is the driver's cursor, as in Django.
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    wrapped = wrap(raw)  # type: ignore[arg-type]
    with wrapped as cursor:
        yield cursor


def _best_window(through: list[float], width: int) -> tuple[int, float] | None:
    """(first minute, bytes) of the window of `width` minutes with the most bytes (the earliest of equals), from
    the running total `through` (through[i] = bytes of the minutes before i); None when no window fits."""
    if width <= 0 or width >= len(through):
        return None
    sums = list(map(sub, islice(through, width, None), through))
    best = max(sums)
    return sums.index(best), best


def flow_minutes(
    *, targets: Sequence[Target], windows: Sequence[tuple[datetime, datetime]] | None = None
) -> tuple[list[tuple[datetime, datetime]], list[int], list[tuple[Any, ...]]]:
    """The rollup behind these targets in one query: per target its full minutes [first, last) of its activity's
    window (or of `windows`, one per target), their number and its row of FLOW_HOURS_READ (the hours' places and
    minutes of bytes, files ok/failed)."""
    if windows is None:
        windows = [(target.activity.start, target.activity.end) for target in targets]
    spans = [_full_minutes(start, end) for start, end in windows]
    keys = [_flow(target) for target in targets]
    counts = [int((last - first) / MINUTE) for first, last in spans]
    params: dict[str, list[Any]] = {
        "activity": [key[0] for key in keys],
        "flow": [key[1] for key in keys],
        "site": [key[2] for key in keys],
        "peer": [key[3] for key in keys],
        "first": [first for first, _ in spans],
        "last": [last for _, last in spans],
        "minutes": counts,
    }
    with _binary_cursor() as cursor:
        cursor.execute(FLOW_HOURS_READ, params)
        rows = cursor.fetchall()
    return spans, counts, rows


def targets_rates_compute(
    *, targets: Sequence[Target], max_window: int, stable_window: int, with_minutes: bool = False
) -> list[TargetRates]:
    """Every number of these targets (see the module's definitions), computed from the rollup in one query (and
    the raw records of the partial minutes of windows that do not start or end on a minute); with_minutes also
    fills the per-minute series that plots draw."""
    if not targets:
        return []
    spans, counts, rows = flow_minutes(targets=targets)
    widths = (_window_width(max_window), _window_width(stable_window))
    return [
        _from_row(
            target,
            first_full,
            minutes,
            row,
            windows=(max_window, stable_window),
            widths=widths,
            with_minutes=with_minutes,
        )
        for target, (first_full, _), minutes, row in zip(targets, spans, counts, rows, strict=True)
    ]


def _minutes_fill(leads: Sequence[int] | None, hours: Sequence[Sequence[float]] | None, minutes: int) -> list[float]:
    """The bytes of each full minute from a row of FLOW_HOURS_READ (`minutes` of them)."""
    series = [0.0] * minutes
    for lead, moved in zip(leads or (), hours or (), strict=True):
        # The hour's minutes that lie inside [first, last): all but those of a first or last partial hour.
        low, high = max(0, -lead), min(MINUTES_PER_HOUR, minutes - lead)
        series[lead + low : lead + high] = moved[low:high]
    return series


def _partial_minutes(start: datetime, end: datetime, first_full: datetime) -> list[tuple[datetime, datetime]]:
    """The partial minutes of [start, end) at its edges, which the rollup cannot split."""
    edges = []
    if first_full > start:  # the partial minute at the start
        edges.append((start, min(first_full, end)))
    if first_full <= minute_floor(end) < end:  # the partial minute at the end
        edges.append((minute_floor(end), end))
    return edges


def _from_row(
    target: Target,
    first_full: datetime,
    minutes: int,
    row: tuple[Any, ...],
    *,
    windows: tuple[int, int],
    widths: tuple[int, int],
    with_minutes: bool,
) -> TargetRates:
    """One target's numbers from its row of FLOW_HOURS_READ (plus the partial edge minutes from the raw records)."""
    leads, hours, files_ok, files_failed = row
    start, end = target.activity.start, target.activity.end
    result = TargetRates(target=target, start=start, end=end, files_ok=int(files_ok), files_failed=int(files_failed))
    series = _minutes_fill(leads, hours, minutes)
    through = list(accumulate(series, initial=0.0))
    result.volume = through[-1]
    for lower, upper in _partial_minutes(start, end, first_full):
        moved, ok, failed = _edge(target, lower, upper, (start, end))
        result.volume += moved
        if lower > start:  # the partial minute at the end: never part of a window's "so far"
            result.end_edge_bytes = moved
        result.files_ok += ok
        result.files_failed += failed
    duration = (end - start).total_seconds()
    result.average_rate = result.volume / duration if duration > 0 else 0.0
    max_window, stable_window = windows
    best = _best_window(through, widths[0])
    if best is None:  # shorter than the window: the whole activity
        result.max_rate = result.average_rate
    else:
        result.max_window_start, result.max_rate = first_full + best[0] * MINUTE, best[1] / max_window
    if duration >= stable_window:
        best = _best_window(through, widths[1])
        if best is not None:
            result.stable_window_start, result.stable_rate = first_full + best[0] * MINUTE, best[1] / stable_window
    if with_minutes:
        result.series, result.series_first = series, first_full
    return result


@dataclass
class FlowSeries:
    """A target's flow over a window [start, end): bytes per full minute from `first` on (the rollup), the exact
    bytes of the partial minutes at the edges, and the files that ended inside the window."""

    start: datetime
    end: datetime
    first: datetime
    minutes: list[float]
    edge_bytes: float = 0.0
    files_ok: int = 0
    files_failed: int = 0

    @property
    def volume(self) -> float:
        return sum(self.minutes) + self.edge_bytes


def flows_series(*, targets: Sequence[Target], windows: Sequence[tuple[datetime, datetime]]) -> list[FlowSeries]:
    """Each target's flow over its window [start, end) of `windows` (the challenge week as it happens: the hours
    before now, the activity's window so far), whatever its activity's window: one query on the rollup, and the raw
    records of the partial minutes at the edges of a window that does not start or end on a minute."""
    if not targets:
        return []
    spans, counts, rows = flow_minutes(targets=targets, windows=windows)
    series = []
    for target, (start, end), (first_full, _), minutes, (leads, hours, files_ok, files_failed) in zip(
        targets, windows, spans, counts, rows, strict=True
    ):
        values = _minutes_fill(leads, hours, minutes)
        flow = FlowSeries(start, end, first_full, values, files_ok=int(files_ok), files_failed=int(files_failed))
        for lower, upper in _partial_minutes(start, end, first_full):
            moved_bytes, ok, failed = _edge(target, lower, upper, (start, end))
            flow.edge_bytes += moved_bytes
            flow.files_ok += ok
            flow.files_failed += failed
        series.append(flow)
    return series


def target_rates(*, target: Target, max_window: int, stable_window: int, with_minutes: bool = False) -> TargetRates:
    """Every number of one target, computed (never cached); see targets_rates_compute."""
    return targets_rates_compute(
        targets=[target], max_window=max_window, stable_window=stable_window, with_minutes=with_minutes
    )[0]


def _window_width(window: int) -> int:
    """A window's width in whole minutes (0 when it is not a positive whole number of minutes)."""
    return window // 60 if window > 0 and window % 60 == 0 else 0


# --- the cache of computed rows -------------------------------------------------------------------------------
# A target's numbers depend only on its flow, its window, the challenge's two windows and the rollups of its
# experiment; every writer of the rollups raises the experiment's RollupVersion in its transaction. So a row cached
# under (flow, window, windows, version and the time of that version) is exactly as fresh as the data: a new
# record, an edited target or edited windows give another key. The time of the version keeps keys apart across
# databases that restart their counters (test databases, restores). Experiments without a version row (rollups
# never written through a writer) are not cached. The target rate and names are not cached: verdicts and rows are
# made from the target as it is now.

RATES_CACHE_PREFIX = "results:rates:v2:"
# Keys of older versions are never read again and only wait to expire: while records stream in, every read after a
# write adds a key per target, so they must not live long. A quiet challenge recomputes once an hour.
RATES_CACHE_SECONDS = 3600

logger = logging.getLogger(__name__)
Version = tuple[int, datetime]


def rollup_versions(*, experiment_ids: Iterable[int]) -> dict[int, Version]:
    """The current (version, changed_at) of these experiments' rollups; experiments never written are absent.
    Read from the database the rollups will be read from (common.db): a replica's rows are never cached under the
    primary's newer version."""
    return {
        experiment: (version, changed_at)
        for experiment, version, changed_at in RollupVersion.objects.using(read_alias())
        .filter(experiment_id__in=set(experiment_ids))
        .values_list("experiment_id", "version", "changed_at")
    }


def rates_cache_key(*, target: Target, max_window: int, stable_window: int, version: Version) -> str:
    """The cache key of a target's computed numbers: everything they depend on."""
    activity_id, flow, site, peer = _flow(target)
    activity = target.activity
    parts = (
        activity.experiment_id,
        activity_id,
        flow,
        site,
        peer,
        activity.start.isoformat(),
        activity.end.isoformat(),
        max_window,
        stable_window,
        version[0],
        version[1].isoformat(),
    )
    return RATES_CACHE_PREFIX + hashlib.sha256(repr(parts).encode()).hexdigest()


_CACHED_FIELDS = (
    "volume",
    "average_rate",
    "max_rate",
    "max_window_start",
    "stable_rate",
    "stable_window_start",
    "files_ok",
    "files_failed",
)


def results_cache_get(keys: list[str]) -> dict[str, Any]:
    """Cached values of these keys (none when the cache is down: it only saves work)."""
    if not keys:
        return {}
    try:
        found: dict[str, Any] = cache.get_many(keys)
    except RedisError as exc:  # the cache is an accelerator: without it, rates are computed
        logger.warning("results cache unavailable (%s): computing", exc)
        return {}
    return found


def results_cache_set(values: dict[str, Any]) -> None:
    """Cache these values (nothing when the cache is down)."""
    if not values:
        return
    try:
        cache.set_many(values, timeout=RATES_CACHE_SECONDS)
    except RedisError as exc:
        logger.warning("results cache unavailable (%s): not stored", exc)


def targets_rates_cached(*, targets: Iterable[Target], max_window: int, stable_window: int) -> list[TargetRates]:
    """Target versus achieved for these targets, from the cache where the rollups have not changed since the row
    was computed, computed (in one query for all the others) and cached otherwise. One query for the versions,
    one for the rollup when anything is missing."""
    targets = list(targets)
    if not targets:
        return []
    versions = rollup_versions(experiment_ids=(target.activity.experiment_id for target in targets))
    keys: list[str | None] = [
        rates_cache_key(
            target=target,
            max_window=max_window,
            stable_window=stable_window,
            version=versions[target.activity.experiment_id],
        )
        if target.activity.experiment_id in versions
        else None
        for target in targets
    ]
    cached = results_cache_get([key for key in keys if key is not None])
    missing = [index for index, key in enumerate(keys) if key not in cached]
    computed = dict(
        zip(
            missing,
            targets_rates_compute(
                targets=[targets[index] for index in missing], max_window=max_window, stable_window=stable_window
            ),
            strict=True,
        )
    )
    results_cache_set(
        {
            key: tuple(getattr(computed[index], name) for name in _CACHED_FIELDS)
            for index, key in enumerate(keys)
            if key is not None and index in computed
        }
    )
    results = []
    for index, (target, key) in enumerate(zip(targets, keys, strict=True)):
        if index in computed:
            results.append(computed[index])
            continue
        result = TargetRates(target=target, start=target.activity.start, end=target.activity.end)
        for name, value in zip(_CACHED_FIELDS, cached[key], strict=True):  # type: ignore[index]
            setattr(result, name, value)
        results.append(result)
    return results


def challenge_targets(
    *, challenge: Challenge, experiment: str | None = None, activity: str | None = None, site: str | None = None
) -> QuerySet[Target]:
    """The targets of a challenge, filtered by experiment name, activity name and site (or link end) name."""
    targets = (
        Target.objects.filter(activity__challenge=challenge)
        .select_related("activity__experiment", "activity__challenge", "site", "link_from", "link_to")
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
    return targets_rates_cached(
        targets=challenge_targets(challenge=challenge, experiment=experiment, activity=activity, site=site),
        max_window=challenge.max_window,
        stable_window=challenge.stable_window,
    )
