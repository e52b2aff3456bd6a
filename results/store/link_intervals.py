"""The FROM x TO matrix's stored unions, kept as the rollups are: in the transaction that changes the records.

Per key (activity, source site, destination site, mode, concurrency; results.models.LinkKey) three tables hold what
the exact matrix (results.matrix.cells's LINK_CELLS) computes from the records, so that a challenge's matrix reads
them instead of every record:
- LinkTotals: volume, files ok / failed, the sum of file rates (numeric: the same quotients, added up exactly in any
  grouping) and the portal runs;
- LinkInterval: the islands of the union of the records' [start, end) intervals;
- LinkError: failures per message (its first 300 characters), for the most common error.

Adding records (every store, and the "in" half of a move) adds to the totals and errors and merges the new
intervals with the stored islands they touch. Taking records out (the "out" half of a move: re-attribution,
sites matched later) takes their counts out and deletes the islands they were part of; those islands are built
again from the records once the records have changed, by the next add in the same transaction (or
link_intervals_settle). A union cannot be un-merged, but an island's records are exactly the key's records within
it, so rebuilding one island reads only them.

Concurrency: a writer upserts the totals row of each key it touches, in key order, before it merges the key's
intervals; that row stays locked until it commits, so a second writer of the same key waits there and its merge
(a new statement, a new snapshot under READ COMMITTED) sees the first one's islands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from ..active_time import islands_sql
from .partitions import months_retired

KEY = "activity_id, source_site_id, destination_site_id, mode, concurrency"
# The columns a SELECT of records gives to link_intervals_add / link_intervals_take_out.
LINK_COLUMNS = (
    'activity_id, source_site_id, destination_site_id, mode, concurrency, state, start, "end", bytes, '
    "error_message, run_id"
)

# The records of the matrix, with the matrix's key (concurrency -1: none) and its definitions: greatest(end, start)
# as LINK_CELLS takes it, the message's first 300 characters.
_DELTA_CREATE = """
CREATE TEMP TABLE link_delta ON COMMIT DROP AS
SELECT activity_id, source_site_id, destination_site_id, mode, coalesce(concurrency, -1) AS concurrency, state,
       start, greatest("end", start) AS "end", bytes, left(error_message, 300) AS message, run_id
FROM ({records}) AS r
WHERE activity_id IS NOT NULL AND source_site_id IS NOT NULL AND destination_site_id IS NOT NULL
  AND state IN ('ok', 'failed')
"""

_TOTALS = f"""
SELECT {KEY},
       coalesce(sum(bytes) FILTER (WHERE state = 'ok'), 0) AS volume,
       count(*) FILTER (WHERE state = 'ok') AS files_ok,
       count(*) FILTER (WHERE state = 'failed') AS files_failed,
       coalesce(sum(bytes / extract(epoch FROM "end" - start)) FILTER (WHERE state = 'ok' AND "end" > start), 0)
           AS sum_of_file_rates,
       coalesce(array_agg(DISTINCT run_id) FILTER (WHERE run_id IS NOT NULL), '{{{{}}}}') AS runs
FROM {{source}} GROUP BY {KEY}
"""

_TOTALS_ADD = f"""
INSERT INTO results_linktotals AS t ({KEY}, volume, files_ok, files_failed, sum_of_file_rates, runs)
SELECT * FROM ({_TOTALS.format(source="link_delta")}) AS d ORDER BY {KEY}
ON CONFLICT ({KEY}) DO UPDATE SET
    volume = t.volume + EXCLUDED.volume,
    files_ok = t.files_ok + EXCLUDED.files_ok,
    files_failed = t.files_failed + EXCLUDED.files_failed,
    sum_of_file_rates = t.sum_of_file_rates + EXCLUDED.sum_of_file_rates,
    runs = CASE WHEN EXCLUDED.runs <@ t.runs THEN t.runs
                ELSE ARRAY(SELECT DISTINCT run FROM unnest(t.runs || EXCLUDED.runs) AS run ORDER BY run) END
"""

_SAME_KEY = " AND ".join(f"{{a}}.{column} = {{b}}.{column}" for column in KEY.split(", "))

# Taking out: the rows exist (their records were added). Runs are not taken out here (an array cannot be
# un-merged): keys that lose records of a run get their runs again from the records (_RUNS_AGAIN).
_TOTALS_SUBTRACT = f"""
UPDATE results_linktotals AS t SET
    volume = t.volume - d.volume, files_ok = t.files_ok - d.files_ok, files_failed = t.files_failed - d.files_failed,
    sum_of_file_rates = t.sum_of_file_rates - d.sum_of_file_rates
