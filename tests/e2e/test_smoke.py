"""The browser smoke test: Debian's Chromium, driven by Playwright, logs in with the demo account."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser

from portal.demo import demo_user_ensure

pytestmark = pytest.mark.browser


def test_demo_account_logs_in_and_sees_the_home_page(live_server: Any, browser: Browser, db: None) -> None:
    username, password = demo_user_ensure()
    page = browser.new_page()
    page.goto(f"{live_server.url}/")
    assert "/accounts/login/" in page.url  # the home page asks for a login first
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    assert page.locator("h1").inner_text() == "Data Challenge Portal"
    assert page.locator(".who").inner_text() == username
    for link in ("Challenges", "Sites", "Results", "API docs", "Tokens"):  # the demo user coordinates
        assert page.get_by_role("link", name=link).is_visible()
    assert page.locator("table.status td").first.inner_text() == "ok"  # the database answered the page


def test_a_wrong_password_is_refused(live_server: Any, browser: Browser, db: None) -> None:
    username, _ = demo_user_ensure()
    page = browser.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "not-the-password")
    page.click("button[type=submit]")
    assert "/accounts/login/" in page.url
    assert "enter a correct username and password" in page.content()


def test_the_api_docs_render_without_any_outside_network(live_server: Any, browser: Browser, db: None) -> None:
    username, password = demo_user_ensure()
    page = browser.new_page()
    page.goto(f"{live_server.url}/accounts/login/?next=/api/docs/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_selector(".swagger-ui .title", timeout=15000)
    assert "Data Challenge Portal API" in page.locator(".swagger-ui .title").inner_text()
    page.wait_for_selector(".opblock-tag[data-tag=sites]", timeout=15000)
