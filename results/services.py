"""Writes of results: storing transfer records once, with the rollup updated in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Q

from .failures import failure_categorize_records
from .models import TransferRecord
from .rollups import rollup_add

RECORDS_LOCK = 0x7265  # serialises writers of records so that a retried batch cannot be counted twice


@dataclass
class StoreSummary:
    stored: int = 0
    duplicates: int = 0


@transaction.atomic
def records_store(*, records: Sequence[TransferRecord]) -> StoreSummary:
    """Store new records and add them to the rollup, all in one transaction. A record whose (origin, origin_id)
    is already stored, or repeats within the batch, is a duplicate and counts nothing."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [RECORDS_LOCK])
    unique: dict[tuple[str, str], TransferRecord] = {}
    for record in records:
        unique.setdefault((record.origin, record.origin_id), record)
    existing: set[tuple[str, str]] = set()
    if unique:
        condition = Q()
        for origin in {origin for origin, _ in unique}:
            condition |= Q(origin=origin, origin_id__in=[oid for o, oid in unique if o == origin])
        existing = set(TransferRecord.objects.filter(condition).values_list("origin", "origin_id"))
    new = [record for key, record in unique.items() if key not in existing]
    failure_categorize_records(new)
    TransferRecord.objects.bulk_create(new, batch_size=5000)
    rollup_add(records=new)
    return StoreSummary(stored=len(new), duplicates=len(records) - len(new))
