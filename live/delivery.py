"""Delivery of alerts to their subscribers: one delivery per alert, subscription and state (a new subscription told
of the alerts already open), sent by a Celery task after the commit, and each attempt at sending it recorded. What
a delivery says (JSON, the Slack/Mattermost text, e-mail) is live.notices'."""

from __future__ import annotations

import functools
import http.client
import json
import logging
import smtplib
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from .audience import subscription_reads_alert, subscriptions_matching
from .choices import AlertState, DeliveryFormat, DeliveryStatus
from .models import Alert, AlertDelivery, AlertSubscription
from .notices import alert_mail, alert_payload, slack_payload
from .webhooks import TIMEOUT, WebhookRefused, webhook_post

logger = logging.getLogger(__name__)

# Sent by name: live.tasks imports this module.
DELIVERY_SEND_TASK = "live.delivery_send"


class DeliveryFailed(Exception):
    """An attempt that did not deliver; the message is what was recorded as the delivery's error. `final` when
    trying again cannot help (the webhook is refused, the subscription switched off)."""

    def __init__(self, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


def _send_after_commit(delivery_id: int) -> None:
    current_app.signature(DELIVERY_SEND_TASK, args=(delivery_id,)).apply_async()


def _silenced(alert: Alert) -> bool:
    return alert.silenced_until is not None and alert.silenced_until > timezone.now()


def _delivery_make(alert: Alert, subscription: AlertSubscription) -> AlertDelivery | None:
    """The delivery of the alert's current state to the subscription, None when it was made already; its task is
    sent once the transaction commits."""
    delivery, created = AlertDelivery.objects.get_or_create(
        alert=alert, subscription=subscription, alert_state=alert.state
    )
    if not created:
        return None
    transaction.on_commit(functools.partial(_send_after_commit, delivery.pk))
    return delivery


def alert_deliveries_create(*, alert: Alert) -> list[AlertDelivery]:
    """Make the deliveries of the alert's current state: one for every active subscription that takes it and whose
    actor may read it, none while the alert is silenced. Each alert, subscription and state is delivered once:
    calling this again (every evaluation may) makes only the deliveries still missing. Returns the new deliveries;
    their task is sent once the transaction commits."""
    if _silenced(alert):
        return []
    made: list[AlertDelivery] = []
    reads: dict[tuple[Any, ...], bool] = {}  # by creator and scope: one look at the access policy each
    for subscription in subscriptions_matching(alert=alert):
        actor = (subscription.created_by_id, subscription.scope())
        if actor not in reads:
            reads[actor] = subscription_reads_alert(subscription=subscription, alert=alert)
        if reads[actor] and (delivery := _delivery_make(alert, subscription)) is not None:
            made.append(delivery)
    return made


def subscription_deliveries_create(*, subscription: AlertSubscription) -> list[AlertDelivery]:
    """Tell a subscription, new or switched on again, of every alert open now that it takes and its actor may read
    (not silenced): one "open" delivery each, as if it had been there when they opened. Idempotent like
    alert_deliveries_create (once per alert, subscription and state), whose rules it follows."""
    if not subscription.active:
        return []
    open_alerts = Alert.objects.filter(state=AlertState.OPEN).select_related("challenge")
    if subscription.challenge_id is not None:
        open_alerts = open_alerts.filter(challenge_id=subscription.challenge_id)
    made: list[AlertDelivery] = []
    for alert in open_alerts.order_by("started_at", "id"):
        # Which alerts it takes is subscriptions_matching's to say (one definition), and the access policy's whether
        # its actor reads them: a query or two per open alert, of which a challenge has a handful.
        if _silenced(alert) or not subscriptions_matching(alert=alert).filter(pk=subscription.pk).exists():
            continue
        readable = subscription_reads_alert(subscription=subscription, alert=alert)
        if readable and (delivery := _delivery_make(alert, subscription)) is not None:
            made.append(delivery)
    return made


def _deliver(delivery: AlertDelivery) -> tuple[int | None, str | None]:
    """Send once: the response code (webhooks) and the error, None when delivered. Raises DeliveryFailed when
    sending again cannot help."""
    subscription, alert, state = delivery.subscription, delivery.alert, delivery.alert_state
    if not subscription.active:
        raise DeliveryFailed("the subscription was switched off before this was sent", final=True)
    if subscription.email:
        subject, body = alert_mail(alert=alert, state=state)
        try:
            send_mail(subject, body, None, [subscription.email], fail_silently=False)
        except (OSError, ValueError, smtplib.SMTPException) as exc:
            return None, f"e-mail not sent: {exc}"
        return None, None
    payload = slack_payload(alert=alert, state=state) if subscription.format == DeliveryFormat.SLACK else None
    document = json.dumps(payload or alert_payload(alert=alert, state=state)).encode()
    try:
        answer = webhook_post(url=subscription.url, body=document)
    except WebhookRefused as exc:
        raise DeliveryFailed(str(exc), final=True) from exc
    except TimeoutError:
        return None, f"no answer within {TIMEOUT:g} s"
    except (OSError, http.client.HTTPException) as exc:
        return None, f"the webhook could not be reached: {str(exc) or type(exc).__name__}"
    if 200 <= answer.status < 300:
        return answer.status, None
    return answer.status, f"HTTP {answer.status}: {answer.body}".strip()


def delivery_attempt(*, delivery_id: int, last_try: bool = False) -> AlertDelivery | None:
    """Try to send one delivery, recording the attempt, the response code, the error and the outcome: sent (a 2xx,
    or the e-mail handed to the mail server), or still pending to be tried again; failed when `last_try` or when
    trying again cannot help. Raises DeliveryFailed when it was not delivered. A delivery already sent or failed
    is not sent again, nor one another worker is sending (its row is locked while it is sent); those return
    as they are (None for one that is gone or busy)."""
    with transaction.atomic():
        delivery = (
            AlertDelivery.objects.select_for_update(of=("self",), skip_locked=True)
            .select_related(
                "subscription",
                "alert__challenge",
                "alert__activity",
                "alert__experiment",
                "alert__site",
                "alert__link_source",
                "alert__link_destination",
            )
            .filter(pk=delivery_id)
            .first()
        )
        if delivery is None or delivery.status != DeliveryStatus.PENDING:
            return delivery
        final = False
        try:
            delivery.response_code, error = _deliver(delivery)
        except DeliveryFailed as exc:
            delivery.response_code, error, final = None, str(exc), exc.final
        delivery.attempts += 1
        delivery.error = error or ""
        if error is None:
            delivery.status, delivery.sent_at = DeliveryStatus.SENT, timezone.now()
        elif final or last_try:
            delivery.status = DeliveryStatus.FAILED
        delivery.save(update_fields=["attempts", "response_code", "error", "status", "sent_at"])
    if error is not None:
        raise DeliveryFailed(error, final=final)
    return delivery


def delivery_give_up(*, delivery_id: int, error: str) -> None:
    """Mark a pending delivery failed with the error, when its last try ended without an outcome recorded (the
    task's time ran out)."""
    AlertDelivery.objects.filter(pk=delivery_id, status=DeliveryStatus.PENDING).update(
        status=DeliveryStatus.FAILED, error=error
    )


RESEND_PENDING_AFTER = timedelta(minutes=30)  # past every retry's backoff: a pending delivery that old lost its task


def deliveries_resend(*, now: datetime | None = None) -> int:
    """Send again the deliveries still pending long after they were made (their task was lost with a broker's data,
    or its worker died): beat's part, every minute. Sending twice is harmless: an attempt takes the row's lock and
    skips what is no longer pending."""
    moment = now or timezone.now()
    stale = list(
        AlertDelivery.objects.filter(
            status=DeliveryStatus.PENDING, created_at__lt=moment - RESEND_PENDING_AFTER
        ).values_list("pk", flat=True)[:500]
    )
    for delivery_id in stale:
        transaction.on_commit(functools.partial(_send_after_commit, delivery_id))
    return len(stale)