FROM ({_TOTALS.format(source="link_delta")}) AS d
WHERE {_SAME_KEY.format(a="t", b="d")}
"""

_ERRORS = f"""
SELECT {KEY}, message, count(*) AS failures FROM link_delta
WHERE state = 'failed' AND message <> '' GROUP BY {KEY}, message
"""

_ERRORS_ADD = f"""
INSERT INTO results_linkerror AS e ({KEY}, message, failures)
SELECT * FROM ({_ERRORS}) AS d ORDER BY {KEY}, message
ON CONFLICT ({KEY}, message) DO UPDATE SET failures = e.failures + EXCLUDED.failures
"""

_ERRORS_SUBTRACT = f"""
UPDATE results_linkerror AS e SET failures = e.failures - d.failures
FROM ({_ERRORS}) AS d WHERE {_SAME_KEY.format(a="e", b="d")} AND e.message = d.message
"""

# The span of the new intervals of each key; the stored islands that meet it are taken out (into link_touched)
# and merged with the new intervals. An island that meets the span but no new interval is put back as it was.
_SPANS = f'SELECT {KEY}, min(start) AS lo, max("end") AS hi FROM link_delta WHERE "end" > start GROUP BY {KEY}'
_TOUCHED = f"""
CREATE TEMP TABLE link_touched ON COMMIT DROP AS
WITH spans AS ({_SPANS}), touched AS (
    DELETE FROM results_linkinterval AS i USING spans AS s
    WHERE {_SAME_KEY.format(a="i", b="s")} AND i."end" >= s.lo AND i.start <= s.hi
    RETURNING i.activity_id, i.source_site_id, i.destination_site_id, i.mode, i.concurrency, i.start, i."end"
)
SELECT * FROM touched
"""
_MERGE = f"""
INSERT INTO results_linkinterval ({KEY}, start, "end")
{
    islands_sql(
        key=KEY,
        intervals=f'SELECT {KEY}, start, "end" FROM link_touched '
        f'UNION ALL SELECT {KEY}, start, "end" FROM link_delta WHERE "end" > start',
    )
}
"""

# Taking out: the islands the records were part of are deleted and remembered in link_dirty, to be built again
# from the records once they have changed (_DIRTY_REBUILD). An island's records are the key's records within it:
# found by the records' (source, destination, end) index.
_DIRTY_CREATE = """
CREATE TEMP TABLE IF NOT EXISTS link_dirty (
    activity_id bigint, source_site_id bigint, destination_site_id bigint, mode varchar(16), concurrency int,
    start timestamptz, "end" timestamptz, runs boolean
) ON COMMIT DROP
"""
_DIRTY = f"""
WITH spans AS ({_SPANS}), touched AS (
    DELETE FROM results_linkinterval AS i USING spans AS s
    WHERE {_SAME_KEY.format(a="i", b="s")} AND i."end" >= s.lo AND i.start <= s.hi
    RETURNING i.activity_id, i.source_site_id, i.destination_site_id, i.mode, i.concurrency, i.start, i."end"
)
INSERT INTO link_dirty SELECT *, FALSE FROM touched
"""
_DIRTY_RUNS = (
    f"INSERT INTO link_dirty ({KEY}, runs) SELECT DISTINCT {KEY}, TRUE FROM link_delta WHERE run_id IS NOT NULL"
)
_RECORDS_OF_KEY = """
r.activity_id = k.activity_id AND r.source_site_id = k.source_site_id
AND r.destination_site_id = k.destination_site_id AND r.mode = k.mode AND coalesce(r.concurrency, -1) = k.concurrency
AND r.state IN ('ok', 'failed')
"""
_DIRTY_REBUILD = f"""
INSERT INTO results_linkinterval ({KEY}, start, "end")
{
    islands_sql(
        key=KEY,
        intervals=f'''SELECT k.activity_id, k.source_site_id, k.destination_site_id, k.mode, k.concurrency,
                             r.start, r."end"
                      FROM link_dirty AS k JOIN results_transferrecord AS r
                        ON {_RECORDS_OF_KEY} AND r."end" <= k."end" AND r."end" > r.start AND r.start >= k.start
                      WHERE NOT k.runs''',
    )
}
"""
_RUNS_AGAIN = f"""
UPDATE results_linktotals AS t SET runs = coalesce(
    (SELECT array_agg(DISTINCT r.run_id ORDER BY r.run_id) FROM results_transferrecord AS r
     WHERE {_RECORDS_OF_KEY.replace("k.", "t.")} AND r.run_id IS NOT NULL), '{{}}')
