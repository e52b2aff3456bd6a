"""Delivery of alerts: real HTTP posts to a receiver on 127.0.0.1 (the JSON and the Slack bodies), retries with the
attempts recorded, e-mail through Django's backend, once per alert and state, silences, which subscriptions take
which alerts, and the access policy on the subscribers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from live import webhooks
from live.delivery import DeliveryFailed, alert_deliveries_create, delivery_attempt
from live.models import AlertDelivery
from live.notices import alert_payload, slack_payload
from live.tasks import delivery_send
from sites.roles import membership_grant
from tests.challenges.factories import ActivityFactory, ChallengeFactory
from tests.live.deliveries import Receiver, alert_make, receiver_running, subscription_make
from tests.sites.factories import ExperimentFactory, SiteFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

private_hosts = override_settings(ALERT_WEBHOOK_PRIVATE_HOSTS=True, PORTAL_URL="https://portal.example.org/")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with private_hosts, receiver_running() as running:
        yield running


@pytest.fixture
def link_alert() -> Any:
    """An open throughput drop of ATLAS on the link CERN -> CNAF of challenge dc24."""
    atlas = ExperimentFactory(name="ATLAS")
    challenge = ChallengeFactory(slug="dc24")
    activity = ActivityFactory(challenge=challenge, experiment=atlas, name="T0 export")
    cern, cnaf = SiteFactory(name="CERN-PROD"), SiteFactory(name="INFN-T1")
    return alert_make(challenge=challenge, activity=activity, experiment=atlas, link_source=cern, link_destination=cnaf)


def sent_once(alert: Any, **subscription: Any) -> AlertDelivery:
    """The alert's delivery to a new subscription, attempted once (successfully or not)."""
    subscription_make(**subscription)
    (delivery,) = alert_deliveries_create(alert=alert)
    with contextlib.suppress(DeliveryFailed):
        delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    return delivery


def test_a_webhook_gets_the_alert_as_json_with_a_link_to_the_now_board(receiver: Receiver, link_alert: Any) -> None:
    delivery = sent_once(link_alert, url=receiver.url)
    assert (delivery.status, delivery.attempts, delivery.response_code, delivery.error) == ("sent", 1, 200, "")
    assert delivery.sent_at is not None
    (request,) = receiver.received
    assert request.path == "/hooks/alerts?team=ops"
    assert request.headers["content-type"] == "application/json"
    assert request.json() == {
        "alert": {
            "id": link_alert.pk,
            "kind": "throughput_drop",
            "state": "open",
            "challenge": "dc24",
            "activity": "T0 export",
            "experiment": "ATLAS",
            "site": None,
            "link": {"source": "CERN-PROD", "destination": "INFN-T1"},
            "value": 2e8,
            "threshold": 5e8,
            "message": "throughput fell to 200 MB/s, a fifth of the last hour's",
            "started_at": "2024-02-12T10:00:00Z",
            "resolved_at": None,
            "url": "https://portal.example.org/challenges/dc24/now/",
        }
    }


def test_a_slack_webhook_gets_one_readable_line(receiver: Receiver, link_alert: Any) -> None:
    sent_once(link_alert, url=receiver.url, format="slack")
    (request,) = receiver.received
    assert request.headers["content-type"] == "application/json"
    assert request.json() == slack_payload(alert=link_alert)
    assert request.json() == {
        "text": "[OPEN] throughput drop, dc24: CERN-PROD → INFN-T1 (ATLAS): throughput fell to 200 MB/s, a fifth of "
        "the last hour's https://portal.example.org/challenges/dc24/now/"
    }


def test_a_site_alert_of_no_experiment_names_its_site_and_no_link() -> None:
    site: Any = SiteFactory(name="CNAF")
    alert = alert_make(kind="site_multi_drop", subject=f"site:{site.pk}", site=site, message="3 links down\nat once")
    body = alert_payload(alert=alert)["alert"]
    assert (body["site"], body["link"], body["experiment"], body["activity"]) == ("CNAF", None, None, None)
    assert body["url"] == f"http://127.0.0.1:8000/challenges/{alert.challenge.slug}/now/"
    assert (
        "\n" not in slack_payload(alert=alert)["text"]
        and "CNAF: 3 links down at once" in slack_payload(alert=alert)["text"]
    )


def test_a_receiver_failing_twice_gets_the_delivery_on_the_third_try(receiver: Receiver, link_alert: Any) -> None:
    receiver.answers = [500, 500]
    subscription_make(url=receiver.url)
    (delivery,) = alert_deliveries_create(alert=link_alert)
    delivery_send.apply(args=(delivery.pk,))  # eagerly: its retries run at once, without the backoff's wait
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code, delivery.error) == ("sent", 3, 200, "")
    assert len(receiver.received) == 3


