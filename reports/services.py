"""Writes of site reports: save (with its rows, all or nothing), submit, comment, accept, ask for changes.

Every service checks who may do it (reports.permissions) and raises django's PermissionDenied with a message that
says why; bad content raises ValidationError with every problem placed by field (`outages[0].end`), and then
nothing is stored.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from challenges.models import Challenge
from common.problems import problems_raise
from sites.models import Site

from . import permissions, validation
from .choices import CommentKind, ReportStatus
from .models import ObservedRate, Outage, Problem, ReportComment, SiteAction, SiteReport

# The kinds of rows a report holds, by the key they have in a report's content.
ROW_MODELS: dict[str, type[ObservedRate | Outage | Problem | SiteAction]] = {
    "rates": ObservedRate,
    "outages": Outage,
    "problems": Problem,
    "actions": SiteAction,
}
ROW_FIELDS: dict[str, tuple[str, ...]] = {
    "rates": ("target", "label", "direction", "rate", "start", "end"),
    "outages": ("start", "end", "reason"),
    "problems": ("category", "ticket", "description"),
    "actions": ("description", "taken_at"),
}


def report_save(
    *,
    user: Any,
    challenge: Challenge,
    site: Site,
    notes: str | None = None,
    content: dict[str, list[dict[str, Any]]] | None = None,
    report: SiteReport | None = None,
) -> SiteReport:
    """Create the site's report on the challenge (report=None) or change it. `content` maps "rates", "outages",
    "problems" and "actions" to the full list of rows of that kind; a kind left out keeps its rows. All or
    nothing: any problem raises and stores nothing."""
    content = content or {}
    if report is None:
        problem = permissions.site_write_problem(user=user, site=site)
    else:
        problem = permissions.report_write_problem(user=user, report=report)
        if problem is None and (site.pk != report.site_id or challenge.pk != report.challenge_id):
            problem = "A report stays with its site and challenge; write a new one for another."
    if problem:
        raise PermissionDenied(problem)
    problems = validation.content_problems(challenge=challenge, site=site, content=content)
    if report is None and SiteReport.objects.filter(challenge=challenge, site=site).exists():
        problems.append(("site", f"{site.name} already has a report on {challenge.name}: change that one"))
    problems_raise(problems)
    try:
        return _report_write(user=user, challenge=challenge, site=site, notes=notes, content=content, report=report)
    except IntegrityError as exc:  # another request made the site's report meanwhile
        if report is None and SiteReport.objects.filter(challenge=challenge, site=site).exists():
            raise ValidationError(
                {"site": f"{site.name} already has a report on {challenge.name}: change that one"}
            ) from exc
        raise ValidationError(str(exc)) from exc


def _report_write(
    *,
    user: Any,
    challenge: Challenge,
    site: Site,
    notes: str | None,
    content: dict[str, list[dict[str, Any]]],
    report: SiteReport | None,
) -> SiteReport:
    with transaction.atomic():
        if report is None:
            report = SiteReport.objects.create(challenge=challenge, site=site, notes=notes or "", author=user)
        else:
            # Locked and checked again: an acceptance that landed meanwhile closes the report to its site admins.
            locked = SiteReport.objects.select_for_update(of=("self",)).select_related("site").get(pk=report.pk)
            problem = permissions.report_write_problem(user=user, report=locked)
            if problem:
                raise PermissionDenied(problem)
            if notes is not None:
                report.notes = notes
                report.save(update_fields=["notes", "updated_at"])
        for kind, rows in content.items():
            model: Any = ROW_MODELS[kind]
            model.objects.filter(report=report).delete()
            model.objects.bulk_create(
                [
                    model(report=report, **{field: row.get(field) for field in ROW_FIELDS[kind] if field in row})
                    for row in rows
                ]
            )
    return report


def _comment(*, report: SiteReport, user: Any, kind: str, text: str) -> ReportComment:
    return ReportComment.objects.create(report=report, author=user, kind=kind, text=text)


def report_submit(*, user: Any, report: SiteReport) -> SiteReport:
    """Hand a draft (or a report sent back for changes) to the coordinators."""
    problem = permissions.report_write_problem(user=user, report=report)
    if problem:
        raise PermissionDenied(problem)
    if report.status not in (ReportStatus.DRAFT, ReportStatus.CHANGES_REQUESTED):
        raise ValidationError({"status": f"this report is {report.get_status_display()}; only a draft is submitted"})
    with transaction.atomic():
        report.status = ReportStatus.SUBMITTED
        report.submitted_at = timezone.now()
        report.save(update_fields=["status", "submitted_at", "updated_at"])
        _comment(report=report, user=user, kind=CommentKind.SUBMITTED, text="")
    return report


def report_comment(*, user: Any, report: SiteReport, text: str) -> ReportComment:
    """A remark in Markdown by a coordinator or one of the site's admins."""
    problem = permissions.report_comment_problem(user=user, report=report)
    if problem:
        raise PermissionDenied(problem)
    if not text.strip():
        raise ValidationError({"text": "write something"})
    return _comment(report=report, user=user, kind=CommentKind.COMMENT, text=text)


def _review_check(*, user: Any, report: SiteReport) -> None:
    if not permissions.user_may_review(user=user):
        raise PermissionDenied("Only coordinators accept reports or ask for changes.")
    if report.status != ReportStatus.SUBMITTED:
        raise ValidationError(
            {"status": f"this report is {report.get_status_display()}; only a submitted report is reviewed"}
        )


def report_accept(*, user: Any, report: SiteReport, text: str = "") -> SiteReport:
    """A coordinator accepts a submitted report; from then on only coordinators change it."""
    _review_check(user=user, report=report)
    with transaction.atomic():
        report.status = ReportStatus.ACCEPTED
        report.accepted_at = timezone.now()
        report.accepted_by = user
        report.save(update_fields=["status", "accepted_at", "accepted_by", "updated_at"])
        _comment(report=report, user=user, kind=CommentKind.ACCEPTED, text=text)
    return report


def report_request_changes(*, user: Any, report: SiteReport, text: str) -> SiteReport:
    """A coordinator sends a submitted report back to the site's admins, saying what to change."""
    _review_check(user=user, report=report)
    if not text.strip():
        raise ValidationError({"text": "say what should change"})
    with transaction.atomic():
        report.status = ReportStatus.CHANGES_REQUESTED
        report.save(update_fields=["status", "updated_at"])
        _comment(report=report, user=user, kind=CommentKind.CHANGES_REQUESTED, text=text)
    return report
