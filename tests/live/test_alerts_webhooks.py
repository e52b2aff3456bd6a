"""The issue's case, end to end: one `manage.py alerts_evaluate` on a challenge running now sends exactly one JSON
webhook per condition to a receiver on 127.0.0.1 (throughput_drop for the dropped link, target_at_risk for the
steady link under its target, no_traffic for the stopped target, nothing for the steady link's throughput), a
second pass sends nothing new, and the alerts API lists them open."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from live.models import AlertSubscription
from sites.tokens import token_issue
from tests.live.deliveries import Receiver, receiver_running
from tests.live.scenario import Scenario, scenario_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    settings.ALERT_WEBHOOK_PRIVATE_HOSTS = True  # the receiver is on loopback
    with receiver_running() as running:
        yield running


def test_one_evaluation_sends_one_json_webhook_per_condition_and_a_second_nothing(
    receiver: Receiver, tasks_run_here: None, django_capture_on_commit_callbacks: Any
) -> None:
    live: Scenario = scenario_make()
    AlertSubscription.objects.create(name="ops", url=receiver.url, format="json", challenge=live.challenge)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("alerts_evaluate", "--challenge", "live")
    alerts = [received.json()["alert"] for received in receiver.received]
    a, c = live.sites["A"].pk, live.sites["C"].pk
    assert sorted((alert["kind"], alert["state"]) for alert in alerts) == [
        ("no_traffic", "open"),
        ("target_at_risk", "open"),
        ("throughput_drop", "open"),
    ]
    drop = next(alert for alert in alerts if alert["kind"] == "throughput_drop")
    assert drop["link"] == {"source": "LIVE-A", "destination": "LIVE-C"} and drop["challenge"] == "live"
    assert set(drop) == {
        "id", "kind", "state", "challenge", "activity", "experiment", "site", "link", "value", "threshold",
        "message", "started_at", "resolved_at", "url",
    }  # fmt: skip
    at_risk = next(alert for alert in alerts if alert["kind"] == "target_at_risk")
    assert at_risk["activity"] == "ATLAS export" and at_risk["link"]["destination"] == "LIVE-B"
    assert drop["url"].endswith("/challenges/live/now/")
    assert all(received.headers["content-type"] == "application/json" for received in receiver.received)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("alerts_evaluate", "--challenge", "live")
    assert len(receiver.received) == 3  # nothing new
    _, key = token_issue(username="ops-viewer", role="viewer")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    listed = api.get("/api/v1/alerts/", {"state": "open"}).json()["results"]
    assert {(row["kind"], row["subject"]) for row in listed} == {
        ("no_traffic", f"target:{live.stopped.pk}"),
        ("target_at_risk", f"target:{live.steady.pk}"),
        ("throughput_drop", f"link:{a}-{c}"),
    }
