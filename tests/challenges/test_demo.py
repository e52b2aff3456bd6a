"""The demo's plan (portal.demo.demo_plan, loaded by manage.py load_demo): its T0 export is of mode T0, and every
activity it invites you to run is open today, whatever weekday it is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from challenges.choices import KNOWN_MODES
from challenges.models import Activity
from challenges.plan import plan_import
from portal.demo import demo_plan
from sites.roles import membership_grant
from tests.challenges.factories import ChallengeFactory
from tests.sites.factories import ExperimentFactory, SiteFactory, UserFactory

MONDAY = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.parametrize("weekday", range(7))
def test_every_activity_of_the_demo_is_open_today_whatever_the_weekday(weekday: int) -> None:
    now = MONDAY + timedelta(days=weekday)
    plan = demo_plan(now=now)
    closed = [a["name"] for a in plan["activities"] if not moment(a["start"]) <= now < moment(a["end"])]
    assert closed == []


@pytest.mark.parametrize("weekday", range(7))
def test_the_demos_two_tape_writes_still_oversubscribe_the_tape_site_today(weekday: int) -> None:
    now = MONDAY + timedelta(days=weekday)
    writes = [a for a in demo_plan(now=now)["activities"] if a["kind"] == "tape-write"]
    assert {a["experiment"] for a in writes} == {"ATLAS", "CMS"}
    assert all(target["site"] == "TB-TAPE" for a in writes for target in a["targets"])
    assert max(moment(a["start"]) for a in writes) < min(moment(a["end"]) for a in writes)


def test_the_demos_t0_export_is_of_mode_t0_a_known_mode() -> None:
    [export] = [a for a in demo_plan(now=MONDAY)["activities"] if a["name"] == "ATLAS T0 export"]
    assert export["mode"] == "T0"
    assert "T0" in KNOWN_MODES


@pytest.mark.django_db
def test_the_demo_plan_imports_with_its_t0_export() -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    for name in ("TB-T0", "TB-T1-A", "TB-T1-B", "TB-TAPE", "TB-ORIGIN"):
        SiteFactory(name=name, experiments=[atlas, cms])
    plan_import(document=demo_plan(now=MONDAY))
    assert Activity.objects.get(name="ATLAS T0 export").mode == "T0"


@pytest.mark.django_db
def test_the_activity_form_suggests_t0_among_the_modes(client: Client) -> None:
    ChallengeFactory(slug="dc")
    boss = UserFactory(username="boss")
    membership_grant(user=boss, role="coordinator")
    client.force_login(boss)
    page = client.get("/challenges/dc/activities/new/").content.decode()
    assert '<option value="T0">' in page


@pytest.mark.django_db
def test_the_demos_results_table_mid_window_says_so_far_with_auto_scaled_rates() -> None:
    from django.utils import timezone

    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    for name in ("TB-T0", "TB-T1-A", "TB-T1-B", "TB-TAPE", "TB-ORIGIN"):
        SiteFactory(name=name, experiments=[atlas, cms])
    plan_import(document=demo_plan(now=timezone.now()))
    viewer = UserFactory(username="demo-viewer")
    membership_grant(user=viewer, role="viewer")
    client = Client()
    client.force_login(viewer)
    table = client.get("/results/demo/").content.decode().split("<tbody>")[1].split("</tbody>")[0]
    assert '<span class="so-far">so far</span>' in table and "missed" not in table
    assert "200 MB/s" in table  # the T0 export's link target, auto-scaled (0.2 GB/s)


@pytest.mark.django_db
def test_the_demo_plan_names_no_activities_that_claim_the_same_transfers() -> None:
    from challenges.conflicts import challenge_conflicts
    from challenges.models import Challenge

    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    for name in ("TB-T0", "TB-T1-A", "TB-T1-B", "TB-TAPE", "TB-ORIGIN"):
        SiteFactory(name=name, experiments=[atlas, cms])
    plan_import(document=demo_plan(now=MONDAY))
    assert challenge_conflicts(challenge=Challenge.objects.get(slug="demo")) == []


def test_the_demo_says_why_its_tape_site_is_oversubscribed_and_keeps_a_steady_load() -> None:
    plan = demo_plan(now=MONDAY)
    assert "oversubscribe TB-TAPE's drives" in plan["description"] and "On purpose" in plan["description"]
    [load] = [a for a in plan["activities"] if a.get("auto_run_repeat")]
    assert (load["source"], load["auto_run"], moment(load["start"])) == ("TB-ORIGIN", True, MONDAY.replace(second=0))
    assert all(a.get("auto_run_repeat") is None for a in demo_plan(now=MONDAY, steady_load=False)["activities"])
