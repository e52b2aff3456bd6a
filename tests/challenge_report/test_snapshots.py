"""Snapshots of the report: made by coordinators with a version, author, time and the PDF's SHA-256; the same bytes
whatever arrives later; what changed between two; shared by a revocable link that needs no account."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from results.services import records_store

from .world import GB, World, record, user_with

pytestmark = pytest.mark.django_db
URL = "/api/v1/challenges/dc22/report/snapshots/"


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _more_records(world: World) -> None:
    """ATLAS's link CERN -> PIC gets 1 GB/s more for ten hours: its figures move, and it meets its target."""
    s = world.sites
    records_store(
        records=[
            record(world.atlas, s["CERN"], s["PIC"], start=60 * h, end=60 * h + 60, size=3600 * GB) for h in range(10)
        ]
    )


def test_a_snapshots_pdf_is_byte_identical_after_new_records_arrive(world: World) -> None:
    coordinator = _client(user_with("coordinator"))
    made = coordinator.post(URL)
    assert made.status_code == 201, made.content
    snapshot = made.json()
    assert (snapshot["version"], snapshot["state"]) == (1, "finished")
    assert snapshot["author"].startswith("coordinator-") and len(snapshot["pdf_sha256"]) == 64
    first = coordinator.get(f"{URL}1/", {"format": "pdf"})
    assert hashlib.sha256(first.content).hexdigest() == snapshot["pdf_sha256"]
    before = {fmt: coordinator.get(f"{URL}1/", {"format": fmt}).content for fmt in ("json", "html", "md")}
    _more_records(world)
    now = coordinator.get("/api/v1/challenges/dc22/report/", {"format": "pdf"}).content
    assert now != first.content  # the report as it is now has moved
    again = coordinator.get(f"{URL}1/", {"format": "pdf"})
    assert again.content == first.content and again["Content-Type"] == "application/pdf"
    assert {fmt: coordinator.get(f"{URL}1/", {"format": fmt}).content for fmt in ("json", "html", "md")} == before


def test_what_changed_between_two_snapshots_names_the_targets_that_moved(world: World) -> None:
    coordinator = _client(user_with("coordinator"))
    coordinator.post(URL)
    _more_records(world)
    assert coordinator.post(URL).json()["version"] == 2
    changes = coordinator.get(f"{URL}2/changes/").json()
    (moved,) = changes["targets"]
    assert (moved["where"], moved["change"]) == ("CERN → PIC", "moved")
    assert moved["figures"]["verdict"] == {"before": "missed", "after": "met"}
    assert moved["figures"]["average_rate"]["after"] == pytest.approx(2 * moved["figures"]["average_rate"]["before"])
    page = Client()
    page.force_login(user_with("coordinator"))  # type: ignore[arg-type]
    html = page.get("/challenges/dc22/report/", {"earlier": 1, "later": 2}).content.decode()
    assert 'id="changes"' in html and "missed → met" in html


def test_only_coordinators_make_snapshots_and_a_ddm_service_reads_none(world: World) -> None:
    scopes = {"viewer": {}, "ddm": {"experiment": world.atlas}, "site-admin": {"site": world.sites["CNAF"]}}
    for role, scope in scopes.items():
        assert _client(user_with(role, **scope)).post(URL).status_code == 403
    _client(user_with("coordinator")).post(URL)
    assert [s["version"] for s in _client(user_with("viewer")).get(URL).json()["snapshots"]] == [1]
    ddm = _client(user_with("ddm", experiment=world.cms))
    assert ddm.get(URL).json()["snapshots"] == []  # it holds ATLAS's part: not for CMS's service
    assert ddm.get(f"{URL}1/", {"format": "json"}).status_code == 404


def test_a_public_link_needs_no_account_and_is_revocable(world: World) -> None:
    coordinator = _client(user_with("coordinator"))
    coordinator.post(URL)
    assert _client(user_with("viewer")).post(f"{URL}1/public/").status_code == 403
    link = coordinator.post(f"{URL}1/public/").json()["public_url"]
    assert link.startswith("/shared/reports/")
    anonymous = Client()
    pdf = anonymous.get(link, {"format": "pdf"})
    assert pdf.status_code == 200 and pdf.content == coordinator.get(f"{URL}1/", {"format": "pdf"}).content
    assert "8. Summary" in anonymous.get(link).content.decode()
    assert anonymous.get(link, {"format": "docx"}).status_code == 400
    assert coordinator.delete(f"{URL}1/public/").json()["public_url"] is None
    assert anonymous.get(link).status_code == 404
    assert anonymous.get("/shared/reports/not-a-key/").status_code == 404


def test_an_unknown_snapshot_or_format_is_a_json_4xx(world: World) -> None:
    coordinator = _client(user_with("coordinator"))
    coordinator.post(URL)
    assert coordinator.get(f"{URL}7/").status_code == 404
    assert coordinator.get(f"{URL}99999999999/").status_code == 404
    bad = coordinator.get(f"{URL}1/", {"format": "xls"})
    assert bad.status_code == 400 and "format" in bad.json()
    assert coordinator.get(f"{URL}1/changes/").status_code == 400  # no earlier snapshot
    assert coordinator.get(f"{URL}1/changes/", {"since": "x"}).status_code == 400


def test_the_page_makes_and_shares_a_snapshot(world: World) -> None:
    page = Client()
    page.force_login(user_with("coordinator"))  # type: ignore[arg-type]
    assert page.post("/challenges/dc22/report/").status_code == 302
    assert page.post("/challenges/dc22/report/snapshots/1/share/", {"public": "on"}).status_code == 302
    html = page.get("/challenges/dc22/report/").content.decode()
    assert "Make a snapshot now" in html and "/shared/reports/" in html and "Revoke" in html
    viewer = Client()
    viewer.force_login(user_with("viewer"))  # type: ignore[arg-type]
    assert viewer.post("/challenges/dc22/report/").status_code == 403
    assert "Make a snapshot now" not in viewer.get("/challenges/dc22/report/").content.decode()


def test_coordinators_write_the_reports_lessons_and_next_steps(world: World) -> None:
    from challenge_report.content import content_json, report_content

    page = Client()
    page.force_login(user_with("coordinator"))  # type: ignore[arg-type]
    saved = page.post(
        "/challenges/dc22/report/",
        {"do": "notes", "lessons": "Book **tape drives** early", "next_steps": "DC24 at twice the rates"},
    )
    assert saved.status_code == 302
    lessons = content_json(report_content(challenge=world.challenge, user=None))["lessons"]
    assert "<strong>tape drives</strong>" in lessons["coordinators"]["lessons_html"]
    assert lessons["coordinators"]["next_steps"] == "DC24 at twice the rates"
    assert "Book <strong>tape drives</strong> early" in page.get("/challenges/dc22/report/").content.decode()
    viewer = Client()
    viewer.force_login(user_with("viewer"))  # type: ignore[arg-type]
    assert viewer.post("/challenges/dc22/report/", {"do": "notes", "lessons": "mine"}).status_code == 403
