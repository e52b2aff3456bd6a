"""A sweep's page at 1280 px: six sites' FROM x TO tables stay inside the page (a wide table scrolls in its own box),
under the Content Security Policy with no violation, and Cancel asks before it cancels."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser

from portal.demo import demo_user_ensure
from sweeps.services import sweep_start
from tests.sites.factories import NetworkHostFactory, SiteFactory, StorageEndpointFactory

pytestmark = pytest.mark.browser

SITES = ["INFN-T1-CNAF", "IHEP-JUNO", "IN2P3-CC-LYON", "JINR-T1-DUBNA", "MSU-MOSCOW", "DESY-ZEUTHEN"]


def test_a_six_site_sweep_page_fits_1280_px_under_the_policy(live_server: Any, browser: Browser, db: None) -> None:
    from django.contrib.auth import get_user_model

    for number, name in enumerate(SITES):
        site = SiteFactory(name=name)
        StorageEndpointFactory(site=site, url=f"davs://se{number}.example.org:443/data", kind="disk")
        NetworkHostFactory(site=site, address=f"ps{number}.example.org")
    username, password = demo_user_ensure()
    data = {"name": "JUNO", "sites": SITES, "modes": ["pull", "push", "streamed"], "concurrency": [10, 40, 100]}
    sweep = sweep_start(user=get_user_model().objects.get(username=username), data={**data, "file_size": 10**6})
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text) if "Content Security Policy" in message.text
            else None)  # fmt: skip
    page.goto(f"{live_server.url}/accounts/login/?next=/sweeps/{sweep.pk}/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_selector("#throughput-streamed-100 table.grid")
    assert page.locator("section[id^=throughput-]").count() == 9
    assert page.locator("#network tbody tr").count() == 6
    overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"the sweep page is {overflow} px wider than 1280 px"
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.click("text=Cancel sweep")
    assert dialogs and dialogs[0].startswith("Cancel this sweep?")
    assert violations == []
