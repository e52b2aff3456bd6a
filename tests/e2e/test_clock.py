"""The clock in a real browser: a coordinator plans an activity with a target through the forms and sees it on
the clock (the grid cell and the Gantt timeline)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from playwright.sync_api import Browser

from portal.demo import demo_user_ensure
from tests.challenges.factories import ChallengeFactory
from tests.sites.factories import ExperimentFactory, SiteFactory

pytestmark = pytest.mark.browser


def test_a_coordinator_plans_an_activity_and_sees_it_on_the_clock(
    live_server: Any, browser: Browser, transactional_db: None
) -> None:
    atlas = ExperimentFactory(name="ATLAS")
    SiteFactory(name="CNAF", experiments=[atlas])
    ChallengeFactory(slug="tc22", name="Tape Challenge 2022", start=datetime(2022, 3, 7, tzinfo=UTC),
                     end=datetime(2022, 3, 26, tzinfo=UTC))  # fmt: skip
    username, password = demo_user_ensure()
    plan_and_look(browser, live_server.url, username, password)


def plan_and_look(browser: Browser, base: str, username: str, password: str) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/accounts/login/?next=/challenges/tc22/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/challenges/tc22/")

    page.get_by_role("link", name="New activity").click()
    page.fill("#id_name", "ATLAS DT")
    page.select_option("#id_experiment", label="ATLAS")
    page.fill("#id_mode", "DT")
    page.select_option("#id_kind", value="tape-write")
    page.fill("#id_start", "2022-03-14T00:00")
    page.fill("#id_end", "2022-03-27T00:00")  # after the challenge: refused in place
    page.click("form.plan-form button[type=submit]")
    assert "after the challenge ends (2022-03-26 00:00 UTC)" in page.locator("form.plan-form").inner_text()
    page.fill("#id_end", "2022-03-19T00:00")
    page.click("form.plan-form button[type=submit]")

    page.wait_for_url("**/targets/new/")
    page.select_option("#id_site", label="CNAF")
    page.select_option("#id_direction", value="in")
    page.fill("#id_rate", "0.290")
    page.fill("#id_nominal_rate", "0.0967")
    page.fill("#id_factors", "headroom=1.5, efficiency=2")
    page.click("form.plan-form button[type=submit]")
    page.wait_for_url(f"{base}/challenges/tc22/")

    week_of_march_14 = page.locator("table.clock tbody tr", has_text="ATLAS").locator("td").nth(1)
    assert week_of_march_14.inner_text().strip() == "DT"
    assert page.locator("table.clock tbody tr", has_text="ATLAS").locator("td").nth(0).inner_text().strip() == ""
    assert (
        "nominal 0.0967 GB/s x headroom 1.5 x efficiency 2 = 0.290 GB/s"
        in page.locator("table.activities").inner_text()
    )
    page.wait_for_selector("#gantt svg.main-svg", timeout=15000)
    assert page.locator("#gantt .barlayer .point").count() == 1
    assert "ATLAS DT" in page.locator("#gantt").inner_text()


def test_the_timeline_fits_its_frame_at_1280_px_with_the_last_days_label(
    live_server: Any, browser: Browser, transactional_db: None
) -> None:
    """The Gantt is drawn inside its frame (not over its right edge) and the label of the challenge's last day, on
    the right edge of the axis, is drawn rather than dropped; the legend does not cover the dates."""
    from django.utils import timezone

    from challenges.plan import plan_import
    from portal.demo import demo_plan

    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    for name in ("TB-T0", "TB-T1-A", "TB-T1-B", "TB-TAPE", "TB-ORIGIN"):
        SiteFactory(name=name, experiments=[atlas, cms])
    plan_import(document=demo_plan(now=timezone.now()))  # two weeks from this Monday, as on the demo
    username, password = demo_user_ensure()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/accounts/login/?next=/challenges/demo/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_selector("#gantt svg.main-svg", timeout=15000)
    frame = page.locator(".gantt-frame").bounding_box()
    drawing = page.locator("#gantt svg.main-svg").first.bounding_box()
    assert frame is not None and drawing is not None
    assert drawing["x"] + drawing["width"] <= frame["x"] + frame["width"] - 1  # inside its 1 px border
    labels = page.locator("#gantt .xtick text")
    last = labels.nth(labels.count() - 1).bounding_box()
    assert last is not None, "the last date label was dropped"
    assert last["x"] + last["width"] <= frame["x"] + frame["width"]
    legend = page.locator("#gantt .legend").bounding_box()
    axis_labels = [labels.nth(index).bounding_box() for index in range(labels.count())]
    assert legend is not None
    assert all(box is None or box["y"] + box["height"] <= legend["y"] for box in axis_labels)
