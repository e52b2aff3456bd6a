"""Who may read and write site reports: the access policy's "report" and "review" actions (sites.roles.POLICY) applied
to reports.

Reading: every logged-in user reads submitted and accepted reports; a draft is seen only by those who may write its
site's report. Writing ("report"): the site admins of THE report's site write it (create, edit, submit) until it is
accepted; coordinators may do everything, including editing an accepted report. Reviewing ("review": accept, ask
for changes) is for coordinators. Commenting: whoever may write the report's site's report.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from sites.models import Site
from sites.roles import action_reach, user_may

from .choices import ReportStatus
from .models import SiteReport


def reports_readable_by(*, user: Any, queryset: QuerySet[SiteReport] | None = None) -> QuerySet[SiteReport]:
    """The reports the user may read: drafts of sites they may not report on are left out."""
    queryset = SiteReport.objects.all() if queryset is None else queryset
    reach = action_reach(user=user, action="report")
    if reach.every:
        return queryset
    return queryset.filter(~Q(status=ReportStatus.DRAFT) | Q(site_id__in=reach.site_ids))


def _site_names(site_ids: frozenset[int]) -> str:
    names = sorted(Site.objects.filter(pk__in=site_ids).values_list("name", flat=True))
    return ", ".join(names) if names else "no site"


def site_write_problem(*, user: Any, site: Site) -> str | None:
    """Why the user may not write a report for this site, or None when they may."""
    reach = action_reach(user=user, action="report")
    if reach.every or site.pk in reach.site_ids:
        return None
    if not reach.site_ids:
        return "Only a site's admins (or a coordinator) may write its report."
    return f"You are a site admin of {_site_names(reach.site_ids)}, not of {site.name}: you may not write its report."


def report_write_problem(*, user: Any, report: SiteReport) -> str | None:
    """Why the user may not change this report, or None when they may."""
    problem = site_write_problem(user=user, site=report.site)
    if problem:
        return problem
    if report.status == ReportStatus.ACCEPTED and not action_reach(user=user, action="report").every:
        return "This report was accepted: only a coordinator may change it now."
    return None


def report_comment_problem(*, user: Any, report: SiteReport) -> str | None:
    """Why the user may not comment on this report, or None when they may."""
    reach = action_reach(user=user, action="report")
    if reach.every or report.site_id in reach.site_ids:
        return None
    return "Only coordinators and the site's admins comment on a report."


def user_may_review(*, user: Any) -> bool:
    """Accepting a report, or asking for changes, is for coordinators."""
    return user_may(user=user, action="review")
