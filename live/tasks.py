"""Celery tasks of live: thin wrappers that load ids and call the services."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

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


@shared_task(name="live.alerts_evaluate", ignore_result=True, soft_time_limit=50, time_limit=55)
def alerts_evaluate() -> dict[str, int]:
    """Beat, every minute: the alerts of every running challenge (and of those ended within the hour, whose open
    alerts resolve), then the deliveries whose task was lost. One challenge's error does not stop the others."""
    from .alerts import alerts_evaluate as evaluate
    from .alerts import challenges_to_evaluate
    from .delivery import deliveries_resend

    opened = resolved = 0
    for challenge in challenges_to_evaluate():
        try:
            summary = evaluate(challenge=challenge)
        except Exception:  # the next challenge, and the next minute, go on
            logger.exception("alerts of %s", challenge.slug)
            continue
        opened, resolved = opened + len(summary.opened), resolved + len(summary.resolved)
    return {"opened": opened, "resolved": resolved, "deliveries_resent": deliveries_resend()}
