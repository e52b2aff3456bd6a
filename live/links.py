"""The link panel of a challenge (reads only): one row per link (source site -> destination site) that its plan names
or that its experiments' traffic used, with what it moves against its target, what FTS's optimizer last decided on
it, what limits it, and its failures by FTS's scheme (category, scope, phase).

Links come from the challenge's link targets, from the site targets of activities with a source (source -> site), and
from the minute rollup of the challenge's experiments' traffic within the challenge's window. Rates are read from the
minute rollup as the now board reads them, at the board's minute (`at`, live.now.board_minute): the last hour is
[at - 1 h, at); the average so far is over the link's window, from its first whole minute to `at`: the earliest
start of the running activities whose targets name the link, else the challenge's start. A link's target rate is
the sum of the rates of its targets whose activities run at `at` (null: none runs).

FTS's latest decision on a link is the newest one (up to now, since the challenge started) of no experiment or of
one the user may read: FTS's optimizer works per link, whoever's files it moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Q

from challenges.models import Activity, Challenge, Target
from common.db import read_connection
from results.choices import RecordState
from results.models import OptimizerDecision, RateRollup, TransferRecord
from results.store.rollups import minute_floor
from results.targets.figures import figures_row, targets_figures
from sites.models import Site
from sites.roles import experiments_visible

from .now import board_minute, challenge_targets_visible

# FTS's optimizer allows at most 60 active transfers per link unless the link is configured otherwise (fts3
# config: MaxActivePerLink); the portal knows no link's configuration, so 60 for every link.
FTS_MAX_ACTIVE = 60
HOUR = timedelta(hours=1)
# What the panel shows of each target on a link: the same figures as the rates API's row.
LINK_TARGET_FIELDS = (
    "id", "url", "activity", "experiment", "site", "link", "direction", "target_rate", "average_rate",
    "last_15min_rate", "last_hour_rate", "verdict",
)  # fmt: skip
LinkKey = tuple[int, int]  # (source site id, destination site id)


@dataclass
class LinkRow:
    """One link of the panel (bytes, bytes per second)."""

    source_id: int
    destination_id: int
    target_rate: float | None = None
    window_start: datetime | None = None
    last_hour_bytes: float = 0.0
    window_bytes: float = 0.0
    files_ok_last_hour: int = 0
    files_failed_last_hour: int = 0
    decision: OptimizerDecision | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    window_errors: list[dict[str, Any]] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)  # the running targets whose flow is this link


def _first_full_minute(moment: datetime) -> datetime:
    floor = minute_floor(moment)
    return floor if floor == moment else floor + timedelta(minutes=1)


def _planned_links(targets: list[Target], at: datetime) -> dict[LinkKey, LinkRow]:
    """The links the targets name, with the target rate and window start of those whose activity runs at `at`."""
    rows: dict[LinkKey, LinkRow] = {}
    for target in targets:
        activity = target.activity
        if target.is_link:
            key = (target.link_from_id, target.link_to_id)
        elif target.site_id and target.direction != "out" and activity.source_id:
            key = (activity.source_id, target.site_id)
        else:
            continue
        if key[0] == key[1] or None in key:
            continue
        row = rows.setdefault(key, LinkRow(*key))  # type: ignore[arg-type]
        if activity.start <= at < activity.end:
            row.targets.append(target)
            row.target_rate = (row.target_rate or 0.0) + target.rate
            if row.window_start is None or activity.start < row.window_start:
                row.window_start = activity.start
    return rows


_TRAFFIC = f"""
WITH starts AS (SELECT * FROM unnest(%(sources)s::bigint[], %(destinations)s::bigint[], %(firsts)s::timestamptz[])
                AS s(source_id, destination_id, first_minute))
SELECT r.source_site_id, r.destination_site_id,
       sum(r.bytes) FILTER (WHERE r.minute >= %(hour)s),
       sum(r.files_ok) FILTER (WHERE r.minute >= %(hour)s),
       sum(r.files_failed) FILTER (WHERE r.minute >= %(hour)s),
       sum(r.bytes) FILTER (WHERE r.minute >= coalesce(s.first_minute, %(challenge_first)s))
