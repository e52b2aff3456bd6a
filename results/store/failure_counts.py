"""The failure-causes page's stored counts, kept as the matrix's unions are (results.store.link_intervals): in the
transaction that changes the records.

Per activity and experiment, three tables count the failed records of known activities the way
results.failures.failures_for_challenge groups them, so that the page reads a few rows instead of every record:
- FailureCount: per link (source, destination, mode), portal category and FTS category / scope / phase;
- FailureHour: per hour of the record's end (UTC) and portal category;
- FailureMessage: per link and message key (URLs replaced by <url>), for the most common messages.

Adding records (every store, the "in" half of a move) and taking them out (the "out" half, before they change) is
one upsert per table of the records' counts times +1 or -1 (ON CONFLICT ... SET failures = failures + EXCLUDED:
two writers of one key add up, the second waiting for the first's row), rows left at 0 deleted. A change of the
rules re-categorises records (failures_recategorize): it takes the changed records out with their old category
and adds them back with the new one, in its transaction. Counts are plain sums: exact in any grouping.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from common.db import read_connection

from .partitions import months_retired

# The message key of the page (results.failures._MessageKey): URLs replaced by <url>, not their trailing punctuation.
MESSAGE_URL_PATTERN = "[a-z][a-z0-9+.-]*://[^ ]*[^ :;,.)]"
# The columns a SELECT of records gives to failure_counts_add (results.store.rollups.ROLLUP_COLUMNS holds them).
FAILURE_COLUMNS = (
    'activity_id, experiment_id, source_site_id, destination_site_id, mode, state, "end", error_message, '
    "error_category, fts_error_category, error_scope, failure_phase"
)

_DELTA_CREATE = f"""
CREATE TEMP TABLE failure_delta ON COMMIT DROP AS
SELECT activity_id, experiment_id, source_site_id, destination_site_id, mode, error_category, fts_error_category,
       error_scope, failure_phase, date_trunc('hour', "end", 'UTC') AS hour,
       regexp_replace(error_message, '{MESSAGE_URL_PATTERN}', '<url>', 'gi') AS message
