"""The rollups: a transfer's bytes spread uniformly over its real [start, end), files counted in the minute they
ended, per minute and key (RateRollup), per hour and key (RateRollupHour, for the matrix) and per flow in arrays of
an hour's minutes (FlowRollup, for the targets). Incremental (in the transaction that stores records) and a full
rebuild, both in SQL."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction

from common.bulk import indexes_set_aside

from .failure_counts import failure_counts_add
from .link_intervals import link_intervals_add, link_intervals_take_out
from .partitions import months_retired

# Writers of records take it shared; whoever moves stored records between sites or activities
# (ingest.services.records_attach, results.store.attribution) takes it exclusive, so that no batch is stored meanwhile.
RECORDS_LOCK = 0x7265

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)


def minute_floor(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def hour_floor(moment: datetime) -> datetime:
    """The start of the hour of a UTC moment (hours are cut in UTC, as the rollups cut them)."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


VERSION_BUMP = """
INSERT INTO results_rollupversion (experiment_id, version, changed_at)
SELECT e, 1, now() FROM unnest(%s::bigint[]) AS e ORDER BY e
ON CONFLICT (experiment_id) DO UPDATE SET
    version = results_rollupversion.version + 1, changed_at = EXCLUDED.changed_at
"""


def rollup_versions_bump(experiment_ids: Iterable[int | None]) -> None:
    """Raise the rollup version of these experiments (None: records of no experiment) in the current transaction:
    every writer of the rollups calls it, so that anything cached from them knows it is stale."""
    ids = sorted({0 if experiment is None else int(experiment) for experiment in experiment_ids})
    if ids:
        with connection.cursor() as cursor:
            cursor.execute(VERSION_BUMP, [ids])


# --- the rollups kept in SQL: deltas of a set of records computed and upserted by PostgreSQL ------------------

# The records' contributions, as REBUILD computes them, times a sign (+1: add them, -1: take them out), into a
# temporary table that the rollups are then updated from. {records} is a SELECT of the records' columns. In float8:
# date_part rather than extract, whose numeric arithmetic took a third of a batch's deltas (the rollups are float8).
DELTAS_CREATE = """
CREATE TEMP TABLE rollup_delta ON COMMIT DROP AS
SELECT minute, experiment_id, activity_id, source_site_id, destination_site_id, mode, concurrency,
       %(sign)s * sum(bytes) AS bytes, %(sign)s * sum(files_ok) AS files_ok,
       %(sign)s * sum(files_failed) AS files_failed
FROM (
    SELECT m AS minute, r.experiment_id, r.activity_id, r.source_site_id, r.destination_site_id, r.mode,
           r.concurrency,
           CASE WHEN r."end" <= r.start THEN r.bytes::float8
                ELSE r.bytes * date_part('epoch', least(r."end", m + interval '1 minute') - greatest(r.start, m))
                     / date_part('epoch', r."end" - r.start) END AS bytes,
           0 AS files_ok, 0 AS files_failed
    FROM ({records}) AS r,
         generate_series(date_trunc('minute', r.start),
                         CASE WHEN r."end" <= r.start THEN date_trunc('minute', r.start)
                              ELSE r."end" - interval '1 microsecond' END,
                         interval '1 minute') AS m
    WHERE r.state = 'ok'
    UNION ALL
    SELECT date_trunc('minute', r."end"), r.experiment_id, r.activity_id, r.source_site_id, r.destination_site_id,
           r.mode, r.concurrency, 0, (r.state = 'ok')::int, (r.state = 'failed')::int
    FROM ({records}) AS r
    WHERE r.state IN ('ok', 'failed')
) AS parts
GROUP BY minute, experiment_id, activity_id, source_site_id, destination_site_id, mode, concurrency
"""

# Adding: upserts in one order of the keys, so that concurrent writers take row locks in the same order.
DELTAS_ADD = """
INSERT INTO results_raterollup
    (minute, experiment_id, activity_id, source_site_id, destination_site_id, mode, concurrency, bytes, files_ok,
     files_failed)
SELECT * FROM rollup_delta
ORDER BY minute, experiment_id, activity_id, source_site_id, destination_site_id, mode, concurrency
ON CONFLICT ON CONSTRAINT rollup_unique_key DO UPDATE SET
    bytes = results_raterollup.bytes + EXCLUDED.bytes,
    files_ok = results_raterollup.files_ok + EXCLUDED.files_ok,
    files_failed = results_raterollup.files_failed + EXCLUDED.files_failed
"""