def test_a_receiver_that_always_fails_ends_failed_after_three_retries(receiver: Receiver, link_alert: Any) -> None:
    receiver.default = 503
    subscription_make(url=receiver.url)
    (delivery,) = alert_deliveries_create(alert=link_alert)
    delivery_send.apply(args=(delivery.pk,))
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("failed", 4, 503)
    assert delivery.error == "HTTP 503: answered 503" and delivery.sent_at is None
    assert len(receiver.received) == 4
    delivery_send.apply(args=(delivery.pk,))  # a failed delivery is not sent again
    assert len(receiver.received) == 4


def test_a_failed_attempt_stays_pending_with_its_error_until_the_last_try(receiver: Receiver, link_alert: Any) -> None:
    receiver.default = 500
    delivery = sent_once(link_alert, url=receiver.url)
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("pending", 1, 500)
    with pytest.raises(DeliveryFailed, match="HTTP 500"):
        delivery_attempt(delivery_id=delivery.pk, last_try=True)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 2)


def test_a_sent_delivery_is_not_sent_again(receiver: Receiver, link_alert: Any) -> None:
    delivery = sent_once(link_alert, url=receiver.url)
    delivery_send.apply(args=(delivery.pk,))
    assert delivery_attempt(delivery_id=delivery.pk) is not None
    assert len(receiver.received) == 1 and AlertDelivery.objects.get().attempts == 1


def test_a_redirect_is_not_followed(receiver: Receiver, link_alert: Any) -> None:
    receiver.default = 302
    delivery = sent_once(link_alert, url=receiver.url)
    assert (delivery.status, delivery.response_code) == ("pending", 302)
    assert "redirected to http://elsewhere.example.org/: not followed" in delivery.error
    assert len(receiver.received) == 1


def test_a_receiver_that_does_not_answer_in_time_is_a_failed_attempt(
    receiver: Receiver, link_alert: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webhooks, "TIMEOUT", 0.3)
    receiver.delay = 1.0
    delivery = sent_once(link_alert, url=receiver.url)
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("pending", 1, None)
    assert "no answer within" in delivery.error


def test_a_receiver_that_is_gone_is_a_failed_attempt(link_alert: Any) -> None:
    with private_hosts:
        with receiver_running() as gone:
            url = gone.url
        delivery = sent_once(link_alert, url=url)
    assert delivery.status == "pending" and "could not be reached" in delivery.error


def test_a_webhook_now_resolving_to_a_private_address_is_refused_before_the_post(
    receiver: Receiver, link_alert: Any
) -> None:
    subscription_make(url=receiver.url)  # allowed when it was saved
    (delivery,) = alert_deliveries_create(alert=link_alert)
    with override_settings(ALERT_WEBHOOK_PRIVATE_HOSTS=False):
        delivery_send.apply(args=(delivery.pk,))
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 1)  # trying again cannot help
    assert "the webhook's host 127.0.0.1 is a loopback address: refused" in delivery.error
    assert receiver.received == []


def test_an_email_subscription_gets_a_readable_mail(link_alert: Any, mailoutbox: list[Any]) -> None:
    delivery = sent_once(link_alert, email="ops@example.org")
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("sent", 1, None)
    (mail,) = mailoutbox
    assert mail.to == ["ops@example.org"]
    assert mail.subject == "[OPEN] throughput drop, dc24: CERN-PROD → INFN-T1 (ATLAS)"
    assert mail.body.startswith("throughput fell to 200 MB/s, a fifth of the last hour's\n")
    assert "Started: 2024-02-12T10:00:00Z" in mail.body
    assert "Now board: http://127.0.0.1:8000/challenges/dc24/now/" in mail.body


def test_each_state_is_delivered_once(receiver: Receiver, link_alert: Any, mailoutbox: list[Any]) -> None:
    subscription_make(url=receiver.url)
    subscription_make(email="ops@example.org")
    first = alert_deliveries_create(alert=link_alert)
    assert len(first) == 2
    assert alert_deliveries_create(alert=link_alert) == []  # the next evaluation finds them made
    link_alert.state, link_alert.resolved_at = "resolved", link_alert.started_at + timedelta(hours=1)
    link_alert.save()
    resolved = alert_deliveries_create(alert=link_alert)
    assert [delivery.alert_state for delivery in resolved] == ["resolved", "resolved"]
    assert alert_deliveries_create(alert=link_alert) == []
    for delivery in AlertDelivery.objects.order_by("id"):
        delivery_attempt(delivery_id=delivery.pk)
    assert [request.json()["alert"]["state"] for request in receiver.received] == ["open", "resolved"]
    assert receiver.received[0].json()["alert"]["resolved_at"] is None
    assert receiver.received[1].json()["alert"]["resolved_at"] == "2024-02-12T11:00:00Z"
    assert [mail.subject.split("]")[0] for mail in mailoutbox] == ["[OPEN", "[RESOLVED"]


