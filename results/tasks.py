"""Celery tasks of results: thin wrappers that call results' services."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import transaction

from challenges.models import Challenge

from .failures.causes import failures_recategorize
from .store.attribution import Scope, records_reattribute
from .store.partitions import partitions_ensure

# One UPDATE over the failed records (rolled back whole when cut short): 23-67 s for 500,000 (measured); an hour
# covers some twenty times that.
RECATEGORIZE_SOFT_LIMIT, RECATEGORIZE_LIMIT = 3600, 3660
# Chunks of 50,000 records, each its own transaction (a chunk cut short is rolled back, the status says "failed",
# and a second pass is idempotent). A plan change concerns its activities' windows: the rollups of 40 million
# records rebuild in 24 minutes (docs/operator/scaling.md), so two hours covers a month's re-attribution.
REATTRIBUTE_SOFT_LIMIT, REATTRIBUTE_LIMIT = 2 * 3600, 2 * 3600 + 60
# Beat, hourly: a few CREATE TABLE ... PARTITION OF, each moving the DEFAULT partition's rows of its month.
PARTITIONS_SOFT_LIMIT, PARTITIONS_LIMIT = 600, 660


@shared_task(
    name="results.failures_recategorize", soft_time_limit=RECATEGORIZE_SOFT_LIMIT, time_limit=RECATEGORIZE_LIMIT
)
def failures_recategorize_task(challenge_id: int | None = None) -> int:
    """Apply the current failure rules to the stored failed records (of one challenge, or all; sent when the rules
    change or a coordinator asks). Idempotent: a second run changes nothing; returns how many records changed
    category (0 when the challenge is gone)."""
    if challenge_id is None:
        return failures_recategorize()
    challenge = Challenge.objects.filter(pk=challenge_id).first()
    return 0 if challenge is None else failures_recategorize(challenge=challenge)


def failures_recategorize_on_commit(*, challenge: Challenge | None = None) -> None:
    """Re-categorise the stored failed records (of one challenge, or all) once the current transaction commits
    (every writer of the rules calls this: pages, API, admin; and the coordinators' "re-categorise" button). In a
    Celery task: one pass matches every failed record against the rules, 23-67 s for 500,000 failed records
    (measured), longer than a request may take (gunicorn ends a worker after 30 s); records stored meanwhile are
    categorised with the new rules as they arrive."""
    challenge_id = None if challenge is None else challenge.pk
    transaction.on_commit(lambda: failures_recategorize_task.delay(challenge_id))


@shared_task(name="results.records_reattribute", soft_time_limit=REATTRIBUTE_SOFT_LIMIT, time_limit=REATTRIBUTE_LIMIT)
def records_reattribute_task(scope: dict[str, Any]) -> int:
    """Apply the attribution rules again to the records a change of the plan may concern (results.signals sends
    it on commit); progress in results.store.attribution.attribution_status(). Returns the records that changed."""
    return records_reattribute(scope=Scope.from_json(scope))


@shared_task(name="results.partitions_ensure", soft_time_limit=PARTITIONS_SOFT_LIMIT, time_limit=PARTITIONS_LIMIT)
def partitions_ensure_task() -> list[str]:
    """Beat's task (hourly): the partitions of the records of this month and the next ones, and of the months
    whose records went to the DEFAULT partition. Idempotent; returns the months made (YYYY-MM)."""
    return [f"{month:%Y-%m}" for month in partitions_ensure()]
