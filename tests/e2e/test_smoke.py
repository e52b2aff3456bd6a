"""The browser smoke test: Debian's Chromium, driven by Playwright, logs in with the demo account."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, sync_playwright

from portal.demo import demo_user_ensure

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
# Chromium as root needs --no-sandbox; the rest keep it from reaching for Google's hosts on a closed network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    # Playwright's sync API keeps an event loop in this thread; Django would refuse ORM calls next to it.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


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