# Per flow and minute: the traffic into a site, out of it and over a link. {minutes} is a SELECT of RateRollup's
# columns (the deltas, or the rollup itself for a rebuild).
FLOW_MINUTES = """
SELECT experiment_id, activity_id, flow, site_id, peer_id, minute, sum(bytes) AS bytes, sum(files_ok)::int AS files_ok,
       sum(files_failed)::int AS files_failed
FROM (
    -- each row of {minutes} read once, counted into its destination ('in'), its source ('out') and its link
    SELECT m.experiment_id, coalesce(m.activity_id, 0) AS activity_id, f.flow, f.site_id, f.peer_id, m.minute,
           m.bytes, m.files_ok, m.files_failed
    FROM ({minutes}) AS m
    CROSS JOIN LATERAL (VALUES ('in', m.destination_site_id, 0::bigint), ('out', m.source_site_id, 0::bigint),
                               ('link', m.source_site_id, m.destination_site_id)) AS f (flow, site_id, peer_id)
    WHERE f.site_id IS NOT NULL AND f.peer_id IS NOT NULL
) AS flows
WHERE experiment_id IS NOT NULL
GROUP BY experiment_id, activity_id, flow, site_id, peer_id, minute
"""

# ... gathered per flow and hour into FlowRollup's arrays of 60 minutes (results_minute_array, migrations 0007 and
# 0018, puts each minute's value at its place and 0 in the others). Hours are cut in UTC whatever the session's time
# zone.
FLOW_HOURS = f"""
SELECT experiment_id, activity_id, flow, site_id, peer_id, hour,
       results_minute_array(array_agg(at_minute), array_agg(bytes)) AS bytes,
       results_minute_array(array_agg(at_minute), array_agg(files_ok)) AS files_ok,
       results_minute_array(array_agg(at_minute), array_agg(files_failed)) AS files_failed,
       sum(files_ok)::int AS hour_files_ok, sum(files_failed)::int AS hour_files_failed
FROM (
    SELECT *, date_bin('1 hour', minute, '2000-01-01 00:00+00') AS hour,
           (mod(extract(epoch FROM minute)::bigint, 3600) / 60)::int AS at_minute
    FROM ({FLOW_MINUTES}) AS per_minute
) AS per_hour
GROUP BY experiment_id, activity_id, flow, site_id, peer_id, hour
"""

_FLOW_COLUMNS = (
    "experiment_id, activity_id, flow, site_id, peer_id, hour, bytes, files_ok, files_failed, hour_files_ok, "
    "hour_files_failed"
)

FLOW_DELTAS_ADD = f"""
INSERT INTO results_flowrollup ({_FLOW_COLUMNS})
SELECT * FROM ({FLOW_HOURS.format(minutes="SELECT * FROM rollup_delta")}) AS deltas
ORDER BY activity_id, flow, site_id, peer_id, hour, experiment_id
ON CONFLICT (activity_id, flow, site_id, peer_id, hour, experiment_id) DO UPDATE SET
    bytes = results_array_add(results_flowrollup.bytes, EXCLUDED.bytes),
    files_ok = results_array_add(results_flowrollup.files_ok, EXCLUDED.files_ok),
    files_failed = results_array_add(results_flowrollup.files_failed, EXCLUDED.files_failed),
    hour_files_ok = results_flowrollup.hour_files_ok + EXCLUDED.hour_files_ok,
    hour_files_failed = results_flowrollup.hour_files_failed + EXCLUDED.hour_files_failed
"""

# The hourly sums of RateRollup, for the matrix.
RATE_HOURS = """
SELECT date_trunc('hour', minute, 'UTC') AS hour, experiment_id, activity_id, source_site_id, destination_site_id,
       mode, concurrency, sum(bytes) AS bytes, sum(files_ok) AS files_ok, sum(files_failed) AS files_failed
FROM ({minutes}) AS per_minute
GROUP BY 1, 2, 3, 4, 5, 6, 7
"""

_RATE_HOUR_COLUMNS = (
    "hour, experiment_id, activity_id, source_site_id, destination_site_id, mode, concurrency, bytes, files_ok, "
    "files_failed"
)

RATE_HOURS_ADD = f"""
INSERT INTO results_raterolluphour ({_RATE_HOUR_COLUMNS})
SELECT * FROM ({RATE_HOURS.format(minutes="SELECT * FROM rollup_delta")}) AS deltas
ORDER BY hour, experiment_id, activity_id, source_site_id, destination_site_id, mode, concurrency
ON CONFLICT ON CONSTRAINT rollup_hour_unique_key DO UPDATE SET
    bytes = results_raterolluphour.bytes + EXCLUDED.bytes,
    files_ok = results_raterolluphour.files_ok + EXCLUDED.files_ok,
    files_failed = results_raterolluphour.files_failed + EXCLUDED.files_failed
"""

