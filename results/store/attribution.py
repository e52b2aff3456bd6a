"""Which activity of the plan a transfer record counts for (or none): the rules, applied in SQL when records are
stored and again when the plan changes.

The rules (also on the "About these numbers" page):
1. A record of a portal run counts for the run's activity; an ad hoc run's for none. Nothing else moves it.
2. A record that came in from FTS, Rucio or perfSONAR counts for an activity of its own experiment
   - whose window overlaps the record's [start, end],
   - that has a target on the record's flow: into the record's destination site (`in`), out of its source site
     (`out`), or on the link from its source to its destination,
   - and whose DDM activity names (FTS / Rucio `activity`) are empty (any) or include the record's, ignoring case.
3. When several activities qualify, the record counts for one, the first by: an activity naming the record's DDM
   activity before one taking any; the window holding the record's midpoint; a link target before a site target;
   the shorter window; the older activity. The clock page lists the activities that can claim the same traffic.
4. Records of no experiment, or whose sites are unknown, count for no activity (and so for no target); nor does a
   network activity claim any record (its targets are measured by its iperf3 runs, results.targets.network).

Rollups are kept per activity, so a target reads exactly its activity's traffic and a challenge's matrix its
activities' traffic. When activities or targets change, the records they may have claimed or may now claim are
attributed again (a Celery task, results.tasks.records_reattribute_task): their contributions are taken out of the
rollups under their old activity and added under the new one, in chunks under the writers' lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.core.cache import cache
from django.db import connection, transaction

from challenges.choices import UNCLAIMING_KINDS
from challenges.models import Activity, Target

from .rollups import RECORDS_LOCK, ROLLUP_COLUMNS, rollup_add_sql

_ACTIVITY = Activity._meta.db_table
_TARGET = Target._meta.db_table

# The activity each record of {table} (rows chosen by {where}, named by their {key}) counts for by rules 2-3; rows
# no activity claims are absent. The activities a flow may count for (rule 2 but the window: experiment, sites, DDM
# activity) are found once per distinct flow of the records, then each record keeps those whose window overlaps
# its own; DISTINCT ON keeps the first candidate of each record in the order of rule 3.
# Activities that claim no records (challenges.choices.UNCLAIMING_KINDS: a network target is measured by its iperf3
# runs), as SQL literals of the code's own constants.
_UNCLAIMING = ", ".join(f"'{kind.value}'" for kind in UNCLAIMING_KINDS)
_CHOSEN = f"""
WITH chosen_records AS MATERIALIZED (
    SELECT r.{{key}} AS rid, r.experiment_id, coalesce(r.source_site_id, 0) AS source_id,
           coalesce(r.destination_site_id, 0) AS destination_id, r.ddm_activity, r.start, r."end"
    FROM {{table}} AS r
    WHERE ({{where}}) AND r.run_id IS NULL AND r.experiment_id IS NOT NULL
), flows AS MATERIALIZED (
    SELECT f.experiment_id, f.source_id, f.destination_id, f.ddm_activity, a.id AS activity_id, a.start, a."end",
           cardinality(a.ddm_activities) > 0 AS named, flow.on_link
    FROM (SELECT DISTINCT experiment_id, source_id, destination_id, ddm_activity FROM chosen_records) AS f
    JOIN {_ACTIVITY} AS a ON a.experiment_id = f.experiment_id
    CROSS JOIN LATERAL (
        SELECT bool_or(t.site_id IS NULL) AS on_link
        FROM {_TARGET} AS t
        WHERE t.activity_id = a.id AND (
            (t.direction = 'in' AND t.site_id = f.destination_id)
            OR (t.direction = 'out' AND t.site_id = f.source_id)
            OR (t.site_id IS NULL AND t.link_from_id = f.source_id AND t.link_to_id = f.destination_id))
    ) AS flow
    WHERE flow.on_link IS NOT NULL AND a.kind NOT IN ({_UNCLAIMING})
      AND (cardinality(a.ddm_activities) = 0
           OR EXISTS (SELECT 1 FROM unnest(a.ddm_activities) AS d WHERE lower(d) = lower(f.ddm_activity)))
)
SELECT DISTINCT ON (r.rid) r.rid, c.activity_id
FROM chosen_records AS r
JOIN flows AS c
  ON c.experiment_id = r.experiment_id AND c.source_id = r.source_id AND c.destination_id = r.destination_id
 AND c.ddm_activity = r.ddm_activity AND c.start <= r."end" AND r.start < c."end"
