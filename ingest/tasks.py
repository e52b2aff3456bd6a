"""Celery tasks of ingestion."""

from __future__ import annotations

from celery import shared_task

from .services import records_attach

# Beat, every minute: one transaction under the writers' lock over the records of newly registered hosts (the
# rollups moved with them). Usually none; a host registered after a day of its records takes longer, and a
# transaction cut short attaches nothing: ten minutes lets that day through.
ATTACH_SOFT_LIMIT, ATTACH_LIMIT = 600, 660


@shared_task(name="ingest.records_attach", soft_time_limit=ATTACH_SOFT_LIMIT, time_limit=ATTACH_LIMIT)
def records_attach_task() -> int:
    """Attach the records of hosts registered since they arrived (Celery beat, every minute). Idempotent."""
    return records_attach().records
