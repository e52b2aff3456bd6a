"""The sites' perspective of the report: per site of the plan, what it moved in and out per experiment over the
challenge (the hourly rollup of the challenge's own activities), its tape figures (runs.probes.tape: DT and A-DT as
the Tape Challenge '22 reported them), and what its report says (outages, problems with their tickets, actions)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db.models import Sum

from challenges.choices import ActivityKind
from challenges.models import Challenge
from live.now import challenge_site_ids
from reports.choices import ReportStatus
from reports.models import SiteReport
from reports.permissions import reports_readable_by
from results.models import RateRollupHour
from runs.probes.tape import tape_table
from runs.selectors import runs_visible_to
from sites.choices import EndpointKind
from sites.models import Experiment, Site


def _traffic(*, challenge: Challenge, site_ids: set[int], user: Any, at: datetime) -> dict[tuple[int, str], dict]:
    """(site, in|out) -> experiment name -> bytes the challenge's activities moved there up to `at` (hourly rollup:
    an hour that has begun counts whole, so a running challenge's last hour may hold minutes after `at`)."""
    hours = RateRollupHour.objects.restrict(user).filter(
        activity_id__in=list(challenge.activities.values_list("pk", flat=True)),  # type: ignore[attr-defined]
        hour__gte=challenge.start.replace(minute=0, second=0, microsecond=0),
        hour__lt=min(challenge.end, at),
    )
    names = dict(Experiment.objects.values_list("pk", "name"))
    flows: dict[tuple[int, str], dict[str, float]] = defaultdict(dict)
    for side, column in (("in", "destination_site_id"), ("out", "source_site_id")):
        rows = (
            hours.filter(**{f"{column}__in": site_ids})
            .values_list(column, "experiment_id")
            .annotate(moved=Sum("bytes"))
            .values_list(column, "experiment_id", "moved")
        )
        for site_id, experiment_id, moved in rows:
            flows[(site_id, side)][names.get(experiment_id, "no experiment")] = float(moved or 0.0)
    return flows


def _report(report: SiteReport | None) -> dict[str, Any] | None:
    if report is None:
        return None
    return {
        "status": report.status,
        "notes_html": report.notes_html,
        "notes": report.notes,
        "outages": [{"start": o.start, "end": o.end, "reason": o.reason} for o in report.outages.all()],
        "problems": [
            {"category": p.category, "ticket": p.ticket, "ticket_url": p.ticket_url, "description": p.description}
            for p in report.problems.all()
        ],
        "actions": [{"taken_at": a.taken_at, "description": a.description} for a in report.actions.all()],
    }


def site_reports(*, challenge: Challenge, user: Any) -> dict[int, SiteReport]:
    """The challenge's site reports the reader may read, drafts left out (a draft is not what a site said yet)."""
    reports = reports_readable_by(user=user, queryset=SiteReport.objects.filter(challenge=challenge))
    reports = reports.exclude(status=ReportStatus.DRAFT).prefetch_related("outages", "problems", "actions")
    return {report.site_id: report for report in reports}


def sites_section(*, challenge: Challenge, user: Any, at: datetime) -> list[dict[str, Any]]:
    site_ids = challenge_site_ids(challenge=challenge, user=user)
    flows = _traffic(challenge=challenge, site_ids=site_ids, user=user, at=at)
    elapsed = max((min(challenge.end, at) - challenge.start).total_seconds(), 0.0)
    runs = list(
        runs_visible_to(user=user).filter(
            activity__challenge=challenge, kind__in=[ActivityKind.TAPE_WRITE, ActivityKind.STAGING]
        )
    )
    tape_rows = tape_table(runs)
    reports = site_reports(challenge=challenge, user=user)
    section = []
    for site in Site.objects.filter(pk__in=site_ids).prefetch_related("endpoints").order_by("name"):
        inbound, outbound = flows.get((site.pk, "in"), {}), flows.get((site.pk, "out"), {})
        experiments = sorted({*inbound, *outbound}, key=str.lower)
        section.append(
            {
                "site": site.name,
                "tier": site.tier,
                "country": site.country,
                "tape": any(endpoint.kind == EndpointKind.TAPE for endpoint in site.endpoints.all()),
                "traffic": [
                    {
                        "experiment": name,
                        "in_volume": inbound.get(name, 0.0),
                        "out_volume": outbound.get(name, 0.0),
                        "in_rate": inbound.get(name, 0.0) / elapsed if elapsed else None,
                        "out_rate": outbound.get(name, 0.0) / elapsed if elapsed else None,
                    }
                    for name in experiments
                ],
                "tape_runs": [row for row in tape_rows if row["site"] == site.name],
                "report": _report(reports.get(site.pk)),
            }
        )
    return section
