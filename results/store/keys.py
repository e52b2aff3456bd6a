"""A transfer record's identity, kept in results_recordkey so that it is stored once whatever its end.

Two identities per record, as the unique indexes of the table had before it was partitioned: (origin, experiment,
origin id), and (experiment, transfer key) when the transfer key is not blank; records of no experiment form one
group (NULL is not distinct). Each is kept as the md5 of its parts (a uuid: 16 bytes, whatever the length of the
ids), prefixed by its kind so that the two never meet.

A batch (the temporary table record_batch, each row numbered by `ord`) claims its keys with INSERT ... ON CONFLICT
DO NOTHING, ordered by key so that concurrent writers meet common keys in one order: a writer that meets a key
another one has claimed waits for it to commit, then skips the row, as it did on the unique indexes. A row is new
when it claimed its origin key and, if it has one, its transfer key, and is the first of the batch to hold them; a
row that claimed its origin key but lost its transfer key gives its origin key back.
"""

from __future__ import annotations

from django.db import connection

ORIGIN_KEY = (
    "md5('o' || chr(31) || {r}.origin || chr(31) || coalesce({r}.experiment_id::text, '') || chr(31) || "
    "{r}.origin_id)::uuid"
)
TRANSFER_KEY = "md5('t' || chr(31) || coalesce({r}.experiment_id::text, '') || chr(31) || {r}.transfer_key)::uuid"

_CLAIM = f"""
CREATE TEMP TABLE record_claim ON COMMIT DROP AS
WITH keyed AS (
    SELECT b.ord, {ORIGIN_KEY.format(r="b")} AS origin_key,
           CASE WHEN b.transfer_key <> '' THEN {TRANSFER_KEY.format(r="b")} END AS transfer_key
    FROM record_batch AS b
), claimed AS (
    INSERT INTO results_recordkey (key)
    SELECT origin_key FROM keyed ORDER BY origin_key
    ON CONFLICT DO NOTHING
    RETURNING key
)
SELECT DISTINCT ON (k.origin_key) k.ord, k.origin_key, k.transfer_key
FROM keyed AS k JOIN claimed AS c ON c.key = k.origin_key
ORDER BY k.origin_key, k.ord
"""
_CLAIM_TRANSFER = """
CREATE TEMP TABLE record_won ON COMMIT DROP AS
WITH claimed AS (
    INSERT INTO results_recordkey (key)
    SELECT DISTINCT transfer_key FROM record_claim WHERE transfer_key IS NOT NULL ORDER BY transfer_key
    ON CONFLICT DO NOTHING
    RETURNING key
), first AS (
    SELECT DISTINCT ON (r.transfer_key) r.ord
    FROM record_claim AS r JOIN claimed AS c ON c.key = r.transfer_key
    ORDER BY r.transfer_key, r.ord
)
SELECT ord FROM record_claim WHERE transfer_key IS NULL
UNION ALL
SELECT ord FROM first
"""
_GIVE_BACK = """
DELETE FROM results_recordkey
WHERE key IN (SELECT origin_key FROM record_claim WHERE ord NOT IN (SELECT ord FROM record_won))
"""


def batch_claim_sql() -> None:
    """Claim the keys of the rows of record_batch; leaves the temporary table record_won (ord) of the rows to
    store. Call inside the transaction that stores them."""
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS pg_temp.record_claim, pg_temp.record_won")
        cursor.execute(_CLAIM)
        claimed = cursor.rowcount
        cursor.execute(_CLAIM_TRANSFER)
        if cursor.rowcount != claimed:
            cursor.execute(_GIVE_BACK)
