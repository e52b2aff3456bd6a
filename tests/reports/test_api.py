"""The site reports API: site admins write their own site's report only (another site's is refused with a clear
message and nothing is stored), coordinators comment and accept, lists filter by challenge and site, drafts stay
with their site, problems come back with their place, and lists take a bounded number of queries."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from reports import services
from reports.models import Outage, ReportComment, SiteReport
from tests.reports.factories import OutageFactory, SiteReportFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/reports/"


def client_for(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def body(site: str = "CNAF", **extra: Any) -> dict[str, Any]:
    return {
        "challenge": "tc22",
        "site": site,
        "notes": "Tape **fine**; disk pools rebooted once.",
        "outages": [{"start": "2022-03-08T00:00:00Z", "end": "2022-03-08T02:00:00Z", "reason": "pools rebooted"}],
        "problems": [{"category": "storage", "ticket": "156789", "description": "slow deletions"}],
        "actions": [{"description": "raised MTU to 9000", "taken_at": "2022-03-08T03:00:00Z"}],
        "rates": [
            {
                "direction": "in",
                "label": "FTS dashboard",
                "rate": 1.1e9,
                "start": "2022-03-07T00:00:00Z",
                "end": "2022-03-07T06:00:00Z",
            }
        ],
        **extra,
    }


def test_a_site_admin_files_their_sites_report(world: dict[str, Any]) -> None:
    response = client_for(world["cnaf_admin"]).post(URL, body(), format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert (data["site"], data["status"], data["author"]) == ("CNAF", "draft", "cnaf-admin")
    assert data["outages"] == [
        {"start": "2022-03-08T00:00:00Z", "end": "2022-03-08T02:00:00Z", "reason": "pools rebooted"}
    ]
    assert data["rates"][0]["rate"] == 1.1e9
    assert data["problems"][0]["ticket_url"] == "https://ggus.eu/?mode=ticket_info&ticket_id=156789"
    assert "<strong>fine</strong>" in data["notes_html"]


def test_a_site_admin_reporting_for_another_site_is_refused_and_nothing_is_stored(world: dict[str, Any]) -> None:
    response = client_for(world["cnaf_admin"]).post(URL, body(site="PIC"), format="json")
    assert response.status_code == 403
    assert response.json() == {"detail": "You are a site admin of CNAF, not of PIC: you may not write its report."}
    assert not SiteReport.objects.exists() and not Outage.objects.exists()


def test_another_sites_admin_is_refused_even_with_bad_content(world: dict[str, Any]) -> None:
    bad = body(site="PIC", outages=[{"start": "2022-03-08T02:00:00Z", "end": "2022-03-08T00:00:00Z", "reason": ""}])
    response = client_for(world["cnaf_admin"]).post(URL, bad, format="json")
    assert response.status_code == 403


def test_a_site_admin_changing_another_sites_report_gets_403_with_the_reason(world: dict[str, Any]) -> None:
    report = SiteReportFactory(challenge=world["challenge"], site=world["pic"], status="submitted", notes="ours")
    response = client_for(world["cnaf_admin"]).patch(f"{URL}{report.pk}/", {"notes": "hijacked"}, format="json")
    assert response.status_code == 403
    assert "not of PIC" in response.json()["detail"]
    report.refresh_from_db()
    assert report.notes == "ours"


def test_another_sites_draft_is_not_found(world: dict[str, Any]) -> None:
    report = SiteReportFactory(challenge=world["challenge"], site=world["pic"])
    assert client_for(world["cnaf_admin"]).get(f"{URL}{report.pk}/").status_code == 404
    assert client_for(world["pic_admin"]).get(f"{URL}{report.pk}/").status_code == 200
    assert client_for(world["coordinator"]).get(f"{URL}{report.pk}/").status_code == 200


def test_bad_rows_come_back_with_their_place_and_store_nothing(world: dict[str, Any]) -> None:
    bad = body(
        outages=[
            {"start": "2022-03-08T00:00:00Z", "end": "2022-03-08T02:00:00Z", "reason": "fine"},
            {"start": "2022-03-25T23:00:00Z", "end": "2022-03-26T01:00:00Z", "reason": "after the end"},
        ]
    )
    bad["rates"][0]["rate"] = -5
    response = client_for(world["cnaf_admin"]).post(URL, bad, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "rates[0].rate": ["a rate must be positive (bytes per second)"],
        "outages[1].end": ["the outage ends after the challenge does (2022-03-26 00:00 UTC): report only its span"],
    }
    assert not SiteReport.objects.exists()


def test_a_patch_replaces_the_rows_it_names_and_keeps_the_others(world: dict[str, Any]) -> None:
    client = client_for(world["cnaf_admin"])
    pk = client.post(URL, body(), format="json").json()["id"]
    outages = [{"start": "2022-03-09T00:00:00Z", "end": "2022-03-09T01:00:00Z", "reason": "router firmware"}]
    response = client.patch(f"{URL}{pk}/", {"outages": outages}, format="json")
    assert response.status_code == 200, response.json()
    assert [o["reason"] for o in response.json()["outages"]] == ["router firmware"]
    assert len(response.json()["problems"]) == 1


def test_a_coordinator_comments_and_accepts_a_submitted_report(world: dict[str, Any]) -> None:
    admin, coordinator = client_for(world["cnaf_admin"]), client_for(world["coordinator"])
    pk = admin.post(URL, body(), format="json").json()["id"]
    assert admin.post(f"{URL}{pk}/submit/").json()["status"] == "submitted"
    comment = coordinator.post(f"{URL}{pk}/comment/", {"text": "Which *pools*?"}, format="json")
    assert comment.status_code == 201 and comment.json()["html"] == "<p>Which <em>pools</em>?</p>"
    accepted = coordinator.post(f"{URL}{pk}/accept/", {"text": "Thanks."}, format="json")
    assert accepted.status_code == 200
    assert (accepted.json()["status"], accepted.json()["accepted_by"]) == ("accepted", "coordinator")
    assert [c["kind"] for c in accepted.json()["comments"]] == ["submitted", "comment", "accepted"]


def test_a_site_admin_cannot_accept_and_cannot_edit_after_acceptance(world: dict[str, Any]) -> None:
    admin, coordinator = client_for(world["cnaf_admin"]), client_for(world["coordinator"])
    pk = admin.post(URL, body(), format="json").json()["id"]
    admin.post(f"{URL}{pk}/submit/")
    refused = admin.post(f"{URL}{pk}/accept/", {}, format="json")
    assert (
        refused.status_code == 403
        and refused.json()["detail"] == "Only coordinators accept reports or ask for changes."
    )
    coordinator.post(f"{URL}{pk}/accept/", {}, format="json")
    late = admin.patch(f"{URL}{pk}/", {"notes": "late"}, format="json")
    assert late.status_code == 403
    assert late.json()["detail"] == "This report was accepted: only a coordinator may change it now."
    assert coordinator.patch(f"{URL}{pk}/", {"notes": "fixed"}, format="json").status_code == 200


def test_a_viewer_reads_submitted_reports_but_writes_none(world: dict[str, Any]) -> None:
    report = SiteReportFactory(challenge=world["challenge"], site=world["cnaf"], status="submitted")
    viewer = client_for(world["viewer"])
    assert viewer.get(f"{URL}{report.pk}/").status_code == 200
    assert viewer.post(f"{URL}{report.pk}/comment/", {"text": "hi"}, format="json").status_code == 403
    assert viewer.post(URL, body(site="PIC"), format="json").status_code == 403
    assert not ReportComment.objects.exists()


def test_the_list_filters_by_challenge_and_site(world: dict[str, Any]) -> None:
    SiteReportFactory(challenge=world["challenge"], site=world["cnaf"], status="submitted")
    SiteReportFactory(challenge=world["challenge"], site=world["pic"], status="accepted")
    SiteReportFactory(site=world["pic"], status="submitted")  # another challenge
    viewer = client_for(world["viewer"])
    by_challenge = viewer.get(URL, {"challenge": "tc22"}).json()["results"]
    assert [r["site"] for r in by_challenge] == ["CNAF", "PIC"]
    assert len(viewer.get(URL, {"site": "pic"}).json()["results"]) == 2  # the site's name, any case
    assert len(viewer.get(URL, {"site": "PIC", "challenge": "tc22"}).json()["results"]) == 1


def test_the_list_takes_a_bounded_number_of_queries(world: dict[str, Any]) -> None:
    viewer = client_for(world["viewer"])
    for site in (world["cnaf"], world["pic"]):
        report = SiteReportFactory(challenge=world["challenge"], site=site, status="submitted")
        OutageFactory.create_batch(3, report=report)
        services.report_comment(user=world["coordinator"], report=report, text="ok")
    with CaptureQueriesContext(connection) as two:
        assert len(viewer.get(URL).json()["results"]) == 2
    for index in range(4):
        report = SiteReportFactory(challenge__slug=f"more-{index}", site=world["cnaf"], status="submitted")
        OutageFactory.create_batch(2, report=report)
    with CaptureQueriesContext(connection) as six:
        assert len(viewer.get(URL).json()["results"]) == 6
    assert len(six) <= len(two)  # the first request also read the user's memberships


def test_notes_of_a_megabyte_are_refused_on_their_field_and_nothing_is_stored(world: dict[str, Any]) -> None:
    response = client_for(world["cnaf_admin"]).post(URL, body(notes="x" * 1_000_000), format="json")
    assert response.status_code == 400
    assert "20000" in str(response.json()["notes"]) or "20,000" in str(response.json()["notes"])
    assert not SiteReport.objects.exists()
