"""The results table while a window runs: its numbers so far (auto-scaled) and its live verdict, never "missed"
before the end; the runs that ran outside their activity's window are said, not silently dropped; network and
recall targets say where they are measured."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from challenges.models import Activity, Target
from results.models import TransferRecord
from runs.models import Run
from sites.roles import membership_grant
from sites.tokens import token_issue
from tests.live.scenario import MB, STEADY, Scenario, scenario_make
from tests.sites.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def live() -> Scenario:
    return scenario_make()


@pytest.fixture
def viewer() -> Client:
    user = UserFactory(username="viewer-so-far")
    membership_grant(user=user, role="viewer")
    client = Client()
    client.force_login(user)
    return client


def api_rows(slug: str) -> list[dict[str, Any]]:
    _, key = token_issue(username="so-far-api", role="viewer")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = client.get(f"/api/v1/challenges/{slug}/rates/")
    assert response.status_code == 200, response.content
    return response.json()["rows"]  # type: ignore[no-any-return]


def test_mid_window_the_api_gives_the_numbers_so_far_and_the_live_verdict(live: Scenario) -> None:
    rows = {(row.get("link") or {}).get("to") or row["site"]: row for row in api_rows("live")}
    steady = rows["LIVE-B"]
    assert steady["window_ended"] is False and steady["verdict"] == "will miss"
    so_far = steady["so_far"]
    assert so_far["volume"] == pytest.approx(120 * STEADY)
    assert so_far["elapsed_seconds"] == pytest.approx(7200)
    assert so_far["average_rate"] == pytest.approx(1 * MB) and so_far["last_hour_rate"] == pytest.approx(1 * MB)
    assert {row["verdict"] for row in rows.values()} == {"will miss", "on track", "met"}  # never "missed"


def test_mid_window_the_table_says_so_far_with_auto_scaled_rates(live: Scenario, viewer: Client) -> None:
    page = viewer.get("/results/live/").content.decode()
    assert "missed" not in page.split("<tbody>")[1].split("</tbody>")[0]
    assert page.count('<span class="so-far">so far</span>') >= 6  # average, volume, verdict of each row
    assert "1 MB/s" in page and "2 MB/s" in page  # target and average of the steady link, auto-scaled
    assert 'href="/challenges/live/now/"' in page


def test_runs_outside_their_window_are_said_and_not_counted(live: Scenario, viewer: Client) -> None:
    for hours in (30, 31):
        run = Run.objects.create(activity=live.activity, kind="transfer", state="finished")
        before = live.activity.start - timedelta(hours=hours)
        TransferRecord.objects.create(
            run=run,
            activity=live.activity,
            experiment=live.activity.experiment,
            source_site=live.sites["A"],
            destination_site=live.sites["B"],
            bytes=10**9,
            start=before,
            end=before + timedelta(seconds=10),
            state="ok",
            origin="probe",
            origin_id=f"outside-{hours}",
        )
    rows = api_rows("live")
    assert {row["runs_outside_window"] for row in rows} == {2}
    page = viewer.get("/results/live/").content.decode()
    assert "2 runs of this activity ran outside its window</a> and are not counted" in page


def test_a_network_target_says_where_it_is_measured(live: Scenario, viewer: Client) -> None:
    network = Activity.objects.create(
        challenge=live.challenge,
        name="iperf3 baseline",
        experiment=live.activity.experiment,
        mode="network",
        kind="network",
        start=live.activity.start,
        end=live.activity.end,
    )
    Target.objects.create(activity=network, site=live.sites["B"], direction="in", rate=10**9)
    page = viewer.get("/results/live/").content.decode()
    assert "Measured by iperf3: no run of this activity has measured it in its window yet" in page
    row = next(row for row in api_rows("live") if row["activity"] == "iperf3 baseline")
    assert (row["measured_by"], row["verdict"], row["volume"]) == ("iperf3", "not measured", None)
