"""Who may read and write site reports, from the roles of sites.roles.

Reading: every logged-in user reads submitted and accepted reports; a draft is seen only by its site's admins and
the coordinators. Writing: the site admins of THE report's site write it (create, edit, submit) until it is
accepted; coordinators may do everything, including editing an accepted report, and they alone accept or ask for
changes. Commenting: coordinators and the report's site admins.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from sites.models import Site
from sites.roles import user_is_coordinator, user_site_ids

from .choices import ReportStatus
from .models import SiteReport


def reports_readable_by(*, user: Any, queryset: QuerySet[SiteReport] | None = None) -> QuerySet[SiteReport]:
    """The reports the user may read: drafts of other sites are left out."""
    queryset = SiteReport.objects.all() if queryset is None else queryset
    if user_is_coordinator(user=user):
        return queryset
    return queryset.filter(~Q(status=ReportStatus.DRAFT) | Q(site_id__in=user_site_ids(user=user)))


def _site_names(site_ids: set[int]) -> str:
    names = sorted(Site.objects.filter(pk__in=site_ids).values_list("name", flat=True))
    return ", ".join(names) if names else "no site"


def site_write_problem(*, user: Any, site: Site) -> str | None:
    """Why the user may not write a report for this site, or None when they may."""
    if user_is_coordinator(user=user):
        return None
    site_ids = user_site_ids(user=user)
    if site.pk in site_ids:
        return None
    if not site_ids:
        return "Only a site's admins (or a coordinator) may write its report."
    return f"You are a site admin of {_site_names(site_ids)}, not of {site.name}: you may not write its report."


def report_write_problem(*, user: Any, report: SiteReport) -> str | None:
    """Why the user may not change this report, or None when they may."""
    problem = site_write_problem(user=user, site=report.site)
    if problem:
        return problem
    if report.status == ReportStatus.ACCEPTED and not user_is_coordinator(user=user):
        return "This report was accepted: only a coordinator may change it now."
    return None


def report_comment_problem(*, user: Any, report: SiteReport) -> str | None:
    """Why the user may not comment on this report, or None when they may."""
    if user_is_coordinator(user=user) or report.site_id in user_site_ids(user=user):
        return None
    return "Only coordinators and the site's admins comment on a report."


def user_may_review(*, user: Any) -> bool:
    """Accepting a report, or asking for changes, is for coordinators."""
    return user_is_coordinator(user=user)
