"""Writes of results: storing transfer records once, with the rollups updated in the same transaction.

The write path is built for DDM ingestion (tens of thousands of records a second): the batch is COPied (binary) into a
temporary table, its rows' identities (origin id, transfer key) are claimed in results_recordkey in one statement
(what is claimed already, or twice in the batch, is a duplicate: results.store.keys), the new rows are given their
activity (results.store.attribution) and inserted into the partitioned table in one statement (the partition of their
month, made beforehand when missing: results.store.partitions; their references checked once for the statement by
the table's triggers, migration 0020), and the rollups get the deltas of exactly the inserted rows, computed and
upserted in SQL.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from operator import attrgetter
from typing import Protocol

import psycopg.errors
from django.db import OperationalError, connection, transaction

from sites.matching import storage_for_url, url_host
from sites.models import NetworkHost

from .choices import Origin
from .failures.causes import failure_categorize_records, failure_categorize_rows
from .models import ERROR_MESSAGE_LENGTH, NetworkMeasurement, OptimizerDecision, TransferRecord
from .store.attribution import batch_attribute_sql
from .store.keys import batch_claim_sql, keys_copy_adapt, origin_key, transfer_key
from .store.partitions import partitions_for_ends
from .store.rollups import RECORDS_LOCK, ROLLUP_COLUMNS, rollup_add_sql
from .store.rows import DecisionRow, RecordRow

# Every stored column but the id, in the model's order (RecordRow's).
_RECORD_FIELDS = [field for field in TransferRecord._meta.concrete_fields if not field.primary_key]
RECORD_COLUMNS: tuple[str, ...] = tuple(field.column for field in _RECORD_FIELDS)
_record_values = attrgetter(*(field.attname for field in _RECORD_FIELDS))
_COLUMN_LIST = ", ".join(f'"{column}"' for column in RECORD_COLUMNS)
_BATCH_CREATE = f"""
CREATE TEMP TABLE record_batch ON COMMIT DROP AS
SELECT 0::int AS ord, {_COLUMN_LIST}, NULL::uuid AS origin_key, NULL::uuid AS transfer_hash
FROM results_transferrecord WITH NO DATA
"""
# The rows whose identities this batch claimed (results.store.keys: the claim is where concurrent writers meet,
# wait for each other and skip what the other stored; a deadlock left, crossing keys, is retried), with the activity
# attribution gave them (a run's records keep their own). The ids come from the table's identity sequence: the
# primary key (id, "end") never conflicts.
_STORED = ", ".join(
    "coalesce(w.activity_id, b.activity_id) AS activity_id" if column == "activity_id" else f'b."{column}"'
    for column in RECORD_COLUMNS
)
_STORED = f"SELECT {_STORED} FROM record_batch AS b JOIN record_claim AS w ON w.ord = b.ord AND w.won"
# What the rollups read of the stored rows (four times: a narrow table is read faster than the join again), kept
# as the INSERT returns them.
_ROLLED_CREATE = (
    f"CREATE TEMP TABLE record_stored ON COMMIT DROP AS SELECT {ROLLUP_COLUMNS} FROM record_batch WITH NO DATA"
)
_BATCH_INSERT = f"""
WITH inserted AS (
    INSERT INTO results_transferrecord ({_COLUMN_LIST}) {_STORED} ORDER BY b.ord RETURNING {ROLLUP_COLUMNS}
)
INSERT INTO record_stored SELECT * FROM inserted
"""
_END = RECORD_COLUMNS.index("end")
_EXPERIMENT, _ORIGIN = RECORD_COLUMNS.index("experiment_id"), RECORD_COLUMNS.index("origin")
_ORIGIN_ID, _TRANSFER_KEY = RECORD_COLUMNS.index("origin_id"), RECORD_COLUMNS.index("transfer_key")
DEADLOCK_RETRIES = 3


@dataclass
class StoreSummary:
    stored: int = 0
    duplicates: int = 0


class ProbeOutcome(Protocol):
    """What a probe tells of one file (measure.outcomes.FileOutcome has this shape)."""

    source_url: str
    destination_url: str
    bytes: int
    start: datetime
    end: datetime
    ok: bool
    error: str
    mode: str


def probe_record_new(
    *,
    run_id: int,
    activity_id: int | None,
    experiment_id: int | None,
    outcome: ProbeOutcome,
    state: str,
    concurrency: int | None,
    origin_id: str,
    attempt: int,
) -> TransferRecord:
    """The transfer record of one file a portal run moved (or failed to): its endpoints and sites matched from the
    URLs (sites.matching, for the run's experiment), its bytes counted only when it succeeded, over its real start
    and end, for the run's activity (None: an ad hoc run, which counts for no activity). Not stored: give it to
    records_store."""
    source_site, source = storage_for_url(outcome.source_url, experiment_id=experiment_id)
    destination_site, destination = storage_for_url(outcome.destination_url, experiment_id=experiment_id)
    return TransferRecord(
        experiment_id=experiment_id,
        source_site=source_site,
        destination_site=destination_site,
        source_endpoint=source,
        destination_endpoint=destination,
        source_url=outcome.source_url,
        destination_url=outcome.destination_url,
        bytes=outcome.bytes if outcome.ok else 0,
        start=outcome.start,
        end=max(outcome.end, outcome.start),
        state=state,
        error_message=outcome.error[:ERROR_MESSAGE_LENGTH],
        mode=outcome.mode[:16],
        concurrency=concurrency,
        origin=Origin.PROBE,
        origin_id=origin_id,
        run_id=run_id,
        attempt=attempt,
        activity_id=activity_id,
    )


def records_store(*, records: Sequence[TransferRecord]) -> StoreSummary:
    """Store new records and add them to the rollups, all in one transaction. A record whose (origin, origin_id)
    or non-blank transfer_key is already stored, or repeats within the batch, is a duplicate and counts nothing.
    Source and destination hosts are taken from the URLs when not given; failed records get their failure
    category. The records are not given their ids (the batch goes in by COPY)."""
    if not records:
        return StoreSummary()
    for record in records:
        if record.source_url and not record.source_host:
            record.source_host = url_host(record.source_url)
        if record.destination_url and not record.destination_host:
            record.destination_host = url_host(record.destination_url)
    failure_categorize_records(records)
    return _rows_store_retried([_record_values(record) for record in records])


def record_rows_store(*, rows: Sequence[RecordRow]) -> StoreSummary:
    """records_store for rows made without model instances (the ingestion parsers'): the same dedupe, failure
    categories and rollups. Their hosts are not filled in from the URLs: the parsers set them."""
    if not rows:
        return StoreSummary()
    return _rows_store_retried(failure_categorize_rows(rows))


def _rows_store_retried(rows: Sequence[tuple[object, ...]]) -> StoreSummary:
    partitions_for_ends(row[_END] for row in rows)
    for attempt in range(DEADLOCK_RETRIES + 1):
        try:
            stored = _rows_store(rows)
            break
        except OperationalError as exc:
            # Only a whole transaction of ours can be tried again; inside a caller's, the caller decides.
            deadlock = isinstance(exc.__cause__, psycopg.errors.DeadlockDetected)
            if not deadlock or attempt == DEADLOCK_RETRIES or connection.in_atomic_block:
                raise
    return StoreSummary(stored=stored, duplicates=len(rows) - stored)


@cache
def _copy_types() -> tuple[str, ...]:
    """The PostgreSQL type of each column of record_batch, for a binary COPY (half the time of a text one: no
    number or time is formatted and parsed again)."""
    columns = (re.sub(r"\(.*\)", "", str(field.db_type(connection))) for field in _RECORD_FIELDS)
    return ("integer", *columns, "uuid", "uuid")


@transaction.atomic
def _rows_store(rows: Sequence[tuple[object, ...]]) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock_shared(%s)", [RECORDS_LOCK])
        cursor.execute("DROP TABLE IF EXISTS pg_temp.record_batch")
        cursor.execute(_BATCH_CREATE)
        keys_copy_adapt(cursor.cursor)
        with cursor.cursor.copy("COPY record_batch FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(_copy_types())
            for index, row in enumerate(rows):
                experiment = row[_EXPERIMENT]
                copy.write_row(
                    (
                        index,
                        *row,
                        origin_key(row[_ORIGIN], experiment, row[_ORIGIN_ID]),
                        transfer_key(experiment, row[_TRANSFER_KEY]),
                    )
                )
        stored = batch_claim_sql()
        if not stored:
            return 0
        batch_attribute_sql()
        # The references (sites, endpoints, experiment, run) are checked once for the whole statement, by the
        # table's trigger (migration 0020), as they go in.
        cursor.execute("DROP TABLE IF EXISTS pg_temp.record_stored")
        cursor.execute(_ROLLED_CREATE)
        cursor.execute(_BATCH_INSERT)
    rollup_add_sql(records=f"SELECT {ROLLUP_COLUMNS} FROM record_stored")
    return stored


# --- FTS optimizer decisions ------------------------------------------------------------------------------------

_DECISION_FIELDS = [field for field in OptimizerDecision._meta.concrete_fields if not field.primary_key]
_DECISION_COLUMNS = ", ".join(f'"{field.column}"' for field in _DECISION_FIELDS)
DECISIONS_PER_STATEMENT = 1000


@transaction.atomic
def optimizer_decisions_store(*, rows: Sequence[DecisionRow]) -> StoreSummary:
    """Store FTS optimizer decisions once: a decision already stored (same origin, experiment, storage elements
    and time), or repeated in the batch, is a duplicate and stores nothing. Decisions touch no rollup."""
    stored = 0
    placeholders = "(" + ", ".join(["%s"] * len(_DECISION_FIELDS)) + ")"
    with connection.cursor() as cursor:
        for first in range(0, len(rows), DECISIONS_PER_STATEMENT):
            chunk = rows[first : first + DECISIONS_PER_STATEMENT]
            cursor.execute(
                f"INSERT INTO {OptimizerDecision._meta.db_table} ({_DECISION_COLUMNS}) VALUES "
                + ", ".join([placeholders] * len(chunk))
                + " ON CONFLICT DO NOTHING",
                [value for row in chunk for value in row],
            )
            stored += int(cursor.rowcount)
    return StoreSummary(stored=stored, duplicates=len(rows) - stored)


def network_measurement_store(
    *,
    run_id: int,
    activity_id: int | None,
    experiment_id: int | None,
    host: str,
    port: int | None,
    rate: float,
    start: datetime,
    end: datetime,
) -> NetworkMeasurement:
    """What a network run (iperf3) measured, as the figure of its activity's network targets: towards the site whose
    network host is `host` (or host:port), none when the registry does not know it. Stored once per run: a second
    store (a probe's message delivered twice) replaces the first."""
    addresses = [host, f"{host}:{port}"] if port else [host]
    host_row = NetworkHost.objects.filter(address__in=addresses).order_by("address").first()
    measurement, _ = NetworkMeasurement.objects.update_or_create(
        run_id=run_id,
        defaults={
            "activity_id": activity_id,
            "experiment_id": experiment_id,
            "site_id": host_row.site_id if host_row else None,
            "host": host[:255],
            "rate": rate,
            "start": start,
            "end": max(end, start),
        },
    )
    return measurement
