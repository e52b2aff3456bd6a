"""Registry pages: the site list (with CSV/JSON export) and a site's detail."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from common.exports import table_response

from . import selectors, services
from .filters import SiteFilter

CSV_COLUMNS = [
    "name",
    "tier",
    "country",
    "experiments",
    "endpoints",
    "network_rate_Bps",
    "tape_drives",
    "tape_drive_rate_Bps",
    "staging_request_limit",
]


@login_required
def site_list(request: HttpRequest) -> HttpResponse:
    """Sites at a glance, filtered by experiment and tier; ?format=csv or ?format=json exports the same rows."""
    filterset = SiteFilter(request.GET, queryset=selectors.sites_with_details())
    sites = filterset.qs
    export = request.GET.get("format")
    if export == "json":
        return JsonResponse(services.sites_export(sites=sites))
    if export == "csv":
        return table_response(request, name="sites", columns=CSV_COLUMNS, rows=[_csv_row(site) for site in sites])
    return render(
        request,
        "sites/site_list.html",
        {
            "sites": sites,
            "filter": filterset,
            "experiments": selectors.experiment_names(),
            "query": request.GET.urlencode(),
        },
    )


def _csv_row(site: Any) -> dict[str, Any]:
    capacity = site.capacity_or_none
    return {
        "name": site.name,
        "tier": site.tier,
        "country": site.country,
        "experiments": " ".join(e.name for e in site.experiments.all()),
        "endpoints": len(site.endpoints.all()),
        "network_rate_Bps": getattr(capacity, "network_rate", None),
        "tape_drives": getattr(capacity, "tape_drives", None),
        "tape_drive_rate_Bps": getattr(capacity, "tape_drive_rate", None),
        "staging_request_limit": getattr(capacity, "staging_request_limit", None),
    }


@login_required
def site_detail(request: HttpRequest, name: str) -> HttpResponse:
    site = get_object_or_404(selectors.sites_with_details(), name=name)
    return render(request, "sites/site_detail.html", {"site": site, "capacity": site.capacity_or_none})
