"""A transfer record's identity, kept in results_recordkey so that it is stored once whatever its end.

Two identities per record, as the unique indexes of the table had before it was partitioned: (origin, experiment,
origin id), and (experiment, transfer key) when the transfer key is not blank; records of no experiment form one
group (NULL is not distinct). Each is kept as the md5 of its parts (a uuid: 16 bytes, whatever the length of the
ids), prefixed by its kind so that the two never meet.

A batch (the temporary table record_batch, each row numbered by `ord`) claims its keys in one statement: every key
it wants (the origin key of the first row of the batch holding it, the transfer key of the first of those rows
holding it) goes into results_recordkey with INSERT ... ON CONFLICT DO NOTHING, ordered by key so that concurrent
writers meet common keys in one order: a writer that meets a key another one has claimed waits for it to commit, then
skips the row, as it did on the unique indexes. A row is new (won) when it claimed its origin key and, if it has one,
its transfer key; the keys claimed by rows that did not win (a new origin id of a transfer already stored, a new
transfer key of an origin id already stored) are given back, a second statement that only such batches run.
"""

from __future__ import annotations

from hashlib import md5
from typing import Any

from django.db import connection
from psycopg import postgres
from psycopg.adapt import Buffer, Dumper
from psycopg.pq import Format

ORIGIN_KEY = (
    "md5('o' || chr(31) || {r}.origin || chr(31) || coalesce({r}.experiment_id::text, '') || chr(31) || "
    "{r}.origin_id)::uuid"
)
TRANSFER_KEY = "md5('t' || chr(31) || coalesce({r}.experiment_id::text, '') || chr(31) || {r}.transfer_key)::uuid"


def origin_key(origin: object, experiment_id: object, origin_id: object) -> bytes:
    """ORIGIN_KEY of a row, its 16 bytes, computed by the writer (the batch's keys come with its COPY: hashing
    10,000 keys in SQL took a tenth of a batch's time in PostgreSQL). A test keeps the two the same."""
    text = f"o\x1f{origin}\x1f{'' if experiment_id is None else experiment_id}\x1f{origin_id}"
    return md5(text.encode(), usedforsecurity=False).digest()


def transfer_key(experiment_id: object, key: object) -> bytes | None:
    """TRANSFER_KEY of a row (None when its transfer key is blank), as origin_key."""
    if not key:
        return None
    text = f"t\x1f{'' if experiment_id is None else experiment_id}\x1f{key}"
    return md5(text.encode(), usedforsecurity=False).digest()


class _KeyDumper(Dumper):
    """A key's 16 bytes as a uuid of a binary COPY, as they are (a uuid's binary form is its 16 bytes): no
    uuid.UUID made per key."""

    format = Format.BINARY
    oid = postgres.types["uuid"].oid

    def dump(self, obj: bytes) -> Buffer:
        return obj


def keys_copy_adapt(cursor: Any) -> None:
    """Make the uuid columns of a binary COPY on this psycopg cursor (after copy.set_types) take the 16 bytes of
    origin_key and transfer_key: for this cursor only."""
    cursor.adapters.register_dumper(None, _KeyDumper)


# record_claim: one row per origin key of the batch (its first row), whether it claimed that key, its transfer key,
# whether it claimed that one (only the first of these rows holding a transfer key tries), whether it won.
_CLAIM = """
CREATE TEMP TABLE record_claim ON COMMIT DROP AS
WITH origin_first AS MATERIALIZED (
    SELECT DISTINCT ON (b.origin_key) b.ord, b.origin_key, b.transfer_hash AS transfer_key
    FROM record_batch AS b ORDER BY b.origin_key, b.ord
), transfer_first AS MATERIALIZED (
    -- among the rows whose origin key is not stored (a row that loses it leaves the transfer key to the next)
    SELECT DISTINCT ON (transfer_key) ord, transfer_key
    FROM origin_first AS o
    WHERE transfer_key IS NOT NULL AND NOT EXISTS (SELECT FROM results_recordkey AS k WHERE k.key = o.origin_key)
    ORDER BY transfer_key, ord
), claimed AS (
    INSERT INTO results_recordkey (key)
    SELECT key FROM (SELECT origin_key FROM origin_first UNION ALL SELECT transfer_key FROM transfer_first) AS k (key)
    ORDER BY key
    ON CONFLICT DO NOTHING
    RETURNING key
), flags AS (
    SELECT o.ord, o.origin_key, o.transfer_key, oc.key IS NOT NULL AS origin_claimed,
           tc.key IS NOT NULL AS transfer_claimed
    FROM origin_first AS o
    LEFT JOIN claimed AS oc ON oc.key = o.origin_key
    LEFT JOIN transfer_first AS t ON t.ord = o.ord
    LEFT JOIN claimed AS tc ON tc.key = t.transfer_key
)
SELECT ord, origin_key, transfer_key, origin_claimed, transfer_claimed,
       origin_claimed AND (transfer_key IS NULL OR transfer_claimed) AS won, NULL::bigint AS activity_id
FROM flags
"""
_COUNTS = """
SELECT count(*) FILTER (WHERE won), count(*) FILTER (WHERE NOT won AND (origin_claimed OR transfer_claimed))
FROM record_claim
"""
_GIVE_BACK = """
DELETE FROM results_recordkey
WHERE key IN (SELECT origin_key FROM record_claim WHERE origin_claimed AND NOT won
              UNION ALL SELECT transfer_key FROM record_claim WHERE transfer_claimed AND NOT won)
"""


def batch_claim_sql() -> int:
    """Claim the keys of the rows of record_batch (their origin_key and transfer_hash columns: origin_key and
    transfer_key of each row); leaves the temporary table record_claim, whose rows with `won`
    are the rows to store (and its activity_id column for results.store.attribution to fill). Returns how many
    won. Call inside the transaction that stores them."""
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS pg_temp.record_claim")
        cursor.execute(_CLAIM)
        cursor.execute(_COUNTS)
        won, lost_claims = cursor.fetchone()
        if lost_claims:
            cursor.execute(_GIVE_BACK)
    return int(won)
