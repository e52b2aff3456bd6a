"""A link's active time, defined once (in SQL): the length of the union of its transfers' [start, end) intervals, ok
and failed alike (a link busy failing is busy). The exact matrix (results.matrix.cells), the stored unions
(results.store.link_intervals: islands kept as records are stored) and the matrix read from them (results.matrix.unions)
all build on the one idea below: in start order, how far the intervals before one reached.

- an interval opens an island when it starts after that reach (ISLANDS: the union as islands, to store);
- it adds to the union what lies beyond that reach (active_seconds_sql: the union's length, per key).
A Python reference of the same length stays in the tests (tests/results/helpers.py `union_seconds`).
"""

from __future__ import annotations

# How far the intervals before this one reached, in start order within its key ({key}: the partition's columns).
REACH = 'max("end") OVER (PARTITION BY {key} ORDER BY start, "end" ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)'


def active_seconds_sql(*, key: str, intervals: str) -> str:
    """SELECT {key}, active_seconds: the length of the union of the `intervals` (a SELECT or a CTE's name giving
    {key}, start, "end") per key, in one window pass: the sum of what each interval adds beyond the reach of those
    before it."""
    source = intervals if intervals.lstrip().upper().startswith("SELECT") else f"SELECT * FROM {intervals}"
    return f"""
    SELECT {key}, sum(extract(epoch FROM greatest("end" - greatest(start, coalesce(reached, start)), interval '0')))
               AS active_seconds
    FROM (SELECT {key}, start, "end", {REACH.format(key=key)} AS reached FROM ({source}) AS i) AS reached
    GROUP BY {key}"""


def islands_sql(*, key: str, intervals: str) -> str:
    """SELECT {key}, start, "end": the union of the `intervals` (a SELECT giving {key}, start, "end", of positive
    length) as islands; an island lasts from its first start to its last end."""
    return f"""
SELECT {key}, min(start) AS start, max("end") AS "end"
FROM (
    SELECT {key}, start, "end", sum(opens) OVER (PARTITION BY {key} ORDER BY start, "end" ROWS UNBOUNDED PRECEDING)
           AS island
    FROM (
        SELECT {key}, start, "end", CASE WHEN start <= {REACH.format(key=key)} THEN 0 ELSE 1 END AS opens
        FROM ({intervals}) AS i
    ) AS marked
) AS numbered
GROUP BY {key}, island
"""
