"""Reads of site reports for the results pages: a marker per site (link to its report, outage count) and the
outage windows that overlap a span."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, QuerySet
from django.urls import reverse

from challenges.models import Challenge

from .models import Outage, SiteReport
from .permissions import reports_readable_by


@dataclass(frozen=True)
class ReportMarker:
    """What the results tables show beside a site: its report's state and outages, and where to read it."""

    report_id: int
    site: str
    status: str
    status_label: str
    outage_count: int
    url: str

    @property
    def title(self) -> str:
        outages = f"{self.outage_count} outage{'s' if self.outage_count != 1 else ''}"
        return f"{self.site} site report ({self.status_label}), {outages}"


def report_markers(*, challenge: Challenge, user: Any) -> dict[str, ReportMarker]:
    """{site name: marker} of the challenge's reports the user may read, in one query."""
    reports = reports_readable_by(user=user, queryset=SiteReport.objects.filter(challenge=challenge))
    rows = reports.annotate(outage_count=Count("outages")).values_list("pk", "site__name", "status", "outage_count")
    markers = {}
    for pk, site, status, outage_count in rows:
        report = SiteReport(status=status)
        markers[site] = ReportMarker(
            report_id=pk,
            site=site,
            status=status,
            status_label=report.get_status_display(),
            outage_count=outage_count,
            url=reverse("reports:detail", args=[challenge.slug, pk]),
        )
    return markers


def outages_overlapping(
    *, challenge: Challenge, user: Any, site_ids: Iterable[int], start: datetime, end: datetime
) -> list[Outage]:
    """The outages of these sites' readable reports on the challenge that overlap [start, end), by start."""
    reports = reports_readable_by(user=user, queryset=SiteReport.objects.filter(challenge=challenge))
    return list(
        Outage.objects.filter(report__in=reports, report__site_id__in=list(site_ids), start__lt=end, end__gt=start)
        .select_related("report__site")
        .order_by("start", "id")
    )


def challenge_outages(*, challenge: Challenge, user: Any) -> QuerySet[Outage]:
    """Every outage of the challenge's readable reports, by start."""
    reports = reports_readable_by(user=user, queryset=SiteReport.objects.filter(challenge=challenge))
    return Outage.objects.filter(report__in=reports).select_related("report__site").order_by("start", "id")
