"""The target versus achieved table fits a 1280 px screen: every column, the verdict too, without scrolling."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import Browser

from portal.demo import demo_user_ensure
from tests.challenges.factories import ActivityFactory, ChallengeFactory, TargetFactory
from tests.sites.factories import ExperimentFactory, SiteFactory

pytestmark = pytest.mark.browser


def test_the_rates_table_fits_1280_px(live_server: Any, browser: Browser, db: None) -> None:
    username, password = demo_user_ensure()
    start = datetime(2024, 2, 12, tzinfo=UTC)
    challenge = ChallengeFactory(slug="wide", start=start, end=start + timedelta(days=14))
    atlas = ExperimentFactory(name="ATLAS")
    for index in range(3):
        activity = ActivityFactory(
            challenge=challenge,
            experiment=atlas,
            name=f"ATLAS Tier-0 export to the Tier-1 sites, week {index} (functional and throughput)",
            mode="T0 export (DT) with data taking",
        )
        TargetFactory(activity=activity, site=SiteFactory(name=f"INFN-T1-CNAF-STORAGE-{index}", experiments=[atlas]))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/accounts/login/?next=/results/wide/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_selector("table.rates")
    overflow = page.evaluate(
        "() => { const box = document.querySelector('table.rates').parentElement;"
        " return box.scrollWidth - box.clientWidth; }"
    )
    assert overflow <= 0, f"the table is {overflow} px wider than its box at 1280 px"
    verdict = page.locator("table.rates tbody tr").first.locator("td.verdict")
    box = verdict.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 1280
