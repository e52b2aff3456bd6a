"""The site report pages: the form with its formsets (problems next to the row they are about, nothing stored on
error), the detail with its sanitised Markdown and the review buttons, the list per challenge, and the export of
a challenge's outages."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from reports import services
from reports.choices import ReportStatus
from reports.models import SiteReport
from tests.reports.factories import OutageFactory, SiteReportFactory
from tests.reports.helpers import at

pytestmark = pytest.mark.django_db


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def management(prefix: str, total: int) -> dict[str, str]:
    return {
        f"{prefix}-TOTAL_FORMS": str(total),
        f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }


def form_data(**rows: str) -> dict[str, str]:
    data = {"notes": "All **good** <script>alert('x')</script>"}
    for prefix in ("rates", "problems", "actions"):
        data |= management(prefix, 1)
    data |= management("outages", 2)
    data |= {
        "outages-0-start": "2022-03-08T00:00",
        "outages-0-end": "2022-03-08T02:00",
        "outages-0-reason": "pools rebooted",
        "actions-0-description": "raised MTU to 9000",
        "actions-0-taken_at": "2022-03-08T03:00",
        "rates-0-label": "FTS dashboard",
        "rates-0-direction": "in",
        "rates-0-rate": "1.25",
        "rates-0-start": "2022-03-07T00:00",
        "rates-0-end": "2022-03-07T06:00",
        "problems-0-category": "network",
        "problems-0-ticket": "https://ggus.eu/?mode=ticket_info&ticket_id=1",
        "problems-0-description": "packet loss",
    }
    return data | rows


def test_a_site_admin_files_a_report_through_the_form(world: dict[str, Any]) -> None:
    client = client_for(world["cnaf_admin"])
    assert client.get("/reports/tc22/new/").status_code == 200  # their one site, without ?site=
    response = client.post("/reports/tc22/new/?site=CNAF", form_data())
    report = SiteReport.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/reports/tc22/{report.pk}/"
    assert report.rates.get().rate == 1.25e9  # typed in GB/s, stored in B/s
    assert [(o.start, o.end) for o in report.outages.all()] == [(at(24), at(26))]  # the empty second row skipped
    assert report.actions.get().description == "raised MTU to 9000"


def test_an_outage_ending_before_it_starts_is_shown_on_its_row_and_nothing_is_stored(world: dict[str, Any]) -> None:
    data = form_data(**{"outages-1-start": "2022-03-09T05:00", "outages-1-end": "2022-03-09T04:00",
                        "outages-1-reason": "router"})  # fmt: skip
    response = client_for(world["cnaf_admin"]).post("/reports/tc22/new/?site=CNAF", data)
    assert response.status_code == 400
    content = response.content.decode()
    row = content.split('outages-row" data-index="1"')[1].split("</fieldset>")[0]  # the second outage row
    assert "the end (2022-03-09 04:00 UTC) must be after the start (2022-03-09 05:00 UTC)" in row
    first = content.split('outages-row" data-index="0"')[1].split('outages-row" data-index="1"')[0]
    assert "must be after the start" not in first
    assert not SiteReport.objects.exists()


def test_the_form_refuses_another_sites_admin_with_the_reason(world: dict[str, Any]) -> None:
    response = client_for(world["pic_admin"]).post("/reports/tc22/new/?site=CNAF", form_data())
    assert response.status_code == 403
    assert "You are a site admin of PIC, not of CNAF" in response.content.decode()
    assert not SiteReport.objects.exists()


def test_the_detail_renders_markdown_without_the_script(world: dict[str, Any]) -> None:
    client = client_for(world["cnaf_admin"])
    client.post("/reports/tc22/new/?site=CNAF", form_data())
    report = SiteReport.objects.get()
    content = client.get(f"/reports/tc22/{report.pk}/").content.decode()
    notes = content.split('class="markdown report-notes">')[1].split("</div>")[0]
    assert "<strong>good</strong>" in notes
    assert "<script" not in notes and "alert(" not in notes
    assert 'href="https://ggus.eu/?mode=ticket_info&amp;ticket_id=1"' in content


def test_a_comment_with_a_script_is_stored_but_rendered_without_it(world: dict[str, Any]) -> None:
    report = SiteReportFactory(challenge=world["challenge"], site=world["cnaf"], status="submitted")
    client = client_for(world["coordinator"])
    client.post(f"/reports/tc22/{report.pk}/comment/", {"text": "ok <script>document.title='owned'</script>"})
    content = client.get(f"/reports/tc22/{report.pk}/").content.decode()
    assert "document.title" not in content
    assert report.comments.get().text.startswith("ok <script>")


def test_a_coordinator_accepts_from_the_detail_page(world: dict[str, Any]) -> None:
    report = SiteReportFactory(challenge=world["challenge"], site=world["cnaf"], status="submitted")
    coordinator = client_for(world["coordinator"])
    page = coordinator.get(f"/reports/tc22/{report.pk}/").content.decode()
    assert 'name="accept"' in page and 'name="request-changes"' in page
    response = coordinator.post(f"/reports/tc22/{report.pk}/accept/", {"text": "Thanks"})
    assert response.status_code == 302
    report.refresh_from_db()
    assert report.status == ReportStatus.ACCEPTED


def test_a_site_admin_sees_no_review_buttons_and_cannot_accept(world: dict[str, Any]) -> None:
    report = SiteReportFactory(challenge=world["challenge"], site=world["cnaf"], status="submitted")
    admin = client_for(world["cnaf_admin"])
    assert 'name="accept"' not in admin.get(f"/reports/tc22/{report.pk}/").content.decode()
    response = admin.post(f"/reports/tc22/{report.pk}/accept/")
    assert response.status_code == 403 and "Only coordinators accept" in response.content.decode()
    report.refresh_from_db()
    assert report.status == ReportStatus.SUBMITTED


def test_the_list_shows_the_reports_and_offers_the_admins_site(world: dict[str, Any]) -> None:
    report = SiteReportFactory(challenge=world["challenge"], site=world["pic"], status="submitted")
    OutageFactory.create_batch(2, report=report)
    content = client_for(world["cnaf_admin"]).get("/reports/tc22/").content.decode()
    assert f'href="/reports/tc22/{report.pk}/">PIC</a>' in content
    assert 'href="/reports/tc22/new/?site=CNAF"' in content and "?site=PIC" not in content


def test_the_outages_export_as_csv_and_json(world: dict[str, Any]) -> None:
    report = SiteReportFactory(challenge=world["challenge"], site=world["cnaf"], status="submitted")
    services.report_save(
        user=world["coordinator"],
        challenge=world["challenge"],
        site=world["cnaf"],
        report=report,
        content={"outages": [{"start": at(24), "end": at(26.5), "reason": "pools, rebooted"}]},
    )
    OutageFactory(report=SiteReportFactory(challenge=world["challenge"], site=world["pic"]))  # a draft: hidden
    viewer = client_for(world["viewer"])
    rows = list(csv.DictReader(io.StringIO(viewer.get("/reports/tc22/outages/?format=csv").content.decode())))
    assert rows == [
        {"site": "CNAF", "start": "2022-03-08T00:00:00Z", "end": "2022-03-08T02:30:00Z", "duration": "9000",
         "reason": "pools, rebooted", "report_status": "submitted", "report_id": str(report.pk)}
    ]  # fmt: skip
    data = viewer.get("/reports/tc22/outages/?format=json").json()
    assert data["table"] == "tc22-outages" and data["rows"][0]["duration"] == 9000


def test_a_draft_s_outages_are_hidden_from_other_readers(world: dict[str, Any]) -> None:
    OutageFactory(report=SiteReportFactory(challenge=world["challenge"], site=world["pic"]))
    assert client_for(world["viewer"]).get("/reports/tc22/outages/?format=json").json()["rows"] == []
    assert len(client_for(world["pic_admin"]).get("/reports/tc22/outages/?format=json").json()["rows"]) == 1


def test_untouched_empty_rows_are_skipped(world: dict[str, Any]) -> None:
    data = {"notes": ""}
    for prefix in ("rates", "outages", "problems", "actions"):
        data |= management(prefix, 1)
    empty_rate = {"rates-0-target": "", "rates-0-label": "", "rates-0-direction": "", "rates-0-rate": "",
                  "rates-0-start": "", "rates-0-end": ""}  # fmt: skip
    data |= empty_rate | {"problems-0-category": "", "problems-0-ticket": "", "problems-0-description": ""}
    data |= {"outages-0-start": "2022-03-08T00:00", "outages-0-end": "2022-03-08T01:00", "outages-0-reason": "x"}
    response = client_for(world["cnaf_admin"]).post("/reports/tc22/new/?site=CNAF", data)
    assert response.status_code == 302
    report = SiteReport.objects.get()
    assert (report.outages.count(), report.rates.count(), report.problems.count()) == (1, 0, 0)


def test_the_list_and_detail_pages_take_a_bounded_number_of_queries(world: dict[str, Any]) -> None:
    viewer = client_for(world["viewer"])
    report = SiteReportFactory(challenge=world["challenge"], site=world["cnaf"], status="submitted")
    OutageFactory.create_batch(2, report=report)
    with CaptureQueriesContext(connection) as few_list:
        viewer.get("/reports/tc22/")
    with CaptureQueriesContext(connection) as few_detail:
        viewer.get(f"/reports/tc22/{report.pk}/")
    OutageFactory.create_batch(20, report=report)
    OutageFactory.create_batch(
        5, report=SiteReportFactory(challenge=world["challenge"], site=world["pic"], status="submitted")
    )
    for index in range(5):
        services.report_comment(user=world["coordinator"], report=report, text=f"comment {index}")
    with CaptureQueriesContext(connection) as many_list:
        viewer.get("/reports/tc22/")
    with CaptureQueriesContext(connection) as many_detail:
        viewer.get(f"/reports/tc22/{report.pk}/")
    assert len(many_list) == len(few_list)
    assert len(many_detail) == len(few_detail)


def test_notes_and_comments_are_rendered_once_when_saved_never_on_a_read(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = client_for(world["cnaf_admin"])
    client.post("/reports/tc22/new/?site=CNAF", form_data())
    report = SiteReport.objects.get()
    assert "<strong>good</strong>" in report.notes_html and "<script" not in report.notes_html
    import reports.rendering

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("Markdown rendered on a read")

    monkeypatch.setattr(reports.rendering.markdown, "markdown", refuse)
    assert client.get(f"/reports/tc22/{report.pk}/").status_code == 200
    assert "<strong>good</strong>" in client.get(f"/api/v1/reports/{report.pk}/").json()["notes_html"]
