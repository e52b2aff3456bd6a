"""The handbook's screenshots of the coordinator's pages, on a challenge running now with three hours of FTS
traffic (tests/e2e/screenshots.py says where they go and how the committed copies are refreshed). Each page is
checked to show what its screenshot is for before it is taken, so a screenshot of an error page cannot be taken."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from challenges.models import Activity, Challenge, Target
from ingest.services import ingest_items
from live.alerts import alerts_evaluate
from live.now import board_minute
from portal.demo import demo_user_ensure
from sites.models import Experiment, Site
from tests.e2e.screenshots import COMMITTED, NAMES, VIEWPORT, screenshot_take
from tests.live.scenario import door

pytestmark = pytest.mark.browser

MB = 10**6
SITES = {"CERN-PROD": "eosatlas.cern.ch", "INFN-T1": "xs-301.cr.cnaf.infn.it", "FZK-LCG2": "atlaswebdav-kit.gridka.de",
         "IN2P3-CC": "ccdavatlas.in2p3.fr"}  # fmt: skip
ERRORS = (
    "TRANSFER [110] TRANSFER Operation timed out",
    "DESTINATION [17] DESTINATION OVERWRITE Destination file exists and overwrite is not enabled",
    "SOURCE [2] SOURCE CHECKSUM No such file or directory",
)


@dataclass
class Week:
    challenge: Challenge
    export: Activity
    steady: Target
    at: datetime


class Messages:
    """FTS transfer-complete messages, each file moving its bytes over one whole minute."""

    def __init__(self, doors: dict[str, str]) -> None:
        self.doors = doors
        self.items: list[dict[str, Any]] = []

    def add(self, vo: str, link: tuple[str, str], end: datetime, size: float, error: str = "") -> None:
        source, destination = link
        number = len(self.items)
        self.items.append(
            {
                "tr_id": f"docs-{number}",
                "job_id": f"docs-job-{number // 50}",
                "vo": vo,
                "src_url": f"{self.doors[source]}/docs/f{number}",
                "dst_url": f"{self.doors[destination]}/docs/f{number}",
                "tr_timestamp_start": int((end - timedelta(seconds=60)).timestamp() * 1000),
                "tr_timestamp_complete": int(end.timestamp() * 1000),
                "f_size": int(size),
                "t_final_transfer_state": "Error" if error else "Ok",
                "t__error_message": error,
                "tr_error_category": "TRANSFER" if error else "",
            }
        )


def week_make() -> Week:
    """ATLAS's T0 export running now (one link on target, one whose rate dropped, one site whose traffic stopped)
    and CMS's T1 to T1 test of yesterday, ended."""
    at = board_minute(None)
    atlas, cms = Experiment.objects.get_or_create(name="ATLAS")[0], Experiment.objects.get_or_create(name="CMS")[0]
    sites, doors = {}, {}
    for name, host in SITES.items():
        sites[name] = Site.objects.create(name=name, tier=0 if name == "CERN-PROD" else 1)
        sites[name].experiments.add(atlas, cms)
        doors[name] = f"davs://{host}:443/atlas"
        door(sites[name], doors[name])
    challenge = Challenge.objects.create(
        name="Data Challenge rehearsal", slug="dc-rehearsal", start=at - timedelta(days=2), end=at + timedelta(days=5)
    )
    export = Activity.objects.create(
        challenge=challenge, name="ATLAS T0 export", experiment=atlas, mode="T0", kind="transfer",
        start=at - timedelta(hours=3), end=at + timedelta(hours=5), source=sites["CERN-PROD"],
        file_count=100, file_size=2 * 10**9, concurrency=50, copy_mode="pull",
    )  # fmt: skip
    cern = sites["CERN-PROD"]
    steady = Target.objects.create(activity=export, link_from=cern, link_to=sites["INFN-T1"], rate=300 * MB)
    Target.objects.create(activity=export, link_from=sites["CERN-PROD"], link_to=sites["FZK-LCG2"], rate=250 * MB)
    Target.objects.create(activity=export, site=sites["IN2P3-CC"], direction="in", rate=80 * MB)
    yesterday = Activity.objects.create(
        challenge=challenge, name="CMS T1 to T1", experiment=cms, mode="T1-T1", kind="transfer",
        start=at.replace(hour=0, minute=0) - timedelta(days=1), end=at.replace(hour=0, minute=0) - timedelta(hours=18),
        source=sites["FZK-LCG2"],
    )  # fmt: skip
    Target.objects.create(activity=yesterday, link_from=sites["FZK-LCG2"], link_to=sites["INFN-T1"], rate=100 * MB)
    Target.objects.create(activity=yesterday, link_from=sites["FZK-LCG2"], link_to=sites["IN2P3-CC"], rate=100 * MB)

    messages = Messages(doors)
    for minutes_ago in range(1, 3 * 60 + 1):
        end = at - timedelta(minutes=minutes_ago - 1)
        for _ in range(4):  # four files a minute on each link
            messages.add("atlas", ("CERN-PROD", "INFN-T1"), end, 330 * MB * 60 / 4)
            rate = 60 * MB if minutes_ago <= 20 else 240 * MB
            messages.add("atlas", ("CERN-PROD", "FZK-LCG2"), end, rate * 60 / 4)
        if minutes_ago > 30:
            messages.add("atlas", ("CERN-PROD", "IN2P3-CC"), end, 90 * MB * 60)
        if minutes_ago <= 40 and minutes_ago % 2 == 0:
            messages.add("atlas", ("CERN-PROD", "FZK-LCG2"), end, 0, error=ERRORS[minutes_ago % 3])
    start = yesterday.start
    for minute in range(int((yesterday.end - yesterday.start).total_seconds() // 60)):
        end = start + timedelta(minutes=minute + 1)
        messages.add("cms", ("FZK-LCG2", "INFN-T1"), end, 112 * MB * 60)
        messages.add("cms", ("FZK-LCG2", "IN2P3-CC"), end, (60 if minute % 360 < 120 else 115) * MB * 60)
    result = ingest_items(format="fts", items=messages.items, user=None)
    assert result.accepted == len(messages.items), result.as_dict()
    decisions = [
        {"source_se": doors["CERN-PROD"], "dest_se": doors[name], "datetime": (at - timedelta(minutes=5)).isoformat(),
         "active": active, "actual_active": active, "queue_size": 400, "throughput": throughput, "success": success,
         "ema": throughput, "rationale": rationale, "diff": diff, "vo": "atlas"}
        for name, active, throughput, success, rationale, diff in (
            ("INFN-T1", 60, 330 * MB, 100, "Range fixed", 0),
            ("FZK-LCG2", 12, 60 * MB, 62, "Bad link efficiency", -8),
        )
    ]  # fmt: skip
    result = ingest_items(format="fts-optimizer", items=decisions, user=None)
    assert result.accepted == 2, result.as_dict()
    alerts_evaluate(challenge=challenge, at=at)
    return Week(challenge, export, steady, at)


def logged_in(browser: Browser, base: str, path: str) -> Page:
    username, password = demo_user_ensure()
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{base}/accounts/login/?next={path}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}{path}")
    return page


def test_the_handbook_screenshots_of_a_challenge_week(live_server: Any, browser: Browser, db: None) -> None:
    week = week_make()
    slug, base = week.challenge.slug, live_server.url
    page = logged_in(browser, base, "/")
    assert "Data Challenge rehearsal" in page.locator("main").inner_text()  # running now
    screenshot_take(page, "home")

    page.goto(f"{base}/challenges/{slug}/")
    page.wait_for_selector("table.clock")
    screenshot_take(page, "clock")

    page.goto(f"{base}/results/{slug}/")
    page.wait_for_selector("table.rates")
    assert page.locator("table.rates tbody tr").count() == 5
    overflow, widths = page.evaluate(
        "() => { const box = document.querySelector('table.rates').parentElement;"
        " const cells = [...document.querySelectorAll('table.rates tbody tr:first-child td')];"
        " return [box.scrollWidth - box.clientWidth,"
        " cells.map(c => Math.round(c.getBoundingClientRect().width) + ':' + c.innerText.slice(0, 30))]; }"
    )
    assert overflow <= 0, f"with windows running, the table is {overflow} px wider than its box at 1280 px: {widths}"
    screenshot_take(page, "results")

    page.goto(f"{base}/results/{slug}/targets/{week.steady.pk}/")
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=15_000)
    screenshot_take(page, "target")

    page.goto(f"{base}/results/{slug}/matrix/")
    page.wait_for_selector("table.matrix, table")
    assert "CERN-PROD" in page.locator("main").inner_text()
    screenshot_take(page, "matrix")

    page.goto(f"{base}/results/{slug}/failures/")
    assert "Operation timed out" in page.locator("main").inner_text()
    screenshot_take(page, "failures")

    page.goto(f"{base}/challenges/{slug}/now/")
    page.wait_for_selector("table.now")
    assert page.locator("table.alerts tbody tr").count() >= 1
    screenshot_take(page, "now-board")
    screenshot_take(page, "now-targets", top="h2:has-text('Targets')")

    page.goto(f"{base}/challenges/{slug}/links/")
    assert "Bad link efficiency" in page.locator("main").inner_text()
    screenshot_take(page, "links")


def test_every_screenshot_has_a_committed_copy_in_the_handbook() -> None:
    missing = [name for name in NAMES if not (COMMITTED / f"{name}.png").is_file()]
    assert missing == [], f"take them with SCREENSHOTS_UPDATE=1 and commit docs/img/: {missing}"
    too_big = [path.name for path in COMMITTED.glob("*.png") if path.stat().st_size > 400_000]
    assert too_big == [], f"screenshots over 400 kB: {too_big}"