ORDER BY r.rid,
    c.named DESC,
    (c.start <= r.start + (r."end" - r.start) / 2 AND r.start + (r."end" - r.start) / 2 < c."end") DESC,
    c.on_link DESC,
    c."end" - c.start,
    c.activity_id
"""


def _changes_sql(where: str) -> str:
    """(id, activity_id) of the stored records chosen by `where` (on alias r, run_id IS NULL implied) whose
    activity the rules now give differently: NULL where no activity claims them any more."""
    chosen = _CHOSEN.format(key="id", table="results_transferrecord", where=where)
    return f"""
        SELECT r.id, c.activity_id
        FROM results_transferrecord AS r LEFT JOIN ({chosen}) AS c ON c.rid = r.id
        WHERE ({where}) AND r.run_id IS NULL AND r.activity_id IS DISTINCT FROM c.activity_id
    """


_APPLY = "UPDATE results_transferrecord AS r SET activity_id = m.activity_id FROM ({changes}) AS m WHERE r.id = m.id"


def batch_attribute_sql() -> None:
    """Give the rows of the writer's record_batch that won their keys (results.store.keys: record_claim) the
    activity they count for, in record_claim.activity_id; rows no activity claims (and a run's) keep NULL there."""
    won = "r.ord IN (SELECT ord FROM record_claim WHERE won)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE record_claim AS w SET activity_id = c.activity_id
            FROM ({_CHOSEN.format(key="ord", table="record_batch", where=won)}) AS c
            WHERE w.ord = c.rid
            """
        )


# --- re-attribution when the plan changes ------------------------------------------------------------------------

STATUS_KEY = "results:attribution:status"
CHUNK = 50_000


@dataclass
class Scope:
    """The records whose activity a change of the plan may change: those of an experiment overlapping a window,
    and those already counted for some activities (wherever the activities have moved since)."""

    experiments: dict[int, tuple[datetime, datetime]] = field(default_factory=dict)
    activity_ids: set[int] = field(default_factory=set)

    def add(self, *, experiment_id: int, start: datetime, end: datetime, activity_id: int | None = None) -> None:
        known = self.experiments.get(experiment_id)
        self.experiments[experiment_id] = (start, end) if known is None else (min(known[0], start), max(known[1], end))
        if activity_id is not None:
            self.activity_ids.add(activity_id)

    def as_json(self) -> dict[str, Any]:
        return {
            "experiments": [[e, s.isoformat(), t.isoformat()] for e, (s, t) in sorted(self.experiments.items())],
            "activity_ids": sorted(self.activity_ids),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scope:
        scope = cls(activity_ids=set(data.get("activity_ids", ())))
        for experiment, start, end in data.get("experiments", ()):
            scope.add(
                experiment_id=int(experiment), start=datetime.fromisoformat(start), end=datetime.fromisoformat(end)
            )
        return scope

    def __bool__(self) -> bool:
        return bool(self.experiments or self.activity_ids)


def _scope_where(scope: Scope) -> tuple[str, list[Any]]:
    parts, params = [], []
    for experiment, (start, end) in sorted(scope.experiments.items()):
        parts.append('(r.experiment_id = %s AND r.start < %s AND r."end" >= %s)')
        params += [experiment, end, start]
    if scope.activity_ids:
        parts.append("r.activity_id = ANY(%s)")
        params.append(sorted(scope.activity_ids))
    return "(" + " OR ".join(parts or ["FALSE"]) + ") AND r.run_id IS NULL", params


def _status_set(**status: Any) -> None:
    cache.set(STATUS_KEY, {**status, "at": datetime.now(UTC).isoformat()}, timeout=7 * 24 * 3600)


def attribution_status() -> dict[str, Any] | None:
    """The last re-attribution's progress: state (running / finished / failed), records checked of the total,
    records whose activity changed, when; None when none ran (or the cache forgot it)."""
    status: dict[str, Any] | None = cache.get(STATUS_KEY)
    return status


def records_reattribute(*, scope: Scope) -> int:
    """Apply the rules again to the stored records of this scope and move the contributions of those whose activity
    changes in the rollups (out under the old activity, in under the new), a chunk of CHUNK records a transaction,
    each under the writers' lock; progress in attribution_status(). Idempotent. Returns the records changed."""
    if not scope:
        return 0
    where, params = _scope_where(scope)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT r.id FROM results_transferrecord AS r WHERE {where} ORDER BY r.id", params)
        ids = [row[0] for row in cursor.fetchall()]
    total, changed = len(ids), 0
    _status_set(state="running", checked=0, total=total, changed=0)
    try:
        for offset in range(0, total, CHUNK):
            changed += _chunk_reattribute(ids[offset : offset + CHUNK])
            _status_set(state="running", checked=min(offset + CHUNK, total), total=total, changed=changed)
    except Exception:
        _status_set(state="failed", checked=0, total=total, changed=changed)
        raise
    _status_set(state="finished", checked=total, total=total, changed=changed)
    return changed


_MOVED = f"SELECT {ROLLUP_COLUMNS} FROM results_transferrecord WHERE id IN (SELECT id FROM attribution_move)"


@transaction.atomic
def _chunk_reattribute(ids: list[int]) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [RECORDS_LOCK])
        cursor.execute("DROP TABLE IF EXISTS pg_temp.attribution_move")
        cursor.execute(
            f"CREATE TEMP TABLE attribution_move ON COMMIT DROP AS {_changes_sql('r.id = ANY(%s)')}", [ids, ids]
        )
        moved = int(cursor.rowcount)
        if not moved:
            return 0
        rollup_add_sql(records=_MOVED, sign=-1)
        cursor.execute(_APPLY.format(changes="SELECT * FROM attribution_move"))
        rollup_add_sql(records=_MOVED, sign=1)
    return moved


