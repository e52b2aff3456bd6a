"""The run page in a real browser as a run ends under it (its rows changed as the engine and the clean-up would):
without a reload, the page shows the end, then its FROM x TO table, then the fate of its copies, and stops asking;
a network probe's page shows its own progress while it runs and draws its figures when it ends, Plotly loaded on
the way under the Content Security Policy."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from portal.demo import demo_user_ensure
from results.models import TransferRecord
from runs.models import Run, RunFile
from tests.sites.factories import SiteFactory

pytestmark = pytest.mark.browser

MB = 10**6


def logged_in(browser: Browser, base: str, path: str) -> tuple[Page, list[str]]:
    username, password = demo_user_ensure()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text) if "Content Security Policy" in message.text
            else None)  # fmt: skip
    page.goto(f"{base}/accounts/login/?next={path}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}{path}")
    return page, violations


def test_the_run_page_shows_the_end_its_table_and_its_copies_fate_without_a_reload(
    live_server: Any, browser: Browser, transactional_db: None
) -> None:
    source, destination = SiteFactory(name="SRC"), SiteFactory(name="DST")
    now = timezone.now()
    run = Run.objects.create(
        kind="transfer", state="running", copies="present", started_at=now, parameters={"concurrency": 2}
    )
    files = [
        RunFile.objects.create(
            run=run,
            index=index,
            source_url="root://a//f",
            destination_url=f"root://b//f{index}",
            size=100 * MB,
            state="running",
            attempt=1,
            start=now,
        )
        for index in range(2)
    ]
    page, violations = logged_in(browser, live_server.url, f"/challenges/runs/{run.pk}/")
    assert page.locator("#run-state").inner_text() == "running"
    assert page.locator("#run-matrix").count() == 0

    end = timezone.now()
    for file in files:  # what the engine stores as the last files end: their records, then the run's end
        RunFile.objects.filter(pk=file.pk).update(state="done", end=end, bytes=100 * MB)
        TransferRecord.objects.create(
            run=run,
            bytes=100 * MB,
            start=now,
            end=end,
            state="ok",
            origin="probe",
            origin_id=f"e2e-{file.pk}",
            source_site=source,
            destination_site=destination,
        )
    Run.objects.filter(pk=run.pk).update(state="finished", finished_at=end, copies="deleting")
    page.wait_for_selector("#run-matrix", timeout=10000)
    assert page.locator("#run-state").inner_text() == "finished"
    assert "SRC" in page.locator("#run-matrix").inner_text()
    assert "being deleted" in page.locator("#run-copies").inner_text()

    Run.objects.filter(pk=run.pk).update(copies="deleted", copies_message="2 deleted")
    expect(page.locator("#run-copies")).to_contain_text("2 deleted", timeout=10000)
    assert page.locator("#run-progress").get_attribute("hx-get") is None  # it stopped asking
    assert page.locator("#run-matrix").count() == 1
    assert violations == []


def test_a_network_probes_page_shows_its_progress_then_draws_its_figures(
    live_server: Any, browser: Browser, transactional_db: None
) -> None:
    run = Run.objects.create(
        kind="network", state="running", started_at=timezone.now() - timedelta(seconds=2), heartbeat=timezone.now(),
        parameters={"host": "iperf.example.org", "port": 5201, "streams": 1, "duration": 10, "reverse": False},
    )  # fmt: skip
    page, violations = logged_in(browser, live_server.url, f"/challenges/runs/{run.pk}/")
    assert "iperf3 to iperf.example.org:5201" in page.locator("#probe-what").inner_text()
    assert page.locator("#files-done").count() == 0

    intervals = [{"summary": {"start": n, "end": n + 1, "throughput-bits": (2 + n) * 1e9}} for n in range(10)]
    summary = {"rate": 4e8, "path_mtu": 1500, "local_mtu": 1500, "pscheduler": {"intervals": intervals}}
    Run.objects.filter(pk=run.pk).update(state="finished", finished_at=timezone.now(), summary=summary)
    page.wait_for_selector("#probe-figure-1 .main-svg", timeout=15000)  # Plotly loaded and drew it
    page.wait_for_selector("#probe-figure-2 .main-svg", timeout=15000)
    assert page.locator("#probe-network").count() == 1
    assert page.locator("#run-state").inner_text() == "finished"
    assert violations == []
