"""The FROM x TO cells of a large challenge from the per-minute rollup: above RESULTS_MATRIX_EXACT_LIMIT transfers,
the union of a million intervals takes seconds (1.7 s for 500,000, bench/rates.py) and would grow past a request's
time, so a link's active time is counted to the minute instead: the minutes in which it moved data or a transfer of
it ended, times 60. Volume and files are exact (the rollup's sums); the sum of file rates, the runs and the most
common error are not computed at that scale. The page says which resolution it shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db.models import F, Sum

from common.db import read_connection

from ..models import RateRollup, RateRollupHour
from .cells import LinkCell


def matrix_exact_limit() -> int:
    return int(getattr(settings, "RESULTS_MATRIX_EXACT_LIMIT", 1_000_000))


def transfers_counted(activity_ids: Sequence[int]) -> int:
    """Files that ended, of these activities, from the hourly rollup (one small query)."""
    found = RateRollupHour.objects.filter(activity_id__in=activity_ids).aggregate(
        files=Sum(F("files_ok") + F("files_failed"))
    )
    return int(found["files"] or 0)


ROLLUP_CELLS = f"""
WITH minutes AS (
    SELECT source_site_id AS s, destination_site_id AS d, {{mode}} AS mode, {{concurrency}} AS concurrency, minute,
           sum(bytes) AS bytes, sum(files_ok) AS ok, sum(files_failed) AS failed
    FROM {RateRollup._meta.db_table}
    WHERE activity_id = ANY(%(activities)s) AND source_site_id IS NOT NULL AND destination_site_id IS NOT NULL
      {{filters}}
    GROUP BY 1, 2, 3, 4, 5
)
SELECT src.name, dst.name, m.mode, m.concurrency, sum(m.bytes),
       60.0 * count(*) FILTER (WHERE m.bytes > 0.5 OR m.ok + m.failed > 0), sum(m.ok), sum(m.failed)
FROM minutes AS m
JOIN sites_site AS src ON src.id = m.s
JOIN sites_site AS dst ON dst.id = m.d
GROUP BY 1, 2, 3, 4
HAVING sum(m.ok) + sum(m.failed) > 0 OR sum(m.bytes) > 0.5
"""


def rollup_cells(
    *, activity_ids: Sequence[int], mode: str | None, concurrency: int | None, split: Sequence[str]
) -> list[LinkCell]:
    filters, params = "", {"activities": list(activity_ids)}
    if mode is not None:
        filters += " AND mode = %(mode)s"
        params["mode"] = mode  # type: ignore[assignment]
    if concurrency is not None:
        filters += " AND concurrency = %(concurrency)s"
        params["concurrency"] = concurrency  # type: ignore[assignment]
    query = ROLLUP_CELLS.format(
        mode="mode" if "mode" in split else "''",
        concurrency="coalesce(concurrency, -1)" if "concurrency" in split else "-1",
        filters=filters,
    )
    with read_connection().cursor() as cursor:
        cursor.execute(query, params)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
    cells = [
        LinkCell(
            source=source,
            destination=destination,
            mode=cell_mode if "mode" in split else None,
            concurrency=None if cell_concurrency == -1 else cell_concurrency,
            volume=int(volume or 0),
            active_seconds=float(active or 0),
            sum_of_file_rates=None,
            files_ok=int(ok or 0),
            files_failed=int(failed or 0),
        )
        for source, destination, cell_mode, cell_concurrency, volume, active, ok, failed in rows
    ]
    return sorted(cells, key=lambda c: (c.source.lower(), c.destination.lower(), c.mode or "", c.concurrency or 0))


def rollup_offered(activity_ids: Sequence[int]) -> set[tuple[str, int | None]]:
    """The modes and concurrencies of these activities' transfers, from the hourly rollup."""
    return set(
        RateRollupHour.objects.filter(
            activity_id__in=activity_ids, source_site_id__isnull=False, destination_site_id__isnull=False
        )
        .values_list("mode", "concurrency")
        .distinct()
        .order_by()
    )
