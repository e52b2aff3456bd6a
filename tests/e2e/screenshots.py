"""Screenshots of the pages for the handbook (docs/), taken by the browser tests so that they never go stale.

Every test run writes them to var/screenshots/ (ignored by git: a test run leaves the tree clean), and the handbook's
build (docs/hooks.py) uses those fresh copies when they are there. The copies committed in docs/img/ are refreshed
on purpose, by the same tests with SCREENSHOTS_UPDATE=1:

    SCREENSHOTS_UPDATE=1 bin/portal test tests/e2e/test_screenshots.py tests/e2e/test_runs.py

A viewport of 1280 x 800, never the whole page: a PNG of a few hundred kB at most.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from django.conf import settings
from playwright.sync_api import Page, ViewportSize

VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
FRESH = Path(settings.BASE_DIR) / "var" / "screenshots"
COMMITTED = Path(settings.BASE_DIR) / "docs" / "img"
# The screenshots the tests take, each with a committed copy in docs/img/ (checked by test_screenshots.py).
NAMES = ("home", "clock", "results", "target", "matrix", "failures", "now-board", "now-targets", "links", "run")


def screenshot_take(page: Page, name: str, *, top: str = "") -> Path:
    """The visible part of the page as var/screenshots/NAME.png (and docs/img/NAME.png with SCREENSHOTS_UPDATE=1);
    `top`: a selector of the element to scroll to the top of the view first."""
    assert name in NAMES, f"{name}: add it to NAMES, take it once with SCREENSHOTS_UPDATE=1 and commit docs/img/"
    page.set_viewport_size(VIEWPORT)
    if top:
        page.locator(top).first.evaluate("element => element.scrollIntoView({block: 'start'})")
    page.evaluate("() => document.fonts.ready")
    FRESH.mkdir(parents=True, exist_ok=True)
    path = FRESH / f"{name}.png"
    page.screenshot(path=str(path), full_page=False, animations="disabled", caret="hide")
    if os.environ.get("SCREENSHOTS_UPDATE") == "1":
        shutil.copyfile(path, COMMITTED / path.name)
    return path