def test_a_silenced_alert_gets_no_delivery_until_its_silence_ends(link_alert: Any) -> None:
    subscription_make()
    link_alert.silenced_until = timezone.now() + timedelta(hours=1)
    assert alert_deliveries_create(alert=link_alert) == []
    link_alert.silenced_until = timezone.now() - timedelta(seconds=1)
    assert len(alert_deliveries_create(alert=link_alert)) == 1


def test_subscriptions_take_the_alerts_of_their_challenge_experiments_sites_and_kinds(link_alert: Any) -> None:
    atlas, cms = link_alert.experiment, ExperimentFactory(name="CMS")
    other_challenge, other_site = ChallengeFactory(), SiteFactory(name="DESY")
    takes = {
        "all": subscription_make(name="all"),
        "challenge": subscription_make(name="challenge", challenge=link_alert.challenge),
        "experiment": subscription_make(name="experiment", experiments=[cms, atlas]),
        "source": subscription_make(name="source", sites=[link_alert.link_source]),
        "destination": subscription_make(name="destination", sites=[other_site, link_alert.link_destination]),
        "kind": subscription_make(name="kind", kinds=["no_traffic", "throughput_drop"]),
    }
    subscription_make(name="other challenge", challenge=other_challenge)
    subscription_make(name="other experiment", experiments=[cms])
    subscription_make(name="other site", sites=[other_site])
    subscription_make(name="other kind", kinds=["no_traffic"])
    subscription_make(name="switched off", active=False)
    made = alert_deliveries_create(alert=link_alert)
    assert sorted(delivery.subscription.name for delivery in made) == sorted(takes)


def test_an_alert_of_no_experiment_goes_only_to_subscriptions_of_every_experiment() -> None:
    site = SiteFactory()
    alert = alert_make(kind="site_multi_drop", site=site)
    subscription_make(name="all")
    subscription_make(name="atlas", experiments=[ExperimentFactory(name="ATLAS")])
    assert [delivery.subscription.name for delivery in alert_deliveries_create(alert=alert)] == ["all"]


def test_a_subscriber_gets_only_the_alerts_the_access_policy_lets_them_read() -> None:
    atlas: Any = ExperimentFactory(name="ATLAS")
    cms: Any = ExperimentFactory(name="CMS")
    atlas_ddm, viewer = UserFactory(username="atlas-ddm"), UserFactory(username="viewer")
    membership_grant(user=atlas_ddm, role="ddm", experiment=atlas)
    retired = UserFactory(username="retired", is_active=False)
    subscription_make(name="atlas ddm", created_by=atlas_ddm)
    subscription_make(name="viewer", created_by=viewer)
    subscription_make(name="admin-made")  # no creator: a coordinator's
    subscription_make(name="retired", created_by=retired)
    challenge = ChallengeFactory()

    def takers(**fields: Any) -> list[str]:
        made = alert_deliveries_create(alert=alert_make(challenge=challenge, **fields))
        return sorted(delivery.subscription.name for delivery in made)

    assert takers(experiment=atlas, subject="a") == ["admin-made", "atlas ddm", "viewer"]
    assert takers(experiment=cms, subject="c") == ["admin-made", "viewer"]
    assert takers(experiment=None, subject="n") == ["admin-made", "viewer"]  # a DDM service reads its own only


def test_new_deliveries_are_sent_by_the_task_once_the_transaction_commits(
    receiver: Receiver, link_alert: Any, tasks_run_here: None, django_capture_on_commit_callbacks: Any
) -> None:
    subscription_make(url=receiver.url)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        (delivery,) = alert_deliveries_create(alert=link_alert)
        assert receiver.received == []  # nothing is sent before the commit
    assert len(callbacks) == 1
    callbacks[0]()
    delivery.refresh_from_db()
    assert delivery.status == "sent" and len(receiver.received) == 1


def test_a_subscription_switched_off_before_sending_gets_nothing(receiver: Receiver, link_alert: Any) -> None:
    subscription = subscription_make(url=receiver.url)
    (delivery,) = alert_deliveries_create(alert=link_alert)
    subscription.active = False
    subscription.save()
    delivery_send.apply(args=(delivery.pk,))
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 1) and "switched off" in delivery.error
    assert receiver.received == []


def test_a_last_try_that_runs_out_of_time_is_marked_failed(link_alert: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    from live import tasks

    def slow(**kwargs: Any) -> None:
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(tasks, "delivery_attempt", slow)
    subscription_make()
    (delivery,) = alert_deliveries_create(alert=link_alert)
    delivery_send.apply(args=(delivery.pk,))
    delivery.refresh_from_db()
    assert (delivery.status, delivery.error) == ("failed", "no complete answer within 60 s")
