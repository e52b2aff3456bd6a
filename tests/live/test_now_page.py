"""The now board's page: worst first with a sparkline, its board alone for HTMX's refresh, the alerts' buttons
(not for viewers), linked from the home page while the challenge runs."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from live.alerts import alerts_evaluate
from live.models import Alert
from sites.roles import membership_grant
from tests.live.scenario import Scenario, scenario_make
from tests.sites.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def live() -> Scenario:
    scenario = scenario_make()
    alerts_evaluate(challenge=scenario.challenge, at=scenario.at)
    return scenario


def logged_in(role: str, **scope: Any) -> Client:
    user = UserFactory(username=f"{role}-page")
    membership_grant(user=user, role=role, **scope)
    client = Client()
    client.force_login(user)
    return client


def test_the_page_shows_the_targets_worst_first_with_a_sparkline_each(live: Scenario) -> None:
    page = logged_in("coordinator").get("/challenges/live/now/").content.decode()
    assert page.index("will miss") < page.index("on track") < page.index(">met<")
    assert page.count('<svg class="spark"') == 3
    assert 'hx-trigger="every 30s"' in page and "<html" in page
    assert "LIVE-A → LIVE-C" in page and "throughput dropped to 200 kB/s" in page


def test_htmx_gets_the_board_alone(live: Scenario) -> None:
    board = logged_in("viewer").get("/challenges/live/now/", HTTP_HX_REQUEST="true").content.decode()
    assert board.strip().startswith('<div id="now-board"') and "<html" not in board


def test_a_coordinator_acknowledges_and_silences_from_the_page(live: Scenario) -> None:
    client = logged_in("coordinator")
    alert = Alert.objects.get(kind="no_traffic")
    client.post(f"/challenges/live/now/alerts/{alert.pk}/acknowledge/")
    client.post(f"/challenges/live/now/alerts/{alert.pk}/silence/", {"hours": "4"})
    alert.refresh_from_db()
    assert alert.acknowledged_by.username == "coordinator-page" and alert.silenced_until is not None  # type: ignore[union-attr]
    page = client.get("/challenges/live/now/").content.decode()
    until = f"{alert.silenced_until:%Y-%m-%d %H:%M} UTC"
    assert "acknowledged by coordinator-page" in page and f"silenced by coordinator-page until {until}" in page


def test_a_viewer_is_shown_no_acknowledge_or_silence_button(live: Scenario) -> None:
    page = logged_in("viewer").get("/challenges/live/now/").content.decode()
    assert "nothing moved for the last" in page  # the alerts are there
    assert "Acknowledge</button>" not in page and "Silence</button>" not in page


def test_a_site_admin_is_shown_the_buttons_of_their_own_sites_alerts_only(live: Scenario) -> None:
    page = logged_in("site-admin", site=live.sites["D"]).get("/challenges/live/now/").content.decode()
    assert Alert.objects.filter(state="open").count() == 3
    assert page.count("Acknowledge</button>") == page.count("Silence</button>") == 1
    own = Alert.objects.get(kind="no_traffic")  # the target into LIVE-D
    assert f"/now/alerts/{own.pk}/acknowledge/" in page and f"/now/alerts/{own.pk}/silence/" in page


def test_a_viewer_may_not_acknowledge(live: Scenario) -> None:
    alert = Alert.objects.get(kind="no_traffic")
    response = logged_in("viewer").post(f"/challenges/live/now/alerts/{alert.pk}/acknowledge/", follow=True)
    assert "Viewers read alerts" in response.content.decode()
    alert.refresh_from_db()
    assert alert.acknowledged_by is None


def test_a_silence_of_a_made_up_length_is_refused(live: Scenario) -> None:
    alert = Alert.objects.get(kind="no_traffic")
    logged_in("coordinator").post(f"/challenges/live/now/alerts/{alert.pk}/silence/", {"hours": "9999"})
    alert.refresh_from_db()
    assert alert.silenced_until is None


def test_the_home_page_links_the_running_challenge_to_its_now_board(live: Scenario) -> None:
    assert 'href="/challenges/live/now/"' in logged_in("viewer").get("/").content.decode()


def test_visitors_are_sent_to_log_in(live: Scenario, settings: Any) -> None:
    settings.ANONYMOUS_READ = False
    response = Client().get("/challenges/live/now/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_targets_plot_marks_its_alerts(live: Scenario) -> None:
    page = logged_in("viewer").get(f"/results/live/targets/{live.steady.pk}/").content.decode()
    assert "Alerts of this target (shaded orange on the plot)" in page
    assert "still open: target at risk: ATLAS export (ATLAS, LIVE-A -&gt; LIVE-B): will miss" in page
    assert '"name": "alert"' in page or "&quot;name&quot;: &quot;alert&quot;" in page or '"name":"alert"' in page


def test_an_alert_no_longer_seen_says_as_of_when_its_text_was_true(live: Scenario) -> None:
    from datetime import timedelta

    alert = Alert.objects.filter(state="open").first()
    assert alert is not None
    page = logged_in("viewer").get("/challenges/live/now/").content.decode()
    assert "no longer true since" not in page  # every open alert was seen at the board's minute
    Alert.objects.filter(pk=alert.pk).update(last_seen_at=live.at - timedelta(minutes=5))
    page = logged_in("coordinator").get("/challenges/live/now/").content.decode()
    assert f"(as of {live.at - timedelta(minutes=5):%H:%M} UTC: no longer true since" in page