def records_attribute_all_sql() -> int:
    """Apply the rules to every ingested record in one UPDATE, the rollups untouched: for bulk loads that rebuild
    the rollups afterwards (rollups_rebuild), never while writers run. Returns the records that changed."""
    with connection.cursor() as cursor:
        cursor.execute(_APPLY.format(changes=_changes_sql("TRUE")))
        return int(cursor.rowcount)


def records_attribute_moved(*, table_of_ids: str) -> None:
    """Apply the rules to the records listed in a temporary table of ids (whose sites were just re-matched, inside
    the caller's transaction, with their old contributions already taken out of the rollups)."""
    with connection.cursor() as cursor:
        cursor.execute(_APPLY.format(changes=_changes_sql(f"r.id IN (SELECT id FROM {table_of_ids})")))


def scope_everything() -> Scope:
    """Every record of an experiment, and every record counted for an activity: to attribute all again (after a
    change made around the signals, e.g. by SQL; manage.py records_reattribute)."""
    scope = Scope()
    with connection.cursor() as cursor:
        cursor.execute(
            'SELECT experiment_id, min(start), max("end") FROM results_transferrecord '
            "WHERE experiment_id IS NOT NULL AND run_id IS NULL GROUP BY experiment_id"
        )
        for experiment, start, end in cursor.fetchall():
            scope.add(experiment_id=experiment, start=start, end=end)
        cursor.execute("SELECT DISTINCT activity_id FROM results_transferrecord WHERE activity_id IS NOT NULL")
        scope.activity_ids.update(row[0] for row in cursor.fetchall())
    return scope
