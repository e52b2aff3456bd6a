"""Celery tasks of live: thin wrappers that load ids and call the services."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from common.locks import advisory_lock_try

from .delivery import DELIVERY_SEND_TASK, DeliveryFailed, delivery_attempt, delivery_give_up

logger = logging.getLogger(__name__)


@shared_task(
    bind=True,
    name=DELIVERY_SEND_TASK,
    acks_late=True,
    ignore_result=True,
    autoretry_for=(DeliveryFailed,),
    max_retries=3,
    retry_backoff=30,  # about 30 s, 1 min, 2 min (with jitter): a webhook's server restarting gets time
    retry_backoff_max=600,
    soft_time_limit=60,
    time_limit=90,
)
def delivery_send(self: Any, delivery_id: int) -> None:
    """Send one alert delivery; retried with backoff when it fails, marked failed (with the error) after the last
    retry. A delivery already sent is not sent again."""
    last_try = self.request.retries >= self.max_retries
    try:
        delivery_attempt(delivery_id=delivery_id, last_try=last_try)
    except DeliveryFailed as exc:
        if exc.final or last_try:
            logger.warning("alert delivery %s failed for good: %s", delivery_id, exc)
            return
        raise
    except SoftTimeLimitExceeded:
        # A server that answers a byte at a time: the attempt's row was rolled back with its transaction.
        error = f"no complete answer within {self.soft_time_limit} s"
        if last_try:
            delivery_give_up(delivery_id=delivery_id, error=error)
            return
        raise DeliveryFailed(error) from None


# A beat tick: it only lists the challenges, sends one task each and re-sends the lost deliveries; seconds.
EVALUATE_SOFT_LIMIT, EVALUATE_LIMIT = 30, 45
# One challenge's evaluation: selects over its rollups and a few writes, in one transaction; it ends before the next
# minute's, and a message not started within the minute is dropped (the next minute's evaluates the challenge).
CHALLENGE_SOFT_LIMIT, CHALLENGE_LIMIT = 50, 55
CHALLENGE_EXPIRES = 60


@shared_task(
    bind=True,
    name="live.alerts_evaluate",
    ignore_result=True,
    soft_time_limit=EVALUATE_SOFT_LIMIT,
    time_limit=EVALUATE_LIMIT,
)
def alerts_evaluate(self: Any) -> dict[str, int]:
    """Beat, every minute: one `live.alerts_evaluate_challenge` per running challenge (and per challenge ended within
    the hour, whose open alerts resolve), so a slow challenge holds no other; then the deliveries whose task was
    lost. The challenges' tasks go to the queue this one came from: the workers that serve beat's tasks."""
    from .alerts import challenges_to_evaluate
    from .delivery import deliveries_resend

    routing: dict[str, Any] = {"queue": queue} if (queue := _queue_of(self.request)) else {}
    sent = 0
    for challenge_id in challenges_to_evaluate().values_list("pk", flat=True):
        alerts_evaluate_challenge.apply_async(args=(challenge_id,), expires=CHALLENGE_EXPIRES, **routing)
        sent += 1
    return {"challenges": sent, "deliveries_resent": deliveries_resend()}


def _queue_of(request: Any) -> str | None:
    """The queue a task's message came from (None outside a worker: the default queue)."""
    delivery_info = getattr(request, "delivery_info", None) or {}
    return delivery_info.get("routing_key") or None


@shared_task(
    name="live.alerts_evaluate_challenge",
    ignore_result=True,
    soft_time_limit=CHALLENGE_SOFT_LIMIT,
    time_limit=CHALLENGE_LIMIT,
)
def alerts_evaluate_challenge(challenge_id: int) -> dict[str, int]:
    """The alerts of one challenge at this minute. Skipped when its evaluation is already under way (a slow one
    of the minute before, or `manage.py alerts_evaluate`): the worker is not held waiting, and the next minute
    evaluates it again. Its soft limit rolls the evaluation's transaction back whole (no alert half-written)."""
    from challenges.models import Challenge

    from .alerts import alerts_evaluate as evaluate

    challenge = Challenge.objects.filter(pk=challenge_id).first()
    if challenge is None:
        return {"opened": 0, "resolved": 0, "busy": 0}
    # The same lock as the evaluation's own (live.alerts), tried instead of waited for; it stacks with the one the
    # evaluation then takes in this session.
    with advisory_lock_try(f"alerts {challenge.pk}") as taken:
        if not taken:
            logger.info("alerts of %s: an evaluation is already under way, skipped", challenge.slug)
            return {"opened": 0, "resolved": 0, "busy": 1}
        try:
            summary = evaluate(challenge=challenge)
        except SoftTimeLimitExceeded:
            logger.warning("alerts of %s: not evaluated within the task's soft time limit", challenge.slug)
            return {"opened": 0, "resolved": 0, "busy": 0}
    return {"opened": len(summary.opened), "resolved": len(summary.resolved), "busy": 0}
