"""Bulk writes into PostgreSQL tables: the indexes set aside while a table is filled in one statement and built
again after it (one sorted build costs a fraction of keeping an index up to date row by row)."""

from __future__ import annotations

from typing import Any


def indexes_set_aside(cursor: Any, table: str) -> list[str]:
    """Drop `table`'s unique constraints and indexes, but not its primary key; return the statements that make them
    again. Call inside the transaction that fills the table and run the statements before it commits: other
    sessions never see the table without them (dropping takes an ACCESS EXCLUSIVE lock until the commit)."""
    again = []
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'u'",
        [table],
    )
    for name, definition in cursor.fetchall():
        cursor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"')
        again.append(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
    cursor.execute(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = %s::regclass AND NOT i.indisprimary",
        [table],
    )
    for name, definition in cursor.fetchall():
        cursor.execute(f'DROP INDEX "{name}"')
        # A partitioned table's index is defined "ON ONLY" the parent: made so, it would cover no partition.
        again.append(definition.replace(" ON ONLY ", " ON ", 1))
    return again
