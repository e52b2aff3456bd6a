"""The now board in a real browser: a coordinator opens it, sees the targets worst first with their sparklines and
the open alerts, acknowledges one, and the board refreshes itself without a reload."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser

from live.alerts import alerts_evaluate
from portal.demo import demo_user_ensure
from tests.live.scenario import scenario_make

pytestmark = pytest.mark.browser


def test_the_now_board_shows_the_worst_first_and_takes_an_acknowledgement(
    live_server: Any, browser: Browser, db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("live.views.REFRESH_SECONDS", 2)  # the page's own refresh, quickly
    username, password = demo_user_ensure()
    live = scenario_make()
    alerts_evaluate(challenge=live.challenge, at=live.at)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/accounts/login/?next=/challenges/live/now/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_selector("table.now")
    verdicts = page.locator("table.now tbody td.verdict").all_inner_texts()
    assert verdicts == ["will miss", "on track", "met"]
    assert page.locator("svg.spark polyline").count() == 3
    assert page.locator("table.alerts tbody tr").count() == 3
    page.locator("table.alerts tbody tr", has_text="nothing moved for the last").get_by_role(
        "button", name="Acknowledge"
    ).click()
    page.wait_for_selector("text=acknowledged by")
    # The board refreshes itself (htmx swaps it) while the page stays: a mark on the window survives, the one on the
    # old board goes with it.
    page.evaluate("() => { window.stayed = true; document.querySelector('#now-board').dataset.old = '1'; }")
    page.wait_for_function("() => !document.querySelector('#now-board').dataset.old", timeout=15_000)
    assert page.evaluate("() => window.stayed") is True
    assert page.locator("table.now tbody td.verdict").all_inner_texts() == ["will miss", "on track", "met"]