FROM ({{records}}) AS r
WHERE activity_id IS NOT NULL AND state = 'failed'
"""

_COUNT_KEY = (
    "activity_id, experiment_id, source_site_id, destination_site_id, mode, error_category, fts_error_category, "
    "error_scope, failure_phase"
)
_HOUR_KEY = "activity_id, experiment_id, hour, error_category"
_MESSAGE_KEY = "activity_id, experiment_id, source_site_id, destination_site_id, mode"

# {sign} is 1 or -1 (a literal). Keys in one order, so that concurrent writers lock rows in the same order.
_UPSERTS = (
    f"""INSERT INTO results_failurecount AS t ({_COUNT_KEY}, failures)
    SELECT {_COUNT_KEY}, {{sign}} * count(*) FROM failure_delta GROUP BY {_COUNT_KEY} ORDER BY {_COUNT_KEY}
    ON CONFLICT ({_COUNT_KEY}) DO UPDATE SET failures = t.failures + EXCLUDED.failures""",
    f"""INSERT INTO results_failurehour AS t ({_HOUR_KEY}, failures)
    SELECT {_HOUR_KEY}, {{sign}} * count(*) FROM failure_delta GROUP BY {_HOUR_KEY} ORDER BY {_HOUR_KEY}
    ON CONFLICT ({_HOUR_KEY}) DO UPDATE SET failures = t.failures + EXCLUDED.failures""",
    f"""INSERT INTO results_failuremessage AS t ({_MESSAGE_KEY}, message, failures)
    SELECT {_MESSAGE_KEY}, message, {{sign}} * count(*) FROM failure_delta GROUP BY {_MESSAGE_KEY}, message
    ORDER BY {_MESSAGE_KEY}, md5(message)
    ON CONFLICT ({_MESSAGE_KEY}, md5(message)) DO UPDATE SET failures = t.failures + EXCLUDED.failures""",
)
_TABLES = ("results_failurecount", "results_failurehour", "results_failuremessage")


def failure_counts_add(*, records: str, params: Sequence[Any] = (), sign: int = 1) -> int:
    """Add (sign=1) or take out (sign=-1) the records selected by `records` (a SELECT giving FAILURE_COLUMNS) to the
    failure causes' counts: call inside the transaction that changes them, a take-out before the change, the add
    after. Returns the failed records that count."""
    if sign not in (1, -1):
        raise ValueError("sign is 1 or -1")
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS pg_temp.failure_delta")
        cursor.execute(_DELTA_CREATE.format(records=records), list(params))
        counted = int(cursor.rowcount)
        if not counted:
            return 0
        for upsert in _UPSERTS:
            cursor.execute(upsert.format(sign=sign))
        if sign < 0:
            for table in _TABLES:
                cursor.execute(
                    f"DELETE FROM {table} WHERE failures = 0 "
                    "AND activity_id IN (SELECT DISTINCT activity_id FROM failure_delta)"
                )
    return counted


@transaction.atomic
def failure_counts_rebuild() -> int:
    """Count the failure causes again from every record (after a bulk load, or to check them), no record written
    meanwhile (the records' table locked against writes). Refused once raw records were retired (their counts
    would be lost). Returns the failed records counted."""
    with connection.cursor() as cursor:
        retired = months_retired(cursor)
        if retired:
            raise RuntimeError(f"cannot rebuild the failure counts: the raw records of {retired} were retired")
        cursor.execute("LOCK TABLE results_transferrecord IN SHARE MODE")
        cursor.execute(f"TRUNCATE {', '.join(_TABLES)}")
    return failure_counts_add(
        records=f"SELECT {FAILURE_COLUMNS} FROM results_transferrecord WHERE state = 'failed'", sign=1
    )


# --- reading them ------------------------------------------------------------------------------------------------


@dataclass
class FailureRows:
    """What the failure-causes page is made of, from the stored counts or from the records (the same rows)."""

    counts: list[tuple[Any, ...]]  # (source id, destination id, mode, category, failures)
    messages: list[tuple[Any, ...]]  # (source id, destination id, mode, message, failures), top ones, by rank
    fts: list[tuple[Any, ...]]  # (source id, destination id, mode, FTS category, scope, phase, failures)
    hourly: list[tuple[str, datetime, int]]  # (category, hour, failures), by category and hour


_LINK = "source_site_id, destination_site_id, mode"
_STORED_COUNTS = f"""
SELECT {_LINK}, error_category, sum(failures) FROM results_failurecount WHERE {{where}}
GROUP BY {_LINK}, error_category HAVING sum(failures) <> 0
"""
_STORED_FTS = f"""
SELECT {_LINK}, fts_error_category, error_scope, failure_phase, sum(failures) AS n FROM results_failurecount
WHERE {{where}} GROUP BY {_LINK}, fts_error_category, error_scope, failure_phase HAVING sum(failures) <> 0
ORDER BY {_LINK}, n DESC, fts_error_category, error_scope, failure_phase
"""
_STORED_MESSAGES = f"""
SELECT {_LINK}, message, n FROM (
    SELECT {_LINK}, message, sum(failures) AS n,
           row_number() OVER (PARTITION BY {_LINK} ORDER BY sum(failures) DESC, message) AS rank
    FROM results_failuremessage WHERE {{where}} GROUP BY {_LINK}, message HAVING sum(failures) <> 0
) AS ranked WHERE rank <= %(top)s ORDER BY {_LINK}, rank
"""
_STORED_HOURLY = """
SELECT error_category, hour, sum(failures) FROM results_failurehour WHERE {where}
GROUP BY error_category, hour HAVING sum(failures) <> 0 ORDER BY error_category, hour
"""


_OF_CHALLENGE = "activity_id IN (SELECT id FROM challenges_activity WHERE challenge_id = %(challenge)s)"


def failure_rows_stored(*, challenge_id: int, experiment_ids: Collection[int] | None, top: int) -> FailureRows:
    """The page's rows for the failed records of a challenge's activities (of these experiments; None: all, with
    those of no experiment) from the stored counts: four small queries."""
    where = _OF_CHALLENGE
    params: dict[str, Any] = {"challenge": challenge_id, "top": top}
    if experiment_ids is not None:
        where += " AND experiment_id = ANY(%(experiments)s)"
        params["experiments"] = list(experiment_ids)
    results = []
    with read_connection().cursor() as cursor:  # the replica where the request allows it (common.db)
        for query in (_STORED_COUNTS, _STORED_MESSAGES, _STORED_FTS, _STORED_HOURLY):
            cursor.execute(query.format(where=where), params)
            results.append([(*row[:-1], int(row[-1])) for row in cursor.fetchall()])
    counts, messages, fts, hourly = results
    return FailureRows(counts=counts, messages=messages, fts=fts, hourly=hourly)


_COMPLETE = f"""
SELECT (SELECT coalesce(sum(files_failed), 0) FROM results_raterolluphour WHERE {_OF_CHALLENGE}),
       (SELECT coalesce(sum(failures), 0) FROM results_failurehour WHERE {_OF_CHALLENGE})
"""


def failure_counts_complete(challenge_id: int) -> bool:
    """Whether the stored counts hold every failed record of a challenge's activities (the hourly rollup's
    count): not when records were bulk-loaded without failure_counts_rebuild; the page then counts from the
    records."""
    with read_connection().cursor() as cursor:
        cursor.execute(_COMPLETE, {"challenge": challenge_id})
        in_rollups, stored = cursor.fetchone()
    return int(in_rollups) == int(stored)
