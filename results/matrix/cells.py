"""The FROM x TO matrix of a set of portal runs, over the time each link was active.

For one run or a few (a sweep's steps, a DT and its recall), the records are few enough to read: each cell (source
site, destination site, and mode and concurrency when split) gets
- volume: the bytes of its successful transfers;
- active_seconds: the length of the union of its transfers' [start, end) intervals (ok and failed: a link busy
  failing is busy), so that a link that ran for 10 s shows its rate over those 10 s, not over a challenge's week;
- rate = volume / active_seconds; sum_of_file_rates = each successful file's bytes over its own duration, added
  up (the way the JUNO challenge reported "adding up single-file rates");
- files ok / failed, failure ratio, the number of runs, and the most common error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import transaction
from django.db.models import QuerySet

from common.db import read_connection

from ..active_time import active_seconds_sql
from ..models import TransferRecord

SPLITS = ("mode", "concurrency")


@dataclass
class LinkCell:
    source: str
    destination: str
    mode: str | None = None
    concurrency: int | None = None
    volume: int = 0
    active_seconds: float = 0.0
    sum_of_file_rates: float | None = 0.0  # None: not computed (a large challenge's matrix, see matrix_rollup)
    files_ok: int = 0
    files_failed: int = 0
    runs: set[int] = field(default_factory=set)
    top_error: str = ""

    @property
    def rate(self) -> float | None:
        return self.volume / self.active_seconds if self.active_seconds > 0 else None

    @property
    def average_rate(self) -> float:
        """rate, 0 for a cell of no active time (the shape the challenge matrix's pages and heat map read)."""
        return self.rate or 0.0

    @property
    def failure_ratio(self) -> float | None:
        total = self.files_ok + self.files_failed
        return self.files_failed / total if total else None

    def as_row(self) -> dict[str, Any]:
        """SI base units: bytes, seconds, bytes per second."""
        return {
            "source": self.source,
            "destination": self.destination,
            "mode": self.mode,
            "concurrency": self.concurrency,
            "rate": self.rate,
            "sum_of_file_rates": self.sum_of_file_rates,
            "volume": self.volume,
            "active_seconds": self.active_seconds,
            "files_ok": self.files_ok,
            "files_failed": self.files_failed,
            "failure_ratio": self.failure_ratio,
            "runs": sorted(self.runs),
            "top_error": self.top_error,
        }


MATRIX_COLUMNS = list(LinkCell(source="", destination="").as_row())


# Per cell (link, and mode / concurrency when split, and run when by_run, the key k; -1 stands for a NULL
# concurrency or key so that cells join): the counts, and the active time (results.active_time).
# {records} is the SELECT of the records' columns (RECORD_COLUMNS, in order). Each part is computed once
# (MATERIALIZED): the planner's estimates of a filtered set of records are rough, and a re-run of the counts per
# cell cost seconds at a million records (measured with bench/rates.py).
RECORD_COLUMNS = (
    "source_site_id",
    "destination_site_id",
    "mode",
    "concurrency",
    "start",
    "end",
    "bytes",
    "state",
    "error_message",
    "run_id",
)
LINK_CELLS = """
WITH r AS MATERIALIZED (
    SELECT s, d, {mode} AS mode, {concurrency} AS concurrency, {key} AS k, start, greatest("end", start) AS "end",
           bytes, state, error_message, run_id
    FROM ({records}) AS q(s, d, record_mode, record_concurrency, start, "end", bytes, state, error_message, run_id)
), active AS MATERIALIZED (
    -- the union of the transfers' intervals: results.active_time
    {ACTIVE}
), totals AS MATERIALIZED (
    -- plain sums and counts: a hash aggregate, no sort of the records
    SELECT s, d, mode, concurrency, k,
           coalesce(sum(bytes) FILTER (WHERE state = 'ok'), 0) AS volume,
           count(*) FILTER (WHERE state = 'ok') AS files_ok,
           count(*) FILTER (WHERE state = 'failed') AS files_failed,
           coalesce(sum(bytes / extract(epoch FROM "end" - start)) FILTER (WHERE state = 'ok' AND "end" > start), 0)
               AS sum_of_file_rates
    FROM r GROUP BY s, d, mode, concurrency, k
), runs AS MATERIALIZED (
    SELECT s, d, mode, concurrency, k, array_agg(run_id) AS runs
    FROM (SELECT DISTINCT s, d, mode, concurrency, k, run_id FROM r WHERE run_id IS NOT NULL) AS distinct_runs
    GROUP BY s, d, mode, concurrency, k
), errors AS MATERIALIZED (
    -- the failed records only (a few per cent) are sorted for the most common message
    SELECT s, d, mode, concurrency, k, mode() WITHIN GROUP (ORDER BY message) AS top_error
    FROM (SELECT s, d, mode, concurrency, k, left(error_message, 300) AS message FROM r
          WHERE state = 'failed' AND error_message <> '') AS failed
    GROUP BY s, d, mode, concurrency, k
)
SELECT src.name, dst.name, t.mode, t.concurrency, t.k, t.volume, a.active_seconds, t.sum_of_file_rates, t.files_ok,
       t.files_failed, runs.runs, errors.top_error
FROM totals AS t
JOIN active AS a ON (a.s, a.d, a.mode, a.concurrency, a.k) = (t.s, t.d, t.mode, t.concurrency, t.k)
LEFT JOIN runs ON (runs.s, runs.d, runs.mode, runs.concurrency, runs.k) = (t.s, t.d, t.mode, t.concurrency, t.k)
LEFT JOIN errors
    ON (errors.s, errors.d, errors.mode, errors.concurrency, errors.k) = (t.s, t.d, t.mode, t.concurrency, t.k)
JOIN sites_site AS src ON src.id = t.s
JOIN sites_site AS dst ON dst.id = t.d
""".replace(
    "{ACTIVE}",
    active_seconds_sql(
        key="s, d, mode, concurrency, k", intervals='SELECT s, d, mode, concurrency, k, start, "end" FROM r'
    ),
)
# Sorting half a million records spills to disk at PostgreSQL's default work_mem (4 MB): this query may use more.
LINK_CELLS_WORK_MEM = "64MB"


def link_matrix(
    records: QuerySet[TransferRecord], *, split: Sequence[str] = (), by_run: bool = False
) -> list[LinkCell]:
    """The cells of these records (e.g. `TransferRecord.objects.filter(run__in=runs)`), by link and the `split`
    fields, and by run when `by_run` (a sweep's steps: one cell per run and link), in one query; records whose
    source or destination site is unknown are left out."""
    unknown = set(split) - set(SPLITS)
    if unknown:
        raise ValueError(f"split by {', '.join(SPLITS)}, not {', '.join(sorted(unknown))}")
    selected_records = records.filter(
        source_site__isnull=False, destination_site__isnull=False, state__in=("ok", "failed")
    ).order_by()
    try:
        selected, params = selected_records.values_list(*RECORD_COLUMNS).query.sql_with_params()
    except EmptyResultSet:  # e.g. activity_id__in=[]: Django knows no row can match
        return []
    query = LINK_CELLS.format(
        records=selected,
        mode="record_mode" if "mode" in split else "''",
        concurrency="coalesce(record_concurrency, -1)" if "concurrency" in split else "-1",
        key="coalesce(run_id, -1)" if by_run else "-1",
    )
    connection = read_connection()  # the replica where the request allows it (common.db)
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL work_mem = '{LINK_CELLS_WORK_MEM}'")
        cursor.execute(query, params)
        rows = cursor.fetchall()
    cells = [
        LinkCell(
            source=source,
            destination=destination,
            mode=mode if "mode" in split else None,
            concurrency=None if concurrency == -1 else concurrency,
            volume=int(volume),
            active_seconds=float(active),
            sum_of_file_rates=float(file_rates),
            files_ok=ok,
            files_failed=failed,
            runs=set(runs or ()),
            top_error=top_error or "",
        )
        for source, destination, mode, concurrency, _, volume, active, file_rates, ok, failed, runs, top_error in rows
    ]
    return sorted(cells, key=lambda c: (c.source.lower(), c.destination.lower(), c.mode or "", c.concurrency or 0))
