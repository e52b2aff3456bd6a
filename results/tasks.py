"""Celery tasks of results: thin wrappers that call results' services."""

from __future__ import annotations

from celery import shared_task

from .failures import failures_recategorize


@shared_task(name="results.failures_recategorize")
def failures_recategorize_task() -> int:
    """Apply the current failure rules to every stored failed record (sent when the rules change). Idempotent:
    a second run changes nothing; returns how many records changed category."""
    return failures_recategorize()
