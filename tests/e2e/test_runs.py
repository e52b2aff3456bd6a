"""A real run in a real browser: a coordinator presses Run on an activity of the clock (4 x 1 MB files from TB-T0
to TB-T1-A on the testbed), lands on the run page and watches the figures move to "finished" without reloading
(htmx polling), with a real Celery worker copying through gfal2."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from playwright.sync_api import Browser, expect

from challenges.models import Activity
from common import processes
from portal.demo import demo_user_ensure
from runs.dispatch import DEFAULT_QUEUE, served_queues_forget
from runs.models import Run
from sites.models import Experiment, Site
from sites.services import sites_import
from testbed.grid import Testbed
from tests.challenges.factories import ChallengeFactory
from tests.e2e.screenshots import screenshot_take
from tests.workers import worker_argv, worker_database_url

pytestmark = pytest.mark.browser


@pytest.fixture
def default_queue_worker(testbed: Testbed, transactional_db: None, tmp_path: Path) -> Iterator[None]:
    """A real worker on the `default` queue (where runs of sites without a worker of their own go), reading the
    test database, with the testbed's credentials. The Redis db of this test session is ours alone."""
    env = {**os.environ, "DATABASE_URL": worker_database_url(), "PROBES_TESTBED": "true"}
    pidfile = tmp_path / "worker.pid"
    name = f"e2e-runs-{uuid.uuid4().hex[:8]}"
    argv = worker_argv(name=name, queues=DEFAULT_QUEUE, concurrency=4)
    processes.start(argv, pidfile=pidfile, logfile=tmp_path / "worker.log", env=env, cwd=settings.BASE_DIR)
    served_queues_forget()
    try:
        yield
    finally:
        processes.stop(pidfile)
        served_queues_forget()


def test_a_coordinator_starts_a_run_and_watches_it_finish(
    live_server: Any, browser: Browser, testbed: Testbed, default_queue_worker: None
) -> None:
    sites_import(document=testbed.sites_document())
    now = timezone.now()
    challenge = ChallengeFactory(slug="dc-now", name="Data Challenge now", start=now - timedelta(days=1),
                                 end=now + timedelta(days=6))  # fmt: skip
    activity = Activity.objects.create(
        challenge=challenge,
        name="T0 export",
        experiment=Experiment.objects.order_by("name").first(),
        mode="DT",
        kind="transfer",
        start=now - timedelta(hours=1),
        end=now + timedelta(hours=5),
        source=Site.objects.get(name="TB-T0"),
        file_count=8,
        file_size=64_000_000,
        concurrency=4,
        copy_mode="pull",
    )
    activity.targets.create(site=Site.objects.get(name="TB-T1-A"), direction="in", rate=1e9)
    username, password = demo_user_ensure()
    # A run writes to portal-runs/run-<id>/ on the destination. Every test database numbers its runs from 1, and
    # other sessions may copy to the same testbed at the same time: start this one's ids somewhere of its own.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", [Run._meta.db_table, random.randrange(10**9)]
        )

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    base = live_server.url
    page.goto(f"{base}/accounts/login/?next=/challenges/dc-now/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/challenges/dc-now/")

    page.locator(f"#activity-{activity.pk}").get_by_role("link", name="Run", exact=True).click()
    page.wait_for_url(f"**/challenges/dc-now/activities/{activity.pk}/run/")
    page.fill("#id_file_count", "4")
    page.fill("#id_file_size", "1000000")
    page.fill("#id_concurrency", "2")
    page.click("form.run-form button[type=submit]")
    page.wait_for_url("**/challenges/runs/*/")
    run = Run.objects.get(activity=activity)
    assert page.url == f"{base}/challenges/runs/{run.pk}/"
    assert page.locator("#files-done").inner_text().endswith("/ 4")

    # The page is never reloaded: a marker set now would be lost by a reload.
    page.evaluate("window.__not_reloaded = true")
    page.wait_for_selector("#run-state.state-finished", timeout=90_000)
    assert page.evaluate("window.__not_reloaded") is True
    files = list(run.files.order_by("index").values_list("index", "state", "attempt", "error"))
    assert page.locator("#files-failed").inner_text() == "0", files
    assert page.locator("#files-done").inner_text() == "4 / 4", files
    assert page.locator("#bytes-done").inner_text() == "4 MB"
    # Its FROM x TO table comes with the end; the page asks on until the worker has deleted the run's copies, then
    # stops.
    page.wait_for_selector("#run-matrix", timeout=10_000)
    expect(page.locator("#run-copies strong")).to_have_text("deleted", timeout=60_000)
    assert page.locator("#run-progress").get_attribute("hx-trigger") is None  # polling stopped
    assert page.evaluate("window.__not_reloaded") is True
    screenshot_take(page, "run")  # the handbook's run page
    run.refresh_from_db()
    assert run.state == "finished"
    assert run.records.filter(state="ok").count() == 4