FROM {RateRollup._meta.db_table} AS r
LEFT JOIN starts AS s ON s.source_id = r.source_site_id AND s.destination_id = r.destination_site_id
WHERE r.experiment_id = ANY(%(experiments)s) AND r.minute >= %(first)s AND r.minute < %(at)s
  AND r.source_site_id IS NOT NULL AND r.destination_site_id IS NOT NULL AND r.source_site_id <> r.destination_site_id
GROUP BY 1, 2
HAVING sum(r.bytes) > 0.5 OR sum(r.files_ok) + sum(r.files_failed) > 0
"""


def _traffic(rows: dict[LinkKey, LinkRow], *, challenge: Challenge, experiments: list[int], at: datetime) -> None:
    """Add the rollup's traffic to the rows (and rows for links only the traffic names): one query."""
    challenge_first = _first_full_minute(challenge.start)
    firsts = {key: _first_full_minute(row.window_start) for key, row in rows.items() if row.window_start}
    params = {
        "sources": [key[0] for key in firsts],
        "destinations": [key[1] for key in firsts],
        "firsts": list(firsts.values()),
        "hour": at - HOUR,
        "challenge_first": challenge_first,
        "first": min([challenge_first, at - HOUR, *firsts.values()]),
        "at": at,
        "experiments": experiments,
    }
    with read_connection().cursor() as cursor:  # the replica where the request allows it (common.db)
        cursor.execute(_TRAFFIC, params)
        found = cursor.fetchall()
    for source, destination, hour_bytes, ok, failed, window_bytes in found:
        row = rows.setdefault((source, destination), LinkRow(source, destination))
        row.last_hour_bytes = float(hour_bytes or 0.0)
        row.files_ok_last_hour, row.files_failed_last_hour = int(ok or 0), int(failed or 0)
        row.window_bytes = float(window_bytes or 0.0)


def _decisions(rows: dict[LinkKey, LinkRow], *, challenge: Challenge, user: Any, at: datetime) -> None:
    """The latest optimizer decision of each link, of no experiment or of one the user may read: one query
    (DISTINCT ON the link)."""
    if not rows:
        return
    links = Q()
    for source, destination in rows:
        links |= Q(source_site_id=source, destination_site_id=destination)
    decisions = OptimizerDecision.objects.filter(links, at__gte=challenge.start, at__lt=at + timedelta(minutes=1))
    decisions = decisions.filter(Q(experiment__isnull=True) | Q(experiment__in=experiments_visible(user=user)))
    for decision in decisions.order_by("source_site_id", "destination_site_id", "-at", "-id").distinct(
        "source_site_id", "destination_site_id"
    ):
        rows[(decision.source_site_id, decision.destination_site_id)].decision = decision  # type: ignore[index]


def _failures(
    rows: dict[LinkKey, LinkRow], *, experiments: list[int], since: datetime, at: datetime
) -> dict[LinkKey, list[dict[str, Any]]]:
    """Failed records of the links that ended in [since, at), per FTS category, scope and phase, most first, with
    an example message: one query."""
    if not rows:
        return {}
    links = Q()
    for source, destination in rows:
        links |= Q(source_site_id=source, destination_site_id=destination)
    grouped = (
        TransferRecord.objects.filter(
            links, experiment_id__in=experiments, state=RecordState.FAILED, end__gte=since, end__lt=at
        )
        .values("source_site_id", "destination_site_id", "fts_error_category", "error_scope", "failure_phase")
        .annotate(count=Count("id"), example=Max("error_message"))
        .order_by("source_site_id", "destination_site_id", "-count", "fts_error_category")
    )
    errors: dict[LinkKey, list[dict[str, Any]]] = {}
    for entry in grouped:
        errors.setdefault((entry["source_site_id"], entry["destination_site_id"]), []).append(
            {
                "category": entry["fts_error_category"] or None,
                "scope": entry["error_scope"] or None,
                "phase": entry["failure_phase"] or None,
                "count": entry["count"],
                "example": entry["example"],
            }
        )
    return errors