# Taking out: the rows exist (the records were added before), and an upsert would check its proposed row of
# negative counts against the counts' CHECK (>= 0) before it found the conflict, so these are UPDATEs.
_SAME_RATE_KEY = """r.experiment_id IS NOT DISTINCT FROM d.experiment_id
  AND r.activity_id IS NOT DISTINCT FROM d.activity_id
  AND r.source_site_id IS NOT DISTINCT FROM d.source_site_id
  AND r.destination_site_id IS NOT DISTINCT FROM d.destination_site_id
  AND r.mode = d.mode AND r.concurrency IS NOT DISTINCT FROM d.concurrency"""

DELTAS_SUBTRACT = f"""
UPDATE results_raterollup AS r
SET bytes = r.bytes + d.bytes, files_ok = r.files_ok + d.files_ok, files_failed = r.files_failed + d.files_failed
FROM rollup_delta AS d
WHERE r.minute = d.minute AND {_SAME_RATE_KEY}
"""

RATE_HOURS_SUBTRACT = f"""
UPDATE results_raterolluphour AS r
SET bytes = r.bytes + d.bytes, files_ok = r.files_ok + d.files_ok, files_failed = r.files_failed + d.files_failed
FROM ({RATE_HOURS.format(minutes="SELECT * FROM rollup_delta")}) AS d
WHERE r.hour = d.hour AND {_SAME_RATE_KEY}
"""

FLOW_DELTAS_SUBTRACT = f"""
UPDATE results_flowrollup AS r
SET bytes = results_array_add(r.bytes, d.bytes), files_ok = results_array_add(r.files_ok, d.files_ok),
    files_failed = results_array_add(r.files_failed, d.files_failed),
    hour_files_ok = r.hour_files_ok + d.hour_files_ok, hour_files_failed = r.hour_files_failed + d.hour_files_failed
FROM ({FLOW_HOURS.format(minutes="SELECT * FROM rollup_delta")}) AS d
WHERE (r.activity_id, r.flow, r.site_id, r.peer_id, r.hour, r.experiment_id)
    = (d.activity_id, d.flow, d.site_id, d.peer_id, d.hour, d.experiment_id)
"""

ROLLUP_COLUMNS = (
    'experiment_id, activity_id, source_site_id, destination_site_id, mode, concurrency, state, start, "end", bytes, '
    "error_message, run_id, "  # for the matrix's unions (results.store.link_intervals)
    # and the failure causes (results.store.failure_counts)
    "error_category, fts_error_category, error_scope, failure_phase"
)


def rollup_add_sql(*, records: str, params: Sequence[Any] = (), sign: int = 1) -> int:
    """Add (sign=1) or take out (sign=-1) the contributions of the records selected by `records` (a SELECT giving
    at least ROLLUP_COLUMNS) to the rollups, computed in SQL like the rebuild; raises the rollup versions of
    their experiments; the matrix's unions (results.store.link_intervals) and the failure causes' counts
    (results.store.failure_counts) move with them. Call inside the transaction that
    changed the records: a take-out before they change, the add after (which also settles the take-out's unions;
    without an add, call link_intervals_settle). Returns the per-minute rows touched."""
    if sign not in (1, -1):
        raise ValueError("sign is 1 or -1")
    query = DELTAS_CREATE.format(records=records)
    # The records' SELECT appears twice; psycopg takes positional parameters in order.
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS pg_temp.rollup_delta")
        cursor.execute(query.replace("%(sign)s", str(sign)), [*params, *params])
        cursor.execute(DELTAS_ADD if sign > 0 else DELTAS_SUBTRACT)
        rows = int(cursor.rowcount)
        cursor.execute(RATE_HOURS_ADD if sign > 0 else RATE_HOURS_SUBTRACT)
        cursor.execute(FLOW_DELTAS_ADD if sign > 0 else FLOW_DELTAS_SUBTRACT)
        # Last: every writer of an experiment waits for this row until the writer before it commits.
        cursor.execute("SELECT DISTINCT experiment_id FROM rollup_delta")
        rollup_versions_bump(row[0] for row in cursor.fetchall())
    if sign > 0:
        link_intervals_add(records=records, params=params)
    else:
        link_intervals_take_out(records=records, params=params)
    failure_counts_add(records=records, params=params, sign=sign)
    return rows