FROM (SELECT DISTINCT {KEY} FROM link_dirty WHERE runs) AS k
WHERE {_SAME_KEY.format(a="t", b="k")}
"""
_EMPTY_DELETE = (
    "DELETE FROM results_linktotals WHERE files_ok + files_failed = 0",
    "DELETE FROM results_linkerror WHERE failures <= 0",
)


def _delta_create(cursor: Any, records: str, params: Sequence[Any]) -> int:
    cursor.execute("DROP TABLE IF EXISTS pg_temp.link_delta")
    cursor.execute(_DELTA_CREATE.format(records=records), list(params))
    return int(cursor.rowcount)


def link_intervals_settle() -> None:
    """Build again the islands that link_intervals_take_out deleted, from the records as they are now (inside the
    transaction that changed them). link_intervals_add does it first; call it after a take-out that no add follows
    (records deleted)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('pg_temp.link_dirty') IS NOT NULL")
        if not cursor.fetchone()[0]:
            return
        cursor.execute(_DIRTY_REBUILD)
        cursor.execute(_RUNS_AGAIN)
        cursor.execute("DROP TABLE pg_temp.link_dirty")


def link_intervals_add(*, records: str, params: Sequence[Any] = ()) -> int:
    """Add the records selected by `records` (a SELECT giving LINK_COLUMNS, already stored) to the matrix's
    unions, after settling an earlier take-out of the transaction. Returns the records that count."""
    link_intervals_settle()
    with connection.cursor() as cursor:
        counted = _delta_create(cursor, records, params)
        if not counted:
            return 0
        cursor.execute(_TOTALS_ADD)  # the keys' rows locked, in key order, until the commit
        cursor.execute(_ERRORS_ADD)
        cursor.execute("DROP TABLE IF EXISTS pg_temp.link_touched")
        cursor.execute(_TOUCHED)
        cursor.execute(_MERGE)
    return counted


def link_intervals_take_out(*, records: str, params: Sequence[Any] = ()) -> int:
    """Take the records selected by `records` (a SELECT giving LINK_COLUMNS, as they are stored now) out of the
    matrix's unions, before they change: their counts out, the islands they were part of deleted, to be built
    again by the next link_intervals_add or link_intervals_settle of the transaction. Returns the records."""
    with connection.cursor() as cursor:
        counted = _delta_create(cursor, records, params)
        if not counted:
            return 0
        cursor.execute(_TOTALS_SUBTRACT)
        cursor.execute(_ERRORS_SUBTRACT)
        cursor.execute(_DIRTY_CREATE)
        cursor.execute(_DIRTY)
        cursor.execute(_DIRTY_RUNS)
        for statement in _EMPTY_DELETE:
            cursor.execute(statement)
    return counted


@transaction.atomic
def link_intervals_rebuild() -> int:
    """Compute the matrix's unions again from every record (after a bulk load, or to check them), no record
    written meanwhile (the records' table locked against writes). Returns the islands stored."""
    with connection.cursor() as cursor:
        retired = months_retired(cursor)
        if retired:
            raise RuntimeError(f"cannot rebuild the matrix's unions: the raw records of {retired} were retired")
        cursor.execute("LOCK TABLE results_transferrecord IN SHARE MODE")
        # TRUNCATE leaves no dead rows behind (a DELETE of the old unions doubled their table until a VACUUM).
        cursor.execute("TRUNCATE results_linktotals, results_linkinterval, results_linkerror")
        _delta_create(cursor, f"SELECT {LINK_COLUMNS} FROM results_transferrecord", ())
        cursor.execute(
            f"INSERT INTO results_linktotals ({KEY}, volume, files_ok, files_failed, sum_of_file_rates, runs) "
            + _TOTALS.format(source="link_delta")
        )
        cursor.execute(f"INSERT INTO results_linkerror ({KEY}, message, failures) {_ERRORS}")
        cursor.execute(
            f'INSERT INTO results_linkinterval ({KEY}, start, "end") '
            + islands_sql(key=KEY, intervals=f'SELECT {KEY}, start, "end" FROM link_delta WHERE "end" > start')
        )
        islands = int(cursor.rowcount)
        cursor.execute("DROP TABLE pg_temp.link_delta")
    return islands
