"""The project's own pages and API: health, status, schema, navigation."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.django_db


def test_the_api_schema_builds_without_warnings(tmp_path: Any) -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "/api/v1/status/" in (tmp_path / "schema.yaml").read_text()


def test_healthz_answers_without_login_when_database_and_redis_answer(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["database"] == "ok"
    assert response.json()["redis"] == "ok"


def test_api_status_refuses_anonymous_callers(client: Client) -> None:
    response = client.get("/api/v1/status/")
    assert response.status_code == 401
    assert "detail" in response.json()


def test_api_status_reports_the_services_to_a_logged_in_user(client: Client, django_user_model: Any) -> None:
    client.force_login(django_user_model.objects.create_user("viewer"))
    body = client.get("/api/v1/status/").json()
    assert body["database"] == "ok" and body["redis"] == "ok"


@pytest.mark.parametrize("path", ["/", "/challenges/", "/sites/", "/sites/TB-T0/", "/results/"])
def test_pages_send_anonymous_visitors_to_the_login(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_the_demo_command_prints_a_login_that_works(client: Client, capsys: Any) -> None:
    call_command("load_demo")
    username, password = capsys.readouterr().out.strip().splitlines()[-1].split(": ", 1)[1].split(" / ")
    response = client.post("/accounts/login/", {"username": username, "password": password})
    assert response.status_code == 302 and "_auth_user_id" in client.session


@pytest.mark.testbed
def test_the_demo_registers_the_running_testbeds_sites(testbed: Any, capsys: Any) -> None:
    from sites.models import Site, StorageEndpoint

    call_command("load_demo")
    assert set(Site.objects.values_list("name", flat=True)) >= {"TB-T0", "TB-T1-A", "TB-T1-B", "TB-TAPE", "TB-WEBDAV"}
    assert StorageEndpoint.objects.get(url=testbed.url("t0.root")).site.name == "TB-T0"
    assert StorageEndpoint.objects.get(url=testbed.url("tape.rest")).kind == "tape"
    assert "testbed sites loaded" in capsys.readouterr().out


def test_the_navigation_offers_tokens_only_to_coordinators(client: Client, django_user_model: Any) -> None:
    from sites.choices import Role
    from sites.roles import membership_grant

    viewer, coordinator = django_user_model.objects.create_user("v"), django_user_model.objects.create_user("c")
    membership_grant(user=coordinator, role=Role.COORDINATOR)
    client.force_login(viewer)
    assert b'href="/tokens/"' not in client.get("/").content
    client.force_login(coordinator)
    assert b'href="/tokens/"' in client.get("/").content


def test_the_admin_is_open_to_coordinators_and_closed_to_viewers(client: Client, django_user_model: Any) -> None:
    from sites.choices import Role
    from sites.roles import membership_grant

    coordinator = django_user_model.objects.create_user("c")  # not staff: the role is what counts
    membership_grant(user=coordinator, role=Role.COORDINATOR)
    client.force_login(django_user_model.objects.create_user("v"))
    assert client.get("/admin/sites/site/").status_code == 302
    client.force_login(coordinator)
    assert client.get("/admin/sites/site/").status_code == 200
    assert client.get("/admin/sites/site/add/").status_code == 200


@pytest.mark.testbed
def test_the_demo_challenge_runs_this_week_on_the_testbed_sites(testbed: Any) -> None:
    from challenges.models import Challenge

    call_command("load_demo")
    call_command("load_demo")  # a second load refreshes in place
    challenge = Challenge.objects.get(slug="demo")
    from sweeps.models import Sweep

    [sweep] = Sweep.objects.all()  # the demo sweep, started once
    assert sweep.steps.count() == 6 + 12 and sweep.created_by.username == settings.DEMO_USERNAME
    assert challenge.start <= timezone.now() < challenge.end
    assert challenge.activities.filter(start__lte=timezone.now(), end__gt=timezone.now()).exists()
    assert Challenge.objects.count() == 1


@pytest.mark.testbed
def test_every_demo_activity_can_be_run_and_the_recall_asks_for_the_tape_write_first(testbed: Any) -> None:
    """Run on the clock must work for the demo's activities as loaded: each starts (its tasks would go out on
    commit), but the A-DT recall, which stages what a DT run wrote, says so until one has."""
    from django.core.exceptions import ValidationError

    from challenges.models import Challenge
    from runs.services import run_start
    from sites.roles import membership_grant
    from tests.sites.factories import UserFactory

    call_command("load_demo")
    coordinator = UserFactory()
    membership_grant(user=coordinator, role="coordinator")
    refused = {}
    started = {}
    for activity in Challenge.objects.get(slug="demo").activities.all():
        try:
            started[activity.name] = run_start(user=coordinator, activity=activity)
        except ValidationError as exc:
            refused[activity.name] = exc.message_dict
    assert set(started) == {"ATLAS T0 export", "ATLAS DT", "CMS DT", "iperf3 baseline", "ATLAS steady load"}, refused
    assert list(refused) == ["CMS A-DT"]
    assert "run the tape-write (DT) activity first" in refused["CMS A-DT"]["urls"][0]
    assert started["ATLAS DT"].parameters["destinations"] == [testbed.endpoint("tape.root").url]
    assert started["iperf3 baseline"].parameters["host"] == "127.0.0.1"


@pytest.mark.parametrize("weekday", range(7))
def test_the_demo_plan_fits_its_challenge_on_every_day_of_the_week(weekday: int) -> None:
    from datetime import datetime, timedelta

    from portal.demo import demo_plan

    monday = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)  # a Monday: the export must not start the day before
    plan = demo_plan(now=monday + timedelta(days=weekday))
    for activity in plan["activities"]:
        assert plan["start"] <= activity["start"] < activity["end"] <= plan["end"], activity["name"]


def test_the_favicon_is_the_portals_icon_not_a_404(client: Any) -> None:
    from django.contrib.staticfiles import finders

    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("/favicon.svg")
    assert finders.find("favicon.svg")  # collected with the other static files
