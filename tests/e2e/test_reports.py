"""Site reports in a real browser: a site admin files the report of their site with an outage and submits it; a
coordinator finds it beside the site's row in the results table, comments and accepts it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page

from challenges.models import Target
from reports.models import SiteReport
from sites.choices import Role
from sites.roles import membership_grant
from tests.challenges.factories import ActivityFactory, ChallengeFactory
from tests.sites.factories import ExperimentFactory, SiteFactory

pytestmark = pytest.mark.browser

PASSWORD = "a-long-test-password-42"


def log_in(browser: Browser, base: str, username: str, next_path: str) -> Page:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(f"{base}/accounts/login/?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}{next_path}")
    return page


def test_a_site_admin_files_a_report_with_an_outage_and_a_coordinator_accepts_it(
    live_server: Any, browser: Browser, transactional_db: None
) -> None:
    atlas = ExperimentFactory(name="ATLAS")
    cnaf = SiteFactory(name="CNAF", experiments=[atlas])
    challenge = ChallengeFactory(slug="tc22", name="Tape Challenge 2022", start=datetime(2022, 3, 7, tzinfo=UTC),
                                 end=datetime(2022, 3, 26, tzinfo=UTC))  # fmt: skip
    activity = ActivityFactory(challenge=challenge, name="ATLAS DT", experiment=atlas)
    Target.objects.create(activity=activity, site=cnaf, direction="in", rate=1e9)
    users = get_user_model().objects
    membership_grant(user=users.create_user("cnaf-admin", password=PASSWORD), role=Role.SITE_ADMIN, site=cnaf)
    membership_grant(user=users.create_user("coordinator", password=PASSWORD), role=Role.COORDINATOR)
    base = live_server.url

    admin = log_in(browser, base, "cnaf-admin", "/reports/tc22/")
    admin.get_by_role("link", name="CNAF").click()
    admin.wait_for_url("**/reports/tc22/new/?site=CNAF")
    admin.fill("#id_outages-0-start", "2022-03-08T00:00")
    admin.fill("#id_outages-0-end", "2022-03-27T00:00")  # after the challenge: refused in place
    admin.fill("#id_outages-0-reason", "dCache pools rebooted")
    admin.fill("#id_actions-0-description", "raised MTU to 9000")
    admin.fill("#id_notes", "Disk was **fine** after the reboot. <script>document.title = 'owned'</script>")
    with admin.expect_navigation():
        admin.click("form.report-form button[type=submit]")
    row = admin.locator('.outages-row[data-index="0"]')
    assert "the outage ends after the challenge does (2022-03-26 00:00 UTC)" in row.inner_text()
    assert not SiteReport.objects.exists()
    admin.fill("#id_outages-0-end", "2022-03-08T02:30")
    admin.click("form.report-form button[type=submit]")
    admin.wait_for_url("**/reports/tc22/*/")
    assert "dCache pools rebooted" in admin.locator("table.report-outages").inner_text()
    assert admin.locator(".report-notes strong").inner_text() == "fine"
    assert admin.title() != "owned"
    with admin.expect_navigation():
        admin.click("button[name=submit-report]")
    assert admin.locator("#report-status").inner_text() == "submitted"

    coordinator = log_in(browser, base, "coordinator", "/results/tc22/")
    marker = coordinator.locator("table.rates tbody tr", has_text="CNAF").locator("a.report-marker")
    assert marker.inner_text() == "report · 1 outage"
    marker.click()
    coordinator.wait_for_url("**/reports/tc22/*/")
    coordinator.fill("#comment-text", "Thanks, the outage explains the dip on the 8th.")
    coordinator.click("button[name=accept]")
    coordinator.wait_for_selector("#report-status:text('accepted')")
    assert "Thanks, the outage explains the dip on the 8th." in coordinator.locator("ol.comments").inner_text()
    report = SiteReport.objects.get()
    assert (report.status, report.accepted_by.username if report.accepted_by else None) == ("accepted", "coordinator")
    assert [(o.reason, o.end) for o in report.outages.all()] == [
        ("dCache pools rebooted", datetime(2022, 3, 8, 2, 30, tzinfo=UTC))
    ]
