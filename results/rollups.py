"""The per-minute rollup: a transfer's bytes spread uniformly over its real [start, end), files counted in the
minute they ended. Incremental (in the transaction that stores records) and a full rebuild in SQL."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import connection, transaction

from .choices import RecordState
from .models import TransferRecord

MINUTE = timedelta(minutes=1)
RollupKey = tuple[datetime, int | None, int | None, int | None, str, int | None]


def minute_floor(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def spread(*, start: datetime, end: datetime, size: float) -> list[tuple[datetime, float]]:
    """size spread uniformly over [start, end), as (minute, bytes) pairs; all in start's minute when end == start."""
    if end <= start:
        return [(minute_floor(start), float(size))]
    duration = (end - start).total_seconds()
    pieces = []
    minute = minute_floor(start)
    while minute < end:
        overlap = (min(end, minute + MINUTE) - max(start, minute)).total_seconds()
        pieces.append((minute, size * overlap / duration))
        minute += MINUTE
    return pieces


def rollup_deltas(records: Iterable[TransferRecord]) -> dict[RollupKey, list[float]]:
    """What the records add to the rollup: {key: [bytes, files_ok, files_failed]}."""
    deltas: dict[RollupKey, list[float]] = defaultdict(lambda: [0.0, 0, 0])
    for record in records:
        base = (
            record.experiment_id,
            record.source_site_id,
            record.destination_site_id,
            record.mode or "",
            record.concurrency,
        )
        if record.state == RecordState.OK:
            for minute, part in spread(start=record.start, end=record.end, size=record.bytes):
                deltas[(minute, *base)][0] += part
            deltas[(minute_floor(record.end), *base)][1] += 1
        elif record.state == RecordState.FAILED:
            deltas[(minute_floor(record.end), *base)][2] += 1
    return deltas


UPSERT = """
INSERT INTO results_raterollup
    (minute, experiment_id, source_site_id, destination_site_id, mode, concurrency, bytes, files_ok, files_failed)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT ON CONSTRAINT rollup_unique_key DO UPDATE SET
    bytes = results_raterollup.bytes + EXCLUDED.bytes,
    files_ok = results_raterollup.files_ok + EXCLUDED.files_ok,
    files_failed = results_raterollup.files_failed + EXCLUDED.files_failed
"""


def rollup_add(*, records: Iterable[TransferRecord]) -> int:
    """Add new records to the rollup (call inside the transaction that stored them). Returns rows touched."""
    rows = [
        (*key, value[0], value[1], value[2])
        for key, value in sorted(
            rollup_deltas(records).items(), key=lambda item: tuple("" if v is None else str(v) for v in item[0])
        )
    ]
    if rows:
        with connection.cursor() as cursor:
            cursor.executemany(UPSERT, rows)
    return len(rows)


REBUILD = """
INSERT INTO results_raterollup
    (minute, experiment_id, source_site_id, destination_site_id, mode, concurrency, bytes, files_ok, files_failed)
SELECT minute, experiment_id, source_site_id, destination_site_id, mode, concurrency,
       sum(bytes), sum(files_ok), sum(files_failed)
FROM (
    -- bytes of successful transfers, spread over the minutes of [start, end)
    SELECT m AS minute, r.experiment_id, r.source_site_id, r.destination_site_id, r.mode, r.concurrency,
           CASE WHEN r."end" <= r.start THEN r.bytes::float8
                ELSE r.bytes * extract(epoch FROM least(r."end", m + interval '1 minute') - greatest(r.start, m))
                     / extract(epoch FROM r."end" - r.start) END AS bytes,
           0 AS files_ok, 0 AS files_failed
    FROM results_transferrecord r,
         generate_series(date_trunc('minute', r.start),
                         CASE WHEN r."end" <= r.start THEN date_trunc('minute', r.start)
                              ELSE r."end" - interval '1 microsecond' END,
                         interval '1 minute') AS m
    WHERE r.state = 'ok'
    UNION ALL
    -- files, in the minute they ended
    SELECT date_trunc('minute', r."end"), r.experiment_id, r.source_site_id, r.destination_site_id, r.mode,
           r.concurrency, 0, (r.state = 'ok')::int, (r.state = 'failed')::int
    FROM results_transferrecord r
    WHERE r.state IN ('ok', 'failed')
) AS parts
GROUP BY minute, experiment_id, source_site_id, destination_site_id, mode, concurrency
"""


@transaction.atomic
def rollups_rebuild() -> int:
    """Recompute the whole rollup from the records (after bulk loads or re-matching sites). Returns its rows."""
    with connection.cursor() as cursor:
        cursor.execute("LOCK TABLE results_raterollup IN EXCLUSIVE MODE")
        cursor.execute("DELETE FROM results_raterollup")
        cursor.execute(REBUILD)
        return int(cursor.rowcount)
