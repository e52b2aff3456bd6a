"""The Content Security Policy forbids inline scripts and eval; every page still draws its figures and works,
and the browser reports no violation. A page that tried an inline script would be refused (checked too)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import Browser

from portal.demo import demo_user_ensure
from results.models import TransferRecord
from results.services import records_store
from tests.challenges.factories import ActivityFactory, ChallengeFactory, TargetFactory
from tests.sites.factories import ExperimentFactory, SiteFactory

pytestmark = pytest.mark.browser


def test_the_figures_draw_under_the_policy_with_no_violation(live_server: Any, browser: Browser, db: None) -> None:
    start = datetime(2024, 2, 12, tzinfo=UTC)
    atlas = ExperimentFactory(name="ATLAS")
    cern, cnaf = SiteFactory(name="CERN", experiments=[atlas]), SiteFactory(name="CNAF", experiments=[atlas])
    challenge = ChallengeFactory(slug="csp", start=start, end=start + timedelta(days=7))
    activity = ActivityFactory(challenge=challenge, experiment=atlas, start=start, end=start + timedelta(hours=2))
    target = TargetFactory(activity=activity, site=cnaf, direction="in")
    records_store(
        records=[
            TransferRecord(
                experiment=atlas, source_site=cern, destination_site=cnaf, bytes=10**9, state="ok",
                start=start + timedelta(minutes=m), end=start + timedelta(minutes=m + 1), mode="pull",
                origin="fts", origin_id=f"csp-{m}",
            )
            for m in range(30)
        ]
    )  # fmt: skip
    username, password = demo_user_ensure()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text) if "Content Security Policy" in message.text
            else None)  # fmt: skip
    page.goto(f"{live_server.url}/accounts/login/?next=/challenges/csp/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    for path, figure in (
        ("/challenges/csp/", "#gantt"),
        ("/results/csp/matrix/", "#heatmap"),
        (f"/results/csp/targets/{target.pk}/", "#rate-plot"),
        (f"/results/csp/targets/{target.pk}/", "#histogram-plot"),
    ):
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None and "script-src 'self'" in response.headers["content-security-policy"]
        page.wait_for_selector(f"{figure} .main-svg", timeout=15000)  # Plotly drew it
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .title", timeout=15000)
    assert violations == []

    # The policy is real: an inline script added to the page is refused and reported.
    page.goto(f"{live_server.url}/challenges/csp/")
    page.evaluate(
        "() => { const s = document.createElement('script'); s.textContent = 'window.injected = 1';"
        " document.body.appendChild(s); }"
    )
    assert page.evaluate("() => window.injected") is None
    page.wait_for_timeout(200)
    assert any("Content Security Policy" in text for text in violations)
