"""What a delivery says (issue #33, item 9): the Slack/Mattermost line names what the alert is about once, and a
resolved alert's notice says what changed (the condition that cleared, its last figure, when), not how it opened."""

from __future__ import annotations

from datetime import timedelta

import pytest

from live.alerts import alerts_evaluate
from live.models import Alert
from live.notices import alert_mail, slack_payload
from tests.live.deliveries import STARTED, alert_make
from tests.live.scenario import scenario_make
from tests.sites.factories import SiteFactory

pytestmark = pytest.mark.django_db

NOW_BOARD = "http://127.0.0.1:8000/challenges/live/now/"


@pytest.fixture
def evaluated() -> None:
    scenario = scenario_make()
    alerts_evaluate(challenge=scenario.challenge, at=scenario.at)


def test_a_links_slack_line_names_the_link_once(evaluated: None) -> None:
    text = slack_payload(alert=Alert.objects.get(kind="throughput_drop"))["text"]
    assert text == (
        "[OPEN] throughput drop, live: LIVE-A -> LIVE-C: throughput dropped to 200 kB/s over the last 15 minutes "
        f"from 933 kB/s over the hour before {NOW_BOARD}"
    )


def test_a_targets_slack_line_names_its_activity_and_link_once(evaluated: None) -> None:
    text = slack_payload(alert=Alert.objects.get(kind="target_at_risk"))["text"]
    assert text.startswith("[OPEN] target at risk, live: ATLAS export (ATLAS, LIVE-A -> LIVE-B): will miss: ")
    assert text.count("LIVE-B") == 1 and text.count("(ATLAS") == 1


def resolved_drop() -> Alert:
    """A throughput drop on CERN-PROD -> INFN-T1 that held from 10:00 to 10:50 and resolved at 11:00."""
    cern, cnaf = SiteFactory(name="CERN-PROD"), SiteFactory(name="INFN-T1")
    return alert_make(
        link_source=cern,
        link_destination=cnaf,
        message="CERN-PROD -> INFN-T1: throughput dropped to 200 kB/s over the last 15 minutes from 1 MB/s",
        value=2e5,
        threshold=5e5,
        state="resolved",
        last_seen_at=STARTED + timedelta(minutes=50),
        resolved_at=STARTED + timedelta(hours=1),
    )


def test_a_resolved_slack_line_says_what_cleared_and_when() -> None:
    alert = resolved_drop()
    text = slack_payload(alert=alert)["text"]
    assert text == (
        f"[RESOLVED] throughput drop, {alert.challenge.slug}: CERN-PROD -> INFN-T1: resolved at 2024-02-12 11:00 UTC "
        "after 1 h 00 min: the throughput is no longer under 500 kB/s (last found at 10:50 UTC: 200 kB/s) "
        f"http://127.0.0.1:8000/challenges/{alert.challenge.slug}/now/"
    )


def test_a_resolved_mail_begins_with_what_changed() -> None:
    alert = resolved_drop()
    subject, body = alert_mail(alert=alert, state="resolved")
    assert subject.startswith("[RESOLVED] throughput drop")
    assert body.splitlines()[0] == (
        "Resolved at 2024-02-12 11:00 UTC after 1 h 00 min: the throughput is no longer under 500 kB/s (last found at "
        "10:50 UTC: 200 kB/s)."
    )
    assert body.splitlines()[2].startswith("While it held: CERN-PROD -> INFN-T1: throughput dropped")