def link_limited_by(*, decision: OptimizerDecision | None, target_rate: float | None, rate: float) -> str | None:
    """What holds a link back, by FTS's latest decision on it: `fts_max_active` when the optimizer sits at its
    maximum actives with files queued and the link under its target; `fts_optimizer` when it is lowering actives for
    the success rate; `source` or `destination` when its rationale names a throughput limit there; else None."""
    if decision is None:
        return None
    rationale = decision.rationale.lower()
    under_target = target_rate is not None and rate < target_rate
    if decision.active >= FTS_MAX_ACTIVE and (decision.queue_size or 0) > 0 and under_target:
        return "fts_max_active"
    lowering = (decision.diff is not None and decision.diff < 0) or (
        decision.actual_active is not None and decision.active < decision.actual_active
    )
    # FTS lowers actives for the success rate with "Bad link efficiency" (a "Good link efficiency, throughput
    # deterioration" lowers them for throughput, which is not the success rate).
    if lowering and ("bad link efficiency" in rationale or "success" in rationale):
        return "fts_optimizer"
    if "source" in rationale and "limit" in rationale:
        return "source"
    if "destination" in rationale and "limit" in rationale:
        return "destination"
    return None


def _decision_dict(decision: OptimizerDecision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    names = ("active", "actual_active", "queue_size", "ema", "throughput", "success", "rationale")
    return {**{name: getattr(decision, name) for name in names}, "at": decision.at}


def _target_figures(challenge: Challenge, rows: dict[LinkKey, LinkRow], at: datetime) -> dict[int, dict[str, Any]]:
    """The figures of the running targets on the links (results.targets.figures, as every surface reads them): the
    panel's rates are the link's whole traffic; these are what counts for each target."""
    targets = list({target.pk: target for row in rows.values() for target in row.targets}.values())
    return {
        row.target.pk: {name: value for name, value in figures_row(row).items() if name in LINK_TARGET_FIELDS}
        for row in targets_figures(challenge=challenge, targets=targets, at=at)
    }


def challenge_links(
    *, challenge: Challenge, user: Any, at: datetime | None = None, window_errors: bool = False
) -> dict[str, Any]:
    """The link panel as the API gives it (and the page shows it, with window_errors: the failures over the
    challenge's window so far as well), for what `user` may read."""
    at = board_minute(at)
    experiments = set(
        Activity.objects.filter(challenge=challenge).restrict(user).values_list("experiment_id", flat=True)
    )
    rows = _planned_links(challenge_targets_visible(challenge=challenge, user=user), at)
    _traffic(rows, challenge=challenge, experiments=sorted(experiments), at=at)
    _decisions(rows, challenge=challenge, user=user, at=at)
    hour_errors = _failures(rows, experiments=sorted(experiments), since=at - HOUR, at=at)
    all_errors = _failures(rows, experiments=sorted(experiments), since=challenge.start, at=at) if window_errors else {}
    names = dict(Site.objects.filter(pk__in={pk for key in rows for pk in key}).values_list("pk", "name"))
    figures = _target_figures(challenge, rows, at)
    links = []
    for key, row in rows.items():
        start = _first_full_minute(row.window_start or challenge.start)
        elapsed = (at - start).total_seconds()
        last_hour_rate = row.last_hour_bytes / HOUR.total_seconds()
        link: dict[str, Any] = {
            "source": names.get(key[0], ""),
            "destination": names.get(key[1], ""),
            "link": {"from": names.get(key[0], ""), "to": names.get(key[1], "")},  # as every target row names it
            "target_rate": row.target_rate,
            "last_hour_rate": last_hour_rate,
            "average_rate": row.window_bytes / elapsed if elapsed > 0 else None,
            "window_start": start,
            "files_ok_last_hour": row.files_ok_last_hour,
            "files_failed_last_hour": row.files_failed_last_hour,
            "fts": _decision_dict(row.decision),
            "limited_by": link_limited_by(decision=row.decision, target_rate=row.target_rate, rate=last_hour_rate),
            "errors": hour_errors.get(key, []),
            "targets": [figures[target.pk] for target in row.targets],
        }
        if window_errors:
            link["window_errors"] = all_errors.get(key, [])
        links.append(link)
    links.sort(key=lambda link: (link["source"].lower(), link["destination"].lower()))
    return {"at": at, "links": links}