REBUILD = """
INSERT INTO results_raterollup
    (minute, experiment_id, activity_id, source_site_id, destination_site_id, mode, concurrency, bytes, files_ok,
     files_failed)
SELECT minute, experiment_id, activity_id, source_site_id, destination_site_id, mode, concurrency,
       sum(bytes), sum(files_ok), sum(files_failed)
FROM (
    -- bytes of successful transfers, spread over the minutes of [start, end)
    SELECT m AS minute, r.experiment_id, r.activity_id, r.source_site_id, r.destination_site_id, r.mode,
           r.concurrency,
           CASE WHEN r."end" <= r.start THEN r.bytes::float8
                ELSE r.bytes * date_part('epoch', least(r."end", m + interval '1 minute') - greatest(r.start, m))
                     / date_part('epoch', r."end" - r.start) END AS bytes,
           0 AS files_ok, 0 AS files_failed
    FROM results_transferrecord r,
         generate_series(date_trunc('minute', r.start),
                         CASE WHEN r."end" <= r.start THEN date_trunc('minute', r.start)
                              ELSE r."end" - interval '1 microsecond' END,
                         interval '1 minute') AS m
    WHERE r.state = 'ok'
    UNION ALL
    -- files, in the minute they ended
    SELECT date_trunc('minute', r."end"), r.experiment_id, r.activity_id, r.source_site_id, r.destination_site_id,
           r.mode, r.concurrency, 0, (r.state = 'ok')::int, (r.state = 'failed')::int
    FROM results_transferrecord r
    WHERE r.state IN ('ok', 'failed')
) AS parts
GROUP BY minute, experiment_id, activity_id, source_site_id, destination_site_id, mode, concurrency
ORDER BY minute  -- stored in time order: a range of minutes (the flow rebuild's days, the rates) reads few pages
"""


# One day of minutes at a time (whole UTC hours: the days' rows never meet), each day's sort in memory.
FLOW_REBUILD = f"""
INSERT INTO results_flowrollup ({_FLOW_COLUMNS})
{FLOW_HOURS.format(minutes="SELECT * FROM results_raterollup WHERE minute >= %(day)s AND minute < %(next)s")}
"""

RATE_HOURS_REBUILD = f"""
INSERT INTO results_raterolluphour ({_RATE_HOUR_COLUMNS})
{RATE_HOURS.format(minutes="SELECT * FROM results_raterollup")}
"""


ROLLUP_TABLES = ("results_raterollup", "results_raterolluphour", "results_flowrollup")


@transaction.atomic
def rollups_rebuild() -> int:
    """Recompute the rollups from the records (after bulk loads or re-matching sites). Returns the rows of the
    per-minute rollup. Refused once raw records were retired (results.store.retention): their rollups would be lost.

    A bulk rebuild: the tables are emptied and their indexes set aside while they are filled, then built again
    (at a million records the minute rollup went in in 15.6 s instead of 87.6 s with its 5 indexes kept up to date
    row by row; bench/README.md, bench/scale.py at 40 million). Until it commits,
    readers of the rollups (rates, matrix, now board) wait rather than see the old numbers."""
    with connection.cursor() as cursor:
        retired = months_retired(cursor)
        if retired:
            raise RuntimeError(f"cannot rebuild the rollups: the raw records of {retired} were retired")
        cursor.execute(f"TRUNCATE {', '.join(ROLLUP_TABLES)}")
        again = {table: indexes_set_aside(cursor, table) for table in ROLLUP_TABLES}
        # The aggregates and index builds of one operator's command, in memory rather than spilled.
        cursor.execute("SET LOCAL work_mem = '256MB'")
        cursor.execute("SET LOCAL maintenance_work_mem = '512MB'")
        cursor.execute(REBUILD)
        rows = int(cursor.rowcount)
        for statement in again.pop("results_raterollup"):  # its index on minute first: the days below read it
            cursor.execute(statement)
        cursor.execute("ANALYZE results_raterollup")
        cursor.execute(RATE_HOURS_REBUILD)
        cursor.execute("SELECT date_trunc('day', min(minute), 'UTC'), max(minute) FROM results_raterollup")
        day, last = cursor.fetchone()
        while day is not None and day <= last:
            cursor.execute(FLOW_REBUILD, {"day": day, "next": day + timedelta(days=1)})
            day += timedelta(days=1)
        for statement in again["results_raterolluphour"] + again["results_flowrollup"]:
            cursor.execute(statement)
        # every experiment with rows now (the hourly rollup: small) or before (it has a version)
        cursor.execute("SELECT DISTINCT experiment_id FROM results_raterolluphour")
        experiments = [row[0] for row in cursor.fetchall()]
        cursor.execute("SELECT experiment_id FROM results_rollupversion")
        experiments += [None if row[0] == 0 else row[0] for row in cursor.fetchall()]
    rollup_versions_bump(experiments)
    return rows
