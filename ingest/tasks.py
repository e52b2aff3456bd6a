"""Celery tasks of ingestion."""

from __future__ import annotations

from celery import shared_task

from .services import records_attach


@shared_task(name="ingest.records_attach")
def records_attach_task() -> int:
    """Attach the records of hosts registered since they arrived (Celery beat, every minute). Idempotent."""
    return records_attach().records
