"""Celery tasks of results: thin wrappers that call results' services."""

from __future__ import annotations

from celery import shared_task

from challenges.models import Challenge

from .failures import failures_recategorize


@shared_task(name="results.failures_recategorize")
def failures_recategorize_task(challenge_id: int | None = None) -> int:
    """Apply the current failure rules to the stored failed records (of one challenge, or all; sent when the rules
    change or a coordinator asks). Idempotent: a second run changes nothing; returns how many records changed
    category (0 when the challenge is gone)."""
    if challenge_id is None:
        return failures_recategorize()
    challenge = Challenge.objects.filter(pk=challenge_id).first()
    return 0 if challenge is None else failures_recategorize(challenge=challenge)
