"""The FROM x TO cells of a challenge from the stored unions (results.store.link_intervals), exactly as
results.matrix.cells computes them from the records (active time, volume, files, sum of file rates, runs, most common
error), reading per key a few rows instead of every record: a cell's active time is the union of its keys' islands,
merged in the query (the union of unions is the union of all).

They answer any selection the matrix page offers: the challenge's activities (of the experiments the reader may
see), one mode, one concurrency, split by mode and / or concurrency. Not a time window: a key's counts are not kept
per time (a window would need the records, or the rollups' minutes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from common.db import read_connection

from ..active_time import active_seconds_sql
from .cells import LINK_CELLS_WORK_MEM, LinkCell

UNION_CELLS = """
WITH totals AS MATERIALIZED (
    SELECT source_site_id AS s, destination_site_id AS d, {mode} AS mode, {concurrency} AS concurrency,
           sum(volume) AS volume, sum(files_ok) AS files_ok, sum(files_failed) AS files_failed,
           sum(sum_of_file_rates) AS sum_of_file_rates
    FROM results_linktotals WHERE {where}
    GROUP BY 1, 2, 3, 4
), runs AS MATERIALIZED (
    SELECT s, d, mode, concurrency, array_agg(DISTINCT run) AS runs
    FROM (SELECT source_site_id AS s, destination_site_id AS d, {mode} AS mode, {concurrency} AS concurrency,
                 unnest(runs) AS run
          FROM results_linktotals WHERE {where} AND cardinality(runs) > 0) AS of_keys
    GROUP BY 1, 2, 3, 4
), active AS MATERIALIZED (
    -- the union's length (results.active_time) over the cell's stored islands
    {ACTIVE}
), errors AS MATERIALIZED (
    -- mode() WITHIN GROUP (ORDER BY message) of LINK_CELLS: the most frequent, the first in order among equals
    SELECT DISTINCT ON (s, d, mode, concurrency) s, d, mode, concurrency, message
    FROM (SELECT source_site_id AS s, destination_site_id AS d, {mode} AS mode, {concurrency} AS concurrency,
                 message, sum(failures) AS failures
          FROM results_linkerror WHERE {where} GROUP BY 1, 2, 3, 4, 5) AS per_message
    ORDER BY s, d, mode, concurrency, failures DESC, message
)
SELECT src.name, dst.name, t.mode, t.concurrency, t.volume, coalesce(a.active_seconds, 0), t.sum_of_file_rates,
       t.files_ok, t.files_failed, runs.runs, errors.message
FROM totals AS t
LEFT JOIN active AS a ON (a.s, a.d, a.mode, a.concurrency) = (t.s, t.d, t.mode, t.concurrency)
LEFT JOIN runs ON (runs.s, runs.d, runs.mode, runs.concurrency) = (t.s, t.d, t.mode, t.concurrency)
LEFT JOIN errors ON (errors.s, errors.d, errors.mode, errors.concurrency) = (t.s, t.d, t.mode, t.concurrency)
JOIN sites_site AS src ON src.id = t.s
JOIN sites_site AS dst ON dst.id = t.d
""".replace(
    "{ACTIVE}",
    active_seconds_sql(
        key="s, d, mode, concurrency",
        intervals="SELECT source_site_id AS s, destination_site_id AS d, {mode} AS mode, {concurrency} AS concurrency, "
        'start, "end" FROM results_linkinterval WHERE {where}',
    ),
)


def union_cells(
    *, activity_ids: Sequence[int], mode: str | None, concurrency: int | None, split: Sequence[str]
) -> list[LinkCell]:
    """The cells of these activities' records (of one mode and / or concurrency, or all), split by `split`, from
    the stored unions: the same numbers as link_matrix over the records, in one query."""
    where, params = "activity_id = ANY(%(activities)s)", {"activities": list(activity_ids)}
    if mode is not None:
        where += " AND mode = %(mode)s"
        params["mode"] = mode  # type: ignore[assignment]
    if concurrency is not None:
        where += " AND concurrency = %(concurrency)s"
        params["concurrency"] = concurrency  # type: ignore[assignment]
    query = UNION_CELLS.format(
        where=where,
        mode="mode" if "mode" in split else "''",
        concurrency="concurrency" if "concurrency" in split else "-1",
    )
    connection = read_connection()  # the replica where the request allows it (common.db)
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL work_mem = '{LINK_CELLS_WORK_MEM}'")
        cursor.execute(query, params)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
    cells = [_cell(row, split) for row in rows]
    return sorted(cells, key=lambda c: (c.source.lower(), c.destination.lower(), c.mode or "", c.concurrency or 0))


def _cell(row: tuple[Any, ...], split: Sequence[str]) -> LinkCell:
    source, destination, mode, concurrency, volume, active, file_rates, ok, failed, runs, top_error = row
    return LinkCell(
        source=source,
        destination=destination,
        mode=mode if "mode" in split else None,
        concurrency=None if concurrency == -1 else concurrency,
        volume=int(volume),
        active_seconds=float(active),
        sum_of_file_rates=float(file_rates),
        files_ok=int(ok),
        files_failed=int(failed),
        runs=set(runs or ()),
        top_error=top_error or "",
    )


UNION_COUNTS = """
SELECT coalesce(sum(files_ok + files_failed), 0),
       coalesce(sum(files_ok + files_failed)
                    FILTER (WHERE source_site_id IS NOT NULL AND destination_site_id IS NOT NULL), 0),
       (SELECT coalesce(sum(files_ok + files_failed), 0) FROM results_linktotals
        WHERE activity_id = ANY(%(activities)s))
FROM results_raterolluphour
WHERE activity_id = ANY(%(activities)s)
"""


def union_transfers(activity_ids: Sequence[int]) -> tuple[int, bool]:
    """Files that ended, of these activities (the hourly rollup's count, as matrix_rollup.transfers_counted), and
    whether the stored unions hold every one of them that has both sites: when they do not (records bulk-loaded
    without link_intervals_rebuild), the matrix is computed another way and says so."""
    with read_connection().cursor() as cursor:
        cursor.execute(UNION_COUNTS, {"activities": list(activity_ids)})
        transfers, with_sites, in_unions = cursor.fetchone()
    return int(transfers), int(with_sites) == int(in_unions)


def union_offered(activity_ids: Sequence[int]) -> set[tuple[str, int | None]]:
    """The modes and concurrencies of these activities' transfers of known sites, from the stored unions."""
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT mode, concurrency FROM results_linktotals WHERE activity_id = ANY(%s)",
            [list(activity_ids)],
        )
        return {(mode, None if concurrency == -1 else concurrency) for mode, concurrency in cursor.fetchall()}
