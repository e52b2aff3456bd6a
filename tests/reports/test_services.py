"""Site reports: the rules of their rows (outages inside the challenge, positive rates), all-or-nothing saves,
the review (submit, accept, ask for changes) and who may do each step; Markdown rendered safely."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from reports import services
from reports.choices import ReportStatus
from reports.models import ObservedRate, Outage, ReportComment, SiteReport
from reports.rendering import markdown_render
from tests.reports.helpers import at

pytestmark = pytest.mark.django_db


def save(world: dict[str, Any], user: str = "cnaf_admin", site: str = "cnaf", **kwargs: Any) -> SiteReport:
    return services.report_save(user=world[user], challenge=world["challenge"], site=world[site], **kwargs)


def outage(start: float, end: float, reason: str = "pool nodes rebooted") -> dict[str, Any]:
    return {"start": at(start), "end": at(end), "reason": reason}


def errors(exc: pytest.ExceptionInfo[ValidationError]) -> dict[str, list[str]]:
    return exc.value.message_dict


def test_a_site_admin_saves_a_report_with_every_kind_of_row(world: dict[str, Any]) -> None:
    report = save(
        world,
        notes="Mostly **fine**.",
        content={
            "rates": [
                {"target": world["target"], "label": "", "direction": "in", "rate": 1.2e9, "start": at(0), "end": at(5)}
            ],
            "outages": [outage(24, 26)],
            "problems": [{"category": "network", "ticket": "GGUS 156789", "description": "packet loss on LHCOPN"}],
            "actions": [{"description": "raised MTU to 9000", "taken_at": at(27)}],
        },
    )
    assert report.status == ReportStatus.DRAFT and report.author == world["cnaf_admin"]
    assert [(o.start, o.end, o.reason) for o in report.outages.all()] == [(at(24), at(26), "pool nodes rebooted")]
    assert report.rates.get().rate == 1.2e9
    assert report.problems.get().ticket_url == "https://ggus.eu/?mode=ticket_info&ticket_id=156789"
    assert report.actions.get().description == "raised MTU to 9000"


def test_an_outage_must_end_after_it_starts(world: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as exc:
        save(world, content={"outages": [outage(26, 24)]})
    assert errors(exc) == {
        "outages[0].end": ["the end (2022-03-08 00:00 UTC) must be after the start (2022-03-08 02:00 UTC)"]
    }


def test_an_outage_outside_the_challenge_says_the_challenges_span(world: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as exc:
        save(world, content={"outages": [outage(-5, 2), outage(24, 19 * 24 + 1)]})
    assert errors(exc) == {
        "outages[0].start": [
            "the outage starts before the challenge does (2022-03-07 00:00 UTC): report only its span"
        ],
        "outages[1].end": ["the outage ends after the challenge does (2022-03-26 00:00 UTC): report only its span"],
    }


def test_a_rate_must_be_positive(world: dict[str, Any]) -> None:
    row = {"target": None, "label": "FTS dashboard", "direction": "in", "rate": 0.0, "start": at(0), "end": at(1)}
    with pytest.raises(ValidationError) as exc:
        save(world, content={"rates": [row]})
    assert errors(exc) == {"rates[0].rate": ["a rate must be positive (bytes per second)"]}


def test_a_rate_for_a_target_of_another_site_is_refused(world: dict[str, Any]) -> None:
    row = {"target": world["target"], "label": "", "direction": "in", "rate": 1e9, "start": at(0), "end": at(1)}
    with pytest.raises(ValidationError) as exc:
        save(world, user="pic_admin", site="pic", content={"rates": [row]})
    assert errors(exc) == {"rates[0].target": ["target CNAF in does not involve PIC"]}


def test_one_bad_row_stores_nothing(world: dict[str, Any]) -> None:
    report = save(world, content={"outages": [outage(1, 2)]})
    with pytest.raises(ValidationError):
        save(world, report=report, notes="changed", content={"outages": [outage(3, 4), outage(6, 5)]})
    report.refresh_from_db()
    assert report.notes == ""
    assert list(Outage.objects.values_list("start", flat=True)) == [at(1)]


def test_a_site_admin_may_not_write_another_sites_report(world: dict[str, Any]) -> None:
    with pytest.raises(PermissionDenied, match="You are a site admin of CNAF, not of PIC"):
        save(world, site="pic", content={"outages": [outage(1, 2)]})
    assert not SiteReport.objects.exists() and not Outage.objects.exists()


def test_a_viewer_may_not_write_a_report(world: dict[str, Any]) -> None:
    with pytest.raises(PermissionDenied, match="Only a site's admins"):
        save(world, user="viewer")


def test_a_site_has_one_report_per_challenge(world: dict[str, Any]) -> None:
    save(world)
    with pytest.raises(ValidationError) as exc:
        save(world)
    assert errors(exc) == {"site": ["CNAF already has a report on TC22: change that one"]}


def test_the_database_refuses_an_outage_ending_before_it_starts(world: dict[str, Any]) -> None:
    report = save(world)
    with pytest.raises(IntegrityError), transaction.atomic():
        Outage.objects.create(report=report, start=at(2), end=at(1), reason="x")


def test_the_database_refuses_a_non_positive_rate(world: dict[str, Any]) -> None:
    report = save(world)
    with pytest.raises(IntegrityError), transaction.atomic():
        ObservedRate.objects.create(report=report, direction="in", rate=-1, start=at(0), end=at(1), label="x")


def test_a_coordinator_accepts_a_submitted_report_with_a_note(world: dict[str, Any]) -> None:
    report = services.report_submit(user=world["cnaf_admin"], report=save(world))
    services.report_accept(user=world["coordinator"], report=report, text="Thanks, clear.")
    report.refresh_from_db()
    assert report.status == ReportStatus.ACCEPTED and report.accepted_by == world["coordinator"]
    assert list(report.comments.values_list("kind", "text")) == [("submitted", ""), ("accepted", "Thanks, clear.")]


def test_a_site_admin_may_not_accept_their_own_report(world: dict[str, Any]) -> None:
    report = services.report_submit(user=world["cnaf_admin"], report=save(world))
    with pytest.raises(PermissionDenied, match="Only coordinators accept"):
        services.report_accept(user=world["cnaf_admin"], report=report)
    report.refresh_from_db()
    assert report.status == ReportStatus.SUBMITTED


def test_a_draft_cannot_be_accepted_before_it_is_submitted(world: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="only a submitted report is reviewed"):
        services.report_accept(user=world["coordinator"], report=save(world))


def test_changes_requested_go_back_to_the_site_which_submits_again(world: dict[str, Any]) -> None:
    report = services.report_submit(user=world["cnaf_admin"], report=save(world))
    services.report_request_changes(user=world["coordinator"], report=report, text="Add the GGUS ticket.")
    assert report.status == ReportStatus.CHANGES_REQUESTED
    services.report_submit(user=world["cnaf_admin"], report=report)
    assert SiteReport.objects.get().status == ReportStatus.SUBMITTED


def test_after_acceptance_only_a_coordinator_changes_the_report(world: dict[str, Any]) -> None:
    report = services.report_submit(user=world["cnaf_admin"], report=save(world))
    services.report_accept(user=world["coordinator"], report=report)
    with pytest.raises(PermissionDenied, match="only a coordinator may change it now"):
        save(world, report=report, notes="late change")
    save(world, user="coordinator", report=report, notes="typo fixed by the coordinator")
    report.refresh_from_db()
    assert report.notes == "typo fixed by the coordinator" and report.status == ReportStatus.ACCEPTED


def test_another_sites_admin_may_not_comment(world: dict[str, Any]) -> None:
    report = save(world)
    with pytest.raises(PermissionDenied):
        services.report_comment(user=world["pic_admin"], report=report, text="hi")
    services.report_comment(user=world["coordinator"], report=report, text="Which pools?")
    assert list(ReportComment.objects.values_list("text", flat=True)) == ["Which pools?"]


def test_markdown_keeps_formatting_and_drops_a_script() -> None:
    html = markdown_render("**Raised** MTU\n\n<script>alert('x')</script>\n\n[t](javascript:alert(1))")
    assert "<strong>Raised</strong>" in html
    assert "<script" not in html and "alert('x')" not in html and "javascript:" not in html


def test_markdown_drops_event_handlers_and_keeps_http_links() -> None:
    html = markdown_render('<img src=x onerror="alert(1)"> see <a href="https://ggus.eu/" onclick="x()">GGUS</a>')
    assert "onerror" not in html and "onclick" not in html and "<img" not in html
    assert '<a href="https://ggus.eu/" rel="noopener noreferrer nofollow">GGUS</a>' in html


def test_an_acceptance_landing_while_a_site_admin_edits_closes_the_report(world: dict[str, Any]) -> None:
    report = services.report_submit(user=world["cnaf_admin"], report=save(world, notes="first"))
    stale = SiteReport.objects.get(pk=report.pk)  # what the site admin's request loaded
    services.report_accept(user=world["coordinator"], report=report)
    with pytest.raises(PermissionDenied, match="only a coordinator may change it now"):
        save(world, report=stale, notes="late", content={"outages": [outage(1, 2)]})
    report.refresh_from_db()
    assert report.notes == "first" and not Outage.objects.exists()


def test_coordinators_see_the_reports_in_the_admin(world: dict[str, Any], client: Any) -> None:
    report = save(world, content={"outages": [outage(1, 2)]})
    client.force_login(world["coordinator"])
    assert "CNAF" in client.get("/admin/reports/sitereport/").content.decode()
    assert "pool nodes rebooted" in client.get(f"/admin/reports/sitereport/{report.pk}/change/").content.decode()
